"""check: many models, verdicts against a baseline, each model in a worker process of its own."""

import sys

from exporter.cli.check import run_check
from exporter.cli.settings import CheckSettings


def test_a_baseline_is_recorded_then_held(models):
    baseline = str(models / "base.json")
    first = run_check(CheckSettings(["unit_models.py:Net"], baseline=baseline, update_baseline=True))
    assert [(r.status, r.note, r.passed) for r in first] == [("ok", "baseline recorded", True)]

    (models / "unit_models.py").write_text((models / "unit_models.py").read_text().replace("return self.lin(x)", "return self.lin(x).sigmoid()"))
    assert "unit_models" not in sys.modules  # each model is loaded in a fresh worker, from the changed file
    drifted = run_check(CheckSettings(["unit_models.py:Net"], baseline=baseline))
    assert drifted[0].status == "drift" and not drifted[0].passed
    assert "op histogram changed:" in drifted[0].drift


def test_without_an_entry_a_model_fails_and_failures_keep_their_reports(models):
    (models / "empty.json").write_text('{"schema": "exporter.baseline/1", "models": {}}')
    results = run_check(CheckSettings(["unit_models.py:Net", "unit_models.py:Branchy"], baseline=str(models / "empty.json")))
    assert [r.status for r in results] == ["no baseline", "failed"]
    assert results[0].note.startswith("no baseline entry")
    assert results[1].report.error.category.value == "data-dependent control flow"
    assert all(r.report.program is None for r in results)  # reports travel between processes


def test_workers_give_the_same_verdicts_in_model_order(models):
    done = []
    results = run_check(
        CheckSettings(["unit_models.py:Branchy", "unit_models.py:Net"], jobs=2),
        on_done=lambda reference, finished: done.append(finished),
    )
    assert [r.reference for r in results] == ["unit_models.py:Branchy", "unit_models.py:Net"]
    assert [r.status for r in results] == ["failed", "ok"] and sorted(done) == [1, 2]
    assert results[0].report.error.traceback  # the worker's traceback comes back for --verbose
