"""Symbolic sizes for the program generator: polynomials in named size symbols.

A dimension's size is a ``Size``: integer coefficients over monomials of symbols
(``s0``, ``2*s0``, ``s0*s1 - s1``, ``4``). Two dimensions are known equal exactly when
their polynomials are equal, which is all the generator needs to broadcast by construction.
"""

from __future__ import annotations

from collections.abc import Mapping


class Size:
    """An immutable polynomial with integer coefficients; ``Size(4)`` is the static size 4."""

    __slots__ = ("terms",)

    def __init__(self, value: int | str | dict | None = None):
        if isinstance(value, int):
            terms = {(): value} if value else {}
        elif isinstance(value, str):
            terms = {(value,): 1}
        else:
            terms = {k: v for k, v in (value or {}).items() if v}
        self.terms: dict[tuple[str, ...], int] = terms

    def _key(self):
        return tuple(sorted(self.terms.items()))

    def __eq__(self, other):
        return isinstance(other, Size) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __add__(self, other: Size | int) -> Size:
        other = other if isinstance(other, Size) else Size(other)
        terms = dict(self.terms)
        for mono, coef in other.terms.items():
            terms[mono] = terms.get(mono, 0) + coef
        return Size(terms)

    def __mul__(self, other: Size | int) -> Size:
        other = other if isinstance(other, Size) else Size(other)
        terms: dict[tuple[str, ...], int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                mono = tuple(sorted(m1 + m2))
                terms[mono] = terms.get(mono, 0) + c1 * c2
        return Size(terms)

    __rmul__ = __mul__

    @property
    def is_static(self) -> bool:
        return all(not mono for mono in self.terms)

    @property
    def static_value(self) -> int:
        assert self.is_static
        return self.terms.get((), 0)

    @property
    def symbols(self) -> set[str]:
        return {s for mono in self.terms for s in mono}

    def evaluate(self, values: Mapping[str, int]) -> int:
        total = 0
        for mono, coef in self.terms.items():
            prod = coef
            for sym in mono:
                prod *= values[sym]
            total += prod
        return total

    def __repr__(self):
        if not self.terms:
            return "0"
        parts = []
        for mono, coef in sorted(self.terms.items(), key=lambda kv: (-len(kv[0]), kv[0])):
            body = "*".join(mono)
            if not body:
                parts.append(str(coef))
            elif coef == 1:
                parts.append(body)
            else:
                parts.append(f"{coef}*{body}")
        return " + ".join(parts).replace("+ -", "- ")
