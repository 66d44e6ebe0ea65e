"""One graph from the runs of forward: where runs part on a decision, ``torch.cond`` on the
decision's predicate with each run's part as a branch; everything the runs share, once.

``Joiner.build`` walks the run that took every decision's first value.  For the first
decision it meets, it asks for the run that took the other value, aligns the two
(``align.py``) and emits, for each region where they part, the predicate, a cond whose
branches are the two runs' nodes of the region (each built the same way, so a decision made
inside a region becomes a cond inside that branch), and the region's slots; nodes after the
region that read a value the runs computed differently read the slot instead.  The graph is
then traced again, on the export's fake inputs, so torch.cond's own tracing makes the
branches' graphs and joins their outputs' sizes.
"""

from __future__ import annotations

import operator
import types
from collections.abc import Callable
from typing import Any

import attrs
import sympy
import torch
import torch.utils._pytree as pytree
from torch.utils._pytree import SequenceKey

from .._torch_internals import (
    ENTER_AUTOCAST,
    EXIT_AUTOCAST,
    SET_GRAD_ENABLED,
    CallMethodKey,
    OpOverload,
    asserts_kept_inside,
    assumed,
    bound_value,
    check_value,
    evaluate_expression,
    free_unbacked_symbols,
)
from .._ir import has_side_effects
from ..trace.write_watch import aliases
from .align import Extend, Parted, Region, Run, Unjoinable, align
from .state import refs
from .general import Adjust, Generality, bound_alike, compose, is_number
from .decide import ITEM_OPS, Decision, Site
from .loops import (
    Bound,
    Iterations,
    Loop,
    LoopBody,
    LoopCondition,
    LoopRefused,
    compare,
    operands_shape_env,
    same_constant,
    same_op,
    while_loop,
)

__all__ = ["DataLoop", "HeldUnkept", "Joiner", "Overlap", "Unread", "interpreted"]


class DataLoop(Exception):
    """A decision's line is asked again inside its own branches more than ``MAX_REPEATS``
    times: the number of times forward goes round a loop (``break``, ``while``) depends on
    the data."""


MAX_REPEATS = 4
"""How many times one line may ask again inside the branches of its own earlier decisions:
two tests on one line (``fast_all(a) and fast_all(b)``) or a short loop of fixed length join
as nested conds; a loop the data ends asks again on every side that goes on, and is refused
once past this."""


class Overlap(Exception):
    """A region inside a branch reaches past the branch's end: the outer region must grow."""

    def __init__(self, end: int) -> None:
        super().__init__(end)
        self.end = end


class _Tainted(Exception):
    """A decision joined in a general run's continuation reads values whose size the special
    run knows: decision ``origin`` must be joined node by node."""

    def __init__(self, origin: Site) -> None:
        super().__init__(origin)
        self.origin = origin


class HeldUnkept(Exception):
    """A side asserts a held decision, but no value forward's results depend on passes
    through the cond, which the program would then drop (``args``: the site and its code)."""


class Unread(Exception):
    """A decision's predicate (or a held check's fact) reads a value made inside an earlier
    decision's branches that no tensor they hand on gives (``args``: the asking site and its
    line of code)."""


class Retested(Exception):
    """A side of a branch tests again a value an earlier statement tested, where that test's
    other side was never traced: the first test's join saw no such use (``args``: the first
    test's site and code)."""


MODE_SWITCHES = (SET_GRAD_ENABLED, ENTER_AUTOCAST, EXIT_AUTOCAST)


class ModeInside(Exception):
    """A branch's side switches grad mode or autocast (a training-IR trace records the
    switches as calls): ``args`` are the decision's site and its line of code."""


MAX_ADJUSTMENTS = 2
"""How many later decisions a general run may be traced again holding (``general.Adjust``):
each is a run of forward more, wasted where the runs still do not agree."""


class _Grow(Exception):
    """Region ``region`` of the decision being joined must end one module call further out."""

    def __init__(self, region: int) -> None:
        super().__init__(region)
        self.region = region


class Predicate:
    """A decision's predicate computed from the values that bind its symbols (an ``.item()``,
    a size), for a graph node: traced, it records the ops that make the SymBool."""

    def __init__(self, expression: sympy.Basic, symbols: list[sympy.Symbol], keypaths: list[Any]) -> None:
        self.expression, self.symbols, self.keypaths = expression, symbols, keypaths
        self.__name__ = "predicate"

    def __call__(self, *values: Any) -> Any:
        bound = {s: bound_value(v, k) for s, v, k in zip(self.symbols, values, self.keypaths)}
        return evaluate_expression(self.expression, bound)


class Branch:
    """One side of a cond: runs its graph through an interpreter, so that tracing it again
    keeps each node's stack trace and module stack, assuming the predicate's value."""

    def __init__(self, gm: torch.fx.GraphModule, value: bool) -> None:
        self.gm, self.value = gm, value
        self.predicate: Any = None

    def __call__(self, *operands: Any) -> tuple[Any, ...]:
        shape_env = _shape_env(self.predicate) or operands_shape_env(operands)
        fact = self.predicate.node.expr if isinstance(self.predicate, torch.SymBool) else None
        with asserts_kept_inside(shape_env):
            if shape_env is None or fact is None:
                return tuple(torch.fx.Interpreter(self.gm).run(*operands))
            with assumed(shape_env, fact if self.value else sympy.Not(fact)):
                return tuple(torch.fx.Interpreter(self.gm).run(*operands))


@attrs.define(eq=False)
class _OtherStep:
    """The run that takes a branch inside a loop's steps the other way (``Joiner._other_step``)."""

    run: Run
    it: Iterations
    decision: Decision
    """The branch, as the run being joined took it."""
    same: dict[torch.fx.Node, torch.fx.Node]
    """The other run's nodes before the branch -> the run's."""
    carried: dict[torch.fx.Node, torch.fx.Node]
    """The run's value before the loop -> the other run's first-step value that replaces it."""

    @property
    def loop(self) -> Loop:
        return next(o for o in self.run.loops if o.site == self.decision.site.loop)


@attrs.define(eq=False)
class _BreakStep:
    """The run whose step takes a branch inside a loop's steps the other way and breaks out
    there (``Joiner._break_step``): a step that goes on, one up to the break, then forward
    after the loop."""

    run: Run
    decision: Decision
    """The branch, as the run being joined took it (the side that goes on)."""
    translate: Callable[[torch.fx.Node], tuple[Run, torch.fx.Node]]
    """The other run's node outside the break -> where the value lives in the loop's body."""
    carried: dict[torch.fx.Node, torch.fx.Node]
    """The run's value before the loop -> the other run's value as the step left it at its
    break, for each value forward after the loop reads from the loop that the step changed,
    and the loop's flag (the others hand on what they held when the step began)."""
    nodes: list[torch.fx.Node]
    """The other run's nodes from the branch to the break."""
    reads: list[tuple[Any, torch.fx.Node, torch.fx.Node]]
    """(a node after the loop of the run being joined, or "output"; a value before the loop it
    reads; that value's node before the loop) for each read of a value the steps that go on
    leave alone and the break changes: it reads the loop's instead."""

    @property
    def loop(self) -> Loop:
        return next(o for o in self.run.loops if o.site == self.decision.site.loop)


def _shape_env(value: Any) -> Any:
    node = getattr(value, "node", None)
    return getattr(node, "shape_env", None)


def cond(predicate: Any, true_branch: Branch, false_branch: Branch, *operands: Any) -> Any:
    """``torch.ops.higher_order.cond`` of the branches, each assuming the predicate's value."""
    true_branch.predicate = false_branch.predicate = predicate
    return torch.ops.higher_order.cond(predicate, true_branch, false_branch, tuple(operands))


cond.__name__ = "cond"


@attrs.define(eq=False)
class _Graph:
    """A graph being built from one run's nodes, with where each node went."""

    graph: torch.fx.Graph
    run: Run
    env: dict[torch.fx.Node, torch.fx.Node]
    parent: _Graph | None = None
    translate: Callable[[torch.fx.Node], tuple[Run, torch.fx.Node]] | None = None
    """For a branch: a node of this graph's run outside the branch -> (run, node) of the
    graph outside, where the value lives there."""
    externals: list[tuple[Run, torch.fx.Node]] = attrs.field(factory=list)
    """For a branch: the outside values its placeholders stand for, in order."""


