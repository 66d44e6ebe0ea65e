"""After tracing: hold the guards the model needed against the ``dynamic_shapes`` the user declared.

For every dimension declared dynamic this finds what tracing learned about it, in the
ShapeEnv: that it became a constant (specialized), that it must equal an expression in other
dimensions (a replacement), that its range was narrowed, or that another guard constrains it
(``seq % 2 == 0``).  Whatever the declaration does not already imply is a violation, reported
with the input and dimension, the source line that forced it and the spec to paste instead.
Then the declared equalities are imposed (``produce_guards``) and the program's
``range_constraints`` are computed, as torch.export computes them.
"""

from __future__ import annotations

import re
from typing import Any

import attrs
import sympy
import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import ConstraintViolationError, free_unbacked_symbols
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from ._dynamic import DimRequest, spec_fragment
from ._errors import ConstraintError
from ._state import ExportState

__all__ = ["check_constraints"]


@attrs.frozen
class _Dim:
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
    message: str
    fix: str
    location: str | None
    """``file.py:LINE`` of the user's code that forced it, if known."""
    code: str | None = None
    """That line's source text."""


def _frame(sloc):
    frame = getattr(sloc, "framework_loc", None)
    return None if frame is None or isinstance(frame, str) else frame


def _location(sloc) -> str | None:
    frame = _frame(sloc)
    return f"{frame.filename}:{frame.lineno}" if frame is not None else None


def _code(sloc) -> str | None:
    frame = _frame(sloc)
    return frame.line.strip() if frame is not None and frame.line else None


class _Names:
    """Renders shape expressions in the user's terms: Dim names, else ``x.shape[1]``."""

    def __init__(self, dims: list[_Dim]) -> None:
        self.by_symbol: dict[sympy.Symbol, sympy.Symbol] = {}
        self.declared: dict[sympy.Symbol, sympy.Expr] = {}
        self.labels: dict[sympy.Symbol, str] = {}
        for dim in dims:
            named = f" ({dim.request.name})" if dim.request.name else ""
            self.labels.setdefault(dim.symbol, f"{dim.request.input_dim}{named}")
            request = dim.request
            if request.kind == "named":
                readable = sympy.Symbol(request.name, integer=True)
                declared: sympy.Expr = readable
            elif request.kind == "derived":
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


def _declared_dims(state: ExportState) -> list[_Dim]:
    plan = state.dynamic
    fakes = {leaf: fake for leaf, fake, _, _ in state.tracked}
    examples = pytree.tree_leaves((state.args, state.kwargs))
    dims = []
    for leaf, requests in plan.requests.items():
        for index, request in requests.items():
            size = fakes[leaf].shape[index]
            if not request.is_dynamic or not isinstance(size, torch.SymInt):
                continue
            symbol = size.node._expr
            if isinstance(symbol, sympy.Symbol):
                dims.append(_Dim(leaf, index, request, symbol, int(examples[leaf].shape[index])))
    return dims


def _fix_for_relation(dim: _Dim, target: sympy.Expr, names: _Names, dims: list[_Dim]) -> str:
    """The spec entry that declares ``dim == target`` (target in traced symbols)."""
    request = dim.request
    symbols = list(target.free_symbols)
    other = next((d for d in dims if symbols and d.symbol == symbols[0]), None) if len(symbols) == 1 else None
    if other is not None:
        if other.request.kind == "named":
            root = sympy.Symbol(other.request.name, integer=True)
        else:
            root = None
        if root is not None:
            expr = sympy.expand(target.xreplace({symbols[0]: root}))
            if expr == root:
                return f"{spec_fragment(request.keys, other.request.name)}  (the same Dim as {other.request.input_dim})"
            poly = sympy.Poly(expr, root) if expr.is_polynomial(root) else None
            if poly is not None and poly.degree() == 1 and all(c.is_integer for c in poly.all_coeffs()):
                a, b = (int(c) for c in poly.all_coeffs())
                if a > 0:
                    derived = f"{a} * {root}" if a != 1 else f"{root}"
                    derived += f" + {b}" if b > 0 else (f" - {-b}" if b < 0 else "")
                    return f"{spec_fragment(request.keys, derived)}  (derived from {other.request.input_dim})"
        else:
            name = f"{request.input_dim.split('.')[0]}_{other.request.input_dim.split('.')[0]}"
            return (
                f'{name} = Dim("{name}"); {spec_fragment(request.keys, name)} and '
                f"{spec_fragment(other.request.keys, name)}  (one Dim for both)"
            )
    return f"{request.where}: declare it so that {request.input_dim} == {names.text(target)}"


