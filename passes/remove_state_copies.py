"""Return a buffer's new value directly when its update is a whole-tensor copy."""

from __future__ import annotations

import torch

from exporter._ir import STATE_MUTATIONS
from exporter._state import ExportState

__all__ = ["remove_state_copies"]

def _same_layout(a, b) -> bool:
    return (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and a.shape == b.shape
        and a.dtype == b.dtype
        and a.device == b.device
    )


def remove_state_copies(state: ExportState) -> bool:
    """No buffer or parameter update is an ``aten.copy(old, new)`` that only repeats ``new``.

    ``self.buf.copy_(new)`` functionalizes to ``copy(buf, new)``; when ``new`` already has
    the buffer's shape, dtype and device, the copy changes nothing, and torch.export's IR
    returns ``new`` itself as the BUFFER_MUTATION output (and wherever else the updated
    buffer is read).  A copy that broadcasts or casts is kept: dropping it would change
    the stored value.
    """
    graph = state.gm.graph
    values = list(graph.output_node().args[0])
    changed = False
    for value, spec in zip(values, state.output_specs):
        if spec.kind not in STATE_MUTATIONS or not isinstance(value, torch.fx.Node):
            continue
        if value.op != "call_function" or value.target is not torch.ops.aten.copy.default:
            continue
        old, new = value.args[:2]
        if not isinstance(new, torch.fx.Node) or not _same_layout(old.meta.get("val"), new.meta.get("val")):
            continue
        state.replace_node(value, new)
        changed = True
    return changed
