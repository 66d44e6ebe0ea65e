"""The branch capture stage: the runs of forward a model's branches on tensor values need,
their join into one graph with torch.cond, the program's branch report, and the errors for
what cannot be captured (sides of different structures, loops the data ends, the limit)."""

from __future__ import annotations

import logging
import re
from typing import Any

import attrs
import torch

from .._branch_report import BranchDecision, BranchLoop, BranchReport
from .._errors import Category, TraceError
from .._state import ExportState
from ..trace import tracer
from ..trace.draft import symbol_origins
from ..trace.module_function import Recorded
from .align import Parted, Run, Unjoinable
from .decide import (
    Decider,
    Learned,
    Pin,
    Site,
    TooManyDecisions,
    causes,
    limit_error,
    loop_error,
    raised_by_model,
    refusal,
    tests_a_selection_for_none,
)
from .join import DataLoop, HeldUnkept, Joiner, ModeInside, Retested, Unread, interpreted
from .lists import ListNeeded
from .loops import WITNESS_STEPS, BreakFound, CarryNeeded, LoopRefused, after_loops_differ, loop_refusal, same_constant, stopped_early

__all__ = ["BRANCH_MODES", "DEFAULT_MAX_RUNS", "capture"]

log = logging.getLogger(__name__)

BRANCH_MODES = ("capture", "refuse", "draft")
"""What an export does where forward branches on a tensor's value: trace both sides into
``torch.cond`` (the default), fail naming the line, or follow the example (draft mode)."""

DEFAULT_MAX_RUNS = 32
"""Runs of forward one export may make for branch capture (one per decision, and one)."""


class _Learned(Exception):
    """A run of forward found something every run must hold (``Learned``): the runs start over."""


def _learn(error: BaseException, decider: Decider, learned: Learned, max_runs: int) -> bool:
    """What a run that failed with ``error`` teaches the runs after it: numbers a loop must
    carry, or, where the model raised, a decision to hold (``_hold_after_raise``).  False
    where it teaches nothing, or the runs started over ``4 * max_runs`` times already."""
    if learned.restarts >= 4 * max_runs:
        return False
    learned.restarts += 1
    for cause in causes(error):
        learned.last = getattr(cause, "site", None) or learned.last
        if isinstance(cause, ListNeeded):
            known = learned.lists.setdefault(cause.site, {})
            if set(cause.shapes) <= set(known):
                return False
            known.update(cause.shapes)
            return True
        if isinstance(cause, BreakFound):
            if cause.site in learned.breaks:  # both sides break
                return False
            learned.breaks[cause.site] = cause.value
            return True
        if isinstance(cause, CarryNeeded):
            site, names = cause.site, cause.names
            known = learned.carried.get(site, ())
            if set(names) <= set(known) or len(learned.carried) >= max_runs:
                return False
            learned.carried[site] = tuple(dict.fromkeys((*known, *names)))
            return True
    if not isinstance(error, TraceError) or len(learned.checked) >= max_runs:
        return False
    return _hold_after_raise(error, decider, learned)


def _hold_after_raise(error: TraceError, decider: Decider, learned: Learned) -> bool:
    """Where forward raised (an input check: ``if (x < 0).any(): raise ValueError``), the
    path of decisions the run took leads to the raise: hold the last decision on it that is
    not held yet to its other side, after the same path (a pin the program asserts, as
    ``torch._check`` would).  A held decision on the path raised on both sides then: let it
    go and try the one before.  False where no decision is left: forward raises whatever the
    data.  Searched so, the side that raises is found, not assumed."""
    if error.category is not Category.MODEL_ERROR or not raised_by_model(error):
        return False
    raised = _what_raised(error)
    for k in reversed(range(len(decider.path))):
        site, value, held = decider.path[k]
        key = (decider.prefix(k), site)
        if held:
            learned.checked.pop(key, None)
            continue
        learned.checked[key] = Pin(not value, raised)
        learned.last = site
        return True
    return False


