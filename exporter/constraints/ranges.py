"""The program's ``range_constraints``: the value range of every input size and data-dependent symbol."""

from __future__ import annotations

from typing import Any

import sympy
import torch

from .._state import ExportState
from .._torch_internals import ValueRanges, free_unbacked_symbols, int_oo

__all__ = ["range_constraints"]


def range_constraints(state: ExportState) -> dict[sympy.Expr, ValueRanges]:
    """Value ranges of the input dims' expressions and of every symbol in them or created
    from data (``nonzero``, ``.item()``), as torch.export records them."""
    shape_env = state.fake_mode.shape_env
    ranges: dict[Any, ValueRanges] = {
        symbol: vr for symbol, vr in shape_env.var_to_range.items() if free_unbacked_symbols(symbol)
    }
    plan = state.dynamic
    free: set[sympy.Symbol] = set()
    if plan is not None:
        for tracked in state.tracked:
            requests = plan.requests.get(tracked.leaf, {})
            for index, size in enumerate(tracked.fake.shape):
                if not isinstance(size, torch.SymInt) or size.node.expr.is_number:
                    continue
                expr = size.node.expr
                request = requests.get(index)
                if request is not None and request.kind.is_dim:
                    declared = ValueRanges(lower=request.min, upper=request.max)
                    ranges[expr] = ranges.get(expr, declared) & declared
                else:
                    vr = shape_env.bound_sympy(expr)
                    if request is not None and (request.min is not None or request.max is not None):
                        vr = vr & ValueRanges(
                            lower=request.min if request.min is not None else 0,
                            upper=request.max if request.max is not None else int_oo,
                        )
                    ranges[expr] = ranges.get(expr, vr) & vr
                free |= expr.free_symbols
    for symbol in free:
        if symbol not in ranges:
            ranges[symbol] = shape_env.var_to_range[symbol]
    return ranges
