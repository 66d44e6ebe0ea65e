"""The branch capture benchmark: its plain models and their torch.cond twins compute the
same thing, each row counts what the program holds, checks it on every side, and its page
renders from the rows alone.  No time is asserted."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest
import torch

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("branches", BENCHMARKS / "branches.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("family", ["local", "shared", "helper"])
def test_the_plain_model_and_its_cond_twin_agree_on_every_side(bench, family):
    plain, twin = bench.models(family, 3)
    for x in bench.side_inputs():
        torch.testing.assert_close(twin(x), plain(x))


def test_the_experts_layer_and_its_twin_without_the_test_agree(bench):
    plain, twin = bench.models("experts", 4)
    for x in bench.side_inputs("experts", plain):
        torch.testing.assert_close(twin(x), plain(x))


def test_the_side_inputs_take_both_sides_of_each_family(bench):
    xs = bench.side_inputs()
    assert {bool(x.mean() > 0) for x in xs} == {True, False}
    plain, _ = bench.models("local", 1)
    assert {bool(plain.layers[0].lin(x).abs().max() > 1) for x in xs} == {True, False}


@pytest.mark.parametrize(
    "family, decisions, runs, oracle_conds", [("local", 2, 3, 2), ("shared", 1, 2, 2), ("helper", 2, 3, 2), ("experts", 2, 3, 0)]
)
def test_a_row_counts_decisions_runs_and_conds_and_checks_every_side(bench, family, decisions, runs, oracle_conds):
    row = bench.measure(family, 2, repeats=1)
    assert (row["decisions"], row["runs"], row["conds"], row["oracle_conds"]) == (decisions, runs, 2, oracle_conds)
    assert (row["exporter_no_branch_s"] is not None) == (family == "experts")
    assert row["matches_eager"] and row["nodes"] > 0 and row["exporter_s"] > 0 and row["torch_export_s"] > 0
    markdown, rows = bench.render([row])
    assert rows == [row] and f"| {family} | 2 | {decisions} | {runs} | 2 |" in markdown
