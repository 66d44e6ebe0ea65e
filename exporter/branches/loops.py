"""Loops over a tensor whose length only the data decides: ``for class_id in
torch.unique(idxs):`` in torchvision's batched NMS, ``for expert_idx in expert_hit:`` in a
mixture of experts.  A trace cannot go round such a loop as many times as eager does, since
it has no count; each run of forward goes round it twice instead, on two symbolic items, and
the join makes the first iteration the body of a ``torch.while_loop`` (the second tells which
values the iterations hand on to each other).

While a run traces, iterating such a tensor gives ``DataLoop``'s items: item ``k`` is
``tensor.index_select(0, counter)`` for a counter that starts at 0 before the loop and goes
up by one at each step, so the two iterations are the same ops on different values.  The
run records where the counter is made and where each step ends (``Loop``).  The join
(``while_loop``) compares the two iterations node by node: where the second reads a value
the first made where the first read one from before the loop, that value is carried from
step to step (the counter, ``keep_mask`` after ``keep_mask[idx] = True``, a sum).  Forward
after the loop may read only the carried values as the last step left them.

What cannot be one loop is refused naming the line: iterations that compute different
things, a value of one iteration read after the loop (items collected into a list), a loop
left early, a branch on a tensor's value inside the loop, a loop inside such a loop."""

from __future__ import annotations

import math
from typing import Any

import attrs
import torch
import torch.utils._pytree as pytree

from .._errors import Category, TraceError
from .._torch_internals import asserts_kept_inside

__all__ = ["WITNESS_STEPS", "DataLoop", "Loop", "after_loops_differ", "LoopBody", "LoopCondition", "LoopRefused", "loop_refusal", "operands_shape_env", "same_constant", "stopped_early", "while_loop"]


@attrs.define(eq=False)
class Loop:
    """One loop over a data-sized tensor, as a run of forward went round it twice."""

    site: Any
    """Where the loop is (``Site``: module call, the ``for`` line, occurrence)."""
    code: str | None
    counter: list[torch.fx.Node | None] = attrs.field(factory=list)
    """The counter's node before the loop, and after each of the two steps."""
    items: list[torch.fx.Node | None] = attrs.field(factory=list)
    """The ``index_select`` node of each step's item (its first argument is the tensor)."""
    finished: bool = False
    """Whether the loop asked for a third item (and was told it was done)."""
    taken: int = 0
    """How many items the loop has taken."""


class LoopRefused(Exception):
    """A loop over a data-sized tensor that cannot be one ``torch.while_loop``: ``args`` are
    the loop and why."""


def loop_refusal(loop: Loop, why: str, hint: str | None = None) -> TraceError:
    """The error for a loop over a data-sized tensor that cannot be captured."""
    return TraceError(
        "forward() loops over a tensor whose length only the data decides"
        + (f" (`{loop.code}`)" if loop.code else "")
        + f", and the loop cannot be one torch.while_loop: {why}",
        category=Category.BRANCH_CAPTURE,
        location=loop.site.location,
        hint=hint or "compute each step from the step's item and what the steps before it left (a running sum, a "
        "mask written in place), and read only those after the loop; or export with branches='draft' to follow "
        "the example's count",
    )


class DataLoop:
    """The iterator a run of forward gets for ``iter(tensor)`` of a data-sized tensor: two
    symbolic items, then done (see the module doc)."""

    STEPS = 2

    def __init__(self, tensor: torch.Tensor, loop: Loop, anchor: Any, steps: int = STEPS) -> None:
        self.tensor, self.loop, self._anchor, self.steps = tensor, loop, anchor, steps
        self.counter = torch.zeros((), dtype=torch.long, device=tensor.device)
        loop.counter.append(anchor())
        self.taken = 0

    def __iter__(self) -> DataLoop:
        return self

    def __next__(self) -> torch.Tensor:
        if self.taken:
            self.counter = self.counter + 1
            self.loop.counter.append(self._anchor())
        if self.taken == self.steps:
            self.loop.finished = True
            raise StopIteration
        self.taken += 1
        self.loop.taken = self.taken
        item = torch.ops.aten.index_select.default(self.tensor, 0, self.counter.reshape(1))
        self.loop.items.append(self._anchor())
        return item.squeeze(0)


class LoopCondition:
    """``while_loop``'s condition: the counter (carried value ``counter``) is below the
    length of the tensor looped over (operand ``tensor``)."""

    def __init__(self, counter: int, tensor: int) -> None:
        self.counter, self.tensor = counter, tensor
        self.__name__ = "loop_condition"

    def __call__(self, *operands: Any) -> torch.Tensor:
        return operands[self.counter] < operands[self.tensor].shape[0]


