"""Guard every dtype or device conversion with the input metadata it assumed (training IR)."""

from __future__ import annotations

import torch

from exporter._state import ExportState

__all__ = ["check_conversions"]

_CONVERSIONS = (torch.ops.aten.to.device, torch.ops.aten.to.dtype, torch.ops.aten.to.dtype_layout)
_ASSERT = torch.ops.aten._assert_tensor_metadata.default


def _guarded(node: torch.fx.Node) -> bool:
    before = node.prev
    return before.op == "call_function" and before.target is _ASSERT and before.args[:1] == node.args[:1]


def check_conversions(state: ExportState) -> bool:
    """Each ``aten.to`` conversion in the top graph is preceded by an
    ``aten._assert_tensor_metadata`` of its input's dtype, device and layout, as torch.export's
    training IR has it: a conversion that is a no-op for the traced input would otherwise
    leave no sign of the dtype the program assumed.  (The default IR gets these checks
    while tracing, from the conversion kernels; a pre-dispatch trace records ``aten.to``
    before those kernels run.)"""
    graph = state.gm.graph
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _CONVERSIONS or _guarded(node):
            continue
        source = node.args[0]
        value = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor):
            continue
        with graph.inserting_before(node):
            check = graph.call_function(
                _ASSERT, (source,), {"dtype": value.dtype, "device": value.device, "layout": value.layout}
            )
        check.meta.update(
            {key: node.meta[key] for key in ("stack_trace", "nn_module_stack") if key in node.meta}, val=None
        )
        changed = True
    return changed
