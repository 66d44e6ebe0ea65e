"""Lists a loop over a data-sized tensor builds: ``crops = []``, then ``crops.append(...)``
in each step, then ``torch.stack(crops)`` after the loop.  A while_loop carries tensors of
fixed sizes only, and the list's length is the data's; so the list becomes a buffer made
before the loop, one row for each item the loop may go round, and a count, both carried:
each append writes its row at the count and counts it.  After the loop the list is the
buffer's filled part: ``torch.stack`` of it is that part, of a size only the data decides,
``torch.cat`` the same with its first two dimensions made one, and ``len()`` and a truth
test read the count.

A run learns such a list where the steps of a loop grow a list of the loop's own function,
empty before the loop, by at most one tensor each, of sizes the loop does not decide
(``ListNeeded``: the runs start over with it, as for a carried number).  Anything else
done with it, inside the loop or after (an index, an iteration, a second append in one
step, a tensor of another size), is refused naming it: the buffer stands for the list only
in these uses."""

from __future__ import annotations

from typing import Any

import torch

from .._errors import Category, TraceError
from .._torch_internals import runtime_check

__all__ = ["FilledList", "ListNeeded", "ListShape", "StepList", "same_sizes"]

ListShape = tuple[tuple[Any, ...], torch.dtype, torch.device]
"""What a list's items are: their sizes, dtype and device."""


class ListNeeded(TraceError):
    """A loop's steps grow lists of its frame (``shapes``, name -> ``ListShape``) that the run
    did not make buffers of: the runs start over with them.  Raised through the model's code."""

    def __init__(self, loop: Any, shapes: dict[str, ListShape]) -> None:
        names = ", ".join(f"`{n}`" for n in shapes)
        super().__init__(
            f"the steps of the loop append to {names}, which the runs must carry as buffers",
            category=Category.BRANCH_CAPTURE, location=loop.site.location,
        )
        self.site, self.shapes = loop.site, shapes


def _refusal(loop: Any, why: str) -> TraceError:
    from .loops import loop_refusal

    return loop_refusal(
        loop, why, hint="append one tensor of one size a step and read the list after the loop with torch.stack, "
        "torch.cat, len() or a truth test; or export with branches='draft' to follow the example's count",
    )


def _refuse_use(what: str, after: bool) -> Any:
    def refused(self: Any, *args: Any, **kwargs: Any) -> Any:
        where = "after the loop" if after else "inside the loop"
        raise _refusal(self.loop, f"forward uses `{self.name}`, the list its steps append to, {where} ({what}), "
                       "where the program holds it as a buffer with a count")

    refused.__name__ = what
    return refused


_LIST_USES = (
    "__iter__", "__getitem__", "__setitem__", "__delitem__", "__contains__", "__add__", "__radd__", "__iadd__",
    "__mul__", "__reversed__", "extend", "insert", "pop", "remove", "clear", "copy", "index", "count", "sort",
    "reverse",
)


