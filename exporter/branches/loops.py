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

Python state the steps change is found, not sampled (``state.py``): the run fingerprints
what the loop's frames reach before the loop and after each step.  A number the steps rebind
in the loop's own frame (a count, a flag) is carried: each step starts from it read out of a
0-d tensor and hands its new value on as one, so the while_loop carries it and forward after
the loop reads what the last step left, as eager does after any count, none included.  A
list of the loop's frame the steps append to is a buffer and a count the loop carries
(``lists.py``).  Any other local the steps rebind is unbound after the loop, so forward
fails where it reads it; an attribute, a container's contents or another frame's local the
steps change is refused.

A step may branch once on a value it computes (``if tokens.numel() == 0: continue``): every
step asks the same question, one decision taken the same way in every step of a run, and
the join makes it a cond in the body whose sides run to the end of the step
(``Joiner._step_cond``).

One side of that branch may ``break``.  Python drops the iterator there (``DataLoop.__del__``
sees the ``break`` statement): the step hands on its values as they are at the break, sets
the loop's flag (a bool carried with the counter, which the loop's condition reads) and
binds the carried numbers for forward after the loop.  The first run to break learns which
side breaks (``BreakFound``: the runs start over); from then on a run goes on unless its
schedule asks for the break, and the run that does goes on at its first step and breaks at
its second, so that the join can tell what the break reads (``Joiner._break_step``).

What cannot be one loop is refused naming the line: iterations that compute different
things, a value of one iteration read after the loop (items collected into a list), a loop
left by a ``return`` or by a ``break`` not under the step's branch, a second branch in a
step or one on a value from before the loop, a loop inside such a loop, a loop Python does
not run itself over the tensor (``enumerate``, ``zip``, ``islice``, a comprehension), whose
own count no frame shows."""

from __future__ import annotations

import linecache
import math
from typing import Any

import attrs
import sympy
import torch
import torch.utils._pytree as pytree

from .._errors import Category, TraceError
from .._torch_internals import asserts_kept_inside, check_value, free_unbacked_symbols, runtime_check
from .lists import ListNeeded, ListShape, StepList, same_sizes
from .meeting import has_else, leaves_by_break
from .state import MISSING, Change, Kind, assigned_at, changes, kind_of, scope, set_local, snapshot, tensors_held, unbind_local

__all__ = ["WITNESS_STEPS", "BreakFound", "Bound", "CarryNeeded", "DataLoop", "Loop", "after_loops_differ", "LoopBody", "LoopCondition", "LoopRefused", "loop_refusal", "operands_shape_env", "same_constant", "same_op", "stopped_early", "while_loop"]


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
    carried: tuple[str, ...] = ()
    """The numbers of the loop's frame carried from step to step, by name."""
    state: list[list[torch.fx.Node | None]] = attrs.field(factory=list)
    """The 0-d tensor of each carried number before the loop and after each step."""
    carried_symbols: dict[Any, str] = attrs.field(factory=dict)
    """The symbol each step reads a carried number as -> the number's name."""
    left: bool = False
    """Whether forward dropped the loop's iterator before its end other than by a ``break``
    under a branch inside the step (a ``return``, an exception, a ``break`` every step takes)."""
    asks: list[tuple[int, Any, bool, torch.fx.Node | None, tuple[torch.fx.Node, ...]]] = attrs.field(factory=list)
    """Each time a step asked its branch: the step's count, the branch's site, the side the
    step took, the last node made before, and the nodes that bind the symbols it tested."""
    exited: bool = False
    """Whether a step left the loop by a ``break`` on the side of its branch the run took
    (``DataLoop._exit``): one step, up to the break, then forward after the loop."""
    exit_mark: torch.fx.Node | None = None
    """In a run whose step broke out: the last node the step made before forward went on."""
    done: list[torch.fx.Node | None] = attrs.field(factory=list)
    """For a loop that a step may leave: its flag (a bool 0-d tensor) before the loop, and
    in a run whose step broke out, the flag that step sets."""
    zipped: list[torch.fx.Node | None] = attrs.field(factory=list)
    """For ``for a, b in zip(x, y):``: the ``index_select`` node of each step's item of each
    tensor zipped after the first (whose are ``items``), in order."""
    lists: tuple[str, ...] = ()
    """The lists of the loop's frame its steps append to, each a buffer and a count the loop
    carries (``lists.py``)."""
    exit_error: BaseException | None = None
    """What a step's break found that the run cannot go on with (raised after the run)."""
    symbols_before: int = 0
    """How many symbols the ShapeEnv knew when the loop began: a symbol made later is made by
    a step (``Decider._in_step``)."""
    unbound: dict[str, tuple[str, str]] = attrs.field(factory=dict)
    """Locals the steps rebind and the trace unbound after the loop: how they changed, and
    what to do instead."""


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