class LoopBody:
    """``while_loop``'s body: one iteration's graph run through an interpreter (so that
    tracing it again keeps each node's stack trace and module stack); ``order`` maps the
    loop's operands (carried values, then the others) to the graph's placeholders."""

    def __init__(self, gm: torch.fx.GraphModule, order: list[int]) -> None:
        self.gm, self.order = gm, order
        self.__name__ = "loop_body"

    def __call__(self, *operands: Any) -> tuple[Any, ...]:
        with asserts_kept_inside(operands_shape_env(operands)):
            return tuple(torch.fx.Interpreter(self.gm).run(*(operands[k] for k in self.order)))


def operands_shape_env(operands: Any) -> Any:
    """The ShapeEnv of the first operand that has one (a fake tensor's, a SymInt's)."""
    for value in operands:
        if isinstance(value, torch.Tensor):
            mode = getattr(value, "fake_mode", None)
            if mode is not None and mode.shape_env is not None:
                return mode.shape_env
        env = getattr(getattr(value, "node", None), "shape_env", None)
        if env is not None:
            return env
    return None


def while_loop(condition: LoopCondition, body: LoopBody, carried: tuple, additional: tuple) -> Any:
    """``torch.ops.higher_order.while_loop`` of a captured loop."""
    return torch.ops.higher_order.while_loop(condition, body, tuple(carried), tuple(additional))


while_loop.__name__ = "while_loop"


WITNESS_STEPS = (1, 4)
"""How many times each witness run goes round each loop (``after_loops_differ``): once,
where Python tests for a single step (``if count == 1``), and more often than the two
steps of a run, where it stops after a few (``islice(rows, 3)``)."""


def after_loops_differ(run: Any, witness: Any) -> tuple[Loop, str] | None:
    """Where forward outside its loops differs between ``run`` and ``witness``, the same run
    of forward going round each loop another number of times (``WITNESS_STEPS``): the loop
    before the first difference and why; None where they agree.  The program goes round as often as the data
    says, so forward may not depend on the count in Python (a counter, a list's length, an
    attribute changed each step, a ``break`` after some steps), which no graph shows."""
    stopped = stopped_early(run, witness.loops)
    if stopped is not None:
        return stopped
    ours, theirs = _outside_loops(run), _outside_loops(witness)
    for x, y in zip(ours, theirs):
        if x.op != y.op or (x.op != "get_attr" and x.target != y.target) or not _same_leaves(run, x, witness, y):
            return _loop_before(run, x), _COUNTED
    if len(ours) != len(theirs):
        return run.loops[-1], _COUNTED
    return None


def stopped_early(run: Any, loops: list[Loop]) -> tuple[Loop, str] | None:
    """The first of a witness run's ``loops`` that stopped before its items ran out, as
    ``run``'s loop at the same site, and why; None where every one went to its end."""
    stopped = next((loop for loop in loops if not loop.finished), None)
    if stopped is None:
        return None
    mine = next((loop for loop in run.loops if loop.site == stopped.site), stopped)
    return mine, (
        "it stops after a number of steps Python counts (a break after some steps, enumerate's count, zip with a "
        "range, islice)"
    )


_COUNTED = (
    "what forward does after it depends on how many times it goes round (a count, a list's length or an "
    "attribute Python changes at each step)"
)


def _outside_loops(run: Any) -> list[torch.fx.Node]:
    """``run``'s nodes outside its loops' steps, in order."""
    inside: set[int] = set()
    for loop in run.loops:
        marks = [run.index[m] for m in loop.counter if m in run.index]
        if marks:
            inside.update(range(marks[0] + 1, marks[-1] + 1))
    return [n for i, n in enumerate(run.nodes) if i not in inside]


def _same_leaves(run: Any, x: torch.fx.Node, witness: Any, y: torch.fx.Node) -> bool:
    if x.op == "get_attr":
        return same_constant(run.constant(x), witness.constant(y))
    xs, xspec = pytree.tree_flatten((x.args, x.kwargs))
    ys, yspec = pytree.tree_flatten((y.args, y.kwargs))
    if xspec != yspec:
        return False
    return all(
        isinstance(a, torch.fx.Node) == isinstance(b, torch.fx.Node) and (isinstance(a, torch.fx.Node) or same_constant(a, b))
        for a, b in zip(xs, ys)
    )


def _loop_before(run: Any, node: torch.fx.Node) -> Loop:
    at = run.index[node]
    before = [loop for loop in run.loops if loop.counter and loop.counter[0] in run.index and run.index[loop.counter[0]] < at]
    return before[-1] if before else run.loops[0]


def same_constant(x: Any, y: Any) -> bool:
    """Whether two constants a graph reads (an attribute's tensor, an argument) are the same
    value: same type, equal (NaN equal to NaN), a tensor of the same shape, dtype and values."""
    if type(x) is not type(y):
        return False
    if isinstance(x, float) and math.isnan(x) and math.isnan(y):
        return True
    if isinstance(x, torch.Tensor):
        return x is y or (x.shape == y.shape and x.dtype == y.dtype and bool(torch.equal(x, y)))
    try:
        return bool(x == y)
    except Exception:  # noqa: BLE001 - values that cannot be compared are not the same
        return False


