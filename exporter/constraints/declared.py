"""The dimensions the user declared dynamic, as the trace left them, and what a violation says."""

from __future__ import annotations

import attrs
import sympy
import torch
import torch.utils._pytree as pytree

from .._dims import DimRequest
from .._state import ExportState
from .._torch_internals import raw_expr

__all__ = ["DeclaredDim", "Violation", "declared_dims", "source_code", "source_location"]


@attrs.frozen
class DeclaredDim:
    """A declared dynamic dimension and the symbol tracing gave it."""

    leaf: int
    index: int
    request: DimRequest
    symbol: sympy.Symbol
    example: int

    @property
    def label(self) -> str:
        return self.request.name or self.request.input_dim


@attrs.frozen
class Violation:
    """One way the traced model disagrees with the spec, and the spec entry that fixes it."""

    message: str
    fix: str
    location: str | None
    """``file.py:LINE`` of the user's code that forced it, if known."""
    code: str | None = None
    """That line's source text."""
    always: bool = False
    """An error whatever torch's shape solver concludes (a ``Dim.DYNAMIC`` fixed to a constant)."""
    flag: str | None = None
    """The same fix as ``--dynamic`` flags (``--dynamic x.3=2*w_2``), where flags can say it."""


def _frame(sloc):
    frame = getattr(sloc, "framework_loc", None)
    return None if frame is None or isinstance(frame, str) else frame


def source_location(sloc) -> str | None:
    frame = _frame(sloc)
    return f"{frame.filename}:{frame.lineno}" if frame is not None else None


def source_code(sloc) -> str | None:
    frame = _frame(sloc)
    return frame.line.strip() if frame is not None and frame.line else None


def declared_dims(state: ExportState) -> list[DeclaredDim]:
    """Every dynamic dimension the spec declares that the trace kept symbolic, with its symbol."""
    plan = state.dynamic
    fakes = {t.leaf: t.fake for t in state.tracked}
    examples = pytree.tree_leaves((state.args, state.kwargs))
    dims = []
    for leaf, requests in plan.requests.items():
        for index, request in requests.items():
            size = fakes[leaf].shape[index]
            if not request.is_dynamic or not isinstance(size, torch.SymInt):
                continue
            symbol = raw_expr(size)
            if isinstance(symbol, sympy.Symbol):
                dims.append(DeclaredDim(leaf, index, request, symbol, int(examples[leaf].shape[index])))
    return dims