class Joiner:
    """Builds the joined graph; ``run_of(schedule)`` traces (or recalls) the run a schedule gives."""

    def __init__(self, run_of: Callable[[dict[Site, bool]], Run], universe: list[int], max_iterations: int | None = None) -> None:
        self.run_of = run_of
        self.universe = universe
        self.max_iterations = max_iterations
        """Where set, each loop is written as that many conds in a row (``loops.Bound``)."""
        self.constants: dict[str, Any] = {}
        self._constant_nodes: dict[tuple[int, int, torch.fx.Node], torch.fx.Node] = {}
        """(graph, run, the run's get_attr) -> the joined graph's node for that constant."""
        self._joining: set[int] = set()
        """The decisions being joined now (their regions' surroundings are copied without them)."""
        self.decisions: list[tuple[Decision, dict[Site, bool], int]] = []
        """Every decision joined: the decision, the decisions fixed around it, its regions."""
        self._loops: dict[int, dict[int, tuple[Loop, Iterations]]] = {}
        self.loops: list[tuple[Loop, int, str | None]] = []
        """Every loop over a data-sized tensor joined as a while_loop, with how many values it
        carries and where a step may break out of it."""
        self._worlds: dict[int, tuple[tuple[dict, int, Site, dict], ...]] = {}
        """Run -> for each special run whose values a general run's nodes that forward goes on
        with must hold: the run's symbols in its values, from which node on, the decision
        that joined them, and what the special run assumed (``general.py``)."""
        self._asked_before: set[int] = set()
        """Decisions joined in the span they were asked in, though they part where it ends."""
        self._redirect: dict[tuple[int, Any], dict[torch.fx.Node, torch.fx.Node]] = {}
        self._loop_values: dict[torch.fx.Node, torch.fx.Node] = {}
        """A stand-in node -> the loop's result it stands for, in the graph that holds the loop:
        a redirected read looks the stand-in up, so a read copied into a cond after the loop
        takes the result as an operand (``_loop_value``)."""
        self._stand_ins = torch.fx.Graph()
        """(run, a node after a loop, or "output") -> values before the loop it reads that the
        loop's other side carries: the node of the joined graph to read instead (``_step_cond``)."""
        self._exact: set[Site] = set()
        """Decisions whose runs must meet node by node (a later decision's sides read values
        only their general run holds)."""

    # -- values

    def _lookup(self, g: _Graph, run: Run, node: torch.fx.Node) -> torch.fx.Node:
        """The node of ``g`` that holds ``run``'s value ``node``: copied already, a constant,
        or (in a branch) a placeholder for a value from outside."""
        result = self._loop_values.get(node)
        if result is not None and result.graph is g.graph:
            return result
        if run is g.run and node in g.env:
            return g.env[node]
        if node.op == "get_attr" and g.parent is None:
            known = self._constant_nodes.get((id(g.graph), id(run), node))
            if known is not None:  # another run's constant, made once however often it is read
                return known
            name = f"_joined_constant_{len(self.constants)}"
            self.constants[name] = run.constant(node)
            new = g.graph.get_attr(name)
            new.meta = dict(node.meta)
            self._constant_nodes[(id(g.graph), id(run), node)] = new
            if run is g.run:
                g.env[node] = new
            return new
        if g.parent is None:
            raise KeyError(f"{node} is read before it is made")
        outside = (run, node) if run is not g.run else (g.translate(node) if g.translate else (g.parent.run, node))
        for k, external in enumerate(g.externals):
            if external[0] is outside[0] and external[1] is outside[1]:
                return _placeholders(g.graph)[k]
        g.externals.append(outside)
        placeholder = g.graph.placeholder(f"operand_{len(g.externals) - 1}")
        placeholder.meta = dict(outside[1].meta)
        if run is g.run:
            g.env[node] = placeholder
        return placeholder

    def _loop_value(self, result: torch.fx.Node) -> torch.fx.Node:
        """A stand-in for ``result``, a loop's result in the graph that holds the loop, for a
        read redirected to it (``_redirect``), wherever that read is copied."""
        stand_in = self._stand_ins.placeholder(f"loop_value_{len(self._loop_values)}")
        stand_in.meta = dict(result.meta)
        self._loop_values[stand_in] = result
        return stand_in

    def _copy(self, g: _Graph, node: torch.fx.Node) -> None:
        if node.op == "get_attr":
            g.env[node] = self._lookup(g, g.run, node)
            return
        redirect = self._redirect.get((id(g.run), node), {})
        new = g.graph.node_copy(node, lambda n: self._lookup(g, g.run, redirect.get(n, n)))
        g.env[node] = new
        for check in self._checks_after(g.run).get(node, ()):
            self._hold(g, g.run, check)

    def _copy_range(self, g: _Graph, start: int, end: int) -> None:
        """Copy nodes ``[start, end)`` of ``g.run`` into ``g``, each loop over a data-sized
        tensor among them as one ``torch.while_loop``."""
        run = g.run
        loops = self._loops_of(run)
        i = start
        while i < end:
            found = loops.get(i)
            if found is not None:
                self._while(g, *found, end)
                i = found[1].end
                continue
            node = run.nodes[i]
            if node.op != "placeholder":
                self._copy(g, node)
            i += 1

    def _loops_of(self, run: Run) -> dict[int, tuple[Loop, Iterations]]:
        """The run's loops over data-sized tensors, by the index of their first node."""
        found = self._loops.get(id(run))
        if found is None:
            found = self._loops[id(run)] = {}
            for loop in run.loops:
                iterations = compare(run, loop, run.constant)
                found[run.index[loop.counter[0]] + 1] = (loop, iterations)
        return found

    def _while(self, g: _Graph, loop: Loop, it: Iterations, end: int) -> None:
        """The loop's first iteration as a ``torch.while_loop`` body in ``g``; the values the
        last step hands on are its outputs, read where forward read the second iteration's."""
        if it.end > end:
            raise LoopRefused(loop, "a branch on a tensor's value around it ends inside it")
        run = g.run
        for node in it.hoisted:
            self._copy(g, node)
        body = _Graph(torch.fx.Graph(), run, {}, parent=g)
        inner = [d for d in run.decisions if d.site.loop == loop.site]
        other = self._other_step(run, loop, it, inner[0]) if inner else None
        carried = list(it.carried)
        if other is not None:  # what the other side carries and this one does not
            carried += [x for x in other.carried if x not in it.carried]
        for value in (*carried, it.tensor):  # the carried values are the body's first operands
            self._lookup(body, run, value)
        if other is None:
            for node in it.first:
                self._copy(body, node)
            outputs = [self._lookup(body, run, it.carried[x]) for x in carried]
        else:
            outputs = self._step_cond(body, it, other, carried)
        operands = [self._lookup(g, r, n) for r, n in body.externals]
        for k, x in enumerate(carried):
            # torch.while_loop needs a step's result in the layout its first input had, and
            # takes that input as a contiguous copy: a value carried as a view (a column
            # written through) goes round as a contiguous copy
            if not (_row_major(x) and _row_major(it.carried[x] if x in it.carried else other.carried[x])):
                operands[k] = _contiguous(g.graph, operands[k])
                outputs[k] = _contiguous(body.graph, outputs[k])
        body.graph.output(tuple(outputs))
        inside = _placeholders(body.graph)
        operands[len(carried):] = [
            _tensor_operand(g.graph, value, [inside[k]]) for k, value in enumerate(operands[len(carried):], len(carried))
        ]
        meta = {k: it.first[0].meta[k] for k in ("stack_trace", "nn_module_stack") if k in it.first[0].meta}
        tensor = _operand_of(body, it.tensor)
        names = []
        done = carried.index(loop.done[0]) if isinstance(other, _BreakStep) else None
        others = tuple(self._zipped_operands(body, loop))
        for kind, value in (
            ("condition", LoopCondition(carried.index(loop.counter[0]), tensor, done, others)),
            ("body", LoopBody(torch.fx.GraphModule(dict(self.constants), body.graph), list(range(len(operands))))),
        ):
            name = f"_joined_loop_{kind}_{len(self.constants)}"
            self.constants[name] = value
            names.append(g.graph.get_attr(name))
        bound = None if self.max_iterations is None else Bound(self.max_iterations, loop.site.location, loop.code)
        call = g.graph.call_function(
            while_loop, (*names, tuple(operands[: len(carried)]), tuple(operands[len(carried) :])), {"bound": bound}
        )
        call.meta.update(meta)
        last = it.last()
        items = {}
        for k, x in enumerate(carried):
            item = g.graph.call_function(_getitem, (call, k))
            item.meta.update(meta)
            items[x] = item
            if x in last:
                g.env[last[x]] = item
        if isinstance(other, _BreakStep):
            for key, read, x in other.reads:
                self._redirect.setdefault((id(run), key), {})[read] = self._loop_value(items[x])
        elif other is not None:
            self._read_after(run, it, other, items)
        if other is not None:
            self._not_held_after(run, it, other, [x for x in carried if x not in it.carried])
        breaks = other.decision.site.location if isinstance(other, _BreakStep) else None
        self.loops.append((loop, len(carried), breaks))

    def _not_held_after(self, run: Run, it: Iterations, other: Any, changed: list[torch.fx.Node]) -> None:
        """Refuse where a value from before the loop that only the other side of its steps'
        branch changes (``changed``) is held by forward's frames where it asks a question after
        the loop: ``run``'s reads of it are the loop's, but a side of that later question
        that ``run`` does not take is traced from a run whose loop left it alone, and would
        read it as it was before the loop whatever the data."""
        if not changed:
            return
        held: set[torch.fx.Node] = set()
        for anchor, state in run.states:
            if anchor in run.index and run.index[anchor] >= it.end:
                held.update(x for x, _ in refs(state, state))
        # the loop's own flag and counter are no frame's
        found = next((x for x in changed if x in held and x not in other.loop.done), None)
        if found is not None:
            raise LoopRefused(
                other.loop, f"the branch inside it (`{other.decision.code}`) changes on one side a value forward holds "
                "where it asks another question after the loop, whose other side is traced from a run whose steps "
                "left that value alone",
            )

    def _zipped_operands(self, body: _Graph, loop: Loop) -> Any:
        """The operand index of each tensor ``zip`` goes over beside the loop's (the loop's
        condition compares the count with the shortest)."""
        for item in loop.zipped[: len(loop.zipped) // 2]:  # the first step's
            found = _operand_of(body, item.args[0] if item is not None else None)
            if found is None:
                raise LoopRefused(loop, "a tensor it zips is read by no step")
            yield found

    def _other_step(self, run: Run, loop: Loop, it: Iterations, decision: Decision) -> _OtherStep | _BreakStep:
        """The run that takes ``decision``, a branch inside each step of ``loop``, the other
        way, compared with ``run``: the same nodes up to the decision, and its loop's steps."""
        other = self.run_of({**run.schedule, decision.site: not decision.value})
        theirs = other.decision_at(decision.site)
        mine = next((o for o in other.loops if o.site == loop.site), None)
        p = decision.position
        if theirs is None or mine is None:
            raise LoopRefused(loop, f"the branch inside it (`{decision.code}`) is not asked again on its other side")
        if theirs.position != p or not all(map(same_op, run.nodes[:p], other.nodes[:p])):
            raise Parted(decision.site)  # traced differently: again, every run functionalized
        if mine.exited:
            return self._break_step(run, loop, it, decision, other, mine)
        o_it = compare(other, mine, other.constant)
        same = {other.nodes[i]: run.nodes[i] for i in range(p)}
        carried: dict[torch.fx.Node, torch.fx.Node] = {}
        for x, y in o_it.carried.items():
            if x not in same:
                raise LoopRefused(loop, f"a side of the branch inside it (`{decision.code}`) carries a value made inside it")
            carried[same[x]] = y
        return _OtherStep(other, o_it, decision, same, carried)

    def _break_step(self, run: Run, loop: Loop, it: Iterations, decision: Decision, other: Run, mine: Loop) -> _BreakStep:
        """The run ``other`` whose loop goes on at its first step, as ``run``'s does, and
        breaks out at its second, compared with ``run``: the two are the same up to the
        second step's branch; forward after the loop must do the same in both, each reading
        a value from before the loop, after it, or as the loop leaves it, where ``other``
        reads that value as its step left it at the break.  Each value so read is what the
        break side hands on.  What the break reads is a value of its own step, or what the
        first step handed on (the loop's current value), or one from before the loop that no
        step replaces: a value from before the loop that the steps replace, read by another
        name, or a value of the step before that no step hands on, is refused."""
        index = other.index
        differs = f"forward after it differs where a step breaks out (`{decision.code}`)"
        unmarked = f"its break (`{decision.code}`) left no mark in the trace"
        asks = [(anchor, bindings) for step, _, _, anchor, bindings in mine.asks if step == 2]
        marks = (*mine.counter, mine.exit_mark, *mine.done)
        if len(asks) != 1 or len(mine.counter) != 2 or len(mine.done) != 2 or not loop.done or any(m not in index for m in marks):
            raise LoopRefused(loop, unmarked)
        start, middle, stop = index[mine.counter[0]], index[mine.counter[1]], index[mine.exit_mark]
        anchor, bindings = asks[0]
        at = max([index[anchor] + 1 if anchor in index else 0, *(index[b] + 1 for b in bindings if b in index)])
        p = other._past_items(at)
        if not middle < p <= stop + 1 or p > len(run.nodes) or not all(map(same_op, run.nodes[:p], other.nodes[:p])):
            raise LoopRefused(loop, unmarked)
        split = next((k for k, n in enumerate(it.first) if run.index[n] >= decision.position), len(it.first))
        prefix = set(it.first[:split])
        handed = {y: x for x, y in it.carried.items()}  # a first-step value -> the value before the loop it replaces
        at_second = {n: k for k, n in enumerate(it.second)}
        hoisted = set(it.hoisted)

        def base_of(node: torch.fx.Node) -> torch.fx.Node:
            """``run``'s node that holds, in any step, what ``other``'s node (made before the
            second step's branch) holds in the second."""
            mine_at = index[node]
            theirs = run.nodes[mine_at]
            if theirs in hoisted:
                return theirs
            if mine_at <= start:
                if theirs in it.carried:
                    raise LoopRefused(loop, f"its break (`{decision.code}`) reads a value from before the loop that the "
                                      "steps replace")
                return theirs
            if mine_at <= middle:
                if theirs in handed:
                    return handed[theirs]
                raise LoopRefused(loop, f"its break (`{decision.code}`) reads a value of the step before that no step "
                                  "hands on")
            k = at_second.get(theirs)
            if k is None or it.first[k] not in prefix:
                raise LoopRefused(loop, unmarked)
            return it.first[k]

        read = lambda n: bool(n.users) or n.is_impure()  # noqa: E731
        ours = [n for n in run.nodes[it.end : -1] if read(n)]
        theirs = [n for n in other.nodes[stop + 1 : -1] if read(n)]
        if len(ours) != len(theirs):
            raise LoopRefused(loop, differs)
        last = {y: x for x, y in it.last().items()}
        before = set(run.nodes[: run.index[it.first[0]]]) if it.first else set()
        after_ours = {n: k for k, n in enumerate(ours)}
        after_theirs = {n: k for k, n in enumerate(theirs)}
        carried: dict[torch.fx.Node, torch.fx.Node] = {}
        passed: set[torch.fx.Node] = set()
        reads: list[tuple[Any, torch.fx.Node, torch.fx.Node]] = []

        def ours_means(value: torch.fx.Node) -> tuple:
            if value in last:
                return ("last", last[value])
            if value in after_ours:
                return ("after", after_ours[value])
            if value in before:
                return ("before", value)
            return ("step", value)

        def theirs_means(value: torch.fx.Node) -> tuple:
            if value in after_theirs:
                return ("after", after_theirs[value])
            if index[value] > stop:
                return ("unknown", value)
            if index[value] >= p:
                return ("break", value)
            held = base_of(value)
            return ("before", held) if held in before else ("break", value)

        def hands_on(x: torch.fx.Node, value: torch.fx.Node | None) -> None:
            """At the break, ``x`` (a value before the loop) holds ``other``'s ``value``; None:
            what it held when the step began (the step did not change it)."""
            known = carried.get(x, None) if x not in passed else None
            if x not in passed and known is None:
                if value is None:
                    passed.add(x)
                else:
                    carried[x] = value
            elif known is not value:
                raise LoopRefused(loop, differs)

        def redirect(key: Any, x: Any, y: Any) -> None:
            xs, xspec = pytree.tree_flatten(x)
            ys, yspec = pytree.tree_flatten(y)
            if xspec != yspec:
                raise LoopRefused(loop, differs)
            for a, b in zip(xs, ys):
                node_a, node_b = isinstance(a, torch.fx.Node), isinstance(b, torch.fx.Node)
                if node_a != node_b:
                    raise LoopRefused(loop, differs)
                if not node_a or a.op == "get_attr" or b.op == "get_attr":
                    same_value = (
                        same_constant(run.constant(a), other.constant(b)) if node_a and a.op == b.op == "get_attr"
                        else not node_a and same_constant(a, b)
                    )
                    if not same_value:
                        raise LoopRefused(loop, differs)
                    continue
                ma, mb = ours_means(a), theirs_means(b)
                if ma[0] == "after" or mb[0] == "after":
                    if ma != mb:
                        raise LoopRefused(loop, differs)
                elif ma[0] == "last" and mb == ("before", ma[1]):
                    hands_on(ma[1], None)  # the step broke before it changed it
                elif ma[0] == "last" and mb[0] == "break":
                    hands_on(ma[1], b)
                elif ma[0] == "before" and mb == ma:
                    continue  # neither changes it
                elif ma[0] == "before" and mb[0] == "break":
                    hands_on(ma[1], b)  # the break changes it: forward reads the loop's
                    reads.append((key, a, ma[1]))
                else:
                    raise LoopRefused(loop, differs)

        for u, v in zip(ours, theirs):
            if not same_op(u, v):
                raise LoopRefused(loop, differs)
            if u.op != "get_attr":
                redirect(u, (u.args, u.kwargs), (v.args, v.kwargs))
        redirect("output", run.outputs(self.universe), other.outputs(self.universe))
        # each number the loop carries, as the break left it: by name, since forward after
        # the loop may test it in Python where the break left a plain number
        if len(mine.state) != 3 or len(loop.state) != 3:
            raise LoopRefused(loop, unmarked)
        for x, value in zip(loop.state[0], mine.state[-1]):
            if x not in it.carried or value not in index or not p <= index[value] <= stop:
                raise LoopRefused(loop, unmarked)
            passed.discard(x)
            carried[x] = value
        carried[loop.done[0]] = mine.done[1]
        # every value forward after the loop reads from the loop is known as the break left it
        for x, y in it.last().items():
            if any(run.index[user] >= it.end for user in y.users) and x not in carried and x not in passed:
                raise LoopRefused(loop, differs)

        def translate(node: torch.fx.Node) -> tuple[Run, torch.fx.Node]:
            return (run, base_of(node)) if index[node] < p else (other, node)

        return _BreakStep(other, decision, translate, carried, other.nodes[p : stop + 1], reads)

    def _step_cond(self, body: _Graph, it: Iterations, other: _OtherStep | _BreakStep, carried: list[torch.fx.Node]) -> list[Any]:
        """The step of a loop whose steps branch: the nodes before the branch, then a cond
        whose sides run to the end of the step, one from each run, and hand on every value
        either side carries (a side that leaves one alone hands on a copy of it)."""
        run, decision, p = body.run, other.decision, other.decision.position
        split = next((k for k, n in enumerate(it.first) if run.index[n] >= p), len(it.first))
        if isinstance(other, _BreakStep):
            other_nodes = other.nodes
        else:
            o_split = next((k for k, n in enumerate(other.it.first) if other.run.index[n] >= p), len(other.it.first))
            other_nodes = other.it.first[o_split:]
        for node in it.first[:split]:
            self._copy(body, node)
        if isinstance(other, _BreakStep):  # a value the break leaves alone: what the step began with
            other_hand_on = lambda x: (other.run, other.carried[x]) if x in other.carried else (run, x)  # noqa: E731
            other_translate = other.translate
        else:
            back = {y: x for x, y in other.same.items()}
            other_hand_on = lambda x: (other.run, other.carried.get(x, back.get(x)))  # noqa: E731
            other_translate = lambda y, m=other.same: (run, m[y]) if y in m else (other.run, y)  # noqa: E731
        sides: list[_Graph] = []
        results: list[list[Any]] = []
        for side_run, nodes, hand_on, translate in (
            (run, it.first[split:], lambda x: (run, it.carried.get(x, x)), None),
            (other.run, other_nodes, other_hand_on, other_translate),
        ):
            side = _Graph(torch.fx.Graph(), side_run, {}, parent=body, translate=translate)
            for node in nodes:
                self._copy(side, node)
            values = []
            for x in carried:
                value_run, value = hand_on(x)
                if value is None:
                    raise LoopRefused(other.loop, "a value a step carries is not one from before the loop")
                values.append(self._lookup(side, value_run, value))
            sides.append(side)
            results.append(values)
        contiguous = [not _mergeable_layouts(*pair) for pair in zip(*results)]
        for side, values in zip(sides, results):
            side.graph.output(tuple(
                _contiguous(side.graph, v) if copy else _not_aliasing(side.graph, v) for v, copy in zip(values, contiguous)
            ))
        operands = _unite(self, body, sides)
        first = run.nodes[p] if p < len(run.nodes) else run.nodes[-1]
        meta = {k: first.meta[k] for k in ("stack_trace", "nn_module_stack") if k in first.meta}
        joined = self._cond_node(body, decision, sides, operands, meta)
        self.decisions.append((decision, {}, 1))
        outputs = []
        for k in range(len(carried)):
            item = body.graph.call_function(_getitem, (joined, k))
            item.meta.update(meta)
            outputs.append(item)
        return outputs

    def _read_after(self, run: Run, it: Iterations, other: _OtherStep, items: dict) -> None:
        """After a loop whose steps branch, forward reads the values the loop carries from it;
        where one run left a value alone that the other's steps changed, the run read it as
        it was before the loop and the other as its last step left it: both read the loop's."""
        # functionalization remakes a view of a tensor written in place where it is next read:
        # a run whose steps wrote it has views nothing reads that the other has not
        read = lambda n: bool(n.users) or n.is_impure()  # noqa: E731
        ours = [n for n in run.nodes[it.end : -1] if read(n)]
        theirs = [n for n in other.run.nodes[other.it.end : -1] if read(n)]
        if len(ours) != len(theirs):
            raise LoopRefused(other.loop, f"forward after it differs with the branch inside it (`{other.decision.code}`)")
        # each run's last step's value -> the value before the loop (this run's) it replaces
        last = {y: other.same[x] for x, y in other.it.last().items()}
        mine = {y: x for x, y in it.last().items()}
        before = set(run.nodes[: run.index[it.first[0]]]) if it.first else set()
        after_ours = {n: k for k, n in enumerate(ours)}
        after_theirs = {n: k for k, n in enumerate(theirs)}
        differs = f"forward after it reads other values with the branch inside it (`{other.decision.code}`) taken " \
            "the other way"

        def meaning(value: Any, r: Run, final: dict, after: dict, same: Callable[[Any], Any]) -> tuple:
            """What a value forward after the loop reads stands for, the same in either run."""
            if not isinstance(value, torch.fx.Node):
                return ("constant", value)
            if value.op == "get_attr":
                return ("attribute", r.constant(value))
            if value in final:
                return ("last", final[value])
            if value in after:
                return ("after", after[value])
            mapped = same(value)
            if mapped in before:
                return ("before", mapped)
            return ("step", value)  # a step's own value: compare() refuses such a read

        def redirect(key: Any, x: Any, y: Any) -> None:
            xs, xspec = pytree.tree_flatten(x)
            ys, yspec = pytree.tree_flatten(y)
            if xspec != yspec:
                raise LoopRefused(other.loop, differs)
            for a, b in zip(xs, ys):
                ma = meaning(a, run, mine, after_ours, lambda n: n)
                mb = meaning(b, other.run, last, after_theirs, lambda n: other.same.get(n))
                if ma[0] in ("attribute", "constant") or mb[0] in ("attribute", "constant"):
                    if ma[0] != mb[0] or not same_constant(ma[1], mb[1]):
                        raise LoopRefused(other.loop, differs)
                elif ma == mb:
                    continue  # the same value before the loop, after it, or as the loop leaves it
                elif ma == ("before", mb[1]) and mb[0] == "last":
                    # this run's steps left it alone, the other's changed it: the loop's
                    self._redirect.setdefault((id(run), key), {})[a] = self._loop_value(items[mb[1]])
                elif mb == ("before", ma[1]) and ma[0] == "last":
                    continue  # the other's steps left it alone: the loop's, as this run reads
                else:
                    raise LoopRefused(other.loop, differs)

        for u, v in zip(ours, theirs):
            if not same_op(u, v):
                raise LoopRefused(other.loop, f"forward after it differs with the branch inside it (`{other.decision.code}`)")
            if u.op != "get_attr":
                redirect(u, (u.args, u.kwargs), (v.args, v.kwargs))
        redirect("output", run.outputs(self.universe), other.run.outputs(self.universe))

    def _checks_after(self, run: Run) -> dict[torch.fx.Node, list[Any]]:
        """The run's held decisions by the node after which each is asserted, in the graph
        that node is copied into (a branch's, where it was held inside one)."""
        if run.held_at is None:
            raise Unjoinable(run, run)
        return run.held_at

    # -- spans

    def span(self, g: _Graph, start: int, end: int, context: dict[Site, bool], call: str | int | None = None) -> _Graph:
        """Copy nodes ``[start, end)`` of ``g.run`` into ``g``, joining the decisions first
        made there (those ``context`` does not fix) as conds; ``call``: the call a region's
        span ends with, whose decisions asked as it returns belong to the span.  Returns the graph the span
        ends in: ``g``, or, where forward continued with another run's nodes to its end
        (``general.py``), that run's."""
        run = g.run
        final = len(run.nodes) - 1
        pending = [
            d for d in run.decisions
            if (
                start <= d.position < end and id(d) not in self._asked_before
                or start < end == final == d.position  # sides that part at the very end
                or self._asked_inside(d, start, end, call)
            )
            and d.site not in context and id(d) not in self._joining
            and d.site.loop is None  # a branch inside a loop's step is joined in the loop's body
        ]
        if g.parent is not None:
            self._retested(g, start, end, context)
        if not pending:
            self._copy_range(g, start, end)
            return g
        decision = min(pending, key=lambda d: d.position)
        levels: dict[int, int] = {}
        mark = _mark(g)
        kept = (len(self.decisions), len(self.loops), dict(self._worlds), set(self._asked_before), dict(self._redirect))
        self._joining.add(id(decision))
        try:
            while True:
                try:
                    return self._decision(g, start, end, decision, context, levels, call)
                except (_Grow, _Tainted) as again:
                    if isinstance(again, _Tainted) and again.origin != decision.site:
                        raise
                    _rewind(g, mark)
                    self._constant_nodes = {k: v for k, v in self._constant_nodes.items() if k[0] != id(g.graph)}
                    del self.decisions[kept[0]:], self.loops[kept[1]:]
                    self._worlds = dict(kept[2])
                    self._asked_before = set(kept[3])  # the grown region asks them anew
                    self._redirect = dict(kept[4])
                    if isinstance(again, _Tainted):
                        self._exact.add(decision.site)
                    else:
                        levels[again.region] = levels.get(again.region, 0) + 1
        finally:
            self._joining.discard(id(decision))

    def _retested(self, g: _Graph, start: int, end: int, context: dict[Site, bool]) -> None:
        """A side's span may use again a decision first asked before it only where the side
        holds that decision (``context``) or it is being joined: anywhere else the side would
        keep the value its run took there, without a cond, for inputs of either value (a
        value tested, then a branch that returns early on one side, then the value tested
        again on the other)."""
        for d in g.run.decisions:
            if d.site in context or id(d) in self._joining or not d.position < start or d.site.loop is not None:
                continue
            if any(start <= position < end for position, _ in d.uses[1:]):
                raise Retested(d.site, d.code)

    def _asked_inside(self, d: Decision, start: int, end: int, call: str | int | None) -> bool:
        """Whether ``d`` was asked inside the span ``[start, end)``, which ends where ``call``
        returns, but parts where it ends: asked inside that call as it returns, with nothing
        left to make in it on the side the run took.  It is joined there, and not again in
        the span after (``_asked_before``)."""
        if call is None or call not in d.stack or d.position != end or not start <= d.asked < end:
            return False
        self._asked_before.add(id(d))
        return True

    def _decision(
        self, g: _Graph, start: int, end: int, decision: Decision, context: dict[Site, bool], levels: dict[int, int],
        call: str | int | None = None,
    ) -> _Graph:
        """Join ``decision``, the first one first made in the span ``[start, end)``, and the rest
        of the span after its regions; ``call``: the call the span ends with (``span``), whose
        decisions asked as it returns the rest of the span still holds."""
        run = g.run
        line = (decision.site.module, decision.site.location)
        if sum((site.module, site.location) == line for site in context) >= MAX_REPEATS:
            # asked again and again inside its own branches: a loop that goes on or stops as
            # the data says
            raise DataLoop(decision)
        other = self.run_of({**run.schedule, **context, decision.site: not decision.value})
        if other.decision_at(decision.site) is None:
            raise AssertionError(f"the run with {decision.site} flipped did not make that decision")
        while True:
            try:
                comparison = align(run, other, decision, self.universe, levels)
                break
            except Extend as extend:
                comparison = self._general(g, end, other, decision, context, levels)
                if comparison is not None:
                    break
                k = extend.args[0]
                levels[k] = levels.get(k, 0) + 1
        if comparison.a is not run:  # the general run took a later decision another way
            g, run = self._switch(g, comparison.a, decision.position), comparison.a
            decision, end = run.decision_at(decision.site), len(comparison.a.nodes) - 1
        other = comparison.b
        self._check_worlds(g, decision, comparison)
        regions = comparison.regions
        if regions and regions[-1].end_a > end:
            raise Overlap(regions[-1].end_a)  # the enclosing branch ends first: it must grow
        self.decisions.append((decision, dict(context), len(regions)))
        position = start
        for k, region in enumerate(regions):
            try:
                self.span(g, position, region.start_a, context)
            except Overlap as overlap:  # a decision between two regions reaches into the next
                if not k:
                    raise
                raise _Grow(k - 1) from overlap
            if region.call is not None and any(is_number(x) or is_number(y) for x, y in region.slots):
                raise _Grow(k)  # torch.cond hands on tensors only: end where no number leaves
            try:
                self._cond(g, region, decision, other, comparison.mapping, context)
            except Overlap as overlap:  # a decision inside the region reaches past its end
                raise _Grow(k) from overlap
            position = region.end_a
        gen = comparison.generality
        if gen is not None and gen.general == "b" and gen.first is not None and gen.first < end:
            # forward goes on with the general run's nodes, which hold both sides' values
            g = self._continue_with(g, comparison, decision)
            return self.span(g, regions[-1].end_b, len(other.nodes) - 1, context)
        if gen is not None and gen.general == "a":
            self._world(run, gen.values, regions[-1].end_a, decision.site, _asked(other))
        return self.span(g, position, end, context, call)

    # -- a general run's continuation (general.py)

    def _general(
        self, g: _Graph, end: int, other: Run, decision: Decision, context: dict[Site, bool], levels: dict[int, int]
    ) -> Any:
        """The runs compared as general and special after the last region, if they agree so
        (``general.py``); None if not.  The program may go on with a run other than
        ``g.run`` only in the joined graph itself, up to the end of forward."""
        if decision.site in self._exact or any(levels.values()):
            return None  # only where the regions end at the innermost calls: rejoining there is the point
        run = g.run
        top = g.parent is None and end == len(run.nodes) - 1
        for general in ("b", "a"):
            a, b = run, other
            for _ in range(MAX_ADJUSTMENTS):
                try:
                    comparison = align(a, b, a.decision_at(decision.site), self.universe, levels, general)
                except (Extend, Unjoinable):
                    break
                except Adjust as adjust:
                    side, site, value = adjust.args
                    if side == "a":
                        a = self.run_of({**a.schedule, **context, site: value})
                    else:
                        b = self.run_of({**b.schedule, **context, decision.site: not decision.value, site: value})
                    continue
                gen = comparison.generality
                if a is not run and not top:
                    break
                if gen is not None and gen.general == "b" and gen.first is not None and gen.first < end and (
                    not top or not _continuation_reads_known(comparison)
                ):
                    break
                return comparison
        return None

    def _switch(self, g: _Graph, run: Run, position: int) -> _Graph:
        """``g`` going on with ``run``, which made the same nodes as ``g.run`` before ``position``."""
        old = g.run
        if any(x.op != y.op or x.target != y.target for x, y in zip(old.nodes[:position], run.nodes[:position])):
            raise Unjoinable(old, run)
        env = {run.nodes[k]: g.env[old.nodes[k]] for k in range(position) if old.nodes[k] in g.env}
        renamed = bound_alike(zip(run.nodes[:position], old.nodes[:position]))
        for values, frm, origin, asked in self._worlds.get(id(old), ()):
            self._world(run, compose(values, renamed), frm, origin, asked)
        return _Graph(g.graph, run, env, g.parent, g.translate, g.externals)

    def _continue_with(self, g: _Graph, comparison: Any, decision: Decision) -> _Graph:
        """``g`` going on with the general run ``comparison.b`` after the decision's last region."""
        gen, b = comparison.generality, comparison.b
        env = {y: g.env[x] for y, x in comparison.mapping.items() if x in g.env}
        for region in comparison.regions:
            for x, y in region.slots:
                if isinstance(y, torch.fx.Node) and x in g.env:
                    env[y] = g.env[x]
        frm = comparison.regions[-1].end_b
        self._world(b, gen.values, frm, decision.site, _asked(comparison.a))
        for values, _, origin, asked in self._worlds.get(id(g.run), ()):
            self._world(b, compose(values, gen.values), frm, origin, asked)
        return _Graph(g.graph, b, env, g.parent, g.translate, g.externals)

    def _world(self, run: Run, values: dict, frm: int, origin: Site, asked: dict) -> None:
        self._worlds[id(run)] = (*self._worlds.get(id(run), ()), (values, frm, origin, asked))

    def _check_worlds(self, g: _Graph, decision: Decision, comparison: Any) -> None:
        """A decision joined where forward goes on with a general run's nodes, which the
        special run's values take too: where those values do not settle it (to the side the
        general run took, which was compared with the special run), its sides must compute
        nothing from a value the general run assumed something of that the special run's
        values do not bear out (its sides were traced holding the general run's decisions)."""
        run, other = comparison.a, comparison.b
        renamed = None
        for values, frm, origin, asked in self._worlds.get(id(run), ()):
            if decision.position < frm:
                continue
            world = Generality("a", dict(values))
            settled = world.in_special(decision.expression)
            if settled is not None and settled in (sympy.true, sympy.false) and bool(settled) == decision.value:
                continue
            assumed: set = set()
            for earlier in run.decisions:
                if earlier.position >= decision.position:
                    continue
                held = world.in_special(earlier.expression)
                if held is not None and held in (sympy.true, sympy.false) and bool(held) == earlier.value:
                    continue  # the special run's values settle it the same way
                if asked.get(world.in_special(earlier.expression, settle=False)) is not earlier.value:
                    assumed |= set(free_unbacked_symbols(earlier.expression))
            if not assumed:
                continue
            used = set(free_unbacked_symbols(decision.expression))
            if renamed is None:  # the same for every world: the two runs' prefix
                renamed = bound_alike(zip(other.nodes[: decision.position], run.nodes[: decision.position]))
            for r, nodes in ((run, _region_nodes(comparison, "a")), (other, _region_nodes(comparison, "b"))):
                for node in nodes:
                    for symbol in _symbols_of(node):
                        used.add(renamed.get(symbol, symbol) if r is other else symbol)
            if used & assumed:
                raise _Tainted(origin)

    def _cond(self, g: _Graph, region: Region, decision: Decision, other: Run, mapping: dict, context: dict[Site, bool]) -> None:
        run = g.run
        sides: list[_Graph] = []
        for value, side_run, start, end in (
            (decision.value, run, region.start_a, region.end_a),
            (not decision.value, other, region.start_b, region.end_b),
        ):
            translate = None if side_run is run else (lambda y, m=mapping: (run, m[y]) if y in m else (other, y))
            side = _Graph(torch.fx.Graph(), side_run, {}, parent=g, translate=translate)
            self.span(side, start, end, {**context, decision.site: value}, region.call)
            sides.append(side)
        for pair in _rebound(sides, region, mapping):
            region.slot_of[pair[0]] = len(region.slots)
            region.slots.append(pair)
        if any(_asserts(side.graph, self.constants) for side in sides):
            # a cond is dead code to torch (ep.module() drops it) unless forward's results
            # read one of its own: a side that asserts a held decision hands on a value
            # they read, as it was
            kept = _kept_through(run, region, mapping)
            if kept is None:
                raise HeldUnkept(decision.site, decision.code)
            if kept is not True:
                region.slot_of[kept[0]] = len(region.slots)
                region.slots.append(kept)
        results: list[list[Any]] = []
        for side, k in zip(sides, (0, 1)):
            outputs = [pair[k] for pair in region.slots]
            results.append([self._lookup(side, side.run, v) if isinstance(v, torch.fx.Node) else v for v in outputs])
        if any(n.op == "call_function" and n.target in MODE_SWITCHES for side in sides for n in side.graph.nodes):
            raise ModeInside(decision.site, decision.code)
        # a contiguous copy also stands for the copy an operand's memory needs
        contiguous = [not _mergeable_layouts(*pair) for pair in zip(*results)]
        # a result with a data-decided size inside another dimension leaves the cond with that
        # dimension outermost, so that no stride holds the size
        outermost = [_data_sized_dim(pair) for pair in zip(*results)]
        # a float or bool the data decides leaves the cond as a 0-d tensor, read back after it
        scalar = [_scalar_dtype(pair) for pair in zip(*results)]
        for side, values in zip(sides, results):
            side.graph.output(tuple(
                _scalar_tensor(side.graph, v, t) if t is not None
                else _outermost(side.graph, v, d) if d is not None
                else _contiguous(side.graph, v) if copy else _not_aliasing(side.graph, v)
                for v, copy, d, t in zip(values, contiguous, outermost, scalar)
            ))
        try:
            operands = _unite(self, g, sides)
        except KeyError:
            self._unheld(g)  # a side reads such a value
            raise Unread(decision.site, decision.code) from None
        first = (run.nodes[region.start_a] if region.start_a < region.end_a else run.nodes[min(region.start_a, len(run.nodes) - 1)])
        meta = {k: first.meta[k] for k in ("stack_trace", "nn_module_stack") if k in first.meta}
        joined = self._cond_node(g, decision, sides, operands, meta)
        for k, (x, _) in enumerate(region.slots):
            item = g.graph.call_function(_getitem, (joined, k))
            item.meta.update(meta)
            if outermost[k] is not None:
                item = _back_in_place(g.graph, item, outermost[k], x.meta["val"].dim(), meta)
            if scalar[k] is not None:
                item = g.graph.call_function(torch.ops.aten._local_scalar_dense.default, (item,))
                item.meta.update(meta)
            if isinstance(x, torch.fx.Node):
                g.env[x] = item

    def _cond_node(self, g: _Graph, decision: Decision, sides: list[_Graph], operands: list, meta: dict) -> torch.fx.Node:
        """The cond in ``g`` on ``decision``'s predicate between ``sides`` (the side of the
        decision's value first), each side's graph kept as a constant."""
        predicate, negated = self._predicate(g, decision, meta)
        names = []
        for value, side in zip((decision.value, not decision.value), sides):
            name = f"_joined_branch_{len(self.constants)}"
            self.constants[name] = Branch(torch.fx.GraphModule(dict(self.constants), side.graph), value != negated)
            names.append(g.graph.get_attr(name))
        true_branch, false_branch = names if decision.value != negated else names[::-1]
        joined = g.graph.call_function(cond, (predicate, true_branch, false_branch, *operands))
        joined.meta.update(meta)
        return joined

    def _hold(self, g: _Graph, run: Run, check: Any) -> None:
        """The program's assert of a decision held because its other side raises."""
        symbols = sorted(check.fact.free_symbols, key=str)
        if not all(s in check.bindings for s in symbols):
            raise Unjoinable(run, run)
        meta = {k: check.bindings[symbols[0]].meta[k] for k in ("stack_trace", "nn_module_stack") if symbols and k in check.bindings[symbols[0]].meta}
        expression, symbols, nodes, keypaths = self._symbol_nodes(g, check.fact, check.bindings, meta, (check.site, None))
        fact = g.graph.call_function(Predicate(expression, symbols, keypaths), tuple(nodes))
        held = g.graph.call_function(_hold, (fact, check.message))
        for node in (fact, held):
            node.meta.update(meta)

    def _predicate(self, g: _Graph, decision: Decision, meta: dict) -> tuple[torch.fx.Node, bool]:
        """The node the cond branches on, and whether its true side is the decision's False:
        the bool tensor itself for ``bool(t)`` (``Eq(u0, 1)``, ``u0`` its ``.item()``), so the
        program reads no value out of the graph; else the predicate over the symbols."""
        tensor = _bool_item(decision)
        if tensor is not None:
            node, negated = tensor
            return self._lookup(g, g.run, node), negated
        expression, symbols, nodes, keypaths = self._symbol_nodes(
            g, decision.expression, decision.bindings, meta, (decision.site, decision.code)
        )
        node = g.graph.call_function(Predicate(expression, symbols, keypaths), tuple(nodes))
        node.meta.update(meta)
        return node, False

    def _symbol_nodes(
        self, g: _Graph, expression: sympy.Basic, bindings: dict, meta: dict, asker: tuple
    ) -> tuple[sympy.Basic, list, list, list]:
        """``expression`` over values ``g`` can read: the expression (rewritten where a symbol
        is read through a size that is an expression of it), its symbols, the nodes of ``g``
        that give each symbol's value, and the keypath into each.  ``asker``, the site and
        code that ask, names the line where no value gives a symbol (``Unread``)."""
        nodes, keypaths, read = [], [], []
        for symbol in sorted(expression.free_symbols, key=str):
            if symbol not in expression.free_symbols:
                continue  # read through a size that also gave an earlier symbol's part
            binding = bindings[symbol]
            keypath = binding.meta["unbacked_bindings"][symbol]
            if binding.target in ITEM_OPS and keypath:
                # a bool tensor's .item() used as a number: read it as an integer
                source = self._lookup(g, g.run, binding.args[0])
                as_int = g.graph.call_function(torch.ops.aten._to_copy.default, (source,), {"dtype": torch.int64})
                binding_value = g.graph.call_function(torch.ops.aten._local_scalar_dense.default, (as_int,))
                for new in (as_int, binding_value):
                    new.meta.update(meta)
                nodes.append(binding_value)
                keypaths.append(())
                read.append(symbol)
                continue
            item = _item_holding(binding, keypath)
            if item is not None:  # the size of one of several results: read from that result's own node
                binding, keypath = item, keypath[1:]
            if not self._holds(g, binding):
                # made inside an earlier decision's branches, which hand on the tensors it sizes
                found = _sized_by(g, symbol, expression)
                if found is None:  # none does
                    self._unheld(g)
                else:
                    binding, keypath, expression, symbol = found
            try:
                nodes.append(self._lookup(g, g.run, binding))
            except KeyError:
                raise Unread(*asker) from None
            keypaths.append(keypath)
            read.append(symbol)
        return expression, read, nodes, keypaths

    def _unheld(self, g: _Graph) -> None:
        """``g`` reads a value made inside an earlier decision's branches that they do not hand
        on: where ``g`` goes on with a general run's nodes, the last such continuation is joined
        node by node instead (``_Tainted``)."""
        worlds = self._worlds.get(id(g.run), ())
        if worlds:
            raise _Tainted(worlds[-1][2]) from None

    def _holds(self, g: _Graph, node: torch.fx.Node) -> bool:
        """Whether ``g`` can read ``g.run``'s ``node``: copied into it, or (in a branch) from outside."""
        while g is not None:
            if node in g.env or node.op == "get_attr":
                return True
            if g.parent is None or g.translate is not None:
                return False
            g = g.parent
        return False

    # -- the whole graph

    def build(self, base: Run) -> torch.fx.GraphModule:
        """The joined graph of every run, from ``base`` (the run that took each decision's first value)."""
        graph = torch.fx.Graph()
        g = _Graph(graph, base, {})
        for node in base.placeholders:
            new = graph.placeholder(node.name)
            new.meta = dict(node.meta)
            g.env[node] = new
        g = self.span(g, len(base.placeholders), len(base.nodes) - 1, {})
        redirect = self._redirect.get((id(g.run), "output"), {})
        graph.output(tuple(
            self._lookup(g, g.run, redirect.get(v, v)) if isinstance(v, torch.fx.Node) else v
            for v in g.run.outputs(self.universe)
        ))
        # a decision's .item() that only fed its predicate is read no more (the cond reads the tensor)
        owner = types.SimpleNamespace(**self.constants)
        held = lambda n: n.target is _hold or n.is_impure()  # noqa: E731
        # a cond or loop whose side asserts a held decision runs, whatever it returns
        graph.eliminate_dead_code(is_impure_node=lambda n: has_side_effects(n, owner, held))
        return torch.fx.GraphModule(dict(self.constants), graph)


def _asserts(graph: torch.fx.Graph, constants: dict[str, Any]) -> bool:
    """Whether ``graph`` asserts a held decision, at any depth of the conds in it."""
    owner = types.SimpleNamespace(**constants)
    return any(has_side_effects(n, owner, lambda n: n.target is _hold) for n in graph.nodes)


def _kept_through(run: Run, region: Region, mapping: dict) -> tuple[torch.fx.Node, torch.fx.Node] | bool | None:
    """True where forward's results depend on a result of the region's cond already (a slot
    a node after the region reads); else a tensor from before the region that they depend on
    through a node after it, as a slot ``(value in the first run, in the second)``; None if
    there is none."""
    live: set[torch.fx.Node] = set()
    todo = [run.output]
    while todo:
        node = todo.pop()
        if node not in live:
            live.add(node)
            todo.extend(node.all_input_nodes)
    inverse = {x: y for y, x in mapping.items()}
    found = None
    for node in run.nodes[region.end_a:]:
        if node not in live:
            continue
        for x in node.all_input_nodes:
            if x in region.slot_of:
                return True
            at = run.index.get(x, region.start_a)
            if found is None and at < region.start_a and x in inverse and isinstance(x.meta.get("val"), torch.Tensor):
                found = x, inverse[x]
    return found


def _rebound(sides: list[_Graph], region: Region, mapping: dict) -> list[tuple[torch.fx.Node, torch.fx.Node]]:
    """Values from before the region that a cond nested in one of its sides rebinds (a side of
    the nested decision computes another value for them), as slots ``(value in the first
    run, value in the second)`` the region must hand on too: the two runs the region was
    aligned on took the nested decision one way, and agree on those values."""
    first, second = sides
    a, b = first.run, second.run
    inverse = {x: y for y, x in mapping.items()}
    found: dict[torch.fx.Node, torch.fx.Node] = {}
    for side, run, start in ((first, a, region.start_a), (second, b, region.start_b)):
        for node, value in side.env.items():
            if not isinstance(value, torch.fx.Node) or value.op in ("placeholder", "get_attr") or node.op == "get_attr":
                continue
            at = run.index.get(node)
            if at is None or at >= start:
                continue
            x, y = (node, inverse.get(node)) if run is a else (mapping.get(node), node)
            if x is None or y is None or x in region.slot_of or x in found:
                continue
            found[x] = y
    return list(found.items())


def _sized_by(
    g: _Graph, symbol: sympy.Symbol, expression: sympy.Basic
) -> tuple[torch.fx.Node, tuple, sympy.Basic, sympy.Symbol] | None:
    """A node of ``g.run`` that ``g`` holds with a size that gives ``expression`` its value
    without ``symbol``: the node, the keypath to that size, ``expression`` with the size in
    ``symbol``'s place, and the symbol that stands for the size.  The size is ``symbol``
    itself, or an expression of it (and of other symbols of ``expression``) that
    ``expression`` reads ``symbol`` through only: ``Min(1000, u0)``, a count of boxes cut to
    the first thousand, or ``u0 + u1``, two selections concatenated."""
    through = None
    for node in g.run.nodes:
        if node not in g.env:
            continue
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            continue
        for dim, size in enumerate(value.shape):
            if not isinstance(size, torch.SymInt):
                continue
            keypath = (CallMethodKey("size"), SequenceKey(dim))
            size = size.node.expr
            if size == symbol:
                return node, keypath, expression, symbol
            if through is None and symbol in size.free_symbols and size.free_symbols <= expression.free_symbols:
                stand_in = sympy.Symbol(f"{symbol}_size", integer=True)
                rewritten = expression.subs(size, stand_in)
                if symbol not in rewritten.free_symbols:
                    through = node, keypath, rewritten, stand_in
    return through


def _item_holding(binding: torch.fx.Node, keypath: tuple) -> torch.fx.Node | None:
    """For a symbol bound inside one of an op's several results (``torch.where(mask)[0]``'s
    length, keypath ``[0].size(0)``), the node of that result, so a branch reads the one
    tensor instead of the op's whole list, which torch.cond cannot take as an operand."""
    if not keypath or not isinstance(binding.meta.get("val"), (list, tuple)):
        return None
    index = getattr(keypath[0], "idx", None)
    if index is None:
        return None
    return next(
        (user for user in binding.users if user.target is operator.getitem and user.args[1:] == (index,)), None
    )


def _hold(fact: Any, message: str) -> None:
    """Assert ``fact`` (a SymBool) when the program runs: the run of forward that took its
    other side raised."""
    check_value(fact, message)


def _not_aliasing(graph: torch.fx.Graph, value: Any) -> Any:
    """``value``, or a copy of it where it is an operand or a view of one: torch.cond's
    branches may not return their inputs' memory."""
    node = value
    while isinstance(node, torch.fx.Node) and node.op == "call_function" and isinstance(node.target, OpOverload) and aliases(node.target):
        node = next((a for a in node.args if isinstance(a, torch.fx.Node)), None)
    if not (isinstance(node, torch.fx.Node) and node.op == "placeholder"):
        return value
    if not isinstance(value.meta.get("val"), torch.Tensor):
        return value
    return _copy(graph, value)


def _copy(graph: torch.fx.Graph, value: torch.fx.Node, **kwargs: Any) -> torch.fx.Node:
    """A clone of ``value`` in ``graph``, placed where ``value`` was made (its value is
    worked out when the joined graph is traced again)."""
    copy = graph.call_function(torch.ops.aten.clone.default, (value,), kwargs)
    copy.meta = {k: v for k, v in value.meta.items() if k in ("stack_trace", "nn_module_stack")}
    return copy


def _mergeable_layouts(a: Any, b: Any) -> bool:
    """Whether torch.cond can merge the two sides' results ``a`` and ``b``: the same strides,
    or both laid out as a contiguous tensor of their sizes is (where the sizes differ, cond
    derives the merged strides from the merged sizes, and refuses an expanded, sliced or
    permuted result).  Compared as written, so no size is guarded on."""
    va, vb = (x.meta.get("val") if isinstance(x, torch.fx.Node) else None for x in (a, b))
    if not (isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor)) or va.dim() != vb.dim():
        return True
    strides = [tuple(map(str, v.stride())) for v in (va, vb)]
    if strides[0] == strides[1]:
        return _dense(va)
    return all(s == tuple(map(str, v.new_empty(v.shape).stride())) for s, v in zip(strides, (va, vb)))


