"""Reduce a program to a smaller one that shows the same finding.

Greedy, coarse edits first: drop an input (and every statement that depends on it),
turn off ``dynamic_shapes``, drop a statement (and its dependents), an output, a
tensor's spec or one dimension's spec, and the extra check sizes. An edit is kept when
the edited program's outcome has the same class as the original's.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator

from .generator import Program
from .runner import Outcome, check_source

__all__ = ["shrink"]


def _edits(p: Program) -> Iterator[Callable[[], Program]]:
    for i in range(len(p.args)):
        if len(p.args) > 1:
            yield lambda i=i: p.without_arg(i)
    if p.spec_enabled and p.leaf_specs:
        yield lambda: _with(p, spec_enabled=False)
    if len(p.check_sizes) > 1:
        for i in range(len(p.check_sizes)):
            yield lambda i=i: _with(p, check_sizes=[p.check_sizes[i]])
    if p.check_sizes:
        yield lambda: _with(p, check_sizes=[])
    for i in reversed(range(len(p.stmts))):
        yield lambda i=i: p.without_stmt(i)
    if len(p.outputs) > 1:
        for i in range(len(p.outputs)):
            yield lambda i=i: _with(p, outputs=p.outputs[:i] + p.outputs[i + 1:])
    if len(p.outputs) == 1 and p.out_kind != "single":
        yield lambda: _with(p, out_kind="single")
    for leaf, spec in p.leaf_specs.items():
        if spec:
            yield lambda leaf=leaf: _with_spec(p, leaf, None)
            if len(spec) > 1:
                for d in spec:
                    yield lambda leaf=leaf, d=d: _with_spec(p, leaf, d)


def _with(p: Program, **changes) -> Program:
    q = copy.deepcopy(p)
    for k, v in changes.items():
        setattr(q, k, v)
    return q


def _with_spec(p: Program, leaf: str, dim: int | None) -> Program:
    q = copy.deepcopy(p)
    if dim is None:
        q.leaf_specs[leaf] = {}
    else:
        del q.leaf_specs[leaf][dim]
    return q


def shrink(
    program: Program,
    outcome: Outcome,
    check: Callable[[str], Outcome] = check_source,
    budget_seconds: float = 240.0,
) -> tuple[Program, Outcome, int]:
    """The smallest program found whose outcome keeps ``outcome.klass``; also its outcome
    and the number of programs tried."""
    deadline = time.monotonic() + budget_seconds
    best, best_outcome, tried = program, outcome, 0
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for make in _edits(best):
            if time.monotonic() > deadline:
                break
            candidate = make()
            tried += 1
            result = check(candidate.render())
            if result.klass == outcome.klass:
                best, best_outcome, changed = candidate, result, True
                break
    return best, best_outcome, tried
