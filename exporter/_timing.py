"""A stopwatch that splits a run into named stages."""

from __future__ import annotations

import time

__all__ = ["StageTimer"]


class StageTimer:
    """Seconds per stage, measured back to back: ``lap(name)`` ends the stage that began at
    the previous lap (or at creation) and books its time under ``name``, adding to what a
    stage of that name already took."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._started = self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = self.timings.get(stage, 0.0) + now - self._last
        self._last = now

    def elapsed(self) -> float:
        """Seconds since the timer was created."""
        return time.perf_counter() - self._started
