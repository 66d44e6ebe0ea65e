"""Decisions: where one run of forward needs a Python bool from a tensor's value, take it from
a schedule instead of failing, and remember where and what was decided.

The ShapeEnv calls the ``Decider`` when a boolean expression over data-dependent symbols
(``Eq(u0, 1)`` for ``if x.sum() > 0:``) has no value.  The decider answers from its schedule
(True unless the schedule says otherwise), lets the ShapeEnv assume the answer for the rest of
the run, and records a ``Decision``: the site (module call, user line, occurrence), the
expression, the graph position, and the module calls active there.  One value is one
decision: the same expression asked again, also through another ``.item()`` of the same
tensor, gets the same answer and counts as another use of the decision."""

from __future__ import annotations

import linecache
import os
import sys
import weakref
from typing import Any

import attrs
import sympy
import torch

from .._branch_report import raises_here
from .._errors import Category, TraceError
from .._ir import is_library_frame
from .._torch_internals import (
    PYTHON_BRANCH_DIRS,
    QUERY_FILES,
    GuardOnDataDependentSymNode,
    OpOverload,
    assume,
    check_at_run_time,
    current_module_stack,
    free_unbacked_symbols,
    functional_inner,
    is_condition,
    traced_graph,
)
from ..trace.active import traced_node
from ..trace.stacks import UserCalls, is_extent
from ..trace.write_watch import writes
from .loops import DataLoop, Loop, loop_refusal
from .meeting import meeting
from .state import iterated_by_for, scope, snapshot, zipped_by_for

__all__ = ["ITEM_OPS", "Check", "Decider", "Decision", "Learned", "Pin", "Site", "TooManyDecisions", "causes", "limit_error", "loop_error", "raised_by_model", "refusal", "step_limit_error", "tests_a_selection_for_none"]

ITEM_OPS = (torch.ops.aten.item.default, torch.ops.aten._local_scalar_dense.default)
"""The ops that read a tensor's one value into Python (``.item()``, ``bool(t)``)."""


@attrs.frozen
class Site:
    """Where a decision is made, the same in every run that gets there the same way: the
    innermost module call, the user's line, and which of that line's decisions in that call
    it is (a loop decides on the same line several times)."""

    module: str
    location: str | None
    occurrence: int
    loop: Any = None
    """For a decision inside a loop over a data-sized tensor, the loop's site: the occurrence
    then counts within one step, so that every step's question is the same decision, taken
    the same way in every step of a run (``Decider._in_step``)."""


@attrs.define(eq=False)
class Decision:
    """One value a run of forward branched on, and what the run took for it."""

    site: Site
    expression: sympy.Basic
    """The predicate, over this run's symbols (``Eq(u0, 1)``: ``bool(t)`` of a bool tensor)."""
    value: bool
    position: int
    """Where the sides part: the index, in the run's finished graph, of the first node made
    after it was first asked (``Run`` sets it from ``anchor``)."""
    stack: tuple[str | int, ...]
    """The calls active when it was first asked, outermost first: the module calls, then the
    user's function calls inside the innermost one (``UserCalls``)."""
    code: str | None
    """The user's source line that asked."""
    uses: list[tuple[int, tuple[str | int, ...]]] = attrs.field(factory=list)
    """Every time it was asked (the first included): graph position and the calls active."""
    anchors: list[torch.fx.Node | None] = attrs.field(factory=list)
    """For each use, the last node made before it that the trace keeps to the end (make_fx
    drops unused size arithmetic when it finishes, so counting nodes while tracing is not
    enough)."""
    bindings: dict[sympy.Symbol, torch.fx.Node] = attrs.field(factory=dict)
    """The node of this run's graph that binds each symbol of ``expression``."""
    asked: int = -1
    """The index, in the run's finished graph, of the last node made when it was first asked
    (``Run`` sets it): the span it belongs to is the one that holds that node."""


@attrs.frozen
class Pin:
    """A decision held to ``value`` where the runs before it took the same path: every run
    that took its other side there raised (``raised``: the model's error, and where)."""

    value: bool
    raised: str | None = None