def same_sizes(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two tensors' sizes are the same as written (no size is guarded on)."""
    return len(a) == len(b) and all(str(x) == str(y) for x, y in zip(a, b))


class StepList:
    """The list, while a run goes round its loop: ``append`` writes the buffer's (``rows``) row
    at the count (``counted``).  The loop's steps carry both as values of the while_loop."""

    __slots__ = ("rows", "counted", "name", "loop", "shape", "_appended")
    __fingerprinted__ = ("rows", "counted")
    """What a fingerprint of the loop's state walks (``state.py``): the two tensors."""

    def __init__(self, name: str, loop: Any, length: Any, shape: ListShape) -> None:
        sizes, dtype, device = shape
        self.rows = torch.zeros((length, *sizes), dtype=dtype, device=device)
        self.counted = torch.zeros((), dtype=torch.long, device=device)
        self.name, self.loop, self.shape = name, loop, shape
        self._appended = 0

    def append(self, value: Any) -> None:
        sizes, dtype, _ = self.shape
        if not isinstance(value, torch.Tensor) or value.dtype != dtype or not same_sizes(tuple(value.shape), sizes):
            got = f"a tensor of sizes {tuple(value.shape)} and {value.dtype}" if isinstance(value, torch.Tensor) else (
                f"a {type(value).__name__}")
            raise _refusal(self.loop, f"a step appends {got} to `{self.name}`, whose other items are tensors of sizes "
                           f"{tuple(sizes)} and {dtype}: the program holds them as rows of one buffer")
        if self._appended == self.loop.taken:
            raise _refusal(self.loop, f"a step appends to `{self.name}` more than once: the program holds one row a step")
        self._appended = self.loop.taken
        self.rows = torch.ops.aten.index_put.default(self.rows, [self.counted.reshape(1)], value.unsqueeze(0))
        self.counted = self.counted + 1

    def __len__(self) -> int:
        raise _refusal(self.loop, f"forward takes the length of `{self.name}`, the list its steps append to, inside "
                       "the loop, where the program holds it as a buffer with a count")

    def __bool__(self) -> bool:
        return self.__len__() > 0

    def filled(self) -> FilledList:
        """The list as the loop leaves it."""
        return FilledList(self.name, self.loop, self.rows, self.counted)


for _use in _LIST_USES:
    setattr(StepList, _use, _refuse_use(_use, after=False))


class FilledList:
    """The list after its loop: the first ``counted`` of its ``rows``."""

    __slots__ = ("rows", "counted", "name", "loop", "_size")
    __fingerprinted__ = ("rows", "counted")

    def __init__(self, name: str, loop: Any, rows: torch.Tensor, counted: torch.Tensor) -> None:
        self.name, self.loop, self.rows, self.counted = name, loop, rows, counted
        self._size: Any = None

    def size(self) -> Any:
        """How many items the list holds: a number only the data decides."""
        if self._size is None:
            size = self.counted.item()
            runtime_check(size >= 0)
            runtime_check(size <= self.rows.shape[0])
            self._size = size
        return self._size

    def stacked(self, dim: int = 0) -> torch.Tensor:
        """``torch.stack`` of the items along ``dim``."""
        rank = self.rows.dim()
        if not -rank <= dim < rank:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})")
        filled = self.rows.narrow(0, 0, self.size())
        return filled.movedim(0, dim % rank) if dim % rank else filled

    def concatenated(self, dim: int = 0) -> torch.Tensor:
        """``torch.cat`` of the items along ``dim``."""
        rank = self.rows.dim() - 1
        if rank == 0:
            raise RuntimeError("zero-dimensional tensor cannot be concatenated")
        if not -rank <= dim < rank:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})")
        dim %= rank
        return self.stacked(dim).flatten(dim, dim + 1)

    def __len__(self) -> int:
        # a plain int is asked for: the run is made again with len() giving the symbolic size
        return self.size().__index__()

    __data_sized_len__ = size
    """What ``len()`` gives where a run's ``len`` gives data-decided sizes (``python_ops``)."""

    def __torch_stack__(self, dim: int = 0, *, out: Any = None) -> torch.Tensor:
        """``torch.stack`` of the list (``python_ops.list_stack``)."""
        if out is not None:
            raise _refusal(self.loop, f"forward stacks `{self.name}` into `out=`")
        return self.stacked(dim)

    def __torch_cat__(self, dim: int = 0, *, out: Any = None) -> torch.Tensor:
        """``torch.cat`` of the list (``python_ops.list_cat``)."""
        if out is not None:
            raise _refusal(self.loop, f"forward concatenates `{self.name}` into `out=`")
        return self.concatenated(dim)

    def __bool__(self) -> bool:
        return bool(self.size() != 0)

    def append(self, value: Any) -> None:
        raise _refusal(self.loop, f"forward appends to `{self.name}` after the loop whose steps append to it, where the "
                       "program holds the list as a buffer with a count")


for _use in _LIST_USES:
    setattr(FilledList, _use, _refuse_use(_use, after=True))
