"""Reduce a control-flow finding to a smaller program that shows it.

Greedy: drop statements (every variable is set at the top of forward, so any statement can
go), an ``else`` block, a helper no statement calls, the layers, what forward adds to its
result; keep an edit where the edited program's outcome has the same class.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator

from tests.fuzz.runner import Outcome

from .generator import Program
from .runner import check_flow

__all__ = ["finding_file", "shrink"]


def _edits(p: Program) -> Iterator[Callable[[], Program]]:
    for path in reversed(p.paths()):
        yield lambda path=path: p.without(path)
    for path in p.paths():
        yield lambda path=path: _without_else(p, path)
    called = {h.name for h in p.helpers if any(h.name in s.line for top in p.stmts for s in top.walk())}
    for k, helper in enumerate(p.helpers):
        if helper.name not in called:
            yield lambda k=k: _with(p, helpers=p.helpers[:k] + p.helpers[k + 1:])
    if p.layers:
        yield lambda: _with(p, layers=0, stmts=[s for s in p.stmts if s.tag != "layers"])
    for k in range(len(p.returns)):
        yield lambda k=k: _with(p, returns=p.returns[:k] + p.returns[k + 1:])


def _with(p: Program, **changes) -> Program:
    q = copy.deepcopy(p)
    for name, value in changes.items():
        setattr(q, name, copy.deepcopy(value))
    return q


def _without_else(p: Program, path: tuple[int, ...]) -> Program:
    q = copy.deepcopy(p)
    block = q.stmts
    for k in range(0, len(path) - 1, 2):
        stmt = block[path[k]]
        block = stmt.body if path[k + 1] == 0 else stmt.orelse
    stmt = block[path[-1]]
    if not stmt.orelse:
        raise ValueError("no else block")
    stmt.orelse = []
    return q


def shrink(
    program: Program, outcome: Outcome, check: Callable[[str], Outcome] | None = None, budget: float = 600.0
) -> tuple[Program, Outcome, int]:
    """The smallest program the greedy edits reach whose outcome keeps ``outcome.klass``,
    its outcome, and how many edits were tried (within ``budget`` seconds)."""
    check = check or (lambda source: check_flow(source, seed=program.seed))
    start = time.perf_counter()
    tried = 0
    changed = True
    while changed and time.perf_counter() - start < budget:
        changed = False
        for edit in _edits(program):
            try:
                candidate = edit()
            except (ValueError, IndexError):
                continue
            tried += 1
            again = check(candidate.render())
            if again.klass == outcome.klass:
                program, outcome, changed = candidate, again, True
                break
    return program, outcome, tried


def finding_file(program: Program, outcome: Outcome) -> str:
    """The shrunk program, headed by what the runner found (the file a finding is kept as)."""
    source = program.render()
    head, _, rest = source.partition("\n")
    said = "\n".join(f"    {line}" for line in outcome.detail.splitlines())
    doc = f'"""{outcome.klass} (control-flow fuzzer, seed {program.seed}, shrunk).\n\n{said}\n"""'
    return doc + "\n" + rest + f"\nSEED = {program.seed}\n"