def _range_fix(dim: _Dim, vr: ValueRanges, *, keep_min: bool = False) -> str:
    """The declaration with range ``vr``; the min is written when it is a real requirement
    (above 2, which every dynamic size is traced as) or when ``keep_min`` asks for it."""
    request = dim.request
    low, high = int(vr.lower), vr.upper
    parts = []
    if low > 2 or keep_min:
        parts.append(f"min={low}")
    if high != int_oo and high is not sympy.oo:
        parts.append(f"max={int(high)}")
    if request.kind == "named":
        args = ", ".join([f'"{request.name}"', *parts])
        return f'{request.name} = Dim({args})'
    if request.kind == "derived":
        return f"narrow {request.root} so that {request.name} stays within [{low}, {_bound(high)}]"
    hint = "Dim.DYNAMIC" if request.kind == "dynamic" else "Dim.AUTO"
    return spec_fragment(request.keys, f"{hint}({', '.join(parts)})")


def _bound(value) -> str:
    return "inf" if value in (int_oo, sympy.oo) else str(int(value))


def find_violations(state: ExportState) -> list[Violation]:
    """Every way the traced model disagrees with the declared dynamic shapes."""
    shape_env = state.fake_mode.shape_env
    dims = _declared_dims(state)
    names = _Names(dims)
    violations: list[Violation] = []
    strict = [d for d in dims if d.request.kind in ("named", "derived", "dynamic")]
    for dim in strict:
        request = dim.request
        current = shape_env.replace(dim.symbol)
        if current.is_number:
            sloc = shape_env.replacements_slocs.get(dim.symbol) or getattr(
                shape_env.var_to_range_sloc.get(dim.symbol), "upper", None
            )
            violations.append(
                Violation(
                    f"{request.input_dim} is declared dynamic ({request.where} = {request.name or 'Dim.DYNAMIC'}) "
                    f"but the model only works when it is {int(current)}",
                    f"{spec_fragment(request.keys, 'None')}  (static), or change the model so it does not fix this size",
                    _location(sloc),
                    _code(sloc),
                )
            )
            continue
        if current != dim.symbol:
            declared_self = names.in_declared_terms(dim.symbol)
            declared_target = names.in_declared_terms(current)
            if sympy.simplify(declared_self - declared_target) != 0:
                sloc = shape_env.replacements_slocs.get(dim.symbol)
                violations.append(
                    Violation(
                        f"the model needs {request.input_dim} == {names.describe(current)}, "
                        f"which the spec does not declare ({request.where} = {request.name or 'Dim.DYNAMIC'})",
                        _fix_for_relation(dim, current, names, dims),
                        _location(sloc),
                        _code(sloc),
                    )
                )
            continue
        vr = shape_env.var_to_range.get(dim.symbol)
        if vr is None or request.kind == "dynamic" and request.min is None and request.max is None:
            continue
        declared_low = max(2, request.min if request.min is not None else 0)
        declared_high = request.max if request.max is not None else int_oo
        if vr.lower > declared_low or vr.upper < declared_high:
            slocs = shape_env.var_to_range_sloc.get(dim.symbol)
            sloc = slocs.upper if vr.upper < declared_high else slocs.lower if slocs else None
            bound = f"<= {_bound(vr.upper)}" if vr.upper < declared_high else f">= {int(vr.lower)}"
            violations.append(
                Violation(
                    f"the model needs {request.input_dim} {bound}, but the spec allows "
                    f"[{declared_low}, {_bound(declared_high)}] ({request.where} = {request.name or 'Dim.DYNAMIC'})",
                    _range_fix(dim, vr),
                    _location(sloc),
                    _code(sloc),
                )
            )
    violations += _other_guards(state, strict, names)
    return violations