class BreakFound(TraceError):
    """A step broke out of a loop not yet known to: the runs start over with the loop's flag,
    and each run takes the branch at ``site`` (inside the step) away from ``value``, the side
    that breaks, unless it asks for that side."""

    def __init__(self, loop: Loop, site: Any, value: bool) -> None:
        super().__init__(
            f"a step breaks out of the loop (`{loop.code}`) on both sides of its branch",
            category=Category.BRANCH_CAPTURE, location=loop.site.location,
            hint="break on one side of the branch only, or export with branches='draft' to follow the example",
        )
        self.site, self.value = site, value


class CarryNeeded(TraceError):
    """A loop's steps rebind numbers of its frame that the run did not carry (``names``): the
    runs start over carrying them.  Raised through the model's code, so an ``ExportError``."""

    def __init__(self, loop: Loop, names: tuple[str, ...]) -> None:
        super().__init__(
            f"the steps of the loop rebind {', '.join(f'`{n}`' for n in names)}, which the runs must carry",
            category=Category.BRANCH_CAPTURE, location=loop.site.location,
        )
        self.site, self.names = loop.site, names


class DataLoop:
    """The iterator a run of forward gets for ``iter(tensor)`` of a data-sized tensor: two
    symbolic items, then done (see the module doc).  ``frame``, the user's frame whose
    ``for`` statement goes round, is fingerprinted before the loop and after each step;
    ``carried`` names its numbers that go round as values of the loop."""

    STEPS = 2

    def __init__(
        self, tensor: torch.Tensor, loop: Loop, anchor: Any, steps: int = STEPS, frame: Any = None,
        carried: tuple[str, ...] = (), breaks: tuple[Any, bool] | None = None, lists: dict[str, ListShape] | None = None,
        zipped: int = 1, convert: Any = None,
    ) -> None:
        self.tensor, self.loop, self._anchor, self.steps = tensor, loop, anchor, steps
        self.frame = frame
        self.frames = scope(frame) if frame is not None else []
        loop.carried = tuple(carried)
        self.lists: dict[str, StepList] = {}
        """The lists the steps append to, each a buffer and a count (``lists.py``)."""
        for name, shape in (lists or {}).items():
            value = frame.f_locals.get(name, MISSING) if frame is not None else MISSING
            if type(value) is not list or value:
                raise loop_refusal(loop, f"its steps append to `{name}`, which is {_described_list(value)} before the "
                                   "loop where another run found an empty list", _HINT_STATE)
            shared = _shared(frame, {name: value})
            if shared:
                raise loop_refusal(loop, f"its steps append to a list that {' and '.join(f'`{n}`' for n in shared)} "
                                   "both hold, which the program carries as a buffer under one name", _HINT_STATE)
            self.lists[name] = StepList(name, loop, tensor.shape[0], shape)
            set_local(frame, name, self.lists[name])
        loop.lists = tuple(self.lists)
        self.states: list[dict] = []
        self.kinds: dict[str, Kind] = {}
        self.values: list[list[torch.Tensor]] = []
        self.tensors_before = tensors_held(self.frames) if frame is not None else {}
        self.held_before = set(self.tensors_before.values())
        self.rebound: list[tuple[int, str, str | None]] = []
        """Where a step bound a tensor that existed before the loop in place of another."""
        if frame is not None:
            self.states.append(snapshot(self.frames, frozenset(loop.carried)))
            self._hand_on()
        self.breaks = breaks
        """(the site of the branch inside the step, the side that breaks), where known."""
        self.has_else = frame is not None and has_else(frame)
        if breaks is not None:  # a step may break out: the flag the loop's condition reads
            torch.zeros((), dtype=torch.bool, device=tensor.device)
            loop.done.append(anchor())
        self.counter = torch.zeros((), dtype=torch.long, device=tensor.device)
        loop.counter.append(anchor())
        self.taken = 0
        self.zipped = zipped
        """How many tensors ``zip`` goes over side by side, this one first."""
        self.convert = convert
        """What each item becomes before the step gets it (a number, for ``range``)."""
        self.followers = 0
        """How many of them have their iterators (counted only: an iterator kept here would
        keep this one alive past a ``break``, which is seen where Python drops it)."""
        self._zip_at = frame.f_lasti if zipped > 1 and frame is not None else None

    def __iter__(self) -> DataLoop:
        return self

    def takes_follower(self, frame: Any) -> bool:
        """Whether ``zip``, called in ``frame`` to make this loop, asks for the iterator of
        another of its tensors now."""
        return (
            self._zip_at is not None and self.taken == 0 and frame is self.frame and frame.f_lasti == self._zip_at
            and self.followers < self.zipped - 1
        )

    def follower(self, tensor: torch.Tensor) -> ZipFollower:
        """The iterator of another tensor ``zip`` goes over beside this one."""
        self.followers += 1
        return ZipFollower(tensor, self)

    def __next__(self) -> torch.Tensor:
        if not self.taken and self.followers != self.zipped - 1:
            raise loop_refusal(
                self.loop, "it goes over the tensor side by side (`zip`) with something other than tensors whose length "
                "only the data decides, whose own count Python keeps where no frame shows it",
                hint="zip only tensors whose length the data decides (a selection, `unique`, `nonzero`), or go over one "
                "tensor that holds both; or export with branches='draft' to follow the example's count",
            )
        if self.taken:
            if self.frame is not None:
                self.states.append(snapshot(self.frames, frozenset(self.loop.carried)))
                self._find_rebound()
                self._hand_on()
            self.counter = self.counter + 1
            self.loop.counter.append(self._anchor())
        if self.taken == self.steps:
            self.loop.finished = True
            if self.frame is not None:
                self._leave()
            raise StopIteration
        self.taken += 1
        self.loop.taken = self.taken
        self._take()
        item = torch.ops.aten.index_select.default(self.tensor, 0, self.counter.reshape(1))
        self.loop.items.append(self._anchor())
        item = item.squeeze(0)
        return item if self.convert is None else self.convert(item)

    def _hand_on(self) -> None:
        """Each carried number as the 0-d tensor the loop carries: before the loop, its value
        there; after a step, the value the step left."""
        tensors, marks = [], []
        for name in self.loop.carried:
            value = self.frame.f_locals.get(name, MISSING)
            kind = _kind(value)
            expected = self.kinds.setdefault(name, kind) if kind is not None else None
            if kind is None or kind is not expected:
                raise loop_refusal(self.loop, f"it carries `{name}`, which is {_described(value)} "
                                  + ("before it" if not self.values else "after a step")
                                  + (f" and {expected.name.lower()} elsewhere" if expected is not None else "")
                                  + ": a while_loop carries a number of one kind")
            tensors.append(_as_tensor(value, kind, self.tensor.device))
            marks.append(self._anchor())
        self.values.append(tensors)
        self.loop.state.append(marks)

    def _grown_list(self, change: Change) -> ListShape | None:
        """What the items are of a list of the loop's frame that was empty before the loop and
        that each step grew by at most one tensor, all of one size, dtype and device, sizes
        the loop does not decide; None for any other change."""
        if change.before != ("object", "list", 0):
            return None
        lengths = [a[2] if isinstance(a, tuple) and a[:2] == ("object", "list") else None for a in change.after]
        if None in lengths or any(not 0 <= b - a <= 1 for a, b in zip([0, *lengths], lengths)):
            return None
        value = self.frame.f_locals.get(change.local)
        if type(value) is not list or not value or len(value) != lengths[-1]:
            return None
        if not all(isinstance(v, torch.Tensor) for v in value):
            return None
        first = value[0]
        sizes = tuple(first.shape)
        if any(v.dtype != first.dtype or v.device != first.device or not same_sizes(tuple(v.shape), sizes) for v in value):
            return None
        env = getattr(getattr(self.tensor, "fake_mode", None), "shape_env", None)
        before = set(list(env.var_to_range)[: self.loop.symbols_before]) if env is not None else set()
        for size in sizes:
            if isinstance(size, torch.SymInt) and not size.node.expr.free_symbols <= before:
                return None
        return sizes, first.dtype, first.device

    def _find_rebound(self) -> None:
        """Note each place whose tensor the step replaced by one that existed before the loop
        (``total = other``): the graph reads that tensor after the loop either way, whatever
        the count, so it cannot tell none from some."""
        for place, now in tensors_held(self.frames).items():
            if now != self.tensors_before.get(place, now) and now in self.held_before and place not in self.rebound:
                self.rebound.append(place)

    def _take(self) -> None:
        """Bind each carried number, for the step about to run, to the value the loop hands it."""
        for name, tensor in zip(self.loop.carried, self.values[-1] if self.values else ()):
            value = _as_number(tensor, self.kinds[name])
            for symbol in getattr(getattr(value, "node", None), "expr", sympy.S.Zero).free_symbols:
                self.loop.carried_symbols[symbol] = name
            set_local(self.frame, name, value)

    def __del__(self) -> None:
        # Python drops a for statement's iterator where the loop ends: before its end, the
        # loop was left (a break, a return, an exception)
        loop = self.loop
        if loop.finished or loop.exited:
            return
        asked = loop.asks[-1] if loop.asks else None
        if asked is None or asked[0] != self.taken or self.frame is None or not leaves_by_break(self.frame):
            loop.left = True
            return
        try:
            self._exit(asked[1], asked[2])
        except TraceError as error:  # a __del__ cannot raise: the run raises it when it ends
            loop.exit_error = error
        except Exception as error:  # noqa: BLE001
            loop.exit_error = loop_refusal(loop, f"its step's break could not be followed ({type(error).__name__}: {error})")

    def _exit(self, site: Any, value: bool) -> None:
        """A ``break`` on the side ``value`` of the branch at ``site`` inside the step: the
        step's values as it left them are what forward after the loop reads, and it sets the
        loop's flag.  Where the loop is not known to break there: the runs start over."""
        if self.has_else:
            raise loop_refusal(
                self.loop, "a step may break out of it, and it has an `else:` block (or its source cannot be read), "
                "which runs only where no step breaks: forward after a break and after the last step would differ "
                "where no graph shows it", hint="set a flag before the break (`found = True`) and test it after the "
                "loop instead of the `else:`",
            )
        if self.breaks != (site, value):
            raise BreakFound(self.loop, site, value)
        self.states.append(snapshot(self.frames, frozenset(self.loop.carried)))
        self._find_rebound()
        self._hand_on()
        torch.ones((), dtype=torch.bool, device=self.tensor.device)
        self.loop.done.append(self._anchor())
        self.loop.exit_mark = self._anchor()
        self.loop.exited = True
        self._leave()

    def _leave(self) -> None:
        """After the last step, or a step's break: what the steps changed is carried, unbound
        or refused, and each carried number is bound to what the step left."""
        if self.rebound:
            k, name, attribute = self.rebound[0]
            what = f"`{name}.{attribute}`" if attribute else f"`{name}`"
            raise loop_refusal(
                self.loop, f"its steps bind {what} to a tensor made before the loop, which forward reads as it is "
                "whether the loop goes round or not", _HINT_STATE,
            )
        found = changes(self.states)
        needed, unbound, refused = [], [], []
        grown: dict[str, ListShape] = {}
        for change in found:
            name = change.local
            if name is None:
                refused.append(change)
                continue
            shape = self._grown_list(change)
            if shape is not None:
                grown[name] = shape
                continue
            kinds = {_fingerprint_kind(v) for v in (change.before, *change.after)}
            if change.before != MISSING and len(kinds) == 1 and None not in kinds:
                needed.append(name)
            elif change.before == MISSING and all(_graph_value(v) for v in change.after):
                continue  # a tensor or symbolic number the steps make: the graph shows where it is read
            else:
                unbound.append(change)
        if refused:
            raise loop_refusal(self.loop, _refused_change(refused[0], self.frames, self.loop), _HINT_STATE)
        shared = _shared(self.frame, grown)
        if shared:
            raise loop_refusal(
                self.loop, f"its steps append to a list that {' and '.join(f'`{n}`' for n in shared)} both hold, which "
                "the program carries as a buffer under one name", _HINT_STATE,
            )
        if grown:
            raise ListNeeded(self.loop, grown)
        if needed:
            raise CarryNeeded(self.loop, tuple(needed))
        for name, tensor in zip(self.loop.carried, self.values[-1]):
            set_local(self.frame, name, _as_number(tensor, self.kinds[name]))
        for name, built in self.lists.items():
            if self.frame.f_locals.get(name) is built:
                set_local(self.frame, name, built.filled())
        for change in unbound:
            name = change.local
            if not unbind_local(self.frame, name):
                raise loop_refusal(self.loop, f"its steps change `{name}` ({_how(change)})", _HINT_STATE)
            self.loop.unbound[name] = (_how(change), _unbound_hint(change))
        self.frame = None
        self.frames = []


