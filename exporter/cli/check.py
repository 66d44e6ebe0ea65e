"""``exporter check``: export many models, compare with baselines, produce a verdict for CI."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from collections.abc import Callable

import attrs

from .baseline import baseline_entry, drift, durations, load_baseline, save_baseline
from .job import run_export
from .report import ExportReport
from .settings import CheckSettings, ModelEntry
from .shard import split

__all__ = ["CHECK_SCHEMA", "CheckResult", "check_exit_code", "check_json", "models_to_check", "run_check"]

CHECK_SCHEMA = "exporter.check/1"


@attrs.define
class CheckResult:
    reference: str
    report: ExportReport
    drift: list[str] = attrs.field(factory=list)
    note: str | None = None
    """Why a model without drift still fails (no baseline entry), or what the update did."""

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
        return {"reference": self.reference, "status": self.status, "drift": self.drift, "note": self.note,
                "report": self.report.to_json()}

    @classmethod
    def from_json(cls, data: dict) -> CheckResult:
        """A result read back from a ``check --json`` file (for ``merge``)."""
        return cls(data["reference"], ExportReport.from_json(data["report"]), list(data.get("drift") or []), data.get("note"))


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


def _export_one(entry: ModelEntry, rtol: float, atol: float) -> ExportReport:
    report = run_export(entry.export_settings(rtol=rtol, atol=atol))
    # Reports cross process boundaries: keep the data, drop the program.
    report.program = None
    return report


def run_check(settings: CheckSettings, on_done: Callable[[str, int], None] | None = None) -> list[CheckResult]:
    """Export and verify every model, or this shard's share (in ``settings.jobs`` worker
    processes), then judge drift.

    ``on_done(reference, finished)`` is called as each export finishes, for progress display.
    """
    done = on_done or (lambda reference, finished: None)
    baseline = load_baseline(settings.baseline) if settings.baseline else None
    entries = models_to_check(settings, baseline)
    reports: dict[str, ExportReport] = {}
    if settings.jobs > 1 and len(entries) > 1:
        # Fresh interpreters, not forks: torch's thread pools do not survive fork reliably.
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(settings.jobs, mp_context=context) as pool:
            futures = {pool.submit(_export_one, m, settings.rtol, settings.atol): m.reference for m in entries}
            for future in concurrent.futures.as_completed(futures):
                reports[futures[future]] = future.result()
                done(futures[future], len(reports))
    else:
        for entry in entries:
            reports[entry.reference] = _export_one(entry, settings.rtol, settings.atol)
            done(entry.reference, len(reports))

    results = []
    for reference in (m.reference for m in entries):
        report = reports[reference]
        result = CheckResult(reference, report)
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