@attrs.define
class Learned:
    """What the runs of one export found out about forward, which every later run holds."""

    checked: dict[tuple[tuple[tuple[Site, bool], ...], Site], Pin] = attrs.field(factory=dict)
    """(the decisions a run took before it, in order; a decision's site) -> the pin that
    holds it there: its other side raises after that path, and the program asserts so."""
    carried: dict[Site, tuple[str, ...]] = attrs.field(factory=dict)
    """A loop's site -> the numbers its steps rebind in the loop's own frame, carried from
    step to step as values of the while_loop (``loops.DataLoop``)."""
    lists: dict[Site, dict[str, Any]] = attrs.field(factory=dict)
    """A loop's site -> the lists of its frame its steps append to, each name -> what the
    items are (``lists.ListShape``): each is a buffer and a count the loop carries."""
    breaks: dict[Site, bool] = attrs.field(factory=dict)
    """A branch inside a loop's step -> the side on which the step breaks out of the loop:
    a run takes the other side unless its schedule asks for this one."""
    restarts: int = 0
    """How many times the runs started over to hold something learned."""
    last: Site | None = None
    """The site of the last thing learned (the line a refusal at the run limit names where
    no run of its own is to blame)."""

    def default(self, site: Site) -> bool:
        """The side a run takes at ``site`` where its schedule is silent."""
        return not self.breaks[site] if site in self.breaks else True
    traces: int = 0
    """How many runs of forward were traced, over every start: each start traces its runs
    anew, so a model that raises on many paths could otherwise take hundreds."""


@attrs.define(eq=False)
class Check:
    """A decision whose other side raises: the run held ``fact``, which the program asserts."""

    site: Site
    fact: sympy.Basic
    bindings: dict[sympy.Symbol, torch.fx.Node]
    """The node of the run's graph that binds each symbol of ``fact``."""
    code: str | None = None
    """The user's source line that asked."""
    raised: str | None = None
    """What forward raised on the other side, and where."""
    value: bool = True
    """The value the decision is held to."""
    anchor: torch.fx.Node | None = None
    """The last node the trace keeps made before it was asked (see ``Decision.anchors``)."""

    @property
    def message(self) -> str:
        """What the program's assert says when an input takes the side that raises."""
        return raises_here(self.site.location, self.code, self.raised)


class TooManyDecisions(Exception):
    """A run met more decisions than the limit."""


def _binding_nodes(graph: torch.fx.Graph | None, symbols: set[sympy.Symbol]) -> dict[sympy.Symbol, torch.fx.Node]:
    """The node of ``graph`` whose ``unbacked_bindings`` binds each of ``symbols``."""
    found: dict[sympy.Symbol, torch.fx.Node] = {}
    if graph is None:
        return found
    for node in reversed(graph.nodes):
        for symbol in node.meta.get("unbacked_bindings", None) or {}:
            if symbol in symbols and symbol not in found:
                found[symbol] = node
        if len(found) == len(symbols):
            break
    return found


def _empty_test(shape_env: Any, expr: sympy.Basic) -> bool:
    """Whether ``expr`` asks if a tensor the data sizes is empty (``Eq(4*u0, 0)``).  An
    operator asks it for its empty-input path (torch's C++ ``batch_norm`` on the rows a mask
    kept): both of the operator's paths are traced and joined, as a branch of the model's."""
    size = _compared_with_zero(expr)
    if size is None:
        return False
    symbols = size.free_symbols
    if not symbols or not symbols <= set(free_unbacked_symbols(size)):
        return False
    try:
        return bool(shape_env.bound_sympy(size).lower >= 0)  # a count, not a value that may be negative
    except Exception:  # noqa: BLE001 - no bound known: not a size
        return False


def _compared_with_zero(expr: sympy.Basic) -> sympy.Basic | None:
    """For ``Eq(e, 0)`` or ``Ne(e, 0)``: ``e``; else None."""
    if not isinstance(expr, (sympy.Eq, sympy.Ne)) or 0 not in (expr.lhs, expr.rhs):
        return None
    return expr.rhs if expr.lhs == 0 else expr.lhs


def _anchor(graph: torch.fx.Graph | None) -> torch.fx.Node | None:
    """The last node of ``graph`` that make_fx keeps when it finishes: not one whose value is
    a symbolic number (sizes read and size arithmetic, which it drops when unused)."""
    if graph is None:
        return None
    symbolic = (torch.SymInt, torch.SymFloat, torch.SymBool)
    for node in reversed(graph.nodes):
        if node.op in ("placeholder", "get_attr") or not isinstance(node.meta.get("val"), symbolic):
            return node
    return None