def _what_raised(error: TraceError) -> str:
    """``ValueError: negative input, at model.py:14``: the model's exception and its line."""
    cause = error.__cause__ or error
    text = " ".join(str(cause).split())
    said = f"{type(cause).__name__}: {text}" if text else type(cause).__name__
    if len(said) > 200:
        said = said[:197] + "..."
    return f"{said}, at {error.location}" if error.location else said


def _loop_state_error(error: BaseException, decider: Decider) -> TraceError | None:
    """For a run that failed reading a local that a loop's steps rebind and the trace unbound
    after the loop (``loops.DataLoop``): the refusal naming it and the line that reads it."""
    for cause in causes(error):
        name = _unbound_name(cause)
        for loop in decider.loops if name else ():
            if name in loop.unbound:
                at = getattr(error, "location", None)
                how, hint = loop.unbound[name]
                return loop_refusal(
                    loop, f"forward reads `{name}` after it" + (f" at {at}" if at else "")
                    + f", and its steps change it ({how}), which the program cannot carry", hint=hint,
                )
    return None


def _unbound_name(error: BaseException) -> str | None:
    """The variable an ``UnboundLocalError`` or ``NameError`` names (Python sets ``name`` on
    some only)."""
    if not isinstance(error, NameError):
        return None
    if getattr(error, "name", None):
        return error.name
    found = re.search(r"variable '(\w+)'", str(error))
    return found.group(1) if found else None


def _traced(request: Any, decider: Decider) -> Any:
    """``tracer.run`` with ``decider``; where a loop's break found what the run could not
    raise, that is raised instead of the run's result or error."""
    try:
        traced = tracer.run(request, decider)
    except (TraceError, TooManyDecisions) as error:
        found = decider.break_error()
        if found is not None:
            raise found from error
        raise
    found = decider.break_error()
    if found is not None:
        raise found
    return traced


def _runner(request: Any, runs: dict[frozenset, Run], max_runs: int, learned: Learned) -> Any:
    """``run_of(schedule)``: the run of forward that takes the scheduled decisions (traced
    on first asking, at most ``max_runs`` of them)."""

    def run_of(schedule: dict[Site, bool]) -> Run:
        key = frozenset((site, value) for site, value in schedule.items() if value != learned.default(site))
        if key not in runs:
            if len(runs) >= max_runs or learned.traces >= TRACE_BUDGET * max_runs:
                site = next((s for s, v in schedule.items() if v != learned.default(s)), learned.last)
                raise _TooManyRuns(site)
            learned.traces += 1
            decider = Decider(schedule, limit=max_runs - 1, learned=learned)
            try:
                traced = _traced(request, decider)
            except TooManyDecisions:
                raise
            except TraceError as error:
                unbound = _loop_state_error(error, decider)
                if unbound is not None:
                    raise unbound from error
                if _learn(error, decider, learned, max_runs):
                    raise _Learned() from error
                raise refusal(error, max_runs - 1) or error
            runs[key] = Run(
                traced, list(decider.decisions), dict(schedule), decider.calls.of_node, list(decider.checks),
                list(decider.loops), list(decider.states),
            )
        return runs[key]

    return run_of


def _parted_error(parted: Parted | None) -> TraceError:
    site = parted.args[0] if parted is not None and parted.args else None
    return TraceError(
        "the runs of forward that take a branch's two sides differ before the branch, so they cannot be "
        "joined (forward does something else each time it runs)",
        category=Category.BRANCH_CAPTURE,
        location=getattr(site, "location", None),
        hint="make forward deterministic up to the branch, or export with branches='draft' to follow the example",
    )


TRACE_BUDGET = 4
"""Runs of forward an export may trace, over every start, per run ``max_branch_runs`` allows."""


class _TooManyRuns(Exception):
    def __init__(self, site: Site) -> None:
        super().__init__(site)
        self.site = site


