"""Where two runs of forward that took one decision's two values part, and where they meet again.

The runs are identical up to the decision.  After it, they are compared node by node: where
they differ a region starts, and it ends where the innermost call that was running when the
decision was asked returns, in each run: a function of the user's (``UserCalls``), or else
a module call.  From there the runs must agree again, node by node, up to the next use of
the decision (another region) or the end; if they do not, the region ends one call further
out, and so on up to the end of forward.  A
node after a region that reads a value the two runs computed differently reads one of the
region's *slots*: the pair (value in the first run, value in the second)."""

from __future__ import annotations

import operator
from typing import Any

import attrs
import sympy
import torch
import torch.utils._pytree as pytree

from .decide import Decision
from .general import Adjust, Generality, bound_alike, facts, is_copy, is_number, is_size, is_view, same_number, same_view, unify
from .loops import same_constant, same_op
from .state import Expr, refs

__all__ = ["Region", "Run", "align"]


@attrs.define(eq=False, slots=False)
class Run:
    """One traced run of forward, indexed for comparing with another."""

    traced: Any
    """The tracer's run: its graph module, fake mode, inputs and what it recorded."""
    decisions: list[Decision]
    schedule: dict
    calls: dict[torch.fx.Node, tuple[int, ...]] = attrs.field(factory=dict)
    """Node -> the user's function calls it was made in (``UserCalls``)."""
    checks: list = attrs.field(factory=list)
    """The decisions the run held because their other side raises (``decide.Check``)."""
    loops: list = attrs.field(factory=list)
    """The run's loops over data-sized tensors (``loops.Loop``)."""
    states: list = attrs.field(factory=list)
    """The Python state at each question the run asked, after the node it follows
    (``Decider.note_state``)."""

    def __attrs_post_init__(self) -> None:
        _items_after_their_op(self.graph)
        self.nodes: list[torch.fx.Node] = list(self.graph.nodes)
        self.index = {node: i for i, node in enumerate(self.nodes)}
        self.held_at: dict[torch.fx.Node, list[Any]] | None = {}
        """Each held check by the node after which the program asserts it: the last of the
        nodes binding its symbols and the one made before it was asked (None: a check whose
        symbols the graph does not bind)."""
        for check in self.checks:
            bound = [n for n in check.bindings.values() if n in self.index]
            if len(bound) != len(check.bindings) or not bound:
                self.held_at = None
                break
            at = max([*bound, *([check.anchor] if check.anchor in self.index else [])], key=self.index.__getitem__)
            self.held_at.setdefault(at, []).append(check)
        self.state_at: dict[torch.fx.Node | None, list[Any]] = {}
        """The Python state at each question, by the node it follows (None: before any)."""
        for anchor, state in self.states:
            self.state_at.setdefault(anchor if anchor in self.index else None, []).append(state)
        self.placeholders = [n for n in self.nodes if n.op == "placeholder"]
        self.output = self.nodes[-1]
        values = list(self.output.args[0])
        mutated = list(self.traced.recorded.mutated)
        self.updates = dict(zip(mutated, values[: len(mutated)]))
        """Flat input index -> the node of its value at the end of forward, for the inputs written."""
        self.results = values[len(mutated) :]
        asked_after = 0
        for decision in self.decisions:  # where each use lies in the finished graph
            # not before the nodes its predicate reads (a value read, as a number, is not kept
            # as an anchor), nor before a decision asked earlier (whose reads may be such values)
            after = max((self.index[n] + 1 for n in decision.bindings.values() if n in self.index), default=0)
            after = max(after, asked_after)
            decision.uses = [
                (self._past_items(max(after, self.index[anchor] + 1 if anchor in self.index else len(self.placeholders))), stack)
                for anchor, (_, stack) in zip(decision.anchors, decision.uses)
            ]
            decision.position = decision.uses[0][0]
            asked_after = decision.position
            # the last node made when it was first asked: a decision asked as the call it is
            # asked in returns parts there, after the call, but belongs inside it
            first = decision.anchors[0] if decision.anchors else None
            decision.asked = max(after, self.index[first] + 1 if first in self.index else len(self.placeholders)) - 1
        # the calls each node was made in: its module calls, then the user's function calls
        # inside the innermost (an op's items, moved next to it, count as made with it)
        self.stacks: list[tuple[str | int, ...]] = []
        modules: tuple[str, ...] = ()
        functions: tuple[int, ...] = ()
        for node in self.nodes:
            stack = node.meta.get("nn_module_stack")
            modules = tuple(stack) if stack else modules
            source = node.args[0] if node.target is operator.getitem and node.args else node
            functions = self.calls.get(source, self.calls.get(node, functions))
            self.stacks.append(modules + functions)

    def _past_items(self, position: int) -> int:
        """``position`` moved past the items of ops made before it (``_items_after_their_op``
        put them there; the op ran before the decision, whatever the item's first use)."""
        while position < len(self.nodes) - 1:
            node = self.nodes[position]
            if node.target is not operator.getitem or self.index.get(node.args[0], position) >= position:
                break
            position += 1
        return position

    @property
    def graph(self) -> torch.fx.Graph:
        return self.traced.gm.graph

    def outputs(self, universe: list[int]) -> list[Any]:
        """The values forward leaves: each flat input in ``universe`` as it ends (its own
        placeholder if this run did not write it), then the outputs."""
        return [self.updates.get(i, self.placeholders[i]) for i in universe] + list(self.results)

    def decision_at(self, site: Any) -> Decision | None:
        return next((d for d in self.decisions if d.site == site), None)

    def constant(self, node: torch.fx.Node) -> Any:
        """The value a ``get_attr`` node reads."""
        value: Any = self.traced.gm
        for part in str(node.target).split("."):
            value = getattr(value, part)
        return value