def _shared(frame: Any, grown: dict[str, Any]) -> list[str]:
    """Two names of ``frame`` (the loop's) that hold one of the lists in ``grown``."""
    values = frame.f_locals
    for name in grown:
        others = [n for n, v in values.items() if v is values[name] and n != name]
        if others:
            return [name, others[0]]
    return []


def _described_list(value: Any) -> str:
    if value is MISSING:
        return "not yet set"
    return f"a list of {len(value)}" if type(value) is list else f"a {type(value).__name__}"


def _unbound_hint(change: Change) -> str:
    """What to write instead of a local that a loop rebinds and that cannot go round it."""
    if all(isinstance(v, tuple) and v[:2] == ("object", "list") for v in (change.before, *change.after)):
        return (
            "start it empty before the loop, append at most one tensor of one size a step, and read it after the "
            "loop with torch.stack, torch.cat, len() or a truth test, which the program carries as a buffer and a "
            "count; or export with branches='draft' to follow the example's count"
        )
    kinds = [_fingerprint_kind(v) for v in (change.before, *change.after)]
    if None not in kinds and len(set(kinds)) > 1:
        ends = kinds[-1].name.lower()
        return (
            f"set it before the loop to a {ends}, the kind the steps leave it (`{change.local} = 1.0` for a float), "
            "so that the loop carries one kind of number"
        )
    return (
        "set it before the loop to a number the steps rebind (`found = False` before, `found = True` in the loop), "
        "which the loop carries; or keep it in a tensor made before the loop; or export with branches='draft' to "
        "follow the example's count"
    )


