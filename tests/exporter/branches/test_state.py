"""The Python state a loop reaches: fingerprints that see a local rebound, an attribute set,
a list grown, a global changed, an iterator advanced; how a frame asks for its iterator; and
the writes that bind or unbind a running frame's local."""

from __future__ import annotations

import itertools
import sys

import pytest
import torch

from exporter.branches import state
from exporter.branches.state import Kind, assigned_at, changes, iterated_by_for, kind_of, set_local, snapshot, unbind_local

COUNT = 0


class Holder:
    def __init__(self) -> None:
        self.steps = 0
        self.items: list = []
        self.inner = torch.nn.Linear(2, 2)


def _changed(step) -> list[state.Change]:
    """The changes ``step(holder, values, it)`` makes, seen from a frame holding them."""
    holder, values, it = Holder(), {"a": 1}, iter([1, 2, 3])
    rows = torch.zeros(2)  # noqa: F841 - a tensor the frame holds, unchanged
    frame = sys._getframe()
    ours = frozenset({"step", "frame", "states"})
    states = [snapshot([frame], ours)]
    step({"holder": holder, "values": values, "it": it})
    states.append(snapshot([frame], ours))
    return changes(states)


@pytest.mark.parametrize(
    "step, path",
    [
        (lambda ns: setattr(ns["holder"], "steps", 1), ("holder", ".steps")),
        (lambda ns: ns["holder"].items.append(1), ("holder", ".items")),
        (lambda ns: ns["values"].update(b=2), ("values",)),
        (lambda ns: ns["values"].update(a=2), ("values", "['a']")),
        (lambda ns: next(ns["it"]), ("it",)),
        (lambda ns: setattr(ns["holder"].inner, "in_features", 3), ("holder", ".inner", ".in_features")),
        (lambda ns: globals().update(COUNT=COUNT + 1), ("<global COUNT>",)),
    ],
    ids=["an attribute", "a list grown", "a key added", "a value replaced", "an iterator advanced",
         "a submodule's attribute", "a global"],
)
def test_a_change_is_found_where_it_is(step, path):
    try:
        found = _changed(step)
    finally:
        globals()["COUNT"] = 0
    assert [c.path[1:] for c in found] == [path]


def test_tensors_and_what_holds_them_unchanged_show_no_change():
    def step(ns):
        ns["holder"].inner.weight.data.add_(1)  # tensor contents: the graph's business

    assert _changed(step) == []


def test_a_rebound_local_is_named_as_a_local():
    count = 0
    frame = sys._getframe()
    ours = frozenset({"frame", "before"})
    before = snapshot([frame], ours)
    count += 1
    (change,) = changes([before, snapshot([frame], ours)])
    assert change.local == "count" and change.before == ("int", 0) and change.after == (("int", 1),)
    assert count == 1


def test_an_object_reached_twice_has_one_fingerprint():
    holder = Holder()
    alias = holder  # noqa: F841 - the snapshot reads it
    frame = sys._getframe()
    first = snapshot([frame])
    assert first[(0, "holder")] == first[(0, "alias")]


def test_kinds_of_numbers():
    assert [kind_of(v) for v in (True, 3, 2.5, "x", None)] == [Kind.BOOL, Kind.INT, Kind.FLOAT, None, None]


def _opcode_check(iterate):
    seen = []

    class Probe:
        def __iter__(self):
            seen.append(iterated_by_for(sys._getframe(1)))
            return iter([1])

    iterate(Probe())
    return seen[0]


def _direct(t):
    for _ in t:
        pass


def _gen(t):
    for v in t:
        yield v


# a loop long enough that its jump past the end takes two instructions (EXTENDED_ARG before FOR_ITER)
_LONG = "def _long(t):\n    total = 0\n    for v in t:\n" + "".join(f"        total = total + v * {k}\n" for k in range(80)) + "    return total\n"
exec(compile(_LONG, __file__ + ":long", "exec"))


@pytest.mark.parametrize(
    "iterate, direct",
    [
        (_direct, True),
        (_long, True),  # noqa: F821 - made by the exec above
        (lambda t: [v for v in t], False),
        (lambda t: list(enumerate(t)), False),
        (lambda t: list(zip(t, range(3))), False),
        (lambda t: list(itertools.islice(t, 2)), False),
        (lambda t: sum(1 for _ in t), False),
        (lambda t: list(_gen(t)), False),
    ],
    ids=["for", "a long for", "a comprehension", "enumerate", "zip", "islice", "a generator expression", "a generator"],
)
def test_only_a_for_statement_over_the_value_itself_counts_as_direct(iterate, direct):
    assert _opcode_check(iterate) is direct


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="Python 3.13 frames unbind no local")
def test_a_running_frames_local_is_bound_and_unbound():
    class Stepper:
        def __init__(self):
            self.n = 0

        def __iter__(self):
            return self

        def __next__(self):
            frame = sys._getframe(1)
            self.n += 1
            if self.n == 2:
                set_local(frame, "count", 10)
            if self.n == 3:
                assert unbind_local(frame, "flag")
                raise StopIteration
            return self.n

    def run():
        count, flag = 0, False
        for _ in Stepper():
            count += 1
            flag = True
        assert count == 11
        return flag

    with pytest.raises(UnboundLocalError):
        run()


def test_the_line_that_writes_a_name_inside_a_loop():
    frame = sys._getframe()
    loop_line = frame.f_lineno + 2
    total, seen = 0, []
    for v in range(2):  # noqa: B007 - the loop is what is read
        total += v
        seen.append(v)
    assert assigned_at(frame, loop_line, "total") == loop_line + 1
    assert assigned_at(frame, loop_line, "seen") == loop_line + 2
    assert assigned_at(frame, loop_line, "absent") is None


def _fresh_state():
    """What one run of forward makes anew: an iterator part way, a closure, a namespace, a deque."""
    import collections
    import types as pytypes

    it = iter([1, 2, 3])
    next(it)
    scale = 2
    double = lambda v: v * scale  # noqa: E731, F841 - the snapshot reads these
    config = pytypes.SimpleNamespace(width=4)  # noqa: F841
    window = collections.deque([1, 2])  # noqa: F841
    return snapshot([sys._getframe()], exprs=False)


def test_two_runs_that_made_the_same_state_anew_have_one_fingerprint():
    assert _fresh_state() == _fresh_state()


def test_a_closure_holding_another_value_is_another_state():
    def state(value):
        held = value
        read = lambda: held  # noqa: E731, F841 - the snapshot reads it
        return snapshot([sys._getframe()], frozenset({"value"}), exprs=False)

    assert state(1) != state(2)
