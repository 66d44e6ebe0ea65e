"""Turn the shape facts the trace could only defer into runtime assertion nodes."""

from __future__ import annotations

import torch

from exporter._state import ExportState
from exporter._torch_internals import insert_deferred_runtime_asserts

__all__ = ["insert_runtime_asserts"]


def insert_runtime_asserts(state: ExportState) -> bool:
    """Every fact about a data-dependent size (``nonzero``, ``.item()``, ``torch._check``) that
    tracing assumed is checked by an ``aten._assert_scalar`` node when the program runs.

    Facts about input sizes are not asserted in the graph: ``ep.module()`` checks inputs
    against the program's range constraints before running it, as torch.export arranges.
    """
    shape_env = getattr(state.fake_mode, "shape_env", None)
    if shape_env is None or not any(shape_env.deferred_runtime_asserts.values()) and not shape_env.var_to_range:
        return False
    graph = state.gm.graph
    before = len(graph.nodes)
    insert_deferred_runtime_asserts(state.gm, shape_env, "exported program", export=True)
    for node in graph.nodes:
        if node.op == "call_function":
            node.meta.setdefault("val", None)
    # torch's pass may compute a returned size anew (a fresh sym_size node): the output
    # specs follow the output node, position by position.
    for spec, value in zip(state.output_specs, graph.output_node().args[0]):
        if isinstance(value, torch.fx.Node) and hasattr(spec.arg, "name"):
            spec.arg.name = value.name
    return len(graph.nodes) != before