def _user_line() -> tuple[str | None, str | None, bool, Any]:
    """The innermost user frame's ``file:line`` and source, whether the model's own code
    asked (only torch's bool conversion and the ShapeEnv run between it and here), rather
    than an operator or other torch code the model called, and that frame."""
    frame, direct = _user_frame(sys._getframe(2))
    if frame is None:
        return None, None, False, None
    filename = os.path.abspath(frame.f_code.co_filename)
    code = linecache.getline(filename, frame.f_lineno).strip() or None
    return f"{filename}:{frame.f_lineno}", code, direct, frame


_LEFT = (
    "it is left before its end (a `break`, a `return` or an exception inside it), where a torch.while_loop goes "
    "round to the end"
)


def _handed_on(code: str | None) -> tuple[str, str]:
    """Why a data-sized tensor handed to something that iterates it (``enumerate``, ``zip``,
    ``islice``, a comprehension) cannot be one while_loop, and what to write instead."""
    said = code or ""
    if "zip(" in said:
        return (
            "it goes over the tensor side by side with something else (`zip`) other than in a `for` statement over the "
            "zip itself, whose own count Python keeps where no frame shows it", "write `for a, b in zip(x, y):` over "
            "tensors whose length the data decides, or go over one tensor that holds both; or export with "
            "branches='draft' to follow the example's count",
        )
    if "enumerate(" in said:
        return (
            "it counts the steps with `enumerate`, whose count Python keeps where no frame shows it",
            "count in the loop's own function (`i = 0` before the loop, `i += 1` at the end of each step), which the "
            "loop carries; or export with branches='draft' to follow the example's count",
        )
    if "islice(" in said:
        return (
            "it takes a number of items Python counts (`islice`)",
            "take the items first (`rows[:3]`) and loop over those, or export with branches='draft' to follow the "
            "example's count",
        )
    return (
        "the tensor is handed to something that iterates it (a comprehension, a generator, `list`, `sum`, "
        "`map`) rather than to a `for` statement, and only a `for` statement over the tensor itself can be a "
        "torch.while_loop",
        "write a `for` statement over the tensor that writes each step's result into a tensor made before the loop "
        "(a running sum, a mask), or compute on the whole tensor at once; or export with branches='draft' to follow "
        "the example's count",
    )


