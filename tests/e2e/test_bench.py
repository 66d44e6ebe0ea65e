"""The benchmark script runs end to end (its figures are in the README; no time is asserted)."""

import importlib.util
import pathlib

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_export.py"


@pytest.fixture(scope="module")
def bench():
    pytest.importorskip("transformers")
    spec = importlib.util.spec_from_file_location("bench_export", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_bench_row_checks_outputs_and_times_both(bench, dynamic):
    row = bench.bench_one("gpt2", 1, repeats=1, dynamic=dynamic)
    assert row["status"] == "ok", row.get("error")
    assert len(row["oracle_s"]) == len(row["exporter_s"]) == 1
    assert row["ratio"] == row["exporter_median_s"] / row["oracle_median_s"]
