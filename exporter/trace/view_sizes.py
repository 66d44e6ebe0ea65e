"""A view's fake kernel that gives the view the sizes it was asked for, as eager's kernel does.

torch's fake kernel returns the sizes its flatten-and-split arithmetic made (``b // (b // 3)``
where ``3`` was asked), and a model that views its batch in two and back in every layer nests
them once more per layer.  The design page's "A view's sizes" says why and when this is sound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["asked_sizes", "chained_strides", "sized_as_asked"]

Size = int | torch.SymInt


def _hint(size: Size) -> int | None:
    if isinstance(size, torch.SymInt):
        hint = size.node.hint
        return hint if isinstance(hint, int) else None
    return size


def _same(a: Size, b: Size) -> bool:
    """Whether two sizes are one expression (compared as written, never guarded)."""
    if isinstance(a, torch.SymInt) and isinstance(b, torch.SymInt):
        return a.node is b.node or a.node.expr == b.node.expr
    return not isinstance(a, torch.SymInt) and not isinstance(b, torch.SymInt) and a == b


def _chosen(made: Size, asked: Size) -> Size:
    # A constant already made stays; an inferred ``-1`` is not a size; a size without a hint
    # (data-dependent) is never exchanged.
    if not isinstance(made, torch.SymInt) or _same(made, asked):
        return made
    hint = _hint(made)
    return asked if hint is not None and _hint(asked) == hint else made


def asked_sizes(made: Sequence[Size], asked: Sequence[Size]) -> list[Size] | None:
    """The sizes a view result should have: each symbolic size ``made`` by torch's kernel is
    exchanged for the one ``asked`` (the view's own size argument) where the two are
    different expressions of the same value; None when nothing is exchanged."""
    if len(made) != len(asked):
        return None
    sizes = [_chosen(m, a) for m, a in zip(made, asked)]
    return None if all(s is m for s, m in zip(sizes, made)) else sizes


def chained_strides(made: Sequence[Size], strides: Sequence[Size], sizes: Sequence[Size]) -> list[Size]:
    """The strides of a view whose sizes ``made`` become ``sizes``.

    A dimension torch's kernel split off another has the stride ``stride * size`` of the one
    inside it, written with the made size; that product is rewritten with the new one, so
    no stride keeps an expression the sizes dropped.  Every other stride is an input's
    stride and stays."""
    new = list(strides)
    for i in range(len(strides) - 2, -1, -1):
        if new[i + 1] is strides[i + 1] and sizes[i + 1] is made[i + 1]:
            continue
        if _same(strides[i], strides[i + 1] * made[i + 1]):
            new[i] = new[i + 1] * sizes[i + 1]
    return new


def _shape_argument(shape: tuple[Any, ...]) -> Sequence[Size]:
    return shape[0] if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)) else shape


def sized_as_asked(rule: Callable[..., torch.Tensor], active: Callable[[], bool]) -> Callable[..., torch.Tensor]:
    """torch's fake kernel ``rule`` for a view op (``rule(fake_mode, func, a, *shape)``), whose
    result, while ``active()``, has the sizes its caller asked for.

    ``rule`` runs first and records its guards as it always does; the result is then the
    same view of the same storage, with sizes from ``asked_sizes`` and strides from
    ``chained_strides``.  No guard is added."""

    def kernel(fake_mode: Any, func: Any, a: torch.Tensor, *shape: Any, **kwargs: Any) -> torch.Tensor:
        out = rule(fake_mode, func, a, *shape, **kwargs)
        if not active():
            return out
        made = out.shape
        sizes = asked_sizes(made, _shape_argument(shape))
        if sizes is None:
            return out
        return out.as_strided(sizes, chained_strides(made, out.stride(), sizes), out.storage_offset())

    return kernel