def _data_sized_dim(values: tuple) -> int | None:
    """For one result of a cond's sides: the dimension, other than the first, whose size only
    the data decides, where it is the one dimension of a size not known at export.

    torch.cond derives its result's strides from the sides' and cannot where a stride holds
    such a size: contiguous, a tensor of sizes ``(2, u0, 4)`` has the stride ``4*Max(1, u0)``
    (a size of 0 may not give a stride of 0), which it finds in no product of sizes, and
    ``4*u0`` it cannot tell from 0.  With that dimension outermost no stride holds it."""
    dims: set[int] = set()
    data_sized = False
    for value in values:
        val = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor):
            return None
        dims |= {d for d, size in enumerate(val.shape) if _plain_int(size) is None}
        data_sized = data_sized or any(free_unbacked_symbols(size) for size in val.shape[1:])
    if len(dims) != 1 or not data_sized:
        return None
    (dim,) = dims
    return dim if dim > 0 else None


def _outermost(graph: torch.fx.Graph, value: torch.fx.Node, dim: int) -> torch.fx.Node:
    """``value`` with dimension ``dim`` moved first, as a contiguous copy (see ``_data_sized_dim``)."""
    rank = value.meta["val"].dim()
    order = [dim, *(d for d in range(rank) if d != dim)]
    moved = graph.call_function(torch.ops.aten.permute.default, (value, order))
    moved.meta = {k: v for k, v in value.meta.items() if k in ("stack_trace", "nn_module_stack")}
    return _copy(graph, moved, memory_format=torch.contiguous_format)


