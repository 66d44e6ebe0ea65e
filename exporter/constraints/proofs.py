"""Prove a shape guard true over the declared ranges, where torch's solver cannot.

torch's solver decides a guard with value-range arithmetic, which loses the relation
between the two sides: ``Min(8*s + 8, 16*s + 16) == 8*s + 8`` (from reshaping an expanded
KV cache, in every grouped-query-attention decoder) holds for every size ``s >= 0``, but
the range of the left side is not smaller than the right's, so torch.export refuses a
dynamic cache length.  Writing each size as its lower bound plus a non-negative integer
(``s = 2 + t``) lets sympy order the arguments of ``Min`` and ``Max`` and compare
polynomials term by term; a guard that simplifies to ``True`` then holds on the whole
range.  The same with sizes written down from their upper bounds covers the other side.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sympy

from .._torch_internals import SizeMax, SizeMin, is_number_bound

__all__ = ["holds_on_ranges"]


def _shifted(expr: sympy.Basic, ranges: Mapping[sympy.Symbol, Any], *, from_lower: bool) -> sympy.Basic | None:
    substitutions = {}
    for symbol in expr.free_symbols:
        vr = ranges.get(symbol)
        if vr is None:
            return None
        bound = vr.lower if from_lower else vr.upper
        if not is_number_bound(bound):
            return None
        offset = sympy.Symbol(f"_{symbol}_offset", integer=True, nonnegative=True)
        substitutions[symbol] = bound + offset if from_lower else bound - offset
    # torch's size Min/Max do not order their arguments by the symbols' assumptions; sympy's
    # do (Min(25, 50*t + 100) is 25 for t >= 0).
    return expr.xreplace(substitutions).replace(SizeMin, sympy.Min).replace(SizeMax, sympy.Max)


def holds_on_ranges(expr: sympy.Basic, ranges: Mapping[sympy.Symbol, Any]) -> bool:
    """True if ``expr`` (a relation of integer sizes) is shown true for every value of its
    symbols within ``ranges`` (symbol -> ``ValueRanges``); False if it is false somewhere or
    cannot be shown."""
    if expr is sympy.true:
        return True
    if not expr.free_symbols:
        return False
    for from_lower in (True, False):
        shifted = _shifted(expr, ranges, from_lower=from_lower)
        if shifted is None:
            continue
        try:
            if _true(shifted):
                return True
        except (TypeError, ValueError, RecursionError):
            continue
    return False


def _true(relation: sympy.Basic) -> bool:
    relation = sympy.simplify(relation)
    if relation is sympy.true or not isinstance(relation, sympy.core.relational.Relational):
        return relation is sympy.true
    # a relation between polynomials in non-negative offsets: decide by the sign of the difference
    difference = sympy.expand(relation.lhs - relation.rhs)
    sign = {
        sympy.Eq: difference.is_zero,
        sympy.Ne: difference.is_nonzero,
        sympy.Ge: difference.is_nonnegative,
        sympy.Gt: difference.is_positive,
        sympy.Le: (-difference).is_nonnegative,
        sympy.Lt: (-difference).is_positive,
    }.get(type(relation))
    return bool(sign)
