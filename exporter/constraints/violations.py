"""After tracing: every way the traced model disagrees with the declared ``dynamic_shapes``.

For every dimension declared dynamic this finds what tracing learned about it, in the
ShapeEnv: that it became a constant (specialized), that it must equal an expression in other
dimensions (a replacement), that its range was narrowed, or that another guard constrains it
(``seq % 2 == 0``).  Whatever the declaration does not already imply is a violation, with
the input and dimension, the source line that forced it and the spec to paste instead.
"""

from __future__ import annotations

from typing import Any

import sympy

from .._dims import DimKind, bound_text, spec_fragment
from .._state import ExportState
from .._torch_internals import ValueRanges, int_oo, raw_expr
from .declared import DeclaredDim, Violation, declared_dims, source_code, source_location
from .fixes import UserNames, edges_text, flag_path, range_fix, range_flag, relation_fix, relation_flag

__all__ = ["find_violations"]


def find_violations(state: ExportState) -> list[Violation]:
    """Every way the traced model disagrees with the declared dynamic shapes."""
    shape_env = state.fake_mode.shape_env
    dims = declared_dims(state)
    names = UserNames(dims)
    violations: list[Violation] = []
    # Any dim that must stay dynamic may not become a constant; only Dims (named or
    # derived) must also declare the relations, ranges and guards the model needs:
    # Dim.DYNAMIC and Dim.AUTO take whatever the trace infers, as in torch.export.
    for dim in [d for d in dims if d.request.kind.must_stay_dynamic]:
        request = dim.request
        current = shape_env.replace(dim.symbol)
        if request.kind is DimKind.DYNAMIC and not current.is_number:
            # the range the trace allows, narrowed by the hint's own bounds, may hold one size
            narrowed = shape_env.var_to_range.get(dim.symbol, ValueRanges(0, int_oo)) & ValueRanges(
                request.min if request.min is not None else 0, request.max if request.max is not None else int_oo
            )
            if narrowed.is_singleton():
                current = sympy.Integer(int(narrowed.lower))
        if current.is_number:
            sloc = shape_env.replacements_slocs.get(dim.symbol) or getattr(
                shape_env.var_to_range_sloc.get(dim.symbol), "upper", None
            )
            violations.append(
                Violation(
                    f"{request.input_dim} is declared dynamic ({request.where} = {request.declared_as}) "
                    f"but the model only works when it is {int(current)}",
                    f"{spec_fragment(request.keys, 'None')}  (static), or change the model so it does not fix this size",
                    source_location(sloc),
                    source_code(sloc),
                    always=request.kind is DimKind.DYNAMIC,
                    flag=_static_flag(request),
                )
            )
            continue
        if not request.kind.is_dim:
            continue
        if current != dim.symbol:
            declared_self = names.in_declared_terms(dim.symbol)
            declared_target = names.in_declared_terms(current)
            if sympy.simplify(declared_self - declared_target) != 0:
                sloc = shape_env.replacements_slocs.get(dim.symbol)
                violations.append(
                    Violation(
                        f"the model needs {request.input_dim} == {names.describe(current)}, "
                        f"which the spec does not declare ({request.where} = {request.declared_as})",
                        relation_fix(dim, current, names, dims),
                        source_location(sloc),
                        source_code(sloc),
                        flag=relation_flag(dim, current, dims),
                    )
                )
            continue
        vr = shape_env.var_to_range.get(dim.symbol)
        if vr is None:
            continue
        declared_low = max(2, request.min if request.min is not None else 0)
        declared_high = request.max if request.max is not None else int_oo
        if vr.lower > declared_low or vr.upper < declared_high:
            slocs = shape_env.var_to_range_sloc.get(dim.symbol)
            sloc = slocs.upper if vr.upper < declared_high else slocs.lower if slocs else None
            bound = f"<= {bound_text(vr.upper)}" if vr.upper < declared_high else f">= {int(vr.lower)}"
            violations.append(
                Violation(
                    f"the model needs {request.input_dim} {bound}, but the spec allows "
                    f"[{declared_low}, {bound_text(declared_high)}] ({request.where} = {request.declared_as})",
                    range_fix(dim, vr),
                    source_location(sloc),
                    source_code(sloc),
                    flag=range_flag(dim, vr),
                )
            )
    violations += _other_guards(state, [d for d in dims if d.request.kind.is_dim], names)
    violations += _fixed_ints(state)
    return violations


def _fixed_ints(state: ExportState) -> list[Violation]:
    """Int inputs declared ``Dim.DYNAMIC`` that the model needs to be one value."""
    shape_env = state.fake_mode.shape_env
    found = []
    for tracked in state.tracked:
        request = state.dynamic.scalars.get(tracked.leaf)
        if request is None or request.kind is not DimKind.DYNAMIC:
            continue
        symbol = raw_expr(tracked.fake)
        value = shape_env.replace(symbol)
        if value.is_number:
            sloc = shape_env.replacements_slocs.get(symbol)
            found.append(
                Violation(
                    f"{request.input_dim} is declared dynamic ({request.where} = Dim.DYNAMIC) but the model "
                    f"only works when it is {int(value)}",
                    f"{request.where} = None  (a constant), or change the model so it does not fix this value",
                    source_location(sloc),
                    source_code(sloc),
                    always=True,
                )
            )
    return found


