"""Dead code elimination over the top-level graph and every higher-order-op subgraph."""

from __future__ import annotations

from collections.abc import Callable

import torch

from exporter._ir import graph_modules, has_side_effects
from exporter._torch_internals import own_buffers, own_parameters
from exporter._state import ExportState

__all__ = ["eliminate_dead_code"]


# Eager profiling regions (``torch.profiler.record_function``) record side-effecting ops;
# an exported program leaves profiling to its runtime, as torch.export's does.
_PROFILING_OPS = frozenset(
    {
        torch.ops.profiler._record_function_enter.default,
        torch.ops.profiler._record_function_enter_new.default,
        torch.ops.profiler._record_function_exit._RecordFunction,
    }
)


# In the training IR only these are dead code when unused: it keeps every other op as the
# model called it (an unused output of a multi-output op too), as torch.export's does.
_BOOKKEEPING_OPS = _PROFILING_OPS | {
    torch.ops.aten.detach.default,
    torch.ops.export.access_subclass_inner_tensor.default,
}


def _is_impure(node: torch.fx.Node) -> bool:
    return node.target not in _PROFILING_OPS and node.is_impure()


def _kept_in_training(node: torch.fx.Node) -> bool:
    return not (node.op == "call_function" and node.target in _BOOKKEEPING_OPS)


def _signature_values(state: ExportState) -> set[torch.fx.Node]:
    """Nodes a preserved module call signature names: the program refers to them by name."""
    return {v for call in state.preserved_calls for v in (*call.inputs, *call.outputs) if isinstance(v, torch.fx.Node)}


def eliminate_dead_code(state: ExportState) -> bool:
    """No call_function or get_attr node is left that nothing uses, unless it has a side effect.

    Tracing leaves such nodes behind: the ``detach`` autograd bookkeeping adds, scratch
    ``empty`` tensors kernels allocate, views read only to sync a mutation.  Eager profiling
    calls (``record_function`` regions) count as having none.  Values a preserved module
    call signature names are kept.  Attributes of the graph module that no get_attr node
    reads any more are deleted with them.

    In the training IR, only unused bookkeeping (``detach``, profiling calls, subclass
    inner-tensor reads) in the top graph is dead: the rest stays as the model called it.
    """
    if state.training:
        return _eliminate(state.gm.graph, _kept_in_training)
    changed = False
    kept = _signature_values(state)
    for module in graph_modules(state.gm):
        # a cond or while_loop whose subgraphs assert something runs, whatever it returns
        if _eliminate(module.graph, lambda n, m=module: n in kept or has_side_effects(n, m, _is_impure)):
            changed = True
            if module is not state.gm:
                module.recompile()
    if changed:
        _delete_unused_submodules(state.gm)
        _delete_unused_tensor_attributes(state.gm)
    return changed


def _delete_unused_submodules(gm: torch.fx.GraphModule) -> None:
    """Delete the submodules no graph reads, at any depth.  torch.fx's own
    ``delete_all_unused_submodules`` counts only the top graph's reads, so it deletes the
    subgraphs of a higher-order op inside a subgraph (a cond inside a cond's branch)."""
    used: set[str] = set()
    for path, module in gm.named_modules():
        if isinstance(module, torch.fx.GraphModule):
            for node in module.graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    atoms = f"{path}.{node.target}".split(".") if path else str(node.target).split(".")
                    used.update(".".join(atoms[: k + 1]) for k in range(len(atoms)))
    unused = sorted((p for p, _ in gm.named_modules() if p and p not in used), key=lambda p: p.count("."))
    for path in unused:
        try:
            gm.get_submodule(path)
        except AttributeError:  # under a module already deleted
            continue
        gm.delete_submodule(path)


def _eliminate(graph: torch.fx.Graph, kept: Callable[[torch.fx.Node], bool]) -> bool:
    """torch.fx's ``Graph.eliminate_dead_code`` without its lint of the whole graph first (the
    verifier checks the program), asking ``kept`` only about nodes nothing uses."""
    changed = False
    for node in reversed(graph.nodes):
        if node.users or node.op == "placeholder" or node.op == "output" or kept(node):
            continue
        graph.erase_node(node)
        changed = True
    return changed


def _delete_unused_tensor_attributes(gm: torch.fx.GraphModule) -> None:
    used = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    for name in [k for k, v in vars(gm).items() if isinstance(v, torch.Tensor)]:
        if name not in used:
            delattr(gm, name)
    buffers, parameters = own_buffers(gm), own_parameters(gm)
    for name in [k for k in buffers if k not in used]:
        del buffers[name]
    for name in [k for k in parameters if k not in used]:
        del parameters[name]