def _items_after_their_op(graph: torch.fx.Graph) -> None:
    """Move each ``getitem`` of an op's several results right after the op.  make_fx makes
    an item's node where the item is first used, which may be inside a branch or a loop
    when the op ran before it; the branch would then read the op's whole list of results,
    which torch.cond cannot take as an operand."""
    last: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not operator.getitem:
            continue
        source = node.args[0]
        if not isinstance(source, torch.fx.Node) or source.op != "call_function":
            continue
        after = last.get(source, source)
        if after.next is not node:
            after.append(node)
        last[source] = node


@attrs.define(eq=False)
class Region:
    """Where two runs part: nodes ``[start_a, end_a)`` of the first and ``[start_b, end_b)``
    of the second, and the values leaving it."""

    start_a: int
    end_a: int
    start_b: int
    end_b: int
    call: str | int | None
    """The call the region ends with: a module call's key, or a function call's name in
    ``UserCalls`` (None: it runs to the end of forward)."""
    slots: list[tuple[Any, Any]] = attrs.field(factory=list)
    """(value in the first run, value in the second) for each value read after the region."""
    slot_of: dict[Any, int] = attrs.field(factory=dict)
    """First run's value -> its slot."""

    def holds_a(self, i: int) -> bool:
        return self.start_a <= i < self.end_a

    def holds_b(self, j: int) -> bool:
        return self.start_b <= j < self.end_b


class Extend(Exception):
    """The runs do not meet again where region ``args[0]`` ends: end it one module call further out."""


class Parted(Exception):
    """The runs part before the decision: they were traced differently."""


class Unjoinable(Exception):
    """The runs do not meet again even at the end of forward: they return different
    structures (``args``: the two runs)."""