@attrs.define
class Iterations:
    """The two iterations of a loop in a run's graph, compared: see ``compare``."""

    hoisted: list[torch.fx.Node]
    """Nodes made inside the loop's span that compute only from values made before it (a size
    read first inside the loop): computed once, before the loop."""
    first: list[torch.fx.Node]
    second: list[torch.fx.Node]
    carried: dict[torch.fx.Node, torch.fx.Node]
    """Value before the loop -> the first iteration's node that replaces it for the next step."""
    tensor: torch.fx.Node
    """The tensor looped over."""
    end: int
    """The index, in the run, of the first node after the loop."""


def compare(run: Any, loop: Loop, constant: Any) -> Iterations:
    """Split the loop's span of ``run`` into its two iterations and find what they carry.
    ``constant(node)`` reads a get_attr node's value.  Raises ``LoopRefused``.

    Functionalization remakes a view written through where it is next read, or on its next
    write: the steps of a loop that writes through a view may then differ in views that
    nothing reads.  Where the steps as traced differ, they are compared again without those."""
    try:
        return _compare(run, loop, constant, keep_unread_views=True)
    except LoopRefused as as_traced:
        try:
            return _compare(run, loop, constant, keep_unread_views=False)
        except LoopRefused:
            raise as_traced from None


def _compare(run: Any, loop: Loop, constant: Any, keep_unread_views: bool) -> Iterations:
    index = run.index
    marks = loop.counter
    if not loop.finished or len(marks) != 3 or any(m not in index for m in marks) or any(i not in index for i in loop.items):
        raise LoopRefused(loop, "it is left before its end (a break, a return, or items taken one at a time)")
    start, middle, end = (index[m] for m in marks)
    span = run.nodes[start + 1 : end + 1]
    spanned = set(span)
    hoisted: list[torch.fx.Node] = []
    for node in span:
        if isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool)) and all(
            n not in spanned or n in hoisted for n in node.all_input_nodes
        ) and not node.meta.get("unbacked_bindings"):
            hoisted.append(node)
    kept = set(hoisted)
    if not keep_unread_views:
        kept |= {n for n in span if not n.users and not n.is_impure() and n not in marks}
    first = [n for n in run.nodes[start + 1 : middle + 1] if n not in kept]
    second = [n for n in run.nodes[middle + 1 : end + 1] if n not in kept]
    if len(first) != len(second):
        raise LoopRefused(loop, "its two iterations compute different things (one makes more ops than the other)")
    at_first = {n: k for k, n in enumerate(first)}
    at_second = {n: k for k, n in enumerate(second)}
    carried: dict[torch.fx.Node, torch.fx.Node] = {}
    for a, b in zip(first, second):
        if a.op != b.op or (a.target != b.target and a.op != "get_attr"):
            raise LoopRefused(loop, f"its two iterations compute different things ({a.target} in one, {b.target} in the other)")
        if a.op == "get_attr":
            if not same_constant(constant(a), constant(b)):
                raise LoopRefused(loop, "its two iterations read different constants")
            continue
        xs, xspec = pytree.tree_flatten((a.args, a.kwargs))
        ys, yspec = pytree.tree_flatten((b.args, b.kwargs))
        if xspec != yspec:
            raise LoopRefused(loop, f"its two iterations call {a.target} differently")
        for x, y in zip(xs, ys):
            if not isinstance(x, torch.fx.Node) or not isinstance(y, torch.fx.Node):
                if isinstance(x, torch.fx.Node) or isinstance(y, torch.fx.Node) or not same_constant(x, y):
                    raise LoopRefused(loop, f"its two iterations call {a.target} with different values (a Python "
                                      "number that changes from step to step, such as enumerate's count)")
                continue
            if x in at_first:
                if at_second.get(y) != at_first[x]:
                    raise LoopRefused(loop, "its two iterations compute different things")
            elif y in at_first:  # the first iteration's value where the first read one from before
                if carried.setdefault(x, y) is not y:
                    raise LoopRefused(loop, "one value before the loop is replaced by two different ones")
            elif x is not y:
                raise LoopRefused(loop, "its two iterations read different values from before the loop")
    counter = marks[0]
    if carried.get(counter) is not first[-1] or first[-1] is not marks[1]:
        raise LoopRefused(loop, "its steps are not counted as expected")
    nexts = {second[at_first[y]] for y in carried.values()}
    later = spanned
    for node in first:
        if any(user not in later for user in node.users):
            raise LoopRefused(loop, "a value one iteration made is read after the loop (items collected in a "
                              "list, or a value of the last step that no step hands on)")
    for node in second:
        if node not in nexts and any(user not in later for user in node.users):
            raise LoopRefused(loop, "a value one iteration made is read after the loop (items collected in a "
                              "list, or a value of the last step that no step hands on)")
    tensor = loop.items[0].args[0]
    return Iterations(hoisted, first, second, carried, tensor, end + 1)