def _back_in_place(graph: torch.fx.Graph, item: torch.fx.Node, dim: int, rank: int, meta: dict) -> torch.fx.Node:
    """The cond's result ``item`` with dimension ``dim`` back where forward had it, contiguous."""
    order = list(range(1, rank))
    order.insert(dim, 0)
    back = graph.call_function(torch.ops.aten.permute.default, (item, order))
    back.meta.update(meta)
    return _copy(graph, back, memory_format=torch.contiguous_format)


def _dense(value: torch.Tensor) -> bool:
    """Whether ``value``'s strides are products of its sizes in some order, as torch.cond
    needs to merge them (a slice of a wider tensor's rows is not); True where a size or
    stride is not a plain number, which the caller's other rule covers."""
    sizes, strides = [], []
    for size, stride in zip(value.shape, value.stride()):
        size, stride = _plain_int(size), _plain_int(stride)
        if size is None or stride is None:
            return True
        if size != 1 and stride != 0:
            sizes.append(size)
            strides.append(stride)
    expected = 1
    for stride, size in sorted(zip(strides, sizes)):
        if stride != expected:
            return False
        expected *= size
    return True


def _plain_int(value: Any) -> int | None:
    if isinstance(value, int):
        return value
    return value.node.maybe_as_int() if isinstance(value, torch.SymInt) else None