_HINT_STATE = (
    "keep what the steps hand on in tensors made before the loop (a running sum, a mask written in place) or in "
    "numbers of the loop's own function (`count += 1`), which the loop carries; or export with branches='draft' "
    "to follow the example's count"
)


def _kind(value: Any) -> Kind | None:
    return kind_of(value) if value is not MISSING else None


def _fingerprint_kind(fingerprint: Any) -> Kind | None:
    """The number kind a fingerprint (``state.snapshot``) shows, else None."""
    head = fingerprint[0]
    if head == "symbolic":
        return {"SymBool": Kind.BOOL, "SymInt": Kind.INT, "SymFloat": Kind.FLOAT}.get(fingerprint[1])
    return {"bool": Kind.BOOL, "int": Kind.INT, "float": Kind.FLOAT}.get(head) if isinstance(head, str) else None


def _graph_value(fingerprint: Any) -> bool:
    return fingerprint[0] in ("tensor", "symbolic")


def _as_tensor(value: Any, kind: Kind, device: torch.device) -> torch.Tensor:
    """``value`` (a number, plain or symbolic) as a 0-d tensor of ``kind``'s dtype."""
    if isinstance(value, torch.SymBool):
        value = torch.sym_ite(value, 1, 0)
    return torch.ops.aten.scalar_tensor.default(value, dtype=kind.value, device=device)


