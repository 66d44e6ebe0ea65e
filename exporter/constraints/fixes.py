"""How violations read: shape expressions in the user's names, and the spec entry to paste."""

from __future__ import annotations

import re
from typing import Any

import attrs
import sympy

from .._dims import DimKind, DimRequest, bound_text, spec_fragment
from .._state import ExportState
from .._torch_internals import ValueRanges, int_oo
from .declared import DeclaredDim, Violation, declared_dims

__all__ = [
    "UserNames", "constraint_report", "edges_text", "flag_path", "in_input_names", "range_fix", "range_flag", "relation_fix",
    "relation_flag",
]


class UserNames:
    """Renders shape expressions in the user's terms: Dim names, else ``x.shape[1]``."""

    def __init__(self, dims: list[DeclaredDim]) -> None:
        self.by_symbol: dict[sympy.Symbol, sympy.Symbol] = {}
        self.declared: dict[sympy.Symbol, sympy.Expr] = {}
        self.labels: dict[sympy.Symbol, str] = {}
        for dim in dims:
            named = f" ({dim.request.name})" if dim.request.name else ""
            self.labels.setdefault(dim.symbol, f"{dim.request.input_dim}{named}")
            request = dim.request
            if request.kind is DimKind.NAMED:
                readable = sympy.Symbol(request.name, integer=True)
                declared: sympy.Expr = readable
            elif request.kind is DimKind.DERIVED:
                readable = sympy.Symbol(request.input_dim, integer=True)
                declared = request.fn(sympy.Symbol(request.root, integer=True))
            else:
                readable = sympy.Symbol(request.input_dim, integer=True)
                declared = readable
            self.by_symbol.setdefault(dim.symbol, readable)
            self.declared.setdefault(dim.symbol, declared)

    def readable(self, expr: sympy.Expr) -> sympy.Expr:
        return expr.xreplace(self.by_symbol)

    def in_declared_terms(self, expr: sympy.Expr) -> sympy.Expr:
        """``expr`` with each traced symbol replaced by what the user declared it to be."""
        return expr.xreplace(self.declared)

    def text(self, expr) -> str:
        return _pretty(self.readable(expr))

    def describe(self, expr) -> str:
        """``expr`` in words: a lone dimension is ``y.shape[0] (batch)``."""
        if isinstance(expr, sympy.Symbol) and expr in self.labels:
            return self.labels[expr]
        return self.text(expr)


def _pretty(expr) -> str:
    """Python-like text for a shape relation: ``seq % 2 == 0``, ``batch <= 64``."""
    if isinstance(expr, sympy.Eq):
        return f"{_pretty(expr.lhs)} == {_pretty(expr.rhs)}"
    if isinstance(expr, sympy.Ne):
        return f"{_pretty(expr.lhs)} != {_pretty(expr.rhs)}"
    for cls, op in ((sympy.Le, "<="), (sympy.Lt, "<"), (sympy.Ge, ">="), (sympy.Gt, ">")):
        if isinstance(expr, cls):
            return f"{_pretty(expr.lhs)} {op} {_pretty(expr.rhs)}"
    if isinstance(expr, sympy.Mod) or type(expr).__name__ in ("Mod", "PythonMod"):
        return f"{_pretty(expr.args[0])} % {_pretty(expr.args[1])}"
    if type(expr).__name__ == "FloorDiv":
        return f"{_pretty(expr.args[0])} // {_pretty(expr.args[1])}"
    if isinstance(expr, sympy.Symbol):
        return expr.name
    text = str(expr)
    return text.replace("*", " * ") if " " not in text else text


@attrs.frozen
class _Relation:
    """``dim == target`` as a declaration can state it: ``a * other + b`` for a named
    ``other`` (``a == 1, b == 0``: the same Dim), or one new Dim for ``dim`` and an undeclared
    ``other`` (``named`` False)."""

    other: DeclaredDim
    named: bool
    a: int = 1
    b: int = 0


def _relation(target: sympy.Expr, dims: list[DeclaredDim]) -> _Relation | None:
    symbols = list(target.free_symbols)
    other = next((d for d in dims if symbols and d.symbol == symbols[0]), None) if len(symbols) == 1 else None
    if other is None:
        return None
    if other.request.kind is not DimKind.NAMED:  # one Dim for both, if they are equal
        return _Relation(other, named=False) if sympy.expand(target - other.symbol) == 0 else None
    root = sympy.Symbol(other.request.name, integer=True)
    expr = sympy.expand(target.xreplace({symbols[0]: root}))
    poly = sympy.Poly(expr, root) if expr.is_polynomial(root) else None
    if poly is None or poly.degree() != 1 or not all(c.is_integer for c in poly.all_coeffs()):
        return None
    a, b = (int(c) for c in poly.all_coeffs())
    return _Relation(other, named=True, a=a, b=b) if a > 0 else None


def _derived_text(name: str, relation: _Relation, times: str) -> str:
    """``a * name + b``, spaced as ``times`` is (``" * "`` in a spec, ``"*"`` in a flag)."""
    plus, minus = (" + ", " - ") if times == " * " else ("+", "-")
    text = f"{relation.a}{times}{name}" if relation.a != 1 else name
    if relation.b > 0:
        text += f"{plus}{relation.b}"
    elif relation.b < 0:
        text += f"{minus}{-relation.b}"
    return text


def _shared_name(dim: DeclaredDim, other: DeclaredDim) -> str:
    return f"{dim.request.input_dim.split('.')[0]}_{other.request.input_dim.split('.')[0]}"