@attrs.define
class _Comparison:
    a: Run
    b: Run
    regions: list[Region]
    mapping: dict[torch.fx.Node, torch.fx.Node]
    """Second run's node -> first run's node, for the nodes where the runs agree."""
    changed: dict[torch.fx.Node, int] = attrs.field(factory=dict)
    """First run's nodes outside every region that a region's slot stands for afterwards."""
    kept: dict[torch.fx.Node, int] = attrs.field(factory=dict)
    """First run's nodes outside every region read as themselves in both runs: the last
    node of the first run that read them so."""
    generality: Generality | None = None
    """After the last region, where one run is compared as the general case of the other
    (``general.py``)."""
    at: int = 0
    """The first run's node being compared."""
    site: Any = None
    """The decision's site."""

    def region_a(self, node: Any) -> int | None:
        i = self.a.index.get(node)
        return next((k for k, r in enumerate(self.regions) if i is not None and r.holds_a(i)), None)

    def region_b(self, node: Any) -> int | None:
        j = self.b.index.get(node)
        return next((k for k, r in enumerate(self.regions) if j is not None and r.holds_b(j)), None)

    def pair(self, x: Any, y: Any) -> bool:
        """Whether value ``x`` of the first run and ``y`` of the second, read by nodes where
        the runs agree again, are one value: the same node, or a slot of the region that
        computed either (made here on first reading)."""
        gen = self.generality
        if gen is not None:
            x, y = gen.resolve(x), gen.resolve(y)
            loose = (
                (is_number(x) or is_number(y))
                and not (isinstance(x, torch.fx.Node) and isinstance(y, torch.fx.Node) and self.mapping.get(y) is x)
                and self.region_a(x) is None and self.region_b(y) is None
            )
            if loose and (isinstance(x, torch.fx.Node) or isinstance(y, torch.fx.Node) or not same_constant(x, y)):
                gen.mark(self.at)
                return same_number(gen, x, y)
        if not isinstance(x, torch.fx.Node) or not isinstance(y, torch.fx.Node):
            return isinstance(x, torch.fx.Node) == isinstance(y, torch.fx.Node) and same_constant(x, y)
        rx, ry = self.region_a(x), self.region_b(y)
        if rx is None and ry is None:
            if x in self.changed or self.mapping.get(y) is not x:
                return False
            self.kept[x] = max(self.kept.get(x, -1), self.at)
            return True
        if rx is not None and ry is not None and rx != ry:
            return False
        k = rx if rx is not None else ry
        region = self.regions[k]
        if ry is None and y not in self.mapping:
            return False
        if x in region.slot_of:
            return region.slots[region.slot_of[x]][1] is y
        if rx is None and (x in self.changed or self.kept.get(x, -1) >= region.end_a):
            # read as itself after the region too (returned twice on one side, once changed
            # on the other): one value cannot stand for both after the cond
            return False
        if gen is not None and not unify(gen, x, y):
            return False
        region.slot_of[x] = len(region.slots)
        region.slots.append((x, y))
        if rx is None:
            self.changed[x] = k
        return True


def _states_differ(ours: Any, theirs: Any, gen: Generality | None = None) -> bool:
    """Whether two runs asked questions after the same node with different Python state.  A
    question one run asks and the other settles without asking is compared by what it
    asks (``_later_decisions``), not by the state it was asked in.  Compared as general and
    special (``gen``), a symbolic number of the general run is the special run's number
    where it is that number in the special run's values (a count of boxes that is 0 where
    an image found none)."""
    if gen is None:
        return any(x != y for x, y in zip(ours, theirs))
    pairs = zip(theirs, ours) if gen.general == "b" else zip(ours, theirs)
    return any(not _alike(general, special, gen) for general, special in pairs)


def _alike(general: Any, special: Any, gen: Generality) -> bool:
    """Whether the fingerprints (``state.snapshot``) ``general`` and ``special`` agree, a
    symbolic number of the general run standing for the number it is in the special run."""
    if general == special:
        return True
    if isinstance(general, dict) and isinstance(special, dict):
        return general.keys() == special.keys() and all(_alike(general[k], special[k], gen) for k in general)
    if not (isinstance(general, tuple) and isinstance(special, tuple)):
        return False
    if general[:2] == ("symbolic", "SymInt") and special[:1] == ("int",) and isinstance(general[2], Expr):
        value = gen.in_special(general[2].expr)
        return value is not None and value.is_number and value == special[1]
    return len(general) == len(special) and all(_alike(x, y, gen) for x, y in zip(general, special))