def capture(
    root: torch.nn.Module,
    bound: Any,
    plan: Any,
    *,
    fast: Any,
    prefer_deferred_runtime_asserts_over_guards: bool,
    training: bool,
    max_runs: int = DEFAULT_MAX_RUNS,
    max_iterations: int | None = None,
) -> ExportState:
    """Trace ``root`` as ``tracer.trace`` does, capturing its branches on tensor values as
    ``torch.cond``; the state's ``branch_report`` says what was captured.  ``max_iterations``:
    write each captured loop as that many conds in a row, not a ``torch.while_loop``."""
    first = tracer.prepare(
        root, bound, plan, fast=fast, prefer_deferred_runtime_asserts_over_guards=prefer_deferred_runtime_asserts_over_guards,
        training=training,
    )
    learned = Learned()  # decisions held where their other side raises; numbers loops carry
    while True:
        decider = Decider({}, limit=max_runs - 1, learned=learned)  # each decision needs a run of its own
        try:
            traced = _traced(first, decider)
        except TooManyDecisions as too_many:
            raise refusal(too_many, max_runs - 1) from None
        except TraceError as error:
            unbound = _loop_state_error(error, decider)
            if unbound is not None:
                raise unbound from error
            if not _learn(error, decider, learned, max_runs):
                raise refusal(error, max_runs - 1) or error
            continue
        break
    if not decider.decisions and not decider.loops and not decider.checks:
        return tracer.finish(first, traced)
    # forward branches on values (or holds a decision whose other side raises, which the join
    # asserts): every run from here on shares one fake world, so their graphs read the same
    # inputs and symbols, and is traced the same way (functionalized if any is)
    functionalize = first.watch.functionalized
    attempts = 0
    while attempts < 2:  # a second time, every run functionalized, if the runs were traced differently
        attempts += 1
        request = tracer.prepare(
            root, bound, plan, fast=fast, prefer_deferred_runtime_asserts_over_guards=prefer_deferred_runtime_asserts_over_guards,
            training=training, shared_world=True, always_functionalize=functionalize, python=first.python,
        )
        runs: dict[frozenset, Run] = {}
        run_of = _runner(request, runs, max_runs, learned)
        try:
            base = run_of({})
            joiner, joined = _join(base, run_of, runs, max_iterations)
        except _TooManyRuns as too_many:
            raise limit_error(too_many.site.location if too_many.site else None, max_runs) from None
        except TooManyDecisions as too_many:
            raise refusal(too_many, max_runs - 1) from None
        except Unjoinable as unjoinable:
            raise _structure_error(*unjoinable.args) from None
        except DataLoop as loop:
            raise _loop_error(loop.args[0]) from None
        except Unread as unread:
            raise _unread_error(*unread.args) from None
        except Retested as retested:
            raise _retested_error(*retested.args) from None
        except HeldUnkept as unkept:
            raise _unkept_error(*unkept.args) from None
        except ModeInside as inside:
            raise _mode_error(*inside.args) from None
        except LoopRefused as refused:
            raise loop_refusal(*refused.args) from None
        except _Learned:
            attempts -= 1  # the runs start over, holding what was learned
            continue
        except Parted as parted:
            if functionalize:
                raise _parted_error(parted) from None
            functionalize = True
            continue
        if len({run.traced.kind for run in runs.values()}) == 1:
            break
        functionalize = True  # a later run needed functionalization: trace every run so
    else:
        raise _parted_error(None)
    _check_structures(runs)
    _witness_loops(request, runs, learned, max_runs)
    recorded = Recorded(
        out_spec=base.traced.recorded.out_spec,
        mutated=list(joiner.universe),
        replaced=_unique(note for run in runs.values() for note in run.traced.recorded.replaced),
    )
    try:
        traced = tracer.replay(request, interpreted(joined), recorded, base.traced.kind)
    except TraceError as error:
        if joiner.loops and not joiner.decisions:
            raise loop_refusal(joiner.loops[-1][0], f"torch.while_loop refuses it: {error.message}") from error
        raise _join_error(joiner, error) from error
    state = tracer.finish(request, traced)
    checks = [check for run in runs.values() for check in run.checks]
    state.branch_report = attrs.evolve(_report(joiner, base, runs), checked=_checked_lines(checks))
    return state