def relation_fix(dim: DeclaredDim, target: sympy.Expr, names: UserNames, dims: list[DeclaredDim]) -> str:
    """The spec entry that declares ``dim == target`` (target in traced symbols)."""
    request = dim.request
    relation = _relation(target, dims)
    if relation is not None and relation.named:
        other = relation.other.request
        if (relation.a, relation.b) == (1, 0):
            return f"{spec_fragment(request.keys, other.name)}  (the same Dim as {other.input_dim})"
        derived = _derived_text(other.name, relation, " * ")
        return f"{spec_fragment(request.keys, derived)}  (derived from {other.input_dim})"
    if relation is not None:
        name = _shared_name(dim, relation.other)
        return (
            f'{name} = Dim("{name}"); {spec_fragment(request.keys, name)} and '
            f"{spec_fragment(relation.other.request.keys, name)}  (one Dim for both)"
        )
    return f"{request.where}: declare it so that {request.input_dim} == {names.text(target)}"


def flag_path(request: DimRequest) -> str | None:
    """The dimension as ``--dynamic`` names it (``x.0``, ``inputs.mask.1``); None for a
    spec entry a flag cannot reach (a positional spec without input names)."""
    keys = request.keys
    if not keys or not isinstance(keys[0], str) or not keys[0].isidentifier() or not isinstance(keys[-1], int):
        return None
    return ".".join(str(k) for k in keys)


def relation_flag(dim: DeclaredDim, target: sympy.Expr, dims: list[DeclaredDim]) -> str | None:
    """``relation_fix`` as ``--dynamic`` flags: the same NAME for equal sizes, ``2*NAME+1``
    for a derived one, one new NAME for both sizes."""
    path = flag_path(dim.request)
    relation = _relation(target, dims)
    if path is None or relation is None:
        return None
    if relation.named:
        return f"--dynamic {path}={_derived_text(relation.other.request.name, relation, '*')}"
    other_path = flag_path(relation.other.request)
    if other_path is None:
        return None
    name = _shared_name(dim, relation.other)
    return f"--dynamic {path}={name} --dynamic {other_path}={name}"


def range_flag(dim: DeclaredDim, vr: ValueRanges, *, keep_min: bool = False) -> str | None:
    """``range_fix`` as a ``--dynamic`` flag (for a derived size, narrow its root instead:
    no flag of its own says it)."""
    request = dim.request
    path = flag_path(request)
    if path is None or request.kind is DimKind.DERIVED:
        return None
    low, high = int(vr.lower), vr.upper
    bounded = high != int_oo and high is not sympy.oo
    text = f"{low if low > 2 or keep_min else ''}..{int(high) if bounded else ''}"
    head = request.name if request.kind is DimKind.NAMED else ("dynamic" if request.kind is DimKind.DYNAMIC else "auto")
    return f"--dynamic {path}={head}:{text}"


def range_fix(dim: DeclaredDim, vr: ValueRanges, *, keep_min: bool = False) -> str:
    """The declaration with range ``vr``; the min is written when it is a real requirement
    (above 2, which every dynamic size is traced as) or when ``keep_min`` asks for it."""
    request = dim.request
    low, high = int(vr.lower), vr.upper
    parts = []
    if low > 2 or keep_min:
        parts.append(f"min={low}")
    if high != int_oo and high is not sympy.oo:
        parts.append(f"max={int(high)}")
    if request.kind is DimKind.NAMED:
        args = ", ".join([f'"{request.name}"', *parts])
        return f'{request.name} = Dim({args})'
    if request.kind is DimKind.DERIVED:
        return f"narrow {request.root} so that {request.name} stays within [{low}, {bound_text(high)}]"
    hint = "Dim.DYNAMIC" if request.kind is DimKind.DYNAMIC else "Dim.AUTO"
    return spec_fragment(request.keys, f"{hint}({', '.join(parts)})")


def edges_text(label: str, request: DimRequest, low: int, high: Any) -> str:
    """The declared sizes outside [low, high], in words: ``seq = 0``, ``seq < 4 and seq = 128``."""
    words = []
    declared_low = int(request.min or 0)
    if low > declared_low:
        words.append(f"{label} = {declared_low}" if low == declared_low + 1 else f"{label} < {low}")
    if request.max not in (None, int_oo) and high < request.max:
        words.append(f"{label} = {int(request.max)}" if high == request.max - 1 else f"{label} > {high}")
    return " and ".join(words)


def in_input_names(message: str, state: ExportState) -> str:
    """torch's constraint message with ``L['x'].size()[1]`` written as ``x.shape[1]``."""
    sources = {t.leaf: t.source.name for t in state.tracked}
    lines = [line for line in message.splitlines()[1:] if line.strip() and "TORCH_LOGS" not in line]
    text = "\n".join(lines) or message
    for dim in declared_dims(state):
        text = text.replace(f"{sources[dim.leaf]}.size()[{dim.index}]", dim.request.input_dim)
    text = re.sub(r"Not all values of (\S+) = \1 ", r"Not all values of \1 ", text)
    return text.replace("IntInfinity()", "inf")


def constraint_report(violations: list[Violation], *, flags: bool = False) -> str:
    """The ConstraintError message: each violation with where it was forced and its fix;
    with ``flags``, the fix as ``--dynamic`` flags where they can say it."""
    lines = ["the model does not fit the declared dynamic shapes:"]
    for v in violations:
        lines.append(f"  - {v.message}")
        if v.location:
            lines.append(f"    forced at {v.location}" + (f": `{v.code}`" if v.code else ""))
        lines.append(f"    fix: {v.flag if flags and v.flag else v.fix}")
    return "\n".join(lines)
