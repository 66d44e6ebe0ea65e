"""Benchmark results as data (benchmarks/results.py, benchmarks/plots.py): every results file
is stamped with how it was made, from a clean tree unless asked, the index opens with
headline figures taken from the files and states nothing they do not, pages are rendered
again from their JSON, and the plots are drawn from the JSON alone.  No export runs here."""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import torch

import exporter

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def _load(name: str):
    """A benchmarks/ script as a module (they are scripts, not a package)."""
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(BENCHMARKS / f"{name}.py"):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results():
    return _load("results")


def _head() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_the_stamp_says_how_a_measurement_was_made(results):
    info = results.stamp([str(BENCHMARKS / "bench_export.py"), "--modes", "static", "--repeats", "3"],
                         allow_dirty=True)
    assert info["command"] == "python benchmarks/bench_export.py --modes static --repeats 3"
    assert info["commit"].removesuffix("-dirty") == _head()
    assert info["torch"] == torch.__version__
    assert torch.__version__.startswith(info["torch_release"] + ".")
    assert info["exporter"] == exporter.__version__
    assert info["python"] == ".".join(map(str, sys.version_info[:3]))
    when = datetime.datetime.fromisoformat(info["date"])
    assert when.utcoffset() == datetime.timedelta(0)
    assert abs(datetime.datetime.now(datetime.timezone.utc) - when) < datetime.timedelta(minutes=5)
    machine = info["machine"]
    assert machine["cpu_count"] == os.cpu_count() and machine["cpu_model"] and machine["platform"]
    for library in ("transformers", "diffusers"):
        module = sys.modules.get(library)
        assert info[library] == (module.__version__ if module else None)


def test_a_release_names_its_results(results):
    assert results.torch_release("2.15.0+cu132") == "2.15"
    assert results.torch_release("2.14.1") == "2.14"
    assert results.release_suffix() == f"torch-{results.torch_release(torch.__version__)}"
    assert results.command(["benchmarks/zoo.py", "--exporter-kwargs", '{"ir": "training"}']) == \
        """python benchmarks/zoo.py --exporter-kwargs '{"ir": "training"}'"""


def test_the_recorded_command_leaves_out_where_the_files_went(results):
    argv = ["benchmarks/zoo.py", "--family", "torchvision", "--results-dir", "other/results",
            "--logs", "zoo-logs", "--json=out.json", "--markdown", "out.md", "--jobs", "2"]
    assert results.command(argv) == "python benchmarks/zoo.py --family torchvision --jobs 2"


def test_write_makes_a_stamped_page_and_stamped_json(results, tmp_path):
    argv = [str(BENCHMARKS / "bench_cold.py"), "--quick"]
    md_path, json_path = results.write("cold-start-torch-2.15", markdown="| a | b |\n|---|---:|\n| x | 1.25 |\n",
                                       data={"rows": [{"command": "x", "median_s": 1.25}]}, argv=argv,
                                       title="Cold start", results_dir=tmp_path, allow_dirty=True)
    assert (md_path, json_path) == (tmp_path / "cold-start-torch-2.15.md", tmp_path / "cold-start-torch-2.15.json")
    content = json.loads(json_path.read_text())
    assert content["data"] == {"rows": [{"command": "x", "median_s": 1.25}]}
    info = content["stamp"]
    assert info["command"] == "python benchmarks/bench_cold.py --quick"
    page = md_path.read_text()
    assert page.startswith("# Cold start\n")
    for value in (info["command"], info["commit"], info["torch"], info["date"], info["machine"]["cpu_model"]):
        assert value in page
    assert "| x | 1.25 |" in page and "(cold-start-torch-2.15.json)" in page
    assert "cold-start-torch-2.15.md" in (tmp_path / "index.md").read_text()


