"""The model's parameters and buffers as the traced function's state inputs.

A parameter or buffer that is a tensor subclass with its own ``__torch_dispatch__``
(``TwoTensor``, a quantized weight) cannot be a program input as it is: it is traced as
its plain inner tensors, named as torch.export names them
(``parametrizations.<name>.original<i>``), and rebuilt from them inside the trace, so
its operations dispatch to the inner tensors and are recorded.  The user's module is not
changed (torch.export registers a parametrization on it; exporter only swaps values in
for the length of the trace).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import torch

from .._errors import Category, TraceError
from .._torch_internals import (
    non_persistent_buffers,
    own_buffers,
    schema_of,
    OpOverload,
    FakeTensor,
    FakeTensorMode,
    fake_dispatch_through,
    is_traceable_wrapper_subclass,
    real_clone,
    real_copy_into,
    tensors_written,
)
from ..inputs.bind import dispatches_like_a_tensor

__all__ = ["StateInputs", "SubclassState", "collect_state", "real_writes_undone"]


@attrs.frozen
class SubclassState:
    """A tensor-subclass parameter or buffer and the plain tensors it is traced as."""

    name: str
    """Its FQN on the module (``block.weight``)."""
    leaves: tuple[str, ...]
    """The inner tensors' names: ``block.parametrizations.weight.original0``, ..."""
    rebuild: Callable[[list[Any]], torch.Tensor]
    """Inner tensors (fakes while tracing), in ``leaves`` order -> the subclass tensor."""


@attrs.frozen
class StateInputs:
    """Parameters and buffers by input name, in the traced function's argument order."""

    parameters: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    subclasses: tuple[SubclassState, ...] = ()
    non_persistent: frozenset[str] = frozenset()
    """Names (all aliases, and inner tensors) of buffers registered with ``persistent=False``."""

    @property
    def names(self) -> list[str]:
        return [*self.parameters, *self.buffers]

    @property
    def values(self) -> list[torch.Tensor]:
        return [*self.parameters.values(), *self.buffers.values()]

    @property
    def leaves(self) -> dict[str, torch.Tensor]:
        """The inner tensors of subclass state, by name."""
        every = {**self.parameters, **self.buffers}
        return {leaf: every[leaf] for sub in self.subclasses for leaf in sub.leaves}

    def module_state(self, by_name: dict[str, Any]) -> dict[str, Any]:
        """What to swap into the module for the traced values ``by_name`` (one per input name):
        the plain values as they are, each subclass rebuilt from its inner values."""
        leaves = {leaf for sub in self.subclasses for leaf in sub.leaves}
        swapped = {name: value for name, value in by_name.items() if name not in leaves}
        for sub in self.subclasses:
            swapped[sub.name] = sub.rebuild([by_name[leaf] for leaf in sub.leaves])
        return swapped


def _inner_tensors(tensor: torch.Tensor) -> Iterator[torch.Tensor]:
    if not is_traceable_wrapper_subclass(tensor):
        yield tensor
        return
    names, _ = tensor.__tensor_flatten__()
    for name in names:
        yield from _inner_tensors(getattr(tensor, name))


def _rebuilt(like: torch.Tensor, leaves: Iterator[Any]) -> Any:
    if not is_traceable_wrapper_subclass(like):
        return next(leaves)
    names, metadata = like.__tensor_flatten__()
    inner = {name: _rebuilt(getattr(like, name), leaves) for name in names}
    return type(like).__tensor_unflatten__(inner, metadata, like.size(), like.stride())


def _leaf_names(name: str, count: int) -> tuple[str, ...]:
    owner, _, attribute = name.rpartition(".")
    prefix = f"{owner}." if owner else ""
    return tuple(f"{prefix}parametrizations.{attribute}.original{i}" for i in range(count))


def _split(name: str, tensor: torch.Tensor, kind: str) -> tuple[dict[str, torch.Tensor], SubclassState | None]:
    if dispatches_like_a_tensor(tensor):
        return {name: tensor}, None
    if not is_traceable_wrapper_subclass(tensor):
        raise TraceError(
            f"{kind} {name!r} is a {type(tensor).__qualname__}, a tensor subclass with its own "
            "__torch_dispatch__ that does not say what tensors it holds (no __tensor_flatten__)",
            category=Category.UNSUPPORTED_TENSOR_SUBCLASS,
            hint="give the subclass __tensor_flatten__ / __tensor_unflatten__ (a traceable wrapper "
            "subclass), or register its inner tensors as plain parameters",
        )
    inner = list(_inner_tensors(tensor))
    if isinstance(tensor, torch.nn.Parameter):
        # the inner tensors are the program's parameters (sharing the subclass's memory)
        inner = [torch.nn.Parameter(t, requires_grad=tensor.requires_grad) for t in inner]
    leaves = _leaf_names(name, len(inner))
    return dict(zip(leaves, inner)), SubclassState(name, leaves, lambda values, like=tensor: _rebuilt(like, iter(values)))


def collect_state(root: torch.nn.Module) -> StateInputs:
    """Every parameter and buffer of ``root`` (all aliases), subclass ones as their inner tensors."""
    non_persistent = set()
    for prefix, module in root.named_modules(remove_duplicate=False):
        for name in non_persistent_buffers(module):
            if own_buffers(module).get(name) is not None:
                non_persistent.add(f"{prefix}.{name}" if prefix else name)
    parameters: dict[str, torch.Tensor] = {}
    buffers: dict[str, torch.Tensor] = {}
    subclasses = []
    for kind, table, named in (
        ("parameter", parameters, root.named_parameters(remove_duplicate=False)),
        ("buffer", buffers, root.named_buffers(remove_duplicate=False)),
    ):
        for name, tensor in named:
            flat, subclass = _split(name, tensor, kind)
            table.update(flat)
            if subclass is not None:
                subclasses.append(subclass)
                if name in non_persistent:
                    non_persistent.update(subclass.leaves)
    return StateInputs(parameters, buffers, tuple(subclasses), frozenset(non_persistent))


@contextlib.contextmanager
def real_writes_undone(fake_mode: FakeTensorMode) -> Iterator[None]:
    """Within the block, a write the trace makes to a real tensor is undone when the block
    ends, also on an error.

    Parameters, buffers and inputs are fakes while tracing, but a plain tensor the model
    holds (``self.foo = torch.zeros(2)``, not registered) or reaches (a global) is real.
    An in-place op on it whose other arguments are numbers or real tensors
    (``self.foo.add_(5)``) is run for real by the fake mode's constant propagation, on the
    user's tensor: torch.export leaves the model changed that way, and the program's
    constant, which is the same tensor, one call ahead of eager.  Each such tensor is copied
    before its first write reaches the fake mode and written back afterwards, so the model
    is as it was and the program starts where eager starts.  Writes with a fake argument
    go to a fake copy and change nothing real."""
    saved: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    mutable: dict[Any, bool] = {}

    def guarded(dispatch, func, types, args, kwargs):
        writes = mutable.get(func)
        if writes is None:
            writes = mutable[func] = isinstance(func, OpOverload) and schema_of(func).is_mutable
        if writes:
            for t in tensors_written(func, args, kwargs or {}):
                if type(t) is not FakeTensor and not is_traceable_wrapper_subclass(t) and id(t) not in saved:
                    saved[id(t)] = (t, real_clone(t))
        return dispatch(func, types, args, kwargs)

    try:
        with fake_dispatch_through(fake_mode, guarded):
            yield
    finally:
        for t, before in saved.values():
            real_copy_into(t, before)
