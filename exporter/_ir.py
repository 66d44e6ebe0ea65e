"""Names of the export IR that the tracer, the passes, the verifier and reports share,
and where in the user's code a node came from."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import re
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind

__all__ = [
    "user_input_nodes",
    "PLACEHOLDER_PREFIXES",
    "ROOT_MODULE_KEY",
    "STATE_MUTATIONS",
    "graph_modules",
    "graph_symbols",
    "has_side_effects",
    "is_library_frame",
    "module_stack_key",
    "node_frame",
    "node_location",
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


def has_side_effects(
    node: torch.fx.Node, owner: Any, impure: Callable[[torch.fx.Node], bool] = lambda n: n.is_impure()
) -> bool:
    """Whether ``node`` (of a graph whose ``get_attr`` targets ``owner`` holds) has an effect
    beyond its results: it is ``impure``, or it calls a higher-order op (torch.cond,
    torch.while_loop) whose subgraphs hold such a node at any depth (an assert on one side).
    A placeholder or the output frames its graph and is always kept, so counts as one; a
    subgraph's own frame is no effect of the call."""
    if impure(node):
        return True
    if node.op != "call_function":
        return False
    for arg in node.args:
        if not (isinstance(arg, torch.fx.Node) and arg.op == "get_attr"):
            continue
        sub: Any = owner
        for part in str(arg.target).split("."):
            sub = getattr(sub, part, None)
        gm = sub if isinstance(sub, torch.fx.GraphModule) else getattr(sub, "gm", None)
        if isinstance(gm, torch.fx.GraphModule) and any(
            has_side_effects(n, gm, impure) for n in gm.graph.nodes if n.op not in ("placeholder", "output")
        ):
            return True
    return False


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


# -- the user's source line of a node ---------------------------------------------------------


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    # exporter.passes and exporter.verifier live outside exporter/ in a source checkout.
    own = [importlib.util.find_spec(name).origin for name in ("exporter", "exporter.passes", "exporter.verifier")]
    return tuple(os.path.dirname(os.path.abspath(path)) + os.sep for path in [torch.__file__, *own])


_STDLIB_DIR = os.path.dirname(os.path.abspath(contextlib.__file__)) + os.sep


@functools.lru_cache(maxsize=4096)
def is_library_frame(filename: str) -> bool:
    """Whether ``filename`` belongs to torch, exporter or the standard library (not user code)."""
    if filename.startswith("<"):
        return True
    filename = os.path.abspath(filename)
    if filename.startswith(_library_dirs()):
        return True
    return filename.startswith(_STDLIB_DIR) and "site-packages" not in filename


# One frame of a node's ``stack_trace`` as traceback.format_list writes it: the
# ``File ...`` line, then the source line (absent when the source is not available).
_FRAME = re.compile(r'^ *File "(?P<file>.+)", line (?P<line>\d+), in (?P<name>.+)$(?:\n {4}(?P<code>.*)$)?', re.M)


def node_frame(node: torch.fx.Node | None) -> traceback.FrameSummary | None:
    """The innermost frame of ``node``'s recorded ``stack_trace`` in the user's code (not in
    torch, such as ``nn.Linear.forward``, exporter or the standard library), with its source
    line; None for no node (a value no trace recorded)."""
    if node is None:
        return None
    trace = node.meta.get("stack_trace")
    if not isinstance(trace, str):
        return None
    for match in reversed(list(_FRAME.finditer(trace))):
        if not is_library_frame(match["file"]):
            return traceback.FrameSummary(match["file"], int(match["line"]), match["name"], line=match["code"])
    return None


def node_location(node: torch.fx.Node) -> str | None:
    """``file:line`` of the user's code that produced ``node`` (see ``node_frame``), if recorded."""
    frame = node_frame(node)
    return f"{frame.filename}:{frame.lineno}" if frame else None


def user_input_nodes(program: torch.export.ExportedProgram) -> list[torch.fx.Node | None]:
    """The placeholder (or None, for a constant input) of each user input, in flat input order."""
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    return [
        nodes.get(getattr(spec.arg, "name", None))
        for spec in program.graph_signature.input_specs
        if spec.kind is InputKind.USER_INPUT
    ]
