"""Names of the export IR that the tracer, the passes, the verifier and reports share."""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind

__all__ = [
    "PLACEHOLDER_PREFIXES",
    "ROOT_MODULE_KEY",
    "STATE_MUTATIONS",
    "graph_modules",
    "graph_symbols",
    "module_stack_key",
]

PLACEHOLDER_PREFIXES = {
    InputKind.USER_INPUT: "",
    InputKind.PARAMETER: "p_",
    InputKind.BUFFER: "b_",
    InputKind.CONSTANT_TENSOR: "c_",
    InputKind.CUSTOM_OBJ: "obj_",
    InputKind.TOKEN: "token",
}
"""How torch.export starts the placeholder name of each kind of input."""

STATE_MUTATIONS = {
    OutputKind.BUFFER_MUTATION: InputKind.BUFFER,
    OutputKind.PARAMETER_MUTATION: InputKind.PARAMETER,
}
"""Output kinds that update model state, and the kind of input each updates."""

ROOT_MODULE_KEY = "L__self__"
"""torch.export's nn_module_stack key for the root module."""


def module_stack_key(path: str) -> str:
    """torch.export's nn_module_stack key for a module call at ``path`` (``layers.0@1`` for a second call)."""
    return ROOT_MODULE_KEY + path


def graph_modules(gm: torch.fx.GraphModule) -> list[torch.fx.GraphModule]:
    """``gm`` and every higher-order-op subgraph module under it, outermost first."""
    return [m for m in gm.modules() if isinstance(m, torch.fx.GraphModule)]


def graph_symbols(gm: torch.fx.GraphModule) -> set:
    """The sympy symbols in the ``val`` of any node of ``gm`` or its subgraphs: in shapes
    and strides of tensors, and in symbolic numbers."""
    found: set = set()
    for module in graph_modules(gm):
        for node in module.graph.nodes:
            for value in pytree.tree_leaves(node.meta.get("val")):
                if isinstance(value, torch.Tensor):
                    numbers = (*value.shape, *value.stride()) if value.layout == torch.strided else value.shape
                else:
                    numbers = (value,)
                for number in numbers:
                    if isinstance(number, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                        found |= number.node.expr.free_symbols
    return found