def _as_number(tensor: torch.Tensor, kind: Kind) -> Any:
    """The number a carried 0-d tensor holds, as the loop's frame had it (symbolic)."""
    value = tensor.item()
    if kind is Kind.BOOL and not isinstance(value, (bool, torch.SymBool)):
        value = value != 0
    return value


def _described(value: Any) -> str:
    if value is MISSING:
        return "not yet set"
    kind = _kind(value)
    return kind.name.lower() if kind is not None else f"a {type(value).__name__}"


def _how(change: Change) -> str:
    """How a path changed, in words: ``None before the loop, a tensor after its steps``."""
    before = _fingerprint_words(change.before)
    after = list(dict.fromkeys(_fingerprint_words(v) for v in change.after))
    return f"{before} before the loop, {' then '.join(after)} after its steps"


def _fingerprint_words(fingerprint: Any) -> str:
    head = fingerprint[0]
    if fingerprint == MISSING:
        return "not set"
    if head == "object":  # a container or object: its kind, and a length
        kind = fingerprint[1]
        return f"a {kind} of {fingerprint[2]}" if len(fingerprint) > 2 and isinstance(fingerprint[2], int) else f"a {kind}"
    if head in ("bool", "int", "str", "NoneType"):
        return repr(fingerprint[1])
    if head == "float":
        return fingerprint[1]
    if head == "tensor":
        return "a tensor"
    if head == "symbolic":
        return f"a {fingerprint[1]}"
    return head


