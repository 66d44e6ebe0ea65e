"""The program's ``range_constraints``: the value range of every input size and data-dependent symbol."""

from __future__ import annotations

from typing import Any

import sympy
import torch

from .._dims import DimRequest
from .._ir import graph_symbols
from .._state import ExportState
from .._torch_internals import ValueRanges, free_unbacked_symbols, int_oo

__all__ = ["range_constraints"]


def range_constraints(state: ExportState) -> dict[sympy.Expr, ValueRanges]:
    """Value ranges of the input dims' expressions and of every symbol in them, and of every
    data-dependent symbol (``nonzero``, ``.item()``) the program uses, as torch.export
    records them.  Run on the finished graph: a data-dependent symbol the trace replaced
    (by a constant, or by an expression in other symbols), or one only a removed node
    held, has no range of its own."""
    shape_env = state.fake_mode.shape_env
    used = graph_symbols(state.gm)
    ranges: dict[Any, ValueRanges] = {
        symbol: vr
        for symbol, vr in shape_env.var_to_range.items()
        if free_unbacked_symbols(symbol) and symbol not in shape_env.replacements and symbol in used
    }
    plan = state.dynamic
    free: set[sympy.Symbol] = set()
    if plan is not None:
        for tracked in state.tracked:
            if isinstance(tracked.fake, torch.SymInt):
                sizes = [(tracked.fake, plan.scalars.get(tracked.leaf))]
            else:
                requests = plan.requests.get(tracked.leaf, {})
                sizes = [(size, requests.get(index)) for index, size in enumerate(tracked.fake.shape)]
            for size, request in sizes:
                if not isinstance(size, torch.SymInt) or size.node.expr.is_number:
                    continue
                expr = size.node.expr
                declared = _declared_range(shape_env, expr, request)
                ranges[expr] = ranges.get(expr, declared) & declared
                free |= expr.free_symbols
    for symbol in free:
        if symbol not in ranges:
            ranges[symbol] = shape_env.var_to_range[symbol]
    return ranges


def _declared_range(shape_env, expr: sympy.Expr, request: DimRequest | None) -> ValueRanges:
    """A Dim's declared range; for a hint (or an undeclared size), what the trace allows
    within the hint's bounds, which start at 0 (ints too, as torch.export has them)."""
    if request is not None and request.kind.is_dim:
        return ValueRanges(lower=request.min, upper=request.max)
    low = request.min if request is not None and request.min is not None else 0
    high = request.max if request is not None and request.max is not None else int_oo
    return shape_env.bound_sympy(expr) & ValueRanges(lower=low, upper=high)
