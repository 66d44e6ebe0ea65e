"""StageTimer books back-to-back stages and adds repeats."""

import time

from exporter._timing import StageTimer


def test_laps_are_back_to_back_and_repeats_add_up():
    timer = StageTimer()
    time.sleep(0.01)
    timer.lap("a")
    time.sleep(0.01)
    timer.lap("b")
    time.sleep(0.01)
    timer.lap("a")
    assert list(timer.timings) == ["a", "b"]
    assert timer.timings["a"] >= 0.02 and timer.timings["b"] >= 0.01
    assert abs(sum(timer.timings.values()) - timer.elapsed()) < 0.01