def _refused_change(change: Change, frames: list, loop: Loop) -> str:
    return (
        f"its steps change {change.named(frames)}{_written_at(change, frames, loop)} ({_how(change)}), which the "
        "program cannot carry: it goes round as often as the data says, and would go on as after the steps a trace takes"
    )


def _written_at(change: Change, frames: list, loop: Loop) -> str:
    """`` at file:line (`code`)``: the line of the loop that writes what ``change`` names."""
    location = loop.site.location
    if not frames or not location or ":" not in location:
        return ""
    path, _, line = location.rpartition(":")
    attributes = [step[1:] for step in change.path[2:] if step.startswith(".")]
    found = assigned_at(frames[0], int(line), attributes[-1] if attributes else change.name)
    if found is None:
        return ""
    text = linecache.getline(path, found).strip()
    return f" at {path}:{found}" + (f" (`{text}`)" if text else "")


class ZipFollower:
    """The iterator ``zip`` gets for a tensor it goes over beside the first one (a
    ``DataLoop``, the leader): each item is the tensor's row at the leader's counter."""

    def __init__(self, tensor: torch.Tensor, leader: DataLoop) -> None:
        self.tensor, self.leader = tensor, leader

    def __iter__(self) -> ZipFollower:
        return self

    def __next__(self) -> torch.Tensor:
        item = torch.ops.aten.index_select.default(self.tensor, 0, self.leader.counter.reshape(1))
        self.leader.loop.zipped.append(self.leader._anchor())
        return item.squeeze(0)


class LoopCondition:
    """``while_loop``'s condition: the counter (carried value ``counter``) is below the
    length of the tensor looped over (operand ``tensor``; with ``zip``, the shortest of it
    and the ``others``), and, for a loop a step may break out of, its flag (carried value
    ``done``) is not set."""

    def __init__(self, counter: int, tensor: int, done: int | None = None, others: tuple[int, ...] = ()) -> None:
        self.counter, self.tensor, self.done, self.others = counter, tensor, done, others
        self.__name__ = "loop_condition"

    def length(self, operands: tuple[Any, ...]) -> Any:
        """How many steps the loop has: the length of the tensor, the shortest one zipped."""
        length = operands[self.tensor].shape[0]
        for k in self.others:
            length = torch.sym_min(length, operands[k].shape[0])
        return length

    def __call__(self, *operands: Any) -> torch.Tensor:
        going = operands[self.counter] < self.length(operands)
        if self.done is None:
            return going
        return torch.logical_and(going, torch.logical_not(operands[self.done]))


class LoopBody:
    """``while_loop``'s body: one iteration's graph run through an interpreter (so that
    tracing it again keeps each node's stack trace and module stack); ``order`` maps the
    loop's operands (carried values, then the others) to the graph's placeholders."""

    def __init__(self, gm: torch.fx.GraphModule, order: list[int]) -> None:
        self.gm, self.order = gm, order
        self.__name__ = "loop_body"

    def __call__(self, *operands: Any) -> tuple[Any, ...]:
        with asserts_kept_inside(operands_shape_env(operands)):
            outputs = tuple(torch.fx.Interpreter(self.gm).run(*(operands[k] for k in self.order)))
            for before, after in zip(operands, outputs):
                _same_sizes_as(after, before)
            return outputs


