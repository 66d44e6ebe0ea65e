"""Leave the user's module exactly as it was: an export must never change the model.

Tracing runs the real ``forward`` with fake tensors swapped in, so anything forward
writes to ``self`` (a cached tensor, a counter, a new submodule, a hook, ``self.eval()``)
would otherwise stay behind holding fake tensors or proxies, a silent corruption that
only shows up on the next eager call.  ``module_preserved`` snapshots every submodule's
attribute dictionary (and the contents of the containers in it: parameter, buffer,
submodule and hook tables, user lists and dicts, and the containers inside those) and puts
them back on exit, whether the export succeeded or failed; every run of forward an export
makes starts from that snapshot too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from .._torch_internals import FakeTensor, FunctionalTensor, is_traceable_wrapper_subclass

__all__ = ["ModuleSnapshot", "find_leaked_tracing_values", "module_preserved", "state_bytes", "state_values_restored"]

_MISSING = object()
_DEPTH = 4
"""How deep containers inside containers are snapshot (a dict of lists of dicts is three)."""


def _container_copy(value: Any, depth: int = _DEPTH) -> Any:
    """The contents of a plain container (dict, list, set), each item with the contents of
    the containers it is, to ``depth``; None for anything else."""
    if depth == 0:
        return None
    if isinstance(value, dict):
        return [(k, v, _container_copy(v, depth - 1)) for k, v in value.items()]
    if type(value) is list:
        return [(v, _container_copy(v, depth - 1)) for v in value]
    if type(value) is set:
        return set(value)
    return None


def _restore_container(value: Any, saved: Any) -> None:
    if isinstance(value, dict):
        if len(value) != len(saved) or any(value.get(k, _MISSING) is not v for k, v, _ in saved):
            value.clear()
            value.update((k, v) for k, v, _ in saved)
        for _, item, contents in saved:
            if contents is not None:
                _restore_container(item, contents)
    elif type(value) is list:
        if len(value) != len(saved) or any(a is not b for a, (b, _) in zip(value, saved)):
            value[:] = [v for v, _ in saved]
        for item, contents in saved:
            if contents is not None:
                _restore_container(item, contents)
    elif type(value) is set:
        if value != saved:
            value.clear()
            value.update(saved)


def _snapshot(module: torch.nn.Module) -> dict[str, tuple[Any, Any]]:
    return {key: (value, _container_copy(value)) for key, value in vars(module).items()}


def _restore(module: torch.nn.Module, snapshot: dict[str, tuple[Any, Any]]) -> None:
    attrs = vars(module)
    for key in [k for k in attrs if k not in snapshot]:
        del attrs[key]
    for key, (value, contents) in snapshot.items():
        if attrs.get(key, _MISSING) is not value:
            attrs[key] = value
        if contents is not None:
            _restore_container(value, contents)


class ModuleSnapshot:
    """Every submodule's attribute dictionary and the containers in it, as they were when the
    snapshot was taken; ``restore()`` puts them back (as often as needed)."""

    def __init__(self, root: torch.nn.Module) -> None:
        self._snapshots = [(m, _snapshot(m)) for m in root.modules()]

    def restore(self) -> None:
        """Put every attribute, table, user container and training flag back as it was."""
        for module, snapshot in self._snapshots:
            _restore(module, snapshot)


@contextlib.contextmanager
def module_preserved(root: torch.nn.Module) -> Iterator[ModuleSnapshot]:
    """Restore every submodule's attributes, tables and training flag on exit; the snapshot
    yielded restores them on demand too (between two runs of forward)."""
    snapshot = ModuleSnapshot(root)
    try:
        yield snapshot
    finally:
        snapshot.restore()


@contextlib.contextmanager
def state_values_restored(root: torch.nn.Module, also: Iterable[torch.Tensor] = ()) -> Iterator[Callable[[], None]]:
    """Copy every parameter and buffer, and the tensors ``also`` lists; yield a function that
    puts the copies back, and call it on exit.

    For running the real model (or a program sharing its tensors) without leaving a trace:
    a train-mode BatchNorm updates its statistics, forward may assign ``weight.data``, or
    write in place to a plain tensor it holds (which a program shares as a constant: pass
    ``program.constants.values()`` as ``also``).  The copy doubles the model's memory while
    the block runs.
    """
    also = [t for t in also if isinstance(t, torch.Tensor)]
    tensors = list({id(t): t for t in (*root.parameters(), *root.buffers(), *also)}.values())
    saved = [(t, t.data, t.detach().clone()) for t in tensors]

    def restore() -> None:
        with torch.no_grad():
            for tensor, data, values in saved:
                if not _same_memory(tensor, data):
                    tensor.data = data
                data.copy_(values)

    try:
        yield restore
    finally:
        restore()


def _same_memory(tensor: torch.Tensor, data: torch.Tensor) -> bool:
    """Whether ``tensor`` still holds the memory ``data`` held (a wrapper subclass, such as
    a quantized weight, holds its inner tensors')."""
    if is_traceable_wrapper_subclass(tensor):
        names, _ = tensor.__tensor_flatten__()
        return is_traceable_wrapper_subclass(data) and all(
            _same_memory(getattr(tensor, name), getattr(data, name)) for name in names
        )
    return tensor.untyped_storage().data_ptr() == data.untyped_storage().data_ptr()


def state_bytes(root: torch.nn.Module) -> int:
    """Bytes of memory held by the distinct parameters and buffers of ``root`` (a tensor on
    the meta device holds none)."""
    tensors = {id(t): t for t in (*root.parameters(), *root.buffers())}.values()
    return sum(t.numel() * t.element_size() for t in tensors if t.device.type != "meta")


def _is_tracing_value(value: Any) -> bool:
    if isinstance(value, (FakeTensor, FunctionalTensor, torch.fx.Proxy)):
        return True
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return not value.node.is_nested_int() and value.node.maybe_as_int() is None
    return False


def find_leaked_tracing_values(root: torch.nn.Module, max_depth: int = 3) -> list[str]:
    """Attribute paths under ``root`` that hold a fake tensor, functional tensor, proxy or symbol."""
    found: list[str] = []

    def visit(value: Any, path: str, depth: int) -> None:
        if _is_tracing_value(value):
            found.append(path)
        elif depth < max_depth and isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                visit(item, f"{path}[{i}]", depth + 1)
        elif depth < max_depth and isinstance(value, dict):
            for key, item in value.items():
                visit(item, f"{path}[{key!r}]", depth + 1)

    for name, module in root.named_modules(remove_duplicate=False):
        prefix = f"{name}." if name else ""
        for key, value in vars(module).items():
            visit(value, prefix + key, 0)
    return found
