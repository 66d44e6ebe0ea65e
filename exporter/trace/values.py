"""Python asking for a traced value: hashing a size (``set(sizes)``, a dict key) and ``.numpy()``
on a tensor.  Neither has a value while tracing; a normal trace refuses with an exception
``explain`` words (``HashedSize``, ``LeavesGraph``), a draft trace takes the example's value
and leaves a check in the program.  ``patches`` installs the replacements in the tracing thread."""

from __future__ import annotations

import os
import sys
from typing import Any

import torch

from .._torch_internals import (
    assert_async,
    free_unbacked_symbols,
    outside_modes,
    real_value,
    runtime_check,
    traced_fake,
)
from .draft import live_user_line, note_values_taken, values_check_message

__all__ = ["HashedSize", "LeavesGraph", "size_hash", "tensor_numpy"]


class HashedSize(TypeError):
    """A size computed from tensor values was hashed outside a draft trace.

    A TypeError, as torch's own refusal is: code that hashes sizes to cache on them
    (einops) catches it and goes on without the cache."""

    def __init__(self, size: torch.SymInt) -> None:
        super().__init__(f"unhashable type: a size computed from tensor values ({size})")
        self.size = str(size)


class LeavesGraph(RuntimeError):
    """``.numpy()`` was called on a traced tensor, and no example value could stand in for it."""

    def __init__(self, shape: tuple[Any, ...], dtype: torch.dtype) -> None:
        shown = ", ".join(str(s) for s in shape)
        super().__init__(f".numpy() on a traced {str(dtype).removeprefix('torch.')}[{shown}] tensor")


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _asked_by_torch() -> bool:
    """Whether the code that asked for a hash (the innermost frame outside exporter) is torch's."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_OWN_DIR):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(_TORCH_DIR)


def size_hash(real, *, draft: bool):
    """``SymInt.__hash__`` for a trace.  A size with data-dependent symbols that the model
    hashes is hashed by its example value in a draft trace (``int()`` asks the ShapeEnv, which
    takes the real value and defers an assert of it to run time) and refused otherwise.  Any
    other SymInt, and any hash torch itself asks for, is ``real``'s: torch refuses a dynamic
    size, and nested ints hash."""

    def hash_(self: torch.SymInt) -> int:
        if self.node.is_nested_int() or not free_unbacked_symbols(self) or _asked_by_torch():
            return real(self)
        if draft:
            return hash(int(self))
        raise HashedSize(self)

    return hash_


_SHOWN_VALUES = 16


def _shown(value: torch.Tensor) -> str:
    """The values taken, short enough for a report line."""
    kind = f"{str(value.dtype).removeprefix('torch.')}[{', '.join(map(str, value.shape))}]"
    if value.numel() <= _SHOWN_VALUES:
        return f"{value.tolist()} ({kind})"
    return f"the example's {value.numel()} values ({kind})"


def _check_holds(traced: torch.Tensor, value: torch.Tensor, message: str) -> None:
    """Ops in the graph that stop the program unless ``traced`` has ``value``'s sizes and values."""
    for dim, size in enumerate(value.shape):
        runtime_check(traced.size(dim) == size)
    same = traced == value
    if value.is_floating_point() or value.is_complex():
        same = same | (traced.isnan() & value.isnan())
    assert_async(same.all(), message)


def tensor_numpy(real, *, draft: bool):
    """``Tensor.numpy`` for a trace.  On a traced tensor a draft trace returns the example's
    values as NumPy gives them and asserts, in the program, that the tensor holds them when
    it runs; a normal trace refuses (``LeavesGraph``).  A real tensor (a constant) is
    converted by ``real`` as in eager."""

    def numpy(self: torch.Tensor, *, force: bool = False):
        fake = traced_fake(self)
        if fake is None:  # a constant: NumPy's conversion must not meet the trace's modes
            with outside_modes():
                return real(self, force=force)
        if self.requires_grad and not force:  # as eager refuses it
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        value = real_value(fake) if draft else None
        if value is None:
            raise LeavesGraph(tuple(self.shape), self.dtype)
        # NumPy gets memory of its own: the model may write to the array, and the copy the
        # check compares with becomes a constant of the program.
        with outside_modes():
            array = real(value, force=force)
        location, code = live_user_line()
        _check_holds(self, value.clone(), values_check_message(location))
        note_values_taken(fake, location, code, _shown(value))
        return array

    return numpy