def _held(run: Run, node: torch.fx.Node) -> tuple:
    return tuple((check.site, check.value) for check in (run.held_at or {}).get(node, ()))


def _same_node(c: _Comparison, a: torch.fx.Node, b: torch.fx.Node) -> bool:
    """Whether nodes ``a`` (first run) and ``b`` (second) compute the same value, the
    program asserts the same held decisions after them, and the runs ask their next
    questions there with the same Python state."""
    if _held(c.a, a) != _held(c.b, b):
        return False
    gen = c.generality
    # compared alike, before the values (their comparison makes slots); compared as general
    # and special, after them: the node's sizes tell what the general run's symbols are
    ours, theirs = c.a.state_at.get(a, ()), c.b.state_at.get(b, ())
    if gen is None and _states_differ(ours, theirs):
        return False
    if not _same_values(c, a, b):
        return False
    if gen is not None and _states_differ(ours, theirs, gen):
        return False
    # the tensors forward's frames hold where the runs ask next are read there, as a node
    # reads its inputs: a value a region rebinds that no traced side reads after it may be
    # read by a side of a later decision that neither run took
    # (the nodes compared now among them, which agree once this returns)
    return all(
        (x is a and y is b) or c.pair(x, y) for state_a, state_b in zip(ours, theirs) for x, y in refs(state_a, state_b)
    )


def _same_values(c: _Comparison, a: torch.fx.Node, b: torch.fx.Node) -> bool:
    gen = c.generality
    if gen is not None and a.op == b.op == "call_function" and is_view(a) and is_view(b) and (
        a.target != b.target or not _same_args(c, (a.args, a.kwargs), (b.args, b.kwargs))
    ):
        gen.mark(c.at)
        return same_view(c.pair, gen, a, b)
    if not same_op(a, b):
        return False
    if a.op == "get_attr":
        return same_constant(c.a.constant(a), c.b.constant(b))
    if not _same_args(c, (a.args, a.kwargs), (b.args, b.kwargs)):
        return False
    return gen is None or unify(gen, a, b)


def _pass_over(c: _Comparison, i: int, j: int) -> tuple[int, int] | None:
    """Where the runs, compared as general and special, differ at nodes ``i`` and ``j``: pass
    over a size only one of them computes, or a copy only one makes; None if neither."""
    gen = c.generality
    x, y = c.a.nodes[i], c.b.nodes[j]
    first, second = ((x, "a"), (y, "b")) if gen.general == "a" else ((y, "b"), (x, "a"))
    for test in (is_size, is_copy):
        for node, side in (first, second):
            if test(node):
                gen.mark(i)
                if test is is_copy:
                    gen.aliases[node] = node.args[0]
                return (i + 1, j) if side == "a" else (i, j + 1)
    return None


def _same_args(c: _Comparison, x: Any, y: Any) -> bool:
    leaves_x, spec_x = pytree.tree_flatten(x)
    leaves_y, spec_y = pytree.tree_flatten(y)
    if spec_x != spec_y:
        return False
    return all(c.pair(p, q) for p, q in zip(leaves_x, leaves_y))


def _end_of_call(run: Run, start: int, call: str | int | None) -> int:
    """The first node at or after ``start`` outside call ``call`` (the output node for None)."""
    end = len(run.nodes) - 1
    if call is None:
        return end
    for i in range(start, end):
        if call not in run.stacks[i]:
            return i
    return end


def _external_reads(c: _Comparison, k: int) -> None:
    """A region's nodes may read only nodes both runs agree on, or their own region's."""
    region = c.regions[k]
    for i in range(region.start_a, region.end_a):
        for x in c.a.nodes[i].all_input_nodes:
            rx = c.region_a(x)
            if rx is not None and rx != k:
                raise Extend(rx)
    for j in range(region.start_b, region.end_b):
        for y in c.b.nodes[j].all_input_nodes:
            ry = c.region_b(y)
            if ry is not None and ry != k:
                raise Extend(ry)
            if ry is None and y not in c.mapping:
                raise Extend(k)


