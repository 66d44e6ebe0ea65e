"""Where a decision's sides meet again: the end of its statement, of the loop's step for a
test with a ``continue`` on one side, the loop's end for one with a ``break``, none for a
``return`` or a loop's own test; and the extent a run's nodes are named inside, which
closes at the first node made outside it."""

from __future__ import annotations

import sys

from exporter.branches.meeting import meeting
from exporter.trace.stacks import UserCalls, is_extent


def _asked(steps, test, seen):
    """Ask ``test(k)`` at each step as a branch would, keeping ``meeting()`` of the asking frame."""
    for k in range(steps):
        if test(k, seen.append(meeting(sys._getframe()))):
            continue
        seen.append("rest")


def test_a_test_with_a_continue_meets_at_the_end_of_the_step():
    seen = []
    _asked(2, lambda k, _: k == 0, seen)
    first, second = seen[0], seen[1]
    assert seen[2:] == ["rest"]
    assert first is not None and second is not None
    assert first.targets[0][0] == "k" and first.targets[0][1] == 0 and second.targets[0][1] == 1
    assert first.first < first.last  # the loop's body, from its first statement to its last


def _plain(x, seen):
    if (seen.append(meeting(sys._getframe())) or x) > 0:
        x = x + 1
        x = x * 2
    return x


def test_a_plain_statement_meets_at_its_end():
    seen = []
    _plain(1, seen)
    (found,) = seen
    assert found is not None and found.last == found.first + 2 and found.targets == ()


def _broken(seen):
    for _ in range(1):
        for k in range(2):
            if seen.append(meeting(sys._getframe())) or k:
                break
            k = k + 1


def test_a_test_with_a_break_meets_after_the_loop_on_the_step_of_the_loops_around():
    seen = []
    _broken(seen)
    first, second = seen
    assert first.after is None  # the loop's next step goes back before the test
    assert [name for name, _ in first.targets] == ["_"]  # the outer loop's variable, not the inner one's
    assert first.last - first.first == 3  # the inner loop, its header to its last line
    assert second.targets[0][1] is first.targets[0][1]  # asked again on the outer loop's same step


def _returned(seen):
    for _ in range(2):
        if seen.append(meeting(sys._getframe())):
            return
        continue


def _tested_by_while(seen):
    n = 0
    while seen.append(meeting(sys._getframe())) or n < 1:
        n += 1


def test_a_return_inside_or_a_loops_own_test_meets_where_the_call_returns():
    seen = []
    _returned(seen)
    _tested_by_while(seen)
    assert seen == [None] * 4  # two asks of each


def test_code_with_no_source_has_no_meeting_point():
    seen = []
    exec("for k in range(1):\n    if seen.append(meeting(sys._getframe())):\n        continue\n", {"seen": seen, "meeting": meeting, "sys": sys})
    assert seen == [None]


def forward(note):
    """Nodes are named only below a ``forward`` (what runs outside it is not the model)."""
    note()


class _Extent:
    """An extent that holds while ``inside`` says so."""

    def __init__(self, frame, inside):
        self.frame, self.inside, self.key = frame, inside, ""

    def holds(self, frame):
        return self.inside[0]


def test_an_extent_names_the_nodes_made_inside_it_and_closes_at_the_first_outside():
    calls = UserCalls()
    inside = [True]
    key = calls.open(_Extent(sys._getframe(), inside))
    assert is_extent(key) and not is_extent(0) and not is_extent("layers.0")
    forward(lambda: calls.note("a", sys._getframe()))
    inside[0] = False
    forward(lambda: calls.note("b", sys._getframe()))
    inside[0] = True  # back inside its lines: a later step, closed for good
    forward(lambda: calls.note("c", sys._getframe()))
    assert [key in calls.of_node[n] for n in "abc"] == [True, False, False]
    assert calls.open(_Extent(sys._getframe(), inside)) != key  # named in order of opening


def test_an_extent_closes_when_its_frame_has_returned():
    calls = UserCalls()

    def asking():
        return calls.open(_Extent(sys._getframe(), [True]))

    key = asking()
    forward(lambda: calls.note("after", sys._getframe()))
    assert key not in calls.of_node["after"]
