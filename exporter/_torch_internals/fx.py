"""make_fx and FX graphs: the module-stack tracer, the graph a trace is recording, node
names, and the state-swapping context a trace runs the module in."""

from __future__ import annotations

from typing import Any

import torch
from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
from torch.fx._lazy_graph_module import _use_lazy_graph_module as use_lazy_graph_module
from torch.fx._pytree import register_pytree_flatten_spec as register_flatten_spec
from torch.fx.experimental import proxy_tensor
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.utils.stateless import _reparametrize_module as reparametrize_module

__all__ = [
    "EXPORT_ROOT",
    "make_fx",
    "module_stack_tracer",
    "ModuleCallEntry",
    "ModuleCallSignature",
    "proxy_tensor",
    "record_module_calls",
    "register_flatten_spec",
    "rename_node",
    "reparametrize_module",
    "stack_trace_anchors",
    "take_name",
    "traced_graph",
    "traced_node",
    "use_lazy_graph_module",
]


EXPORT_ROOT = "_export_root"
"""The attribute torch.export's non-strict tracer holds the traced module under (exporter's
holder too): torch strips it from module-stack paths (``torch.export._trace._strip_root``),
and AOT autograd finds the module through it from a traced function's ``_orig_mod`` (which
``record_module_calls`` sets)."""


def module_stack_tracer() -> type:
    """make_fx's tracer class when it records the module stack."""
    return proxy_tensor._ModuleStackTracer


def stack_trace_anchors() -> Any:
    """Code locations torch.fx keeps in stack traces besides ``forward`` frames."""
    return getattr(torch.fx.proxy, "_STACK_TRACE_ANCHORS", ())


def record_module_calls(
    fn: Any, root: torch.nn.Module, decompositions: dict, inputs: list[Any], *, pre_dispatch: bool = False
) -> torch.fx.GraphModule:
    """``make_fx`` of ``fn`` below autograd (above it with ``pre_dispatch``: composite ops
    such as ``aten.linear`` and grad-mode changes recorded as called), recording each
    node's module stack relative to ``root`` (the module ``fn`` runs) and no torch-function
    metadata."""
    fn._orig_mod = root
    return make_fx(
        fn,
        decompositions,
        record_module_stack=True,
        pre_dispatch=pre_dispatch,
        _disable_torch_fn_metadata_mode=True,
    )(*inputs)


def traced_graph() -> torch.fx.Graph | None:
    """The graph the innermost active ``make_fx`` trace is recording, if one is."""
    mode = proxy_tensor.get_proxy_mode()
    return mode.tracer.graph if mode is not None else None


def traced_node(value: torch.Tensor) -> torch.fx.Node | None:
    """The node of the active ``make_fx`` trace that produced ``value`` (an unwrapped fake
    tensor), if the trace saw it."""
    mode = proxy_tensor.get_proxy_mode()
    if mode is None:
        return None
    slot = proxy_tensor.get_proxy_slot(value, mode.tracer, None)
    return slot.proxy.node if slot is not None else None




def take_name(node: torch.fx.Node, name: str) -> None:
    """Name ``node`` exactly ``name``, which a node since erased from its graph held (FX
    never hands a name out twice, so the erased node's is released first)."""
    if any(other.name == name for other in node.graph.nodes if other is not node):
        raise ValueError(f"{name!r} is still held by a node of the graph")
    node.graph._graph_namespace._used_names.discard(name)
    node._rename(name)


def rename_node(node: torch.fx.Node, candidate: str) -> None:
    """Give ``node`` the name its graph would give a new node named ``candidate`` (``add`` ->
    ``add_3``), as if it had been created under that name."""
    node._rename(candidate)