def align(
    a: Run, b: Run, decision: Decision, universe: list[int], levels: dict[int, int], general: str | None = None
) -> _Comparison:
    """Compare ``a`` (``decision`` True) with ``b`` (False) from the decision on.  ``levels``:
    how many module calls further out than the innermost each region ends (raised by the
    caller on ``Extend``).  ``general``: after the last region, compare run ``'a'`` or
    ``'b'`` as the general case of the other (``general.py``).  Returns the regions and the
    agreement between the runs."""
    p = decision.position
    if len(a.nodes) < p or len(b.nodes) < p or not all(map(same_op, a.nodes[:p], b.nodes[:p])):
        raise Parted(decision.site)
    c = _Comparison(a, b, [], {y: x for x, y in zip(a.nodes[:p], b.nodes[:p])}, site=decision.site)
    uses = sorted(decision.uses)
    used = 0
    i = j = p
    end_a, end_b = len(a.nodes) - 1, len(b.nodes) - 1
    while True:
        if general is not None and c.regions and used == len(uses) and c.generality is None:
            # what the special run knew when it took the decision (a later decision of its own
            # has two sides there too: the general run must ask it as well)
            special = b if general == "a" else a
            c.generality = Generality(general, facts=facts(d for d in special.decisions if d.position <= p))
            _seed(c)
            after = (i, j)
        while i < end_a and j < end_b:
            c.at = i
            if _same_node(c, a.nodes[i], b.nodes[j]):
                c.mapping[b.nodes[j]] = a.nodes[i]
                i, j = i + 1, j + 1
                continue
            step = _pass_over(c, i, j) if c.generality is not None else None
            if step is None:
                break
            i, j = step
        if i == end_a and j == end_b:
            c.at = i
            if _same_outputs(c, universe):
                if c.generality is not None:
                    _later_decisions(c, *after, i, j, finished=True)
                else:
                    k = _differing_decisions(c)
                    if k is not None:
                        if c.regions[k].call is None:
                            raise Unjoinable(a, b)
                        raise Extend(k)
                break
            if c.regions and c.regions[-1].call is None:
                raise Unjoinable(a, b)
        if c.generality is not None:
            _later_decisions(c, *after, i, j, finished=False)
        fresh = [(position, stack) for position, stack in uses[used:] if position <= i]
        used += len(fresh)  # each use of the decision opens at most one region
        if not fresh and c.regions:
            if c.regions[-1].call is None:
                raise Unjoinable(a, b)
            raise Extend(len(c.regions) - 1)
        position, stack = (fresh or [uses[0]])[-1]
        # The region starts where the decision was asked, not where the runs first differ:
        # what lies between is the same in both runs, and a decision asked there belongs inside.
        back = i - max(position, c.regions[-1].end_a if c.regions else p)
        for n in b.nodes[j - back : j]:
            c.mapping.pop(n, None)
        i, j = i - back, j - back
        k = len(c.regions)
        # the innermost call the decision was asked in that either run is still inside (one
        # side may have nothing more to do in it)
        inside = [key for key in reversed(stack) if key in a.stacks[min(i, end_a)] or key in b.stacks[min(j, end_b)]]
        level = levels.get(k, 0)
        call = inside[level] if level < len(inside) else None
        region = Region(i, _end_of_call(a, i, call), j, _end_of_call(b, j, call), call)
        c.regions.append(region)
        _external_reads(c, k)
        i, j = region.end_a, region.end_b
    return c