def _same_sizes_as(after: Any, before: Any) -> None:
    """Tell the ShapeEnv that a value a step hands on has its carried sizes: a cond in the
    step gives each result a size the data decides a symbol of its own, even where both
    sides keep the size they were given (a list's buffer, one row a step)."""
    if not (isinstance(after, torch.Tensor) and isinstance(before, torch.Tensor)) or after.dim() != before.dim():
        return
    for x, y in zip(after.shape, before.shape):
        if isinstance(x, torch.SymInt) and str(x) != str(y) and free_unbacked_symbols(x):
            runtime_check(x == y)


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


@attrs.frozen
class Bound:
    """A captured loop written as at most ``steps`` steps instead of a ``torch.while_loop``
    (``export(..., max_iterations=steps)``), for a consumer that cannot run one."""

    steps: int
    location: str | None
    code: str | None

    @property
    def message(self) -> str:
        """What the program's assert says when the data asks for more steps."""
        where = f" at {self.location}" if self.location else ""
        code = f" (`{self.code}`)" if self.code else ""
        return (
            f"the loop{where}{code} goes round more than max_iterations={self.steps} times for this input; "
            "export again with a larger max_iterations, or without it (a torch.while_loop)"
        )


def while_loop(condition: LoopCondition, body: LoopBody, carried: tuple, additional: tuple, bound: Bound | None = None) -> Any:
    """``torch.ops.higher_order.while_loop`` of a captured loop; with ``bound``, the same loop
    as ``bound.steps`` conds in a row instead, step ``k`` taken where the tensor looped over
    has more than ``k`` items, after an assert that it has no more than ``bound.steps``."""
    if bound is None:
        return torch.ops.higher_order.while_loop(condition, body, tuple(carried), tuple(additional))
    operands = (*carried, *additional)
    length = condition.length(operands)
    if isinstance(length, torch.SymInt):
        check_value(length <= bound.steps, bound.message, own_node=True)
    elif length > bound.steps:
        raise TraceError(bound.message, category=Category.BRANCH_CAPTURE, location=bound.location)
    values = tuple(carried)
    for step in range(bound.steps):
        if condition.done is not None:  # a step may break out: each step asks the condition
            if isinstance(length, int) and length <= step:
                break
            going = condition(*values, *additional)
            values = tuple(torch.ops.higher_order.cond(going, body, _Stay(len(values)), (*values, *additional)))
            continue
        going = length > step
        if not isinstance(going, torch.SymBool):  # a length the trace knows: nothing to decide
            if not going:
                break
            values = body(*values, *additional)
            continue
        values = tuple(torch.ops.higher_order.cond(going, body, _Stay(len(values)), (*values, *additional)))
    return values


while_loop.__name__ = "while_loop"


class _Stay:
    """A bounded loop's step not taken: the carried values as they are (copies, since a
    cond's side may not hand on its operands)."""

    def __init__(self, carried: int) -> None:
        self.carried = carried
        self.__name__ = "loop_done"

    def __call__(self, *operands: Any) -> tuple[Any, ...]:
        return tuple(value.clone() for value in operands[: self.carried])


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
        if not same_op(x, y) or not _same_leaves(run, x, witness, y):
            return _loop_before(run, x), _COUNTED
    if len(ours) != len(theirs):
        return run.loops[-1], _COUNTED
    return None


def stopped_early(run: Any, loops: list[Loop]) -> tuple[Loop, str] | None:
    """The first of a witness run's ``loops`` that stopped before its items ran out, as
    ``run``'s loop at the same site, and why; None where every one went to its end."""
    stopped = next((loop for loop in loops if not loop.finished and not loop.exited), None)
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
        marks = [run.index[m] for m in (*loop.counter, loop.exit_mark) if m in run.index]
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


def same_op(x: torch.fx.Node, y: torch.fx.Node) -> bool:
    """Whether two nodes of two traces are the same kind of node calling the same op (a
    ``get_attr`` of either run's constant counts as the same op: compare the constants)."""
    return x.op == y.op and (x.op == "get_attr" or x.target == y.target)


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

    def last(self) -> dict[torch.fx.Node, torch.fx.Node]:
        """Value before the loop -> the second iteration's node that replaces it: what forward
        after the loop reads as the loop left it."""
        at = {n: k for k, n in enumerate(self.first)}
        return {x: self.second[at[y]] for x, y in self.carried.items()}


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
        if not same_op(a, b):
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