def _git(root: pathlib.Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture
def checkout(results, tmp_path, monkeypatch):
    """A one-commit repository standing in for the project's, with a results directory."""
    root = tmp_path / "repo"
    (root / "docs" / "results").mkdir(parents=True)
    (root / "model.py").write_text("x = 1\n")
    (root / "docs" / "results" / "old.md").write_text("# old\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "first")
    monkeypatch.setattr(results, "ROOT", root)
    monkeypatch.setattr(results, "RESULTS_DIR", root / "docs" / "results")
    return root


def test_a_clean_tree_is_stamped_with_its_commit(results, checkout):
    (checkout / "docs" / "results" / "old.md").write_text("# rewritten by a benchmark\n")
    (checkout / "untracked.py").write_text("")
    results.check_clean()
    info = results.stamp(["benchmarks/zoo.py"])
    assert info["commit"] == _git(checkout, "rev-parse", "--short", "HEAD") and "changed_files" not in info


def test_a_dirty_tree_is_refused_naming_the_changed_files(results, checkout):
    (checkout / "model.py").write_text("x = 2\n")
    with pytest.raises(results.DirtyTree, match=r"1 tracked file\(s\) differ from commit \w+: model\.py\. .*"
                                                r"commit the changes first, or pass --allow-dirty"):
        results.stamp(["benchmarks/zoo.py"])
    with pytest.raises(results.DirtyTree, match="model.py"):
        results.write("zoo-torch-2.15", markdown="", data={}, argv=["benchmarks/zoo.py"])
    assert not (checkout / "docs" / "results" / "zoo-torch-2.15.json").exists()


def test_allow_dirty_stamps_the_commit_dirty_with_the_changed_files(results, checkout):
    (checkout / "model.py").write_text("x = 2\n")
    md_path, json_path = results.write("zoo-torch-2.15", markdown="", data={}, argv=["benchmarks/zoo.py"],
                                       allow_dirty=True)
    info = json.loads(json_path.read_text())["stamp"]
    assert info["commit"] == _git(checkout, "rev-parse", "--short", "HEAD") + "-dirty"
    assert info["changed_files"] == ["model.py"]
    assert f"`{info['commit']}` (uncommitted changes to `model.py`)" in md_path.read_text()


def test_a_script_on_a_dirty_tree_stops_before_it_runs_and_when_it_writes(results, checkout, capsys):
    import argparse

    (checkout / "model.py").write_text("x = 2\n")
    parser = argparse.ArgumentParser()
    results.add_arguments(parser)
    args = parser.parse_args([])
    with pytest.raises(SystemExit, match="model.py.*--allow-dirty"):
        results.require_clean(args)
    with pytest.raises(SystemExit, match="model.py.*--allow-dirty"):
        results.write_from_args(args, "zoo-torch-2.15", markdown="", data={}, argv=["benchmarks/zoo.py"])
    results.require_clean(parser.parse_args(["--no-results"]))
    allowed = parser.parse_args(["--allow-dirty"])
    results.require_clean(allowed)
    results.write_from_args(allowed, "zoo-torch-2.15", markdown="", data={}, argv=["benchmarks/zoo.py"])
    assert "results: " in capsys.readouterr().out
    assert json.loads((checkout / "docs" / "results" / "zoo-torch-2.15.json").read_text())["stamp"]["commit"].endswith("-dirty")


def _stamp(release: str, date: str, commit: str = "abc1234") -> dict:
    return {"command": "python benchmarks/bench_export.py", "commit": commit, "torch": f"{release}.0",
            "torch_release": release, "exporter": "0.1.0", "transformers": "5.0.0", "python": "3.11.7",
            "date": date, "machine": {"cpu_count": 2, "cpu_model": "Test CPU", "platform": "Linux-x86_64"}}


def _export_rows(scale: float) -> list[dict]:
    rows = []
    for mode in ("static", "dynamic"):
        for model in ("gpt2", "llama"):
            for layers in (2, 8):
                mine, theirs = scale * layers * 0.0123, layers * 0.0345
                rows.append({"mode": mode, "model": model, "layers": layers, "status": "ok",
                             "exporter_median_s": mine, "oracle_median_s": theirs, "ratio": mine / theirs})
    rows.append({"mode": "static", "model": "t5", "layers": 2, "status": "FAILED", "error": "boom"})
    rows.append({"mode": "cold", "command": "import torch", "median_s": 1.5, "min_s": 1.25, "ratio": 1.0})
    return rows


def _zoo_rows() -> list[dict]:
    outcomes = {"bert": ["both ok", "both ok"], "gpt2": ["only exporter ok", "both ok"],
                "mamba": ["only torch.export ok"], "odd": ["both fail", "not built"]}
    kinds = {"bert": "text", "gpt2": "text", "mamba": "text", "odd": "other"}
    return [{"family": family, "model_type": family, "kind": kinds[family], "outcome": outcome, "verdict": outcome}
            for family, found in outcomes.items() for outcome in found]


ZOO_SUMMARY = {"rows": 7, "counts": {"both ok": 3, "only exporter ok": 1, "only torch.export ok": 1, "both fail": 1,
                                     "not built": 1}, "time_ratio_geomean": 0.3125,
               "time_ratio_median": 0.25}
PARITY_SUMMARY = {"inference": {"cases": 9, "oracle_ok": 7, "match": 6, "known_differences": 1, "other_differences": 0,
                                "ours_only": 1, "both_fail": 1, "seconds": 12.5},
                  "training": {"cases": 9, "oracle_ok": 8, "match": 5, "known_differences": 3, "other_differences": 0,
                               "ours_only": 0, "both_fail": 1, "seconds": 11.5}}


def _synthetic(directory: pathlib.Path) -> None:
    """Results files of two torch releases, as the scripts write them, without running any."""
    zoo = {"settings": {"family": "transformers", "dynamic": False, "exporter_kwargs": {}}, "summary": ZOO_SUMMARY,
           "rows": _zoo_rows()}
    files = {
        "export-time-torch-2.14": (_stamp("2.14", "2030-01-02T03:04:05+00:00"), {"rows": _export_rows(0.5)}),
        "export-time-torch-2.15": (_stamp("2.15", "2030-01-03T03:04:05+00:00", "def5678-dirty"),
                                   {"rows": _export_rows(0.25)}),
        "export-time-static-quick-torch-2.15": (_stamp("2.15", "2030-01-05T03:04:05+00:00"),
                                                {"quick": True, "rows": _export_rows(4.0)}),
        "zoo-torch-2.15": (_stamp("2.15", "2030-01-04T03:04:05+00:00"), zoo),
        "export-time-first-torch-2.15": ({**_stamp("2.15", "2030-01-04T03:04:05+00:00"),
                                          "command": "python benchmarks/bench_first.py"},
                                         {"repeats": 3, "rows": [{"first_ratio": 0.125, "warm_ratio": 0.0625},
                                                                 {"first_ratio": 0.375, "warm_ratio": 0.0625}]}),
        "zoo-fast-torch-2.15": (_stamp("2.15", "2030-01-04T03:04:05+00:00"), {**zoo, "summary": {"rows": 1}}),
        "parity-torch-2.15": ({**_stamp("2.15", "2030-01-06T03:04:05+00:00"),
                               "command": "python -m tests.parity.run --ir both --results"},
                              {"irs": ["inference", "training"], "summary": PARITY_SUMMARY}),
    }
    for name, (info, data) in files.items():
        (directory / f"{name}.json").write_text(json.dumps({"stamp": info, "data": data}))
        (directory / f"{name}.md").write_text(f"# {name}\n")
    (directory / "unrelated.json").write_text(json.dumps({"rows": []}))


_NUMBER = re.compile(r"\d+(?:\.\d+)*")


def _headline_row(index: str, first_cell: str) -> list[str]:
    line = next(line for line in index.splitlines() if line.startswith(f"| {first_cell} |"))
    return [cell.strip() for cell in line.strip("|").split(" | ")]


def test_the_index_opens_with_headline_figures_from_the_files(results, tmp_path):
    _synthetic(tmp_path)
    index = results.write_index(tmp_path).read_text()
    assert index.index("## Headline") < index.index("## Export time")
    command = "`python benchmarks/bench_export.py`"
    ratio = {0.5: f"{0.5 * 0.0123 / 0.0345:.2f}", 0.25: f"{0.25 * 0.0123 / 0.0345:.2f}"}
    assert _headline_row(index, "torch 2.14") == [
        "torch 2.14", f"[{ratio[0.5]}](export-time-torch-2.14.md#static)", ratio[0.5],
        f"[{ratio[0.5]}](export-time-torch-2.14.md#dynamic)", ratio[0.5], command]
    # the quick run is newer but measures a subset: the headline keeps the whole run
    assert _headline_row(index, "torch 2.15")[1] == f"[{ratio[0.25]}](export-time-torch-2.15.md#static)"
    assert _headline_row(index, "[transformers, torch 2.15](zoo-torch-2.15.md)") == [
        "[transformers, torch 2.15](zoo-torch-2.15.md)", "7", "3", "1", "1", "1", "1", "0.31", "0.25",
        "`python benchmarks/bench_export.py`"]
    assert "zoo-fast-torch-2.15.md)" not in index.split("## Plots")[0].split("## Export time")[0]
    assert _headline_row(index, "[training IR, torch 2.15](parity-torch-2.15.md#training-ir)") == [
        "[training IR, torch 2.15](parity-torch-2.15.md#training-ir)", "9", "8", "5", "3", "0", "0", "1",
        "`python -m tests.parity.run --ir both --results`"]
    (first_row,) = [line for line in index.splitlines() if "export-time-first-torch-2.15.md" in line and "[0.25]" in line]
    assert [c.strip() for c in first_row.strip("|").split(" | ")] == [
        "torch 2.15", "[0.25](export-time-first-torch-2.15.md)", "0.38", "0.06", "0.06", "`python benchmarks/bench_first.py`"]
    assert f"| {results.TIME_RATIO} | static: median | max | dynamic: median | max | made by |" in index
    assert f"| {results.TIME_RATIO}, geometric mean | median | made by |" in index
    assert "[time ratio](../benchmarks.md#the-time-ratio)" in index


def test_the_index_lists_every_file_and_no_number_they_do_not_hold(results, tmp_path):
    _synthetic(tmp_path)
    index = results.write_index(tmp_path).read_text()
    for name in ("export-time-torch-2.14", "export-time-torch-2.15", "zoo-torch-2.15", "parity-torch-2.15"):
        assert f"[{name}]({name}.md)" in index and f"({name}.json)" in index
    assert "unrelated" not in index
    files = index.split("## Plots")[-1] if "## Plots" in index else index.split("## Headline")[1]
    assert files.index("## Export time") < files.index("### torch 2.15") < files.index("### torch 2.14") \
        < files.index("## Model zoo") < files.index("## Parity with torch.export")
    assert "def5678-dirty" in index and "2030-01-03T03:04:05+00:00" in index
    stamps = " ".join(json.dumps(json.loads(p.read_text()).get("stamp")) + " " + p.name
                      for p in tmp_path.glob("*.json"))
    figures = [0.5 * 0.0123 / 0.0345, 0.25 * 0.0123 / 0.0345, ZOO_SUMMARY["time_ratio_geomean"], ZOO_SUMMARY["time_ratio_median"],
               0.25, 0.375, 0.0625]  # the first-export file's medians and maxima
    stated = set(_NUMBER.findall(stamps)) | {f"{x:.2f}" for x in figures} | set(_NUMBER.findall(json.dumps(
        [ZOO_SUMMARY["counts"], ZOO_SUMMARY["rows"], PARITY_SUMMARY])))
    assert set(_NUMBER.findall(index)) <= stated
    assert "0.0123" not in index and "0.0345" not in index  # the data stays on the pages


def test_the_index_of_an_empty_directory_says_there_is_nothing_yet(results, tmp_path):
    index = results.write_index(tmp_path).read_text()
    assert "No results yet" in index and not _NUMBER.search(index)


def test_the_plots_are_drawn_from_the_json_and_embedded_in_the_index(tmp_path):
    pytest.importorskip("matplotlib")
    _synthetic(tmp_path)
    done = subprocess.run([sys.executable, str(BENCHMARKS / "plots.py"), "--results-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    plots = ["plot-export-time-depth.png", "plot-ratio.png", "plot-zoo-fast-torch-2.15.png", "plot-zoo-torch-2.15.png"]
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(plots)
    for plot in plots:
        assert (tmp_path / plot).read_bytes().startswith(b"\x89PNG")
    index = (tmp_path / "index.md").read_text()
    assert all(f"]({plot})" in index for plot in plots)
    assert "The models not both ok: [zoo-torch-2.15](zoo-torch-2.15.md#not-both-ok)." in index
    assert "skipped" not in done.stdout


def test_the_zoo_plot_counts_outcomes_by_kind_and_names_the_models_not_both_ok(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib import image

    plots = _load("plots")
    content = {"stamp": _stamp("2.15", "2030-01-04T03:04:05+00:00"),
               "data": {"settings": {"family": "transformers"}, "rows": _zoo_rows() * 120}}
    assert plots.zoo_outcomes(content) == {
        "text": {"both ok": 360, "only exporter ok": 120, "only torch.export ok": 120},
        "other": {"both fail": 120, "not built": 120}}
    found = plots.not_both_ok({"data": {"rows": _zoo_rows()}})
    assert found == {"only exporter ok": ["gpt2"], "only torch.export ok": ["mamba"], "both fail": ["odd"],
                     "not built": ["odd"]}
    height, width, _ = image.imread(plots.plot_zoo("zoo-torch-2.15", content, tmp_path)).shape
    assert width <= 1600 and height <= 800  # one bar per kind, not per model
    text = plots._names_text({"both fail": ["a", "b"], "not built": [f"m{i}" for i in range(40)]},
                             {"no model class": 30, "inputs unknown": 10})
    assert "both fail (2): a, b" in text and "30  no model class" in text and "m3" not in text


def test_a_plot_without_data_is_skipped_and_said_so(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    plots = _load("plots")
    (tmp_path / "plot-ratio.png").write_bytes(b"left from earlier data")
    assert plots.main(["--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("skipped:") == 3 and "removed plot-ratio.png" in out
    assert list(tmp_path.glob("*.png")) == [] and "No results yet" in (tmp_path / "index.md").read_text()


def _zoo_json_row(model_type: str, mine: float | None, theirs: float | None, torch_outcome: str = "ok") -> dict:
    """A row as zoo.py wrote it before its time ratio was exporter / torch.export."""
    def tool(outcome, seconds):
        return {"outcome": outcome, "seconds": seconds, "error": None if outcome == "ok" else "boom",
                "error_type": None if outcome == "ok" else "RuntimeError", "signature": [["USER_INPUT", "x", None, None]]}

    built = mine is not None
    return {"model_type": model_type, "class_name": f"{model_type.title()}Model" if built else None, "built": built,
            "reason": None if built else "no model class", "note": "", "inputs": {}, "parameters": 1,
            "build_seconds": 0.1, "family": model_type,
            "results": {"exporter": tool("ok", mine), "torch": tool(torch_outcome, theirs)} if built else {},
            "ratio": theirs / mine if built and torch_outcome == "ok" else None}


def test_a_zoo_page_is_rendered_again_from_its_json_with_its_stamp(results, tmp_path):
    pytest.importorskip("transformers")
    rows = [_zoo_json_row("bert", 0.25, 1.0), _zoo_json_row("gpt2", 0.5, 1.0),
            _zoo_json_row("llama", 0.5, 0.75, "fails"), _zoo_json_row("newmodel", None, None)]
    info = _stamp("2.15", "2030-01-04T03:04:05+00:00")
    data = {"settings": {"tools": ["exporter", "torch"], "family": "transformers", "timeout": 180.0},
            "summary": {"ratio_geomean": 2.83}, "rows": rows}
    (tmp_path / "zoo-torch-2.15.json").write_text(json.dumps({"stamp": info, "data": data}))
    (tmp_path / "zoo-torch-2.15.md").write_text("# Model zoo, torch 2.15\n\nold page\n")
    page = results.render("zoo-torch-2.15", tmp_path).read_text()
    content = json.loads((tmp_path / "zoo-torch-2.15.json").read_text())
    assert content["stamp"] == info
    assert [[r["results"].get(t, {}).get("seconds") for t in ("exporter", "torch")] for r in content["data"]["rows"]] \
        == [[0.25, 1.0], [0.5, 1.0], [0.5, 0.75], [None, None]]
    assert [r["ratio"] for r in content["data"]["rows"]] == [0.25, 0.5, None, None]
    assert [r["kind"] for r in content["data"]["rows"]][:3] == ["text", "text", "text"]
    summary = content["data"]["summary"]
    assert "ratio_geomean" not in summary and summary["time_ratio_geomean"] == pytest.approx((0.25 * 0.5) ** 0.5)
    assert summary["counts"] == {"both ok": 2, "only exporter ok": 1, "only torch.export ok": 0, "both fail": 0,
                                 "not built": 1}
    assert page.startswith("# Model zoo, torch 2.15\n") and info["date"] in page and "old page" not in page
    assert f"<th align=\"right\">{results.TIME_RATIO}</th>" in page and (
        '<td>bert</td><td>BertModel</td><td>ok</td><td>ok</td><td align="right">0.25</td>'
        '<td align="right">1.00</td><td align="right">0.25</td>') in page
    assert "geometric mean where both ok | 0.35 |" in page
    assert "| llama | LlamaModel | text | only exporter ok | ok | fails: RuntimeError: boom |" in page
    assert "<td>newmodel</td><td></td><td>other</td><td>no model class</td>" in page
    assert "## Not both ok" in page and "## By kind" in page
    assert "[zoo-torch-2.15](zoo-torch-2.15.md)" in (tmp_path / "index.md").read_text()


def test_an_export_time_page_is_rendered_again_with_the_same_rows(results, tmp_path):
    pytest.importorskip("transformers")
    info = _stamp("2.15", "2030-01-03T03:04:05+00:00")
    rows = [{**row, "floor_median_s": 0.01, "x_floor": 2.0} for row in _export_rows(0.5)
            if row["mode"] in ("static", "cold") and row.get("model") != "t5"]
    data = {"modes": ["static", "dynamic", "cold"], "repeats": 3, "rows": rows}
    (tmp_path / "export-time-torch-2.15.json").write_text(json.dumps({"stamp": info, "data": data}))
    page = results.render("export-time-torch-2.15", tmp_path).read_text()
    assert json.loads((tmp_path / "export-time-torch-2.15.json").read_text()) == {"stamp": info, "data": data}
    assert "## static" in page and "## dynamic" not in page and "## cold" in page
    assert f"| model | layers | exporter s | oracle s | {results.TIME_RATIO} |" in page
    assert f"- {results.TIME_RATIO}: median {0.5 * 0.0123 / 0.0345:.2f}" in page


def test_a_results_file_no_script_renders_is_refused(results):
    with pytest.raises(ValueError, match="no script renders 'cold-start-torch-2.15'"):
        results.renderer("cold-start-torch-2.15")


def test_a_parity_page_names_its_known_and_other_differences(results, tmp_path):
    run = results.renderer("parity-torch-2.15")
    case = lambda verdict, problems=(): {"verdict": verdict, "oracle": "ok", "exporter": "ok",
                                         "problems": list(problems), "seconds": 0.5}
    data = {"irs": ["inference"], "subset": False,
            "summary": {"inference": {**PARITY_SUMMARY["inference"], "cases": 3, "other_differences": 1}},
            "known_differences": {"inference": {"test_b": "torch.export before 2.14 guards on the order"}},
            "cases": [{"name": "test_a", "inference": case("match")},
                      {"name": "test_b", "inference": case("differ", ["range of x: exporter (0, None), torch.export (2, None)"])},
                      {"name": "test_c", "inference": case("differ", ["signature input 0: exporter a, torch.export b"])}]}
    page, kept = run.render(data)
    assert kept == data
    assert "## inference IR" in page
    assert "Known differences: 1.\n\n- `test_b`: torch.export before 2.14 guards on the order" in page
    assert "Other differences: 1.\n\n- `test_c`: signature input 0: exporter a, torch.export b" in page
    assert "<tr><td>test_b</td><td>known difference</td></tr>" in page
    assert "<tr><td>test_c</td><td>differs</td></tr>" in page


def test_the_benchmark_scripts_name_their_results_for_what_ran(results):
    pytest.importorskip("transformers")
    bench = _load("bench_export")
    release = results.release_suffix()
    assert bench.results_name(list(bench.MODES)) == f"export-time-{release}"
    assert bench.results_name(["static"]) == f"export-time-static-{release}"
    assert bench.results_name(["dynamic", "static"], quick=True) == f"export-time-static-dynamic-quick-{release}"
    assert bench.results_name([], memory=True) == f"export-memory-{release}"
    zoo = _load("zoo")
    names = {
        (): f"zoo-{release}",
        ("--fast",): f"zoo-fast-{release}",
        ("--classes", "first", "--dynamic"): f"zoo-dynamic-{release}",
        ("--classes", "first", "--exporter-kwargs", '{"ir": "training"}'): f"zoo-training-{release}",
        ("--only", "bert"): f"zoo-subset-{release}",
    }
    assert {args: zoo.results_name(zoo.parse_args(list(args))) for args in names} == names