def _row_major(node: torch.fx.Node) -> bool:
    """Whether a tensor's strides are those of a contiguous tensor of its sizes, as written
    (no size is guarded on); True for anything but a tensor."""
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor):
        return True
    expected: Any = 1
    for size, stride in reversed(list(zip(value.shape, value.stride()))):
        if str(size) != "1" and str(stride) != str(expected):
            return False
        expected = expected * size
    return True


def _contiguous(graph: torch.fx.Graph, value: Any) -> Any:
    """``value`` as a contiguous copy, in its branch: the same values, in the one layout both
    sides of a cond can share whatever their sizes."""
    if not isinstance(value, torch.fx.Node):
        return value
    return _copy(graph, value, memory_format=torch.contiguous_format)


def _bool_item(decision: Decision) -> tuple[torch.fx.Node, bool] | None:
    """For a decision that is ``bool(t)`` of a one-element bool tensor (``Eq(u0, 1)``, or its
    negation ``Eq(u0, 0)``): the tensor's node and whether the expression negates it."""
    expr = decision.expression
    if not isinstance(expr, (sympy.Eq, sympy.Ne)) or len(expr.free_symbols) != 1:
        return None
    (symbol,) = expr.free_symbols
    other = expr.rhs if expr.lhs == symbol else expr.lhs if expr.rhs == symbol else None
    if other not in (0, 1):
        return None
    binding = decision.bindings.get(symbol)
    if binding is None or binding.target not in ITEM_OPS or not binding.args:
        return None
    source = binding.args[0]
    value = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
    if not isinstance(value, torch.Tensor) or value.dtype != torch.bool or value.numel() != 1:
        return None
    true_when_one = (other == 1) == isinstance(expr, sympy.Eq)
    return source, not true_when_one