def _differing_decisions(c: _Comparison) -> int | None:
    """Where the runs made different decisions outside the regions: the region before the
    first (to end further out), or None where they made the same.  Nodes that agree do not
    show it: a run that knows a size settles a test of it without asking, where the other
    asks and happens to take the same side; that side's other side is then never traced."""
    if not c.regions:
        return None
    last = c.regions[-1]

    def outside(run: Run, held: Any, end: int) -> list[Decision]:
        return sorted(
            (
                d for d in run.decisions
                if d.site != c.site and not any(held(r, d.position) for r in c.regions)
                and d.position >= (c.regions[0].start_a if run is c.a else c.regions[0].start_b)
                and not (last.call is None and d.position >= end)
            ),
            key=lambda d: d.position,
        )

    mine = outside(c.a, Region.holds_a, last.end_a)
    theirs = outside(c.b, Region.holds_b, last.end_b)
    for n in range(max(len(mine), len(theirs))):
        x = mine[n] if n < len(mine) else None
        y = theirs[n] if n < len(theirs) else None
        if x is not None and y is not None and x.site == y.site and x.value == y.value:
            continue
        before = [k for k, r in enumerate(c.regions) if (x is not None and r.start_a <= x.position) or (y is not None and r.start_b <= y.position)]
        return before[-1] if before else 0
    return None


def _in_a(c: _Comparison, j: int) -> int:
    """The first run's node that the second run's node ``j`` (or the last before it that the
    runs agree on) stands for."""
    for k in range(min(j, len(c.b.nodes) - 1), -1, -1):
        x = c.mapping.get(c.b.nodes[k])
        if x is not None:
            return c.a.index[x]
    return 0


def _seed(c: _Comparison) -> None:
    """The symbols the runs made before the comparison turned general: a node both runs made
    binds, at the same place in its value, one symbol in each."""
    gen = c.generality
    pairs = ((x, y) if gen.general == "a" else (y, x) for y, x in c.mapping.items())
    for symbol, theirs in bound_alike(pairs).items():
        gen.values.setdefault(symbol, theirs)


def _later_decisions(c: _Comparison, start_a: int, start_b: int, i: int, j: int, *, finished: bool) -> None:
    """The decisions the runs made after the last region, up to nodes ``i`` and ``j``: each
    the general run made must come out, in the special run's values, settled as the general
    run took it (the special run knows the answer and did not ask), or as a decision the
    special run made on the same values, taken the same way.  (They are compared by what they
    ask, not by site: a run that settles one question numbers the next ones on its line
    differently.)  Raises ``Adjust`` where the general run took one the other way: traced
    holding it as the special run did, the runs may agree.  Raises ``Extend`` where,
    ``finished``, a decision of either run has no counterpart."""
    gen = c.generality
    runs = {"a": (c.a, start_a, i), "b": (c.b, start_b, j)}
    general, g_start, g_end = runs[gen.general]
    special, s_start, s_end = runs["b" if gen.general == "a" else "a"]
    asked = {d.expression: d for d in special.decisions if s_start <= d.position <= s_end and d.site != c.site}
    matched = set()
    for decision in general.decisions:
        if not g_start <= decision.position <= g_end or decision.site == c.site:
            continue
        asks = gen.in_special(decision.expression, settle=False)
        theirs, negated = (asked.get(asks), False) if asks is not None else (None, False)
        if theirs is None and asks is not None:
            theirs, negated = asked.get(sympy.Not(asks)), True
        if theirs is not None:
            matched.add(id(theirs))
            if (theirs.value != negated) != decision.value:
                raise Adjust(gen.general, decision.site, theirs.value != negated)
            continue
        settled = gen.in_special(decision.expression)
        if settled is not None and settled in (sympy.true, sympy.false):
            if bool(settled) != decision.value:
                raise Adjust(gen.general, decision.site, bool(settled))
            if gen.general == "b":  # only the general run's nodes hold its other side
                gen.mark(_in_a(c, decision.position))
            continue
        if finished:
            raise Extend(len(c.regions) - 1)
    if finished and any(id(d) not in matched for d in asked.values()):
        raise Extend(len(c.regions) - 1)


def _same_outputs(c: _Comparison, universe: list[int]) -> bool:
    mine, theirs = c.a.outputs(universe), c.b.outputs(universe)
    return len(mine) == len(theirs) and all(c.pair(x, y) for x, y in zip(mine, theirs))
