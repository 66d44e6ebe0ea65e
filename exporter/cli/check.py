"""``exporter check``: export many models, compare with baselines, produce a verdict for CI."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from collections.abc import Callable

import attrs

from .baseline import baseline_entry, drift, load_baseline, save_baseline
from .job import run_export
from .report import ExportReport
from .settings import CheckSettings, ExportSettings

__all__ = ["CheckResult", "run_check"]


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


def _export_one(reference: str, rtol: float, atol: float) -> ExportReport:
    report = run_export(ExportSettings(model=reference, verify=True, save=False, rtol=rtol, atol=atol))
    # Reports cross process boundaries: keep the data, drop the program.
    report.program = None
    return report


def run_check(settings: CheckSettings, on_done: Callable[[str, int], None] | None = None) -> list[CheckResult]:
    """Export and verify every model (in ``settings.jobs`` worker processes), then judge drift.

    ``on_done(reference, finished)`` is called as each export finishes, for progress display.
    """
    done = on_done or (lambda reference, finished: None)
    baseline = load_baseline(settings.baseline) if settings.baseline else None
    reports: dict[str, ExportReport] = {}
    if settings.jobs > 1 and len(settings.models) > 1:
        # Fresh interpreters, not forks: torch's thread pools do not survive fork reliably.
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(settings.jobs, mp_context=context) as pool:
            futures = {pool.submit(_export_one, m, settings.rtol, settings.atol): m for m in settings.models}
            for future in concurrent.futures.as_completed(futures):
                reports[futures[future]] = future.result()
                done(futures[future], len(reports))
    else:
        for reference in settings.models:
            reports[reference] = _export_one(reference, settings.rtol, settings.atol)
            done(reference, len(reports))

    results = []
    for reference in settings.models:
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
