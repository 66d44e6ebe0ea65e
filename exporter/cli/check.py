"""``exporter check``: export many models, compare with baselines, produce a verdict for CI."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from .baseline import baseline_entry, drift, durations, load_baseline, save_baseline
from .report import ExportReport
from .settings import CheckSettings, ModelEntry
from .shard import split
from .workers import Limits, Outcome, run_isolated

__all__ = ["CHECK_SCHEMA", "CheckResult", "check_exit_code", "check_json", "models_to_check", "run_check"]

CHECK_SCHEMA = "exporter.check/1"


@attrs.define
class CheckResult:
    reference: str
    report: ExportReport
    drift: list[str] = attrs.field(factory=list)
    note: str | None = None
    """Why a model without drift still fails (no baseline entry), or what the update did."""
    worker: dict[str, Any] | None = None
    """For a model whose worker was stopped or died: the stage, seconds, peak memory, and the
    exit code or signal (the reason is ``report.error``)."""

    @property
    def passed(self) -> bool:
        return self.report.ok and not self.drift and not (self.note and self.note.startswith("no baseline"))

    @property
    def status(self) -> str:
        if not self.report.ok:
            return "failed"
        if self.drift:
            return "drift"
        if self.note and self.note.startswith("no baseline"):
            return "no baseline"
        return "ok"


    def to_json(self) -> dict:
        data = {"reference": self.reference, "status": self.status, "drift": self.drift, "note": self.note,
                "report": self.report.to_json()}
        if self.worker is not None:
            data["worker"] = self.worker
        return data

    @classmethod
    def from_json(cls, data: dict) -> CheckResult:
        """A result read back from a ``check --json`` file (for ``merge``)."""
        return cls(
            data["reference"], ExportReport.from_json(data["report"]), list(data.get("drift") or []), data.get("note"), data.get("worker")
        )


def check_json(results: list[CheckResult], shard: tuple[int, int] | None = None, models: list[str] | None = None) -> dict:
    """The ``--json`` summary (schema ``exporter.check/1``); a shard also records which share it
    is and every model of the run, so ``merge`` can tell that all shares are there."""
    data = {
        "schema": CHECK_SCHEMA,
        "status": "ok" if all(r.passed for r in results) else "failed",
        "models": [r.to_json() for r in results],
    }
    if shard is not None:
        data["shard"] = {"index": shard[0], "count": shard[1], "models": list(models or [])}
    return data


def check_exit_code(results: list[CheckResult]) -> int:
    """0 all passed; 2 when every failing model failed on its input (bad references); else 1."""
    failing = [r for r in results if not r.passed]
    if not failing:
        return 0
    return 2 if all(r.report.exit_code == 2 for r in failing) else 1


def models_to_check(settings: CheckSettings, baseline: dict | None) -> list[ModelEntry]:
    """The models this run checks: all of them, or with ``--shard K/N`` the K-th share,
    balanced by the durations in ``baseline``."""
    if settings.shard is None:
        return list(settings.models)
    index, count = settings.shard
    share = set(split([m.reference for m in settings.models], count, durations(baseline or {}))[index - 1])
    return [m for m in settings.models if m.reference in share]


def _report(entry: ModelEntry, settings: CheckSettings, outcome: Outcome) -> ExportReport:
    if outcome.report is not None:
        return outcome.report
    report = ExportReport(entry.export_settings(rtol=settings.rtol, atol=settings.atol))
    report.error = outcome.error
    report.timings = {"total": outcome.worker["seconds"]} if outcome.worker else {}
    return report


def run_check(settings: CheckSettings, on_done: Callable[[str, int], None] | None = None) -> list[CheckResult]:
    """Export and verify every model, or this shard's share, each in a worker process of its
    own (``settings.jobs`` at a time), then judge drift. A model whose worker hangs past
    ``settings.timeout``, holds more than ``settings.max_memory`` or dies fails alone.

    ``on_done(reference, finished)`` is called as each export finishes, for progress display.
    """
    done = on_done or (lambda reference, finished: None)
    baseline = load_baseline(settings.baseline) if settings.baseline else None
    entries = models_to_check(settings, baseline)
    finished: list[str] = []

    def ended(reference: str, outcome: Outcome) -> None:
        finished.append(reference)
        done(reference, len(finished))

    outcomes = run_isolated(
        [(m.reference, m.export_settings(rtol=settings.rtol, atol=settings.atol)) for m in entries],
        Limits(settings.timeout, settings.max_memory),
        settings.jobs,
        on_done=ended,
    )
    reports = {m.reference: _report(m, settings, outcomes[m.reference]) for m in entries}

    results = []
    for reference in (m.reference for m in entries):
        report = reports[reference]
        result = CheckResult(reference, report, worker=outcomes[reference].worker)
        if baseline is not None and report.ok:
            entry = baseline_entry(report)
            if settings.update_baseline:
                result.note = "baseline updated" if reference in baseline else "baseline recorded"
                baseline[reference] = entry
            elif reference not in baseline:
                result.note = "no baseline entry; record one with --update-baseline"
            else:
                result.drift = drift(baseline[reference], entry)
        results.append(result)
    if baseline is not None and settings.update_baseline:
        save_baseline(settings.baseline, baseline)
    return results
