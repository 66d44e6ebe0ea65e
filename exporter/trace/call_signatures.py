"""Record how named submodules were called, for ``preserve_module_call_signature``: while a
trace runs, hooks on each named submodule read the graph nodes holding its flattened arguments
and outputs, which the program's module call graph carries so that ``torch.export.unflatten``
rebuilds the submodule with the calling convention it had."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree

from .._errors import Category, InputSpecError, TraceError
from .._state import PreservedCall
from .._torch_internals import FunctionalTensor, unwrap_functional
from .active import traced_graph, traced_node

__all__ = ["recording_calls"]

_CONSTANT_LEAVES = (int, float, bool, str, type(None))


def _submodules(root: torch.nn.Module, paths: Sequence[str] | None) -> list[tuple[str, torch.nn.Module]]:
    if paths is None:
        return []
    if not isinstance(paths, str) and not isinstance(paths, (list, tuple, set, frozenset)):
        raise InputSpecError(
            f"preserve_module_call_signature must be a sequence of submodule paths, got {type(paths).__name__}",
            hint="write preserve_module_call_signature=('encoder.layers.0', ...)",
        )
    if isinstance(paths, str):
        raise InputSpecError(
            f"preserve_module_call_signature must be a sequence of submodule paths, got the string {paths!r}",
            hint=f"write preserve_module_call_signature=({paths!r},)",
        )
    found = []
    for path in paths:
        module = None
        if isinstance(path, str) and path:
            try:
                module = root.get_submodule(path)
            except AttributeError:
                module = None
        if module is None:
            names = [name for name, _ in root.named_modules() if name][:8]
            raise InputSpecError(
                f"preserve_module_call_signature names {path!r}, which is not a submodule of "
                f"{type(root).__name__}",
                hint=f"use a path from model.named_modules(), such as {', '.join(map(repr, names))}"
                if names
                else "the model has no submodules",
            )
        found.append((path, module))
    return found


def _node_or_constant(value: Any, fqn: str, what: str) -> Any:
    if isinstance(value, torch.Tensor):
        inner = unwrap_functional(value) if isinstance(value, FunctionalTensor) else value
        node = traced_node(inner)
        if node is None:
            raise TraceError(
                f"cannot preserve the call signature of {fqn!r}: {what} is a tensor the trace "
                f"did not record (a tensor created outside the traced inputs and state)",
                category=Category.TRACE,
                hint="pass it to the submodule as an input of the model, or preserve a module that does not take it",
            )
        return node
    if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
        raise TraceError(
            f"cannot preserve the call signature of {fqn!r}: {what} is a symbolic number "
            f"({value}); as in torch.export, only tensors and constants can cross a preserved call",
            category=Category.TRACE,
            hint="pass the size inside a tensor, or preserve the submodule that computes it",
        )
    if isinstance(value, _CONSTANT_LEAVES):
        return value
    raise TraceError(
        f"cannot preserve the call signature of {fqn!r}: {what} is a {type(value).__name__}, "
        f"which is neither a tensor nor a constant",
        category=Category.TRACE,
        hint="register the class as a pytree node (exporter.register_container), or pass its tensors",
    )


def _argument_name(path: pytree.KeyPath) -> str:
    # (args, kwargs) paths: [0][i] is positional argument i, [1]['name'] a keyword one.
    head, rest = path[0], path[1:]
    return f"args{pytree.keystr(rest)}" if getattr(head, "idx", None) == 0 else pytree.keystr(rest).lstrip(".")


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[torch.fx.Graph, PreservedCall]] = []
        self.counts: dict[tuple[int, str], int] = {}
        self.specs: dict[str, tuple[pytree.TreeSpec, pytree.TreeSpec]] = {}
        self.open: dict[int, list[tuple[str, pytree.TreeSpec, list[Any]]]] = {}

    def enter(self, path: str, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        graph = traced_graph()
        if graph is None:
            return  # an eager run: nothing to record
        n = self.counts.get((id(graph), path), 0)
        self.counts[(id(graph), path)] = n + 1
        fqn = path if n == 0 else f"{path}@{n}"
        leaves, in_spec = pytree.tree_flatten_with_path((args, kwargs))
        inputs = [_node_or_constant(v, fqn, f"input {_argument_name(k)}") for k, v in leaves]
        self.open.setdefault(id(module), []).append((fqn, in_spec, inputs))

    def leave(self, path: str, module: torch.nn.Module, output: Any) -> None:
        graph = traced_graph()
        if graph is None or not self.open.get(id(module)):
            return
        fqn, in_spec, inputs = self.open[id(module)].pop()
        flat, out_spec = pytree.tree_flatten(output)
        outputs = [_node_or_constant(v, fqn, f"output {i}") for i, v in enumerate(flat)]
        first = self.specs.setdefault(path, (in_spec, out_spec))
        if first != (in_spec, out_spec):
            raise TraceError(
                f"cannot preserve the call signature of {path!r}: it is called with different "
                f"argument or output structures ({first[0]} then {in_spec})",
                category=Category.TRACE,
                hint="call the submodule the same way every time (same positional and keyword "
                "arguments), or do not preserve it",
            )
        self.calls.append((graph, PreservedCall(fqn, in_spec, out_spec, inputs, outputs)))


@contextlib.contextmanager
def recording_calls(root: torch.nn.Module, paths: Sequence[str]) -> Iterator[list[tuple[torch.fx.Graph, PreservedCall]]]:
    """Within the block, every traced call of the submodules at ``paths`` is appended to the
    yielded list as ``(graph, call)`` (a trace that is restarted leaves calls of its own
    graph: keep those of the graph that is used)."""
    modules = _submodules(root, paths)
    recorder = _Recorder()
    handles = []
    try:
        for path, module in modules:
            handles.append(module.register_forward_pre_hook(
                lambda m, args, kwargs, path=path: recorder.enter(path, m, args, kwargs), with_kwargs=True
            ))
            handles.append(module.register_forward_hook(
                lambda m, args, kwargs, out, path=path: recorder.leave(path, m, out), with_kwargs=True
            ))
        yield recorder.calls
    finally:
        for handle in handles:
            handle.remove()