def _getitem(values: Any, k: int) -> Any:
    return values[k]


_getitem.__name__ = "getitem"


def _operand_of(body: _Graph, node: Any) -> int | None:
    """The index of the operand of ``body`` (a loop's body) that stands for ``node``."""
    return next((k for k, (_, n) in enumerate(body.externals) if n is node), None)


def _placeholders(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    return [n for n in graph.nodes if n.op == "placeholder"]


def _unite(joiner: Joiner, g: _Graph, sides: list[_Graph]) -> list[torch.fx.Node]:
    """One operand list for both branches: every outside value either reads, once, in order;
    each branch's placeholders are remade to take the whole list."""
    operands: list[torch.fx.Node] = []
    for side in sides:
        for run, node in side.externals:
            value = joiner._lookup(g, run, node)
            if value not in operands:
                operands.append(value)
    for side in sides:
        old = _placeholders(side.graph)
        mine = [joiner._lookup(g, run, node) for run, node in side.externals]
        first = next(iter(side.graph.nodes), None)
        fresh = []
        for k, value in enumerate(operands):
            with side.graph.inserting_before(first) if first is not None else side.graph.inserting_after(None):
                placeholder = side.graph.placeholder(f"arg{k}")
            placeholder.meta = dict(value.meta)
            fresh.append(placeholder)
        for placeholder, value in zip(old, mine):
            placeholder.replace_all_uses_with(fresh[operands.index(value)])
            side.graph.erase_node(placeholder)
    return [_tensor_operand(g.graph, value, [_placeholders(side.graph)[k] for side in sides]) for k, value in enumerate(operands)]


_SCALAR_DTYPES = {torch.SymFloat: torch.float64, torch.SymBool: torch.bool}
"""torch.cond and torch.while_loop take tensors, ints and SymInts as operands: a float or
bool the data decides crosses as a 0-d tensor of this dtype (float64 holds a Python float
exactly)."""


def _scalar_dtype(values: tuple) -> torch.dtype | None:
    """The dtype a branch result crosses torch.cond as when it is a number on either side
    (cond's results are tensors: an integer, a size that differs by side, too), else None."""
    for v in values:
        value = v.meta.get("val") if isinstance(v, torch.fx.Node) else v
        if type(value) in _SCALAR_DTYPES:
            return _SCALAR_DTYPES[type(value)]
        if isinstance(value, torch.SymInt):
            return torch.int64
    return None


def _scalar_tensor(graph: torch.fx.Graph, value: Any, dtype: torch.dtype) -> torch.fx.Node:
    """A 0-d tensor of ``value`` (a node or a plain number), made where ``value`` is."""
    tensor = graph.call_function(torch.ops.aten.scalar_tensor.default, (value,), {"dtype": dtype})
    if isinstance(value, torch.fx.Node):
        tensor.meta.update({k: value.meta[k] for k in ("stack_trace", "nn_module_stack") if k in value.meta})
    return tensor


def _tensor_operand(graph: torch.fx.Graph, value: torch.fx.Node, placeholders: list[torch.fx.Node]) -> torch.fx.Node:
    """``value`` as an operand the control-flow op takes: itself, or for a data-decided float
    or bool a 0-d tensor made in ``graph`` that each of ``placeholders`` (the operand inside a
    branch or body) reads back with ``.item()``."""
    dtype = _SCALAR_DTYPES.get(type(value.meta.get("val")))
    if dtype is None:
        return value
    if dtype is torch.bool:
        # a bool crosses as a whole number, 1 or 0: read back as a tensor's item in each side,
        # the sides would bind one symbol twice, which AOTInductor cannot lower
        number = graph.call_function(torch.sym_ite, (value, 1, 0))
        number.meta.update({k: value.meta[k] for k in ("stack_trace", "nn_module_stack") if k in value.meta})
        for placeholder in placeholders:
            inner = placeholder.graph
            with inner.inserting_after(_placeholders(inner)[-1]):
                flag = inner.call_function(operator.ne, (placeholder, 0))
            placeholder.replace_all_uses_with(flag, delete_user_cb=lambda user, flag=flag: user is not flag)
            flag.meta = dict(placeholder.meta)
        return number
    tensor = _scalar_tensor(graph, value, dtype)
    for placeholder in placeholders:
        if not placeholder.users:  # a side that does not read it reads no number back (no symbol bound twice)
            placeholder.meta = dict(tensor.meta)
            continue
        inner = placeholder.graph
        with inner.inserting_after(_placeholders(inner)[-1]):
            item = inner.call_function(torch.ops.aten._local_scalar_dense.default, (placeholder,))
        placeholder.replace_all_uses_with(item, delete_user_cb=lambda user, item=item: user is not item)
        item.meta = dict(placeholder.meta)
        placeholder.meta = dict(tensor.meta)
    return tensor


def _mark(g: _Graph) -> tuple[int, dict, int]:
    return len(g.graph.nodes), dict(g.env), len(g.externals)


def _rewind(g: _Graph, mark: tuple[int, dict, int]) -> None:
    count, env, externals = mark
    for node in reversed(list(g.graph.nodes)[count:]):
        g.graph.erase_node(node)
    g.env.clear()
    g.env.update(env)
    del g.externals[externals:]


def interpreted(joined: torch.fx.GraphModule) -> Callable[..., Any]:
    """A function that runs ``joined`` node by node (for tracing it again, its node metadata kept)."""
    return lambda *flat: torch.fx.Interpreter(joined).run(*flat)


def _asked(run: Run) -> dict:
    """What ``run`` assumed: each decision's predicate -> the value it took."""
    return {d.expression: d.value for d in run.decisions}


def _region_nodes(comparison: Any, side: str) -> list[torch.fx.Node]:
    """The nodes of the regions in run ``side`` (``'a'`` or ``'b'``) and the ones they read."""
    run = comparison.a if side == "a" else comparison.b
    found: dict[torch.fx.Node, None] = {}
    for region in comparison.regions:
        start, end = (region.start_a, region.end_a) if side == "a" else (region.start_b, region.end_b)
        for node in run.nodes[start:end]:
            found[node] = None
            for read in node.all_input_nodes:
                found[read] = None
    return list(found)


def _symbols_of(node: torch.fx.Node) -> set:
    """The data-decided symbols in ``node``'s value (its sizes, or the number it is)."""
    found: set = set()
    value = node.meta.get("val")
    for v in value if isinstance(value, (list, tuple)) else (value,):
        if isinstance(v, torch.Tensor):
            for size in v.shape:
                found |= set(free_unbacked_symbols(size))
        elif isinstance(v, (torch.SymInt, torch.SymBool, torch.SymFloat)):
            found |= set(free_unbacked_symbols(v))
    return found


def _continuation_reads_known(comparison: Any) -> bool:
    """Whether every value the general run ``b``'s nodes after the last region read is one
    the joined graph holds: made before the decision, a slot of a region, or made after."""
    b = comparison.b
    start = comparison.regions[-1].end_b
    known = set(comparison.mapping)
    for region in comparison.regions:
        known |= {y for _, y in region.slots if isinstance(y, torch.fx.Node)}
    for j in range(start, len(b.nodes)):
        for y in b.nodes[j].all_input_nodes:
            if y not in known and b.index.get(y, -1) < start:
                return False
    return True