def _witness_loops(request: Any, runs: dict[frozenset, Run], learned: Learned, max_runs: int) -> None:
    """Trace once more each run that first goes round a loop, going round it more often, and
    refuse the loop where forward outside the loops then differs (``after_loops_differ``):
    the program would go on as after two steps, whatever the count."""
    seen: set[Any] = set()
    for run in list(runs.values()):
        # a loop whose steps branch is witnessed taking each side
        key = lambda loop, run=run: (loop.site, frozenset((s, v) for s, v in run.schedule.items() if s.loop == loop.site))  # noqa: E731
        # a run whose step breaks out goes round once whatever the count: its break is the
        # other side of a run that goes on, which is witnessed
        loops = [loop for loop in run.loops if key(loop) not in seen and not loop.exited]
        if not loops:
            continue
        seen.update(key(loop) for loop in run.loops)
        for steps in WITNESS_STEPS:
            decider = Decider(run.schedule, limit=max_runs - 1, learned=learned, steps=steps)
            try:
                traced = _traced(request, decider)
            except (TraceError, TooManyDecisions) as error:
                stopped = stopped_early(run, decider.loops)
                if stopped is not None:
                    raise loop_refusal(*stopped) from error
                why = f"forward fails where it goes round {steps} time(s) ({getattr(error, 'message', error)})"
                raise loop_refusal(loops[0], why) from error
            witness = Run(
                traced, list(decider.decisions), dict(run.schedule), decider.calls.of_node, list(decider.checks),
                list(decider.loops), list(decider.states),
            )
            differs = after_loops_differ(run, witness)
            if differs is not None:
                raise loop_refusal(*differs)


def _join(base: Run, run_of: Any, runs: dict[frozenset, Run], max_iterations: int | None) -> tuple[Joiner, torch.fx.GraphModule]:
    """Join every run into one graph, over the inputs any run writes (a write on one side
    only is an output of the cond, which is why the set is known only once all ran)."""
    universe: list[int] = []
    while True:
        joiner = Joiner(run_of, universe, max_iterations)
        joined = joiner.build(base)
        written = sorted({i for run in runs.values() for i in run.traced.recorded.mutated})
        if written == universe:
            return joiner, joined
        universe = written


def _check_structures(runs: dict[frozenset, Run]) -> None:
    """Every run returns the same structure (torch.cond's branches must)."""
    specs = {}
    for run in runs.values():
        specs.setdefault(str(run.traced.recorded.out_spec), run)
    if len(specs) > 1:
        raise _structure_error(*list(specs.values())[:2])


def _structure_error(first: Run, other: Run) -> TraceError:
    flipped = next((d for d in other.decisions if not d.value), None) or next((d for d in first.decisions if not d.value), None)
    ours, theirs = first.traced.recorded.out_spec, other.traced.recorded.out_spec
    found = (
        f": {_structure(ours)} on one, {_structure(theirs)} on the other" if str(ours) != str(theirs)
        else _differing_output(first, other) or _aliased_output(first, other) or _reordered_output(first, other)
        or " (the values forward writes differ)"
    )
    return TraceError(
        "forward() returns different structures on the two sides of a branch on a tensor's value"
        + (f" (`{flipped.code}`)" if flipped and flipped.code else "") + found,
        category=Category.BRANCH_CAPTURE,
        location=flipped.site.location if flipped else None,
        hint="return the same structure on both sides (None where a value is missing is a different "
        "structure: return a tensor of the same kind instead), or export with branches='draft' to "
        "follow the example",
    )


def _mode_error(site: Any, code: str | None) -> TraceError:
    return TraceError(
        "forward() switches grad mode or autocast on a side of a branch on a tensor's value"
        + (f" (`{code}`)" if code else "")
        + ", or a `with torch.no_grad()` or autocast block ends there: the training IR holds such "
        "switches as regions, which it cannot keep inside torch.cond",
        category=Category.BRANCH_CAPTURE,
        location=site.location,
        hint="export with the default IR, where the switches leave no calls, or with branches='draft' to follow "
        "the example",
    )


