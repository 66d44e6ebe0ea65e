"""The first-export benchmark: each measurement is a process of its own that exports twice,
a row holds both tools' seconds and ratios, and the page renders from the rows alone.
No time is asserted."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("bench_first", BENCHMARKS / "bench_first.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(model, first, warm):
    runs = {"exporter": [{"first_s": first[0], "warm_s": warm[0]}], "oracle": [{"first_s": first[1], "warm_s": warm[1]}]}
    return {"model": model, "layers": 2, "runs": runs,
            "exporter_first_s": first[0], "oracle_first_s": first[1], "first_ratio": first[0] / first[1],
            "exporter_warm_s": warm[0], "oracle_warm_s": warm[1], "warm_ratio": warm[0] / warm[1]}


def test_the_page_shows_both_ratios_per_model_and_their_medians(bench):
    rows = [_row("bert", (0.3, 2.0), (0.1, 1.0)), _row("gpt2", (0.5, 2.5), (0.1, 0.5))]
    markdown, data = bench.render({"repeats": 3, "rows": rows})
    assert data["rows"] == rows
    assert "| bert | 2 | 0.300 | 2.000 | 0.150 | 0.100 | 1.000 | 0.100 |" in markdown
    assert "first-export ratio: median 0.175, max 0.200; warm ratio: median 0.150, max 0.200" in markdown


@pytest.mark.slow
def test_a_row_measures_each_tool_in_processes_of_its_own(bench):
    row = bench.bench_one("bert", 1, repeats=1)
    for tool in ("exporter", "oracle"):
        (run,) = row["runs"][tool]
        assert run["first_s"] > 0 and run["warm_s"] > 0
    assert row["first_ratio"] == row["exporter_first_s"] / row["oracle_first_s"]
    assert row["warm_ratio"] == row["exporter_warm_s"] / row["oracle_warm_s"]