def _holds(expr, values: dict) -> bool:
    try:
        result = expr.xreplace({k: sympy.Integer(v) for k, v in values.items()})
        return bool(result)
    except (TypeError, ZeroDivisionError):
        return False


_SAMPLES = 64


def _root_samples(root: sympy.Symbol, dims: dict[sympy.Symbol, _Dim], *, sized: bool) -> list[int]:
    """Values to try for a declared root: the low end of its range and, if bounded, the high end.

    ``sized`` starts at 2, as the trace assumed for every dynamic size; otherwise a named Dim
    starts at its declared min (0 by default), where torch checks a one-size guard too.
    """
    dim = next((d for d in dims.values() if d.request.name == root.name or d.request.root == root.name), None)
    request = dim.request if dim is not None else None
    low, high = 2, None
    if request is not None and request.kind == "named":
        low = int(request.min or 0)
        if sized:
            low = max(2, low)
        high = None if request.max in (None, int_oo) else int(request.max)
    elif request is not None and request.kind == "derived" and request.root_range:
        low = max(2, int(request.root_range[0] or 0))  # a root is traced like a size: never 0 or 1
        high = None if request.root_range[1] in (None, int_oo) else int(request.root_range[1])
    values = list(range(low, low + _SAMPLES // 2))
    if high is not None:
        values += range(max(low, high - _SAMPLES // 2), high + 1)
    return sorted(set(v for v in values if high is None or v <= high))


def _implied(guard, names: _Names, dims: dict[sympy.Symbol, _Dim]) -> bool:
    """Whether the declarations make ``guard`` true, checked on sample values of the declared
    roots (both ends of their ranges; from the declared min for a guard on one size)."""
    declared = names.in_declared_terms(guard)
    if declared in (sympy.true, sympy.false):
        return declared == sympy.true
    if _divides(declared):
        # torch's solver proves a guard on size // k (or % k) only when the size is declared
        # a multiple of k (then the division simplifies away), however many samples hold
        return False
    roots = sorted(declared.free_symbols, key=str)
    sized = len(guard.free_symbols) > 1
    samples = {root: _root_samples(root, dims, sized=sized) for root in roots}
    for step in range(max(len(v) for v in samples.values())):
        values = {root: vals[(step * (i + 1)) % len(vals)] for i, (root, vals) in enumerate(samples.items())}
        if not _holds(declared, values):
            return False
    return True


def _multiple_of(dim: _Dim, guards: list, examples: dict[sympy.Symbol, int]) -> int | None:
    """k > 1 if the guards hold exactly for the multiples of k (other dims at their examples)."""
    others = {s: v for s, v in examples.items() if s != dim.symbol}
    start = 2
    ok = [v for v in range(start, start + _SAMPLES) if all(_holds(g, {**others, dim.symbol: v}) for g in guards)]
    if len(ok) < 2:
        return None
    k = ok[1] - ok[0]
    if k > 1 and all(v % k == 0 for v in ok) and ok == list(range(ok[0], start + _SAMPLES, k)):
        return k
    return None


def _other_guards(state: ExportState, strict: list[_Dim], names: _Names) -> list[Violation]:
    """Guards a range or an equality cannot state (``seq % 2 == 0``), one violation per dimension.

    A guard the declarations imply is fine; for the rest, if they hold exactly for multiples
    of some k the fix is a derived Dim ``k * name``, otherwise the simplest guard is quoted.
    """
    shape_env = state.fake_mode.shape_env
    declared = {d.symbol: d for d in strict}
    examples = {d.symbol: d.example for d in strict}
    by_dim: dict[sympy.Symbol, list] = {}
    seen = set()
    for guard in shape_env.guards:
        expr = shape_env.simplify(guard.expr)
        symbols = expr.free_symbols
        if not symbols or not symbols <= set(declared) or expr in seen:
            continue
        seen.add(expr)
        if len(symbols) == 1 and _is_plain_bound(expr):
            continue  # a bound on one dim: handled as its range
        if _implied(expr, names, declared):
            continue
        by_dim.setdefault(sorted(symbols, key=str)[0], []).append((expr, guard.sloc))
    found = []
    for symbol, failing in by_dim.items():
        dim = declared[symbol]
        request = dim.request
        guards = [g for g, _ in failing]
        expr, sloc = min(failing, key=lambda item: len(str(item[0])))
        more = f" (and {len(failing) - 1} more guard{'s' if len(failing) > 2 else ''})" if len(failing) > 1 else ""
        k = _multiple_of(dim, guards, examples) if len(expr.free_symbols) == 1 else None
        # torch proves a guard that divides a size by k only for a size declared k * root,
        # so a divisor wins over a narrower range even where the range would be true.
        divisor = _divisor_in(guards, dim.symbol)
        excluded = _excluded_edge(dim, guards) if k is None and divisor is None else None
        if excluded is not None:
            vr = ValueRanges(excluded[0], excluded[1])
            declared_range = f"[{max(2, int(request.min or 0))}, {_bound(request.max if request.max is not None else int_oo)}]"
            message = (
                f"the model needs {names.text(expr)}{more}, which fails for "
                f"{_edges(dim.label, request, *excluded)} inside the declared range {declared_range}"
            )
            fix = _range_fix(dim, vr, keep_min=excluded[0] != int(request.min or 0))
        elif k is not None or divisor is not None:
            k = k or divisor
            base = request.root if request.kind == "derived" else request.name
            stem = f"{base or request.input_dim.split('.')[0]}_{k}"
            if _multiple_of(dim, guards, examples):
                message = f"the model needs {request.input_dim} to be a multiple of {k}"
            else:
                message = (
                    f"the model needs {names.text(expr)}{more}, which export can prove for every size "
                    f"only if {request.input_dim} is a multiple of {k}"
                )
            fix = f'{stem} = Dim("{stem}"); {spec_fragment(request.keys, f"{k} * {stem}")}  (a multiple of {k})'
        else:
            message = f"the model needs {names.text(expr)}{more}, which the spec does not declare"
            fix = f"declare a relation that implies it, or make {request.input_dim} static: {spec_fragment(request.keys, 'None')}"
        found.append(Violation(message, fix, _location(sloc), _code(sloc)))
    return found


def _divides(expr) -> bool:
    return any(
        type(node).__name__ in _DIVISIONS and node.args[1].is_Integer and int(node.args[1]) > 1
        for node in sympy.preorder_traversal(expr)
    )


_DIVISIONS = ("FloorDiv", "Mod", "PythonMod", "CleanDiv")


def _divisor_in(guards: list, symbol: sympy.Symbol) -> int | None:
    """k if the guards divide ``symbol`` by the integer k (``t // 2``, ``t % 2``)."""
    for guard in guards:
        for node in sympy.preorder_traversal(guard):
            if type(node).__name__ in _DIVISIONS and node.args[0] == symbol:
                if node.args[1].is_Integer and int(node.args[1]) > 1:
                    return int(node.args[1])
    return None


def _excluded_edge(dim: _Dim, guards: list) -> tuple[int, Any] | None:
    """If the guards on this one size fail only towards the ends of its declared range
    (``seq != 128`` with max=128, ``n != 1``), the range around the example size in which
    they hold, checked on samples from both ends and around the example."""
    request = dim.request
    if request.kind != "named" or any(g.free_symbols != {dim.symbol} for g in guards):
        return None
    low = int(request.min or 0)
    high = None if request.max in (None, int_oo) else int(request.max)
    top = high if high is not None else max(dim.example, low) + _SAMPLES
    samples = {*range(low, low + _SAMPLES), *range(dim.example - _SAMPLES, dim.example + _SAMPLES), *range(top - _SAMPLES, top + 1)}
    samples = sorted(v for v in samples if low <= v <= top)
    holds = {v: all(_holds(g, {dim.symbol: v}) for g in guards) for v in samples}
    if not holds.get(dim.example):
        return None
    at = samples.index(dim.example)
    below = [v for v in samples[:at] if not holds[v]]
    above = [v for v in samples[at:] if not holds[v]]
    if above and high is None:
        return None  # fails somewhere above: not an edge a range can cut off
    new_low = samples[samples.index(below[-1]) + 1] if below else low
    new_high = samples[samples.index(above[0]) - 1] if above else high
    if (new_low, new_high) == (low, high):
        return None
    return new_low, int_oo if new_high is None else new_high


def _edges(label: str, request: DimRequest, low: int, high: Any) -> str:
    """The declared sizes outside [low, high], in words: ``seq = 0``, ``seq < 4 and seq = 128``."""
    words = []
    declared_low = int(request.min or 0)
    if low > declared_low:
        words.append(f"{label} = {declared_low}" if low == declared_low + 1 else f"{label} < {low}")
    if request.max not in (None, int_oo) and high < request.max:
        words.append(f"{label} = {int(request.max)}" if high == request.max - 1 else f"{label} > {high}")
    return " and ".join(words)


def _is_plain_bound(expr) -> bool:
    if not isinstance(expr, (sympy.Eq, sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt)):
        return False
    return not any(type(a).__name__ in _DIVISIONS for a in sympy.preorder_traversal(expr))


def check_constraints(state: ExportState) -> None:
    """The traced model satisfies the declared dynamic shapes, or ConstraintError explains how not.

    Afterwards the declared equalities are in the ShapeEnv and ``state.range_constraints``
    maps every input symbol (and every data-dependent one) to its range.
    """
    shape_env = state.fake_mode.shape_env
    if state.dynamic is not None:
        violations = find_violations(state)
        if violations:
            raise ConstraintError(_report(violations), violations=violations)
        _, fakes, sources, contexts = zip(*state.tracked) if state.tracked else ((), (), (), ())
        try:
            shape_env.produce_guards(
                list(fakes),
                list(sources),
                input_contexts=list(contexts),
                equalities_inputs=state.equalities,
                ignore_static=False,
            )
        except ConstraintViolationError as e:
            # our checks passed but torch's solver could not prove a guard for every declared size
            raise ConstraintError(
                "the model does not fit the declared dynamic shapes: torch's shape solver cannot prove, "
                "for every size the spec allows, what the model needs:\n" + _in_input_names(str(e), state),
                hint="narrow the range of that dimension, declare it a multiple (k * NAME) or make it static (None)",
            ) from None
    shape_env.frozen = True
    state.range_constraints = range_constraints(state)


def _in_input_names(message: str, state: ExportState) -> str:
    """torch's constraint message with ``L['x'].size()[1]`` written as ``x.shape[1]``."""
    sources = {leaf: source.name for leaf, _, source, _ in state.tracked}
    lines = [line for line in message.splitlines()[1:] if line.strip() and "TORCH_LOGS" not in line]
    text = "\n".join(lines) or message
    for dim in _declared_dims(state):
        text = text.replace(f"{sources[dim.leaf]}.size()[{dim.index}]", dim.request.input_dim)
    text = re.sub(r"Not all values of (\S+) = \1 ", r"Not all values of \1 ", text)
    return text.replace("IntInfinity()", "inf")


def _report(violations: list[Violation]) -> str:
    lines = ["the model does not fit the declared dynamic shapes:"]
    for v in violations:
        lines.append(f"  - {v.message}")
        if v.location:
            lines.append(f"    forced at {v.location}" + (f": `{v.code}`" if v.code else ""))
        lines.append(f"    fix: {v.fix}")
    return "\n".join(lines)


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
        for leaf, fake, _, _ in state.tracked:
            requests = plan.requests.get(leaf, {})
            for index, size in enumerate(fake.shape):
                if not isinstance(size, torch.SymInt) or size.node.expr.is_number:
                    continue
                expr = size.node.expr
                request = requests.get(index)
                if request is not None and request.kind in ("named", "derived"):
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