def _unkept_error(site: Any, code: str | None) -> TraceError:
    return TraceError(
        "forward() raises on a side of a branch on a tensor's value"
        + (f" (`{code}`)" if code else "")
        + ", and the program's check of it would sit in a torch.cond that none of forward's results depends "
        "on, which consumers of the program drop as dead code",
        category=Category.BRANCH_CAPTURE,
        location=site.location,
        hint="check the input before the branch, or export with branches='draft' to follow the example",
    )


def _retested_error(site: Any, code: str | None) -> TraceError:
    return TraceError(
        "forward() tests a value"
        + (f" (`{code}`)" if code else "")
        + " and tests it again on one side of a later branch on a tensor's value, where the runs that took "
        "the first test's other side never reached the second: that side of the program would follow one "
        "outcome for both",
        category=Category.BRANCH_CAPTURE,
        location=site.location if site is not None else None,
        hint="compute the value once into a tensor and select with torch.where, test it once, or export with "
        "branches='draft' to follow the example",
    )


def _unread_error(site: Any, code: str | None) -> TraceError:
    return TraceError(
        "forward() decides on a size or value made inside an earlier branch on a tensor's value"
        + (f" (`{code}`)" if code else "")
        + ", and no tensor that branch returns carries it, so the program cannot compute the decision",
        category=Category.BRANCH_CAPTURE,
        location=site.location,
        hint="return the tensor whose size or value is decided from the function that branches, or export "
        "with branches='draft' to follow the example",
    )


def _aliased_output(first: Run, other: Run) -> str | None:
    """Where one run returns one tensor at two places and the other two different ones."""
    for run, twin in ((first, other), (other, first)):
        ours, theirs = run.results, twin.results
        if len(ours) != len(theirs):
            return None
        for i, x in enumerate(ours):
            for j in range(i + 1, len(ours)):
                if isinstance(x, torch.fx.Node) and ours[j] is x and theirs[i] is not theirs[j]:
                    return (
                        f": outputs {i} and {j} are one tensor on one side and two on the other, and one "
                        "result of torch.cond cannot stand for both (return a copy at one of them, `y.clone()`)"
                    )
    return None


def _reordered_output(first: Run, other: Run) -> str | None:
    """Where both runs return values made before they part (the same node, at the same place
    of each run), at swapped places."""
    ours, theirs = first.results, other.results
    if len(ours) != len(theirs) or not all(isinstance(v, torch.fx.Node) for v in (*ours, *theirs)):
        return None
    at_first = [first.index.get(n) for n in ours]
    at_other = [other.index.get(n) for n in theirs]
    for i, (x, y) in enumerate(zip(at_first, at_other)):
        if x is None or y is None or x == y or y not in at_first:
            continue
        j = at_first.index(y)
        same = first.nodes[y].name == other.nodes[y].name and first.nodes[x].name == other.nodes[x].name
        if same and at_other[j] == x:
            return (
                f": outputs {i} and {j} are the same values in another order on each side, made before the branch, "
                "and a cond's results are values its sides compute (return copies on one side, `a.clone(), "
                "b.clone()`, or pick each with torch.where)"
            )
    return None


def _differing_output(first: Run, other: Run) -> str | None:
    """Where the two runs return a tensor at one place of the same structure and a constant
    at the other (``None``, a number), or two different constants: the first such output."""
    ours, theirs = first.results, other.results
    if len(ours) != len(theirs):
        return None
    for k, (x, y) in enumerate(zip(ours, theirs)):
        if isinstance(x, torch.fx.Node) and isinstance(y, torch.fx.Node):
            continue
        if isinstance(x, torch.fx.Node) or isinstance(y, torch.fx.Node) or not same_constant(x, y):
            return f": output {k} is {_kind(x)} on one side and {_kind(y)} on the other"
    return None