def _holds(expr, values: dict) -> bool:
    try:
        result = expr.xreplace({k: sympy.Integer(v) for k, v in values.items()})
        return bool(result)
    except (TypeError, ZeroDivisionError):
        return False


_SAMPLES = 64


def _root_samples(root: sympy.Symbol, dims: dict[sympy.Symbol, DeclaredDim], *, sized: bool) -> list[int]:
    """Values to try for a declared root: the low end of its range and, if bounded, the high end.

    ``sized`` starts at 2, as the trace assumed for every dynamic size; otherwise a named Dim
    starts at its declared min (0 by default), where torch checks a one-size guard too.
    """
    dim = next((d for d in dims.values() if d.request.name == root.name or d.request.root == root.name), None)
    request = dim.request if dim is not None else None
    low, high = 2, None
    if request is not None and request.kind is DimKind.NAMED:
        low = int(request.min or 0)
        if sized:
            low = max(2, low)
        high = None if request.max in (None, int_oo) else int(request.max)
    elif request is not None and request.kind is DimKind.DERIVED and request.root_range:
        low = max(2, int(request.root_range[0] or 0))  # a root is traced like a size: never 0 or 1
        high = None if request.root_range[1] in (None, int_oo) else int(request.root_range[1])
    values = list(range(low, low + _SAMPLES // 2))
    if high is not None:
        values += range(max(low, high - _SAMPLES // 2), high + 1)
    return sorted(set(v for v in values if high is None or v <= high))


def _implied(guard, names: UserNames, dims: dict[sympy.Symbol, DeclaredDim]) -> bool:
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


def _multiple_of(dim: DeclaredDim, guards: list, examples: dict[sympy.Symbol, int]) -> int | None:
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


def _other_guards(state: ExportState, declared_dims: list[DeclaredDim], names: UserNames) -> list[Violation]:
    """Guards a range or an equality cannot state (``seq % 2 == 0``), one violation per dimension.

    A guard the declarations imply is fine; for the rest, if they hold exactly for multiples
    of some k the fix is a derived Dim ``k * name``, otherwise the simplest guard is quoted.
    """
    shape_env = state.fake_mode.shape_env
    declared = {d.symbol: d for d in declared_dims}
    examples = {d.symbol: d.example for d in declared_dims}
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
            declared_range = f"[{max(2, int(request.min or 0))}, {bound_text(request.max if request.max is not None else int_oo)}]"
            message = (
                f"the model needs {names.text(expr)}{more}, which fails for "
                f"{edges_text(dim.label, request, *excluded)} inside the declared range {declared_range}"
            )
            keep_min = excluded[0] != int(request.min or 0)
            fix, flag = range_fix(dim, vr, keep_min=keep_min), range_flag(dim, vr, keep_min=keep_min)
        elif k is not None or divisor is not None:
            k = k or divisor
            base = request.root if request.kind is DimKind.DERIVED else request.name
            stem = f"{base or request.input_dim.split('.')[0]}_{k}"
            if _multiple_of(dim, guards, examples):
                message = f"the model needs {request.input_dim} to be a multiple of {k}"
            else:
                message = (
                    f"the model needs {names.text(expr)}{more}, which export can prove for every size "
                    f"only if {request.input_dim} is a multiple of {k}"
                )
            fix = f'{stem} = Dim("{stem}"); {spec_fragment(request.keys, f"{k} * {stem}")}  (a multiple of {k})'
            path = flag_path(request)
            flag = f"--dynamic {path}={k}*{stem}" if path else None
        else:
            message = f"the model needs {names.text(expr)}{more}, which the spec does not declare"
            fix = f"declare a relation that implies it, or make {request.input_dim} static: {spec_fragment(request.keys, 'None')}"
            flag = _static_flag(request)
        found.append(Violation(message, fix, source_location(sloc), source_code(sloc), flag=flag))
    return found


def _static_flag(request) -> str | None:
    path = flag_path(request)
    return f"--dynamic {path}=static  (or no --dynamic for it)" if path else None


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


def _excluded_edge(dim: DeclaredDim, guards: list) -> tuple[int, Any] | None:
    """If the guards on this one size fail only towards the ends of its declared range
    (``seq != 128`` with max=128, ``n != 1``), the range around the example size in which
    they hold, checked on samples from both ends and around the example."""
    request = dim.request
    if request.kind is not DimKind.NAMED or any(g.free_symbols != {dim.symbol} for g in guards):
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


def _is_plain_bound(expr) -> bool:
    if not isinstance(expr, (sympy.Eq, sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt)):
        return False
    return not any(type(a).__name__ in _DIVISIONS for a in sympy.preorder_traversal(expr))
