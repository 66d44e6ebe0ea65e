"""The benchmark script runs end to end, refuses to time a wrong program and writes its
stamped results where it is told (the figures are on the docs' results page; no time is
asserted)."""

import copy
import importlib.util
import json
import pathlib

import pytest
import torch

import exporter

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_export.py"


@pytest.fixture(scope="module")
def bench():
    pytest.importorskip("transformers")
    spec = importlib.util.spec_from_file_location("bench_export", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_row_times_both_tools_on_a_checked_program(bench, dynamic):
    row = bench.bench_one("gpt2", 1, repeats=2, dynamic=dynamic)
    assert row["status"] == "ok", row.get("error")
    assert len(row["oracle_s"]) == len(row["exporter_s"]) == 2
    assert all(t > 0 for t in row["oracle_s"] + row["exporter_s"])
    if dynamic:
        assert len(row["dyn_floor_s"]) == 2 and row["x_dyn_floor"] > 0


@pytest.mark.slow
def test_a_training_dynamic_row_is_timed_against_its_own_static_training_export(bench, monkeypatch):
    irs = []
    original = bench.run_exporter

    def run_exporter(model, kwargs, dynamic=None, ir="inference"):
        irs.append((dynamic is not None, ir))
        return original(model, kwargs, dynamic, ir)

    monkeypatch.setattr(bench, "run_exporter", run_exporter)
    row = bench.bench_one("gpt2", 1, repeats=1, dynamic=True, ir="training")
    assert row["status"] == "ok", row.get("error")
    assert set(irs) == {(True, "training"), (False, "training")} and row["x_static"] > 0


def test_the_dynamic_floor_runs_on_symbolic_sizes(bench):
    """The dynamic floor is a forward on fake inputs whose batch and sequence sizes are
    symbolic: its output's batch and sequence sizes are symbols, not the example's numbers."""
    from torch.fx.experimental.symbolic_shapes import is_concrete_int

    model, kwargs = bench.build_model("gpt2", 1), bench.make_inputs("gpt2")
    seen = []
    original = model.forward

    def forward(*args, **kw):
        out = original(*args, **kw)
        seen.append(out.logits.shape)
        return out

    model.forward = forward
    assert bench.symbolic_fake_forward(model, kwargs)() > 0
    batch, seq = seen[0][:2]
    assert not is_concrete_int(batch) and not is_concrete_int(seq)


def test_a_program_that_differs_from_eager_is_a_failed_row_not_a_time(bench, monkeypatch):
    def wrong_export(model, kwargs, dynamic=None, ir="inference"):
        other = copy.deepcopy(model)
        with torch.no_grad():
            next(other.parameters()).add_(1.0)
        return exporter.export(other, (), kwargs, dynamic_shapes=dynamic, ir=ir)

    monkeypatch.setattr(bench, "run_exporter", wrong_export)
    row = bench.bench_one("gpt2", 1, repeats=1)
    assert row["status"] == "FAILED" and "differs from eager" in row["error"]
    assert "ratio" not in row


@pytest.mark.slow
def test_back_to_back_exports_time_both_tools(bench):
    row = bench.back_to_back("gpt2", 1, exports=2)
    for tool in ("exporter", "oracle"):
        assert 0 < row[f"{tool}_median_s"] <= row[f"{tool}_max_s"]
        assert row[f"{tool}_wall_s"] > 0
    assert row["ratio"] == row["exporter_wall_s"] / row["oracle_wall_s"]


def test_the_first_export_split_counts_kernels_inside_the_memos_time_and_restores_the_memo():
    pytest.importorskip("transformers")
    spec = importlib.util.spec_from_file_location("dynamic_floor", BENCH.parent / "dynamic_floor.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from exporter.trace.fast.symbolic_memo import SymbolicMemo

    original = SymbolicMemo.__call__
    model, kwargs = module.build_model("gpt2", 2), module.make_inputs("gpt2")
    seconds = module._exporter(model, kwargs, module.dynamic_shapes(kwargs), "training")
    assert SymbolicMemo.__call__ is original
    # every call of a dynamic trace reaches the memo; the first calls run their kernels
    assert 0 < seconds["kernels"] < seconds["dispatch"] < seconds["total"]
    static = module._exporter(model, kwargs, None, "training")
    assert static["dispatch"] == static["kernels"] == 0.0  # no symbolic memo without symbolic sizes


@pytest.mark.slow
def test_a_run_writes_its_stamped_results_where_it_is_told(bench, tmp_path, capsys):
    """The tables and raw rows go through results.write into --results-dir (never docs/results
    here); --no-results only prints."""
    args = ["--modes", "static", "--models", "gpt2", "--layers", "1", "--repeats", "1"]
    # --allow-dirty: the test may run in a working tree with changes (the stamp then says so)
    bench.main([*args, "--results-dir", str(tmp_path), "--allow-dirty"])
    name = f"export-time-static-subset-{bench.results.release_suffix()}"
    content = json.loads((tmp_path / f"{name}.json").read_text())
    # where the files went is not part of how the numbers were made: the stamp leaves it out
    assert content["stamp"]["command"] == "python benchmarks/bench_export.py " + " ".join(args) + " --allow-dirty"
    (row,) = content["data"]["rows"]
    assert row["mode"] == "static" and row["model"] == "gpt2" and row["layers"] == 1 and row["ratio"] > 0
    assert "| gpt2 | 1 |" in (tmp_path / f"{name}.md").read_text()
    assert f"({name}.md)" in (tmp_path / "index.md").read_text()
    before = sorted(p.name for p in tmp_path.iterdir())
    bench.main([*args, "--no-results", "--results-dir", str(tmp_path / "unused")])
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert "results:" not in capsys.readouterr().out.splitlines()[-1]