def _kind(value: Any) -> str:
    if isinstance(value, torch.fx.Node):
        return "a tensor" if isinstance(value.meta.get("val"), torch.Tensor) else "a value the data decides"
    return repr(value)


def _structure(spec: Any) -> str:
    """A pytree structure in words: ``a tensor``, ``a tuple of 2``, ``a dict with keys a, b``."""
    if spec is None or spec.is_leaf():
        return "one value"
    name = getattr(spec.type, "__name__", str(spec.type))
    if isinstance(spec.context, (list, tuple)) and spec.context and all(isinstance(k, str) for k in spec.context):
        return f"a {name} with keys {', '.join(spec.context)}"
    return f"a {name} of {spec.num_children}"


def _loop_error(decision: Any) -> TraceError:
    return loop_error(decision.site.location, decision.code, tests_a_selection_for_none(decision))


def _join_error(joiner: Joiner, error: TraceError) -> TraceError:
    """A join torch.cond refuses (branches whose outputs it cannot merge), named at the decision."""
    decision = joiner.decisions[-1][0] if joiner.decisions else None
    # torch.cond's own words, not the trace's account of them ("the model raised ..."): the
    # joined graph raised, not the model
    cause = error.__cause__
    said = " ".join(str(cause).split("\n\n")[0].split()) if cause is not None and str(cause) else error.message
    return TraceError(
        "the two sides of a branch on a tensor's value cannot be one program"
        + (f" (`{decision.code}`)" if decision and decision.code else "")
        + f": torch.cond refuses them: {said}",
        category=Category.BRANCH_CAPTURE,
        location=decision.site.location if decision else error.location,
        hint="make both sides return tensors of the same dtype and rank (shapes may differ in size), "
        "or export with branches='draft' to follow the example",
    )


def _checked_lines(checks: list[Any]) -> tuple[str, ...]:
    """The lines of the decisions the program asserts, each once."""
    return tuple(dict.fromkeys(check.site.location or "?" for check in checks))


def _unique(items: Any) -> list[Any]:
    """The items, each once: two runs' notes that differ only in the names their own traces
    gave a size only the data decides (``u9``, ``u15``) are one note."""
    seen, out = set(), []
    for item in items:
        key = _DATA_SIZE.sub("u", str(item))
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


_DATA_SIZE = re.compile(r"\bu\d+\b")


def _strip(module: str) -> str:
    from ..trace.module_function import ROOT_ATTR

    if module == ROOT_ATTR:
        return ""
    return module[len(ROOT_ATTR) + 1 :] if module.startswith(ROOT_ATTR + ".") else module


def _report(joiner: Joiner, base: Run, runs: dict[frozenset, Run]) -> BranchReport:
    """One entry per decision site, however many contexts it was joined in."""
    entries: dict[Site, BranchDecision] = {}
    for decision, context, regions in joiner.decisions:
        if decision.site in entries:
            entry = entries[decision.site]
            entries[decision.site] = attrs.evolve(entry, conds=entry.conds + regions)
            continue
        run = next((r for r in runs.values() if any(d is decision for d in r.decisions)), base)
        origins = symbol_origins(run.traced.gm)
        symbols = tuple(origins.get(str(s), str(s)) for s in sorted(decision.expression.free_symbols, key=str))
        entries[decision.site] = BranchDecision(
            decision.site.location, decision.code, str(decision.expression), symbols, _strip(decision.site.module),
            len(decision.uses), regions, tuple(site.location or "?" for site in context),
        )
    loops: dict[Any, BranchLoop] = {}
    for loop, carried, breaks in joiner.loops:
        loops.setdefault(
            loop.site,
            BranchLoop(
                loop.site.location, loop.code, _strip(loop.site.module), carried, joiner.max_iterations, breaks, loop.lists
            ),
        )
    return BranchReport(tuple(entries.values()), len(runs), loops=tuple(loops.values()))