def _user_frame(frame: Any) -> tuple[Any, bool]:
    """The innermost user frame at or outside ``frame``, and whether only torch's bool
    conversion, the ShapeEnv and exporter run between it and ``frame``."""
    direct, settled = True, False
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not is_library_frame(filename):
            return frame, direct
        if not settled and filename.startswith(PYTHON_BRANCH_DIRS):
            settled = True  # torch's own Python asked, as a model would
        elif not settled and filename not in QUERY_FILES and not filename.startswith(_PACKAGE):
            direct = False
        frame = frame.f_back
    return None, False


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _without_extents(stack: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """``stack`` without the statements' extents (``Decider._met``)."""
    return tuple(key for key in stack if not is_extent(key))


class Decider:
    """Answers a run's data-dependent booleans from ``schedule`` (site -> value; True where the
    schedule is silent) and records each ``Decision``."""

    def __init__(
        self, schedule: dict[Site, bool] | None = None, *, limit: int = 32, learned: Learned | None = None,
        steps: int = DataLoop.STEPS,
    ) -> None:
        self.schedule = dict(schedule or {})
        self.steps = steps
        """How many times the run goes round each loop over a data-sized tensor."""
        self.learned = learned if learned is not None else Learned()
        """Decisions held where their other side raises, and the numbers loops carry."""
        self.limit = limit
        self.active = True
        self.reset()

    def reset(self) -> None:
        """Forget the decisions of a run that was abandoned (the next way of tracing starts over)."""
        self.decisions: list[Decision] = []
        self.checks: list[Check] = []
        self.path: list[tuple[Site, bool, bool]] = []
        """Every decision and check of the run in order: its site, its value, whether held."""
        self.states: list[tuple[torch.fx.Node | None, Any]] = []
        """The Python state at each question the run asked, after the node it follows (``note_state``)."""
        self.loops: list[Loop] = []
        self._known: dict[sympy.Basic, Decision] = {}
        self._held: dict[sympy.Basic, bool] = {}
        self._occurrences: dict[tuple[str, str | None], int] = {}
        self._item_symbols: dict[torch.fx.Node, sympy.Symbol] = {}
        self._item_nodes: dict[sympy.Symbol, torch.fx.Node] = {}
        self._step_asked: dict[tuple[Any, str, str | None], tuple[int, int]] = {}
        """(loop, module, line) -> the step that last asked there, and how often in it."""
        self._leader: Any = None
        """A weak reference to the loop ``zip`` is making, which takes its next tensors."""
        self.calls = UserCalls()
        """The user's function calls each node of the run was made in (recorded by the tracer)."""

    def __call__(self, shape_env: Any, expr: sympy.Basic, error: GuardOnDataDependentSymNode) -> bool:
        if not self.active or not is_condition(expr):
            raise error
        location, code, direct, asker = _user_line()
        if not direct and not _empty_test(shape_env, expr):  # an operator's own question: not a branch of the model's
            raise error
        inside = self._open_loop()
        if inside is not None:
            if inside.left:
                raise loop_refusal(inside, _LEFT) from error
            tested = sorted({inside.carried_symbols[s] for s in free_unbacked_symbols(expr) if s in inside.carried_symbols})
            if tested:
                names = ", ".join(f"`{n}`" for n in tested)
                raise loop_refusal(
                    inside, f"a step tests {names}, which the steps change (`{code}` at {location}): each step "
                    "would decide otherwise, and a torch.while_loop's body is one program",
                    hint="compute both outcomes and pick with torch.where inside the loop, or export with "
                    "branches='draft' to follow the example",
                ) from error
            return self._in_step(shape_env, expr, error, inside, location, code)
        graph = traced_graph()
        modules = tuple(current_module_stack())
        stack = modules + self.calls.running(sys._getframe(1))
        anchor = _anchor(graph)
        self.note_state(anchor, sys._getframe(1))
        position = 0
        bindings = _binding_nodes(graph, set(free_unbacked_symbols(expr)))
        canonical, bindings = self._canonical(expr, bindings)
        known = self._known.get(canonical)
        negated = self._known.get(sympy.Not(canonical)) if known is None else None
        held = self._held.get(canonical, None if sympy.Not(canonical) not in self._held else not self._held[sympy.Not(canonical)])
        if held is not None and known is None and negated is None:  # a held decision asked again
            assume(shape_env, expr if held else sympy.Not(expr))
            return held
        if known is not None or negated is not None:
            decision = known or negated
            value = decision.value if known is not None else not decision.value
            # one value tested by several statements: its regions end where the calls that
            # asked return, each use holding what follows it there
            decision.stack = _without_extents(decision.stack)
            decision.uses = [(p, _without_extents(s)) for p, s in decision.uses]
            decision.uses.append((position, stack))
            decision.anchors.append(anchor)
        else:
            module = modules[-1] if modules else ""
            if len(self.decisions) >= self.limit:
                # most of them on this one line of this one call: a loop that tests a value each time round
                repeated = self._occurrences.get((module, location), 0) * 2 > len(self.decisions)
                # each of them meets its other side again after its statement: a test in every
                # step of a loop that goes on either way, one run each
                per_step = repeated and all(
                    d.stack and is_extent(d.stack[-1]) for d in self.decisions if d.site.location == location
                )
                raise TooManyDecisions(location, code if repeated else None, per_step) from error
            site = self._next_site(module, location)
            pin = self.learned.checked.get((self.prefix(), site))
            if pin is not None:
                value = pin.value
                fact = expr if value else sympy.Not(expr)
                check = Check(
                    site, fact, _binding_nodes(graph, set(free_unbacked_symbols(fact))), code, pin.raised, value, anchor
                )
                check_at_run_time(shape_env, fact, check.message)
                self.checks.append(check)
                self.path.append((site, value, True))
                self._held[canonical] = value
                return value
            value = self.schedule.get(site, True)
            self.path.append((site, value, False))
            stack = self._met(stack, asker if direct else None)
            decision = Decision(
                site, canonical, value, position, stack, code, uses=[(position, stack)], anchors=[anchor], bindings=bindings
            )
            self.decisions.append(decision)
            self._known[canonical] = decision
        assume(shape_env, expr if value else sympy.Not(expr))
        return value

    def _in_step(
        self, shape_env: Any, expr: sympy.Basic, error: BaseException, loop: Loop, location: str | None, code: str | None
    ) -> bool:
        """A question asked inside a step of ``loop``: one decision for every step, a cond in
        the while_loop's body whose sides run to the end of the step.  Its value must come from
        the step itself (the item, what the step computes from it); one such branch a step."""
        graph = traced_graph()
        symbols = set(free_unbacked_symbols(expr))
        if not symbols or not symbols <= set(list(shape_env.var_to_range)[loop.symbols_before:]):
            raise loop_refusal(
                loop, f"a step branches on a value from before the loop (`{code}` at {location}), which every step "
                "would decide the same way the run did",
                hint="test the value once before the loop, or compute both outcomes and pick with torch.where inside "
                "the loop; or export with branches='draft' to follow the example",
            ) from error
        bindings = _binding_nodes(graph, symbols)
        canonical, bindings = self._canonical(expr, bindings)
        modules = tuple(current_module_stack())
        module = modules[-1] if modules else ""
        step, asked = self._step_asked.get((loop.site, module, location), (0, 0))
        occurrence = asked if step == loop.taken else 0
        self._step_asked[(loop.site, module, location)] = (loop.taken, occurrence + 1)
        site = Site(module, location, occurrence, loop=loop.site)
        value = self.schedule.get(site, self.learned.default(site))
        answer = value
        if self.learned.breaks.get(site) == value and loop.taken == 1 and self.steps > 1:
            # the run that breaks goes on at the first step and breaks at the second, so that
            # what the break reads tells a value the first step handed on from one before the loop
            answer = not value
        loop.asks.append((loop.taken, site, answer, _anchor(graph), tuple(bindings.values())))
        asked_before = [d for d in self.decisions if d.site.loop == loop.site]  # in the first step
        if loop.taken == 1:
            others = [d for d in asked_before if d.site != site]
            if asked_before:
                raise loop_refusal(
                    loop, f"a step branches more than once (`{others[0].code if others else code}`, then `{code}` at "
                    f"{location}); a step may hold one branch on a value", hint="compute the other outcomes with "
                    "torch.where inside the loop, or export with branches='draft' to follow the example",
                ) from error
            anchor = _anchor(graph)
            stack = modules + self.calls.running(sys._getframe(2))
            decision = Decision(site, canonical, value, 0, stack, code, uses=[(0, stack)], anchors=[anchor], bindings=bindings)
            self.decisions.append(decision)
            self.path.append((site, value, False))
        elif not any(d.site == site for d in asked_before):
            raise loop_refusal(
                loop, f"its steps ask different questions (`{code}` at {location} in one step, not in the first)"
            ) from error
        assume(shape_env, expr if answer else sympy.Not(expr))
        return answer

    def loop(self, tensor: torch.Tensor, convert: Any = None) -> DataLoop | None:
        """The iterator of a loop the model's own code makes over ``tensor``, whose length only
        the data decides (``loops.py``); None where the question is not the model's (the
        tensor is then iterated as torch iterates it, which needs the length).  ``convert``:
        what each step's item becomes (``range``'s numbers)."""
        if not self.active:
            return None
        frame, direct = _user_frame(sys._getframe(1))
        if frame is None or not direct:
            return None
        location = f"{os.path.abspath(frame.f_code.co_filename)}:{frame.f_lineno}"
        code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() or None
        stack = tuple(current_module_stack())
        module = stack[-1] if stack else ""
        inside = self._open_loop()
        if inside is not None:
            leader = self._leader() if self._leader is not None else None
            if leader is not None and leader.loop is inside and leader.takes_follower(frame):
                return leader.follower(tensor)  # zip's next tensor
            raise loop_refusal(
                inside, _LEFT if inside.left else
                f"another loop over a data-sized tensor starts inside it (`{code}` at {location})",
            )
        zipped = 1
        if not iterated_by_for(frame):
            zipped = zipped_by_for(frame) or 0
            if not zipped:
                raise loop_refusal(Loop(self._next_site(module, location), code), *_handed_on(code))
        loop = Loop(self._next_site(module, location), code)
        shape_env = getattr(getattr(tensor, "fake_mode", None), "shape_env", None)
        loop.symbols_before = len(shape_env.var_to_range) if shape_env is not None else 0
        self.loops.append(loop)
        self.note_state(_anchor(traced_graph()), frame)
        carried = self.learned.carried.get(loop.site, ())
        breaks = next(((s, v) for s, v in self.learned.breaks.items() if s.loop == loop.site), None)
        iterator = DataLoop(
            tensor, loop, lambda: _anchor(traced_graph()), self.steps, frame=frame, carried=carried, breaks=breaks,
            lists=self.learned.lists.get(loop.site), zipped=zipped, convert=convert,
        )
        self._leader = weakref.ref(iterator) if zipped > 1 else None
        return iterator

    def _met(self, stack: tuple[str | int, ...], frame: Any) -> tuple[str | int, ...]:
        """``stack`` with, innermost, the extent of the model's code after which the sides
        of the decision ``frame`` asks now meet again (``meeting.py``), where there is one
        (``frame`` None: an operator asked, not the model's own line)."""
        extent = meeting(frame) if frame is not None else None
        return stack if extent is None else (*stack, self.calls.open(extent))

    def note_state(self, anchor: torch.fx.Node | None, frame: Any) -> None:
        """Fingerprint the Python state forward's frames reach where it asks a question (a
        decision, a loop), after the node ``anchor``: two runs that took an earlier decision
        two ways and reach this question with different state may go on differently on a
        side no run of theirs took, so the earlier decision's region must hold this one."""
        user, _ = _user_frame(frame)
        if user is not None:
            self.states.append((anchor, snapshot(scope(user), exprs=False, nodes=_held_node)))

    def prefix(self, length: int | None = None) -> tuple[tuple[Site, bool], ...]:
        """The sites and values of the run's first ``length`` decisions and checks (all of them
        for None): the path a pin holds after."""
        return tuple((site, value) for site, value, _ in self.path[:length])

    def _next_site(self, module: str, location: str | None) -> Site:
        """The site of the next question this line asks in this module call (its occurrence
        counts the ones before it, branches and loops alike)."""
        occurrence = self._occurrences.get((module, location), 0)
        self._occurrences[(module, location)] = occurrence + 1
        return Site(module, location, occurrence)

    def _open_loop(self) -> Loop | None:
        return next((loop for loop in self.loops if not loop.finished and not loop.exited), None)

    def break_error(self) -> BaseException | None:
        """What a loop's break found that the run could not raise (a ``__del__`` cannot): the
        run is over, or failed after it, and this is the error to raise instead."""
        return next((loop.exit_error for loop in self.loops if loop.exit_error is not None), None)

    def _canonical(
        self, expr: sympy.Basic, bindings: dict[sympy.Symbol, torch.fx.Node]
    ) -> tuple[sympy.Basic, dict[sympy.Symbol, torch.fx.Node]]:
        """``expr`` with every symbol that is an ``.item()`` of a tensor replaced by the first
        symbol this run took from the same value (two reads of one value are one value, also
        where each ``bool(t)`` computed ``t != 0`` again before reading it), and the node
        that binds each of its symbols."""
        replace, bound = {}, {}
        for symbol, node in bindings.items():
            if node.target in ITEM_OPS and node.args:
                first = self._item_symbols.setdefault(_value_key(node.args[0]), symbol)
                self._item_nodes.setdefault(first, node)
                if first is not symbol:
                    replace[symbol] = first
                    bound[first] = self._item_nodes[first]
                    continue
            bound[symbol] = node
        return (expr.xreplace(replace) if replace else expr), bound


def _held_node(tensor: torch.Tensor) -> torch.fx.Node | None:
    """The node of the run's graph that holds ``tensor`` now, where the trace saw it."""
    try:
        return traced_node(functional_inner(tensor))
    except Exception:  # noqa: BLE001 - a tensor the trace cannot place (a real one, a subclass)
        return None


def _value_key(node: Any, depth: int = 8) -> Any:
    """What identifies the value ``node`` computes: the node itself, or for a pure ATen op the
    op and the keys of its arguments (two ``ne(flag, 0)`` nodes are one value)."""
    if not isinstance(node, torch.fx.Node) or depth == 0:
        return node if isinstance(node, torch.fx.Node) else ("constant", repr(node))
    target = node.target
    if node.op != "call_function" or not isinstance(target, OpOverload) or writes(target):
        return node
    if torch.Tag.nondeterministic_seeded in target.tags:  # two draws are two values
        return node
    return (target, tuple(_value_key(a, depth - 1) for a in node.args), tuple(sorted((k, repr(v)) for k, v in node.kwargs.items())))


def refusal(error: BaseException, limit: int) -> TraceError | None:
    """The TraceError for a run that met more decisions than ``limit`` allows, or None for
    another failure."""
    for cause in causes(error):
        if isinstance(cause, TooManyDecisions):
            location, loop, per_step = (list(cause.args) + [None, None, False])[:3]
            if per_step:
                return step_limit_error(location, loop, limit + 1)
            if loop is not None:
                return loop_error(location, loop)
            return limit_error(location, limit + 1)
    return None


def loop_error(location: str | None, code: str | None, empty_test: bool = False) -> TraceError:
    """forward() tests a value each time round a loop: no fixed number of branches holds it.
    ``empty_test``: the test asks whether a selection is empty (``if tokens.numel() == 0:``),
    as a fixed loop over experts does at each step."""
    hint = (
        "drop the test for an empty selection: the step's ops run on no rows as well; or loop "
        "over the entries present (`for e in hit.nonzero():`, captured as a "
        "torch.while_loop); or export with branches='draft' to follow the example"
        if empty_test else
        "loop a fixed number of times and let masks skip the steps past the end (or use "
        "torch.while_loop), or export with branches='draft' to follow the example's count"
    )
    what = (
        "forward() tests whether a selection is empty at each step of a loop"
        + (f" (`{code}`)" if code else "")
        + ": each side of the test goes on to ask it again, so the program would need a branch for every "
        "combination of steps"
        if empty_test else
        "forward() loops as many times as the data says"
        + (f" (`{code}` decides whether it goes on)" if code else "")
        + ": each side of the decision asks it again, so no fixed number of branches holds every input"
    )
    return TraceError(
        what,
        category=Category.DATA_DEPENDENT_CONTROL_FLOW,
        location=location,
        hint=hint,
    )


def tests_a_selection_for_none(decision: Decision) -> bool:
    """Whether ``decision`` asks if a selection the data sizes is empty (``Eq(u0, 0)`` with
    ``u0`` a size of ``nonzero``'s or ``where``'s result, not a value read with ``.item()``)."""
    if _compared_with_zero(decision.expression) is None:
        return False
    nodes = list(decision.bindings.values())
    return bool(nodes) and all(node.target not in ITEM_OPS for node in nodes)


def raised_by_model(error: BaseException) -> bool:
    """Whether ``error`` is the model's own exception (an input check that raised), not
    branch capture's limit or a question about data no decision answered."""
    return not any(isinstance(cause, (TooManyDecisions, GuardOnDataDependentSymNode)) for cause in causes(error))


def step_limit_error(location: str | None, code: str | None, max_runs: int) -> TraceError:
    """forward() tests a value in each step of a loop that goes on either way: each test is a
    branch of its own, which needs a run of its own, and the steps need more than the limit."""
    return TraceError(
        "forward() tests a value at each step of a loop" + (f" (`{code}`)" if code else "")
        + f": each step's test is a branch that needs a run of forward of its own, more than the {max_runs} "
        "runs branch capture may make",
        category=Category.BRANCH_CAPTURE,
        location=location,
        hint=f"raise the limit above the number of steps (exporter.export(..., max_branch_runs=N), now {max_runs}), "
        "drop the test (the step's ops run on no rows as well), or export with branches='draft' to follow the example",
    )


def limit_error(location: str | None, max_runs: int) -> TraceError:
    """Branch capture needs more runs of forward than it may make."""
    return TraceError(
        f"forward() branches on tensor values in more ways than {max_runs} runs of forward can capture",
        category=Category.BRANCH_CAPTURE,
        location=location,
        hint=f"raise the limit (exporter.export(..., max_branch_runs=N), now {max_runs}), compute without the "
        "branches (torch.where), or export with branches='draft' to follow the example's values",
    )


def causes(error: BaseException):
    """``error``, then what caused it, and so on (``__cause__``, else ``__context__``)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__
