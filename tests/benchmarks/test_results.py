"""Benchmark results as data (benchmarks/results.py, benchmarks/plots.py): every results file
is stamped with how it was made, the index lists the files and states nothing they do not,
and the plots are drawn from the JSON alone.  No export runs here."""

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
    info = results.stamp([str(BENCHMARKS / "bench_export.py"), "--modes", "static", "--repeats", "3"])
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


def test_write_makes_a_stamped_page_and_stamped_json(results, tmp_path):
    argv = [str(BENCHMARKS / "bench_cold.py"), "--quick"]
    md_path, json_path = results.write("cold-start-torch-2.15", markdown="| a | b |\n|---|---:|\n| x | 1.25 |\n",
                                       data={"rows": [{"command": "x", "median_s": 1.25}]}, argv=argv,
                                       title="Cold start", results_dir=tmp_path)
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
    rows.append({"mode": "cold", "command": "import torch", "median_s": 1.5, "ratio": 1.0})
    return rows


def _zoo_rows() -> list[dict]:
    outcomes = {"bert": ["both ok", "both ok"], "gpt2": ["only exporter ok", "both ok"],
                "mamba": ["only torch.export ok"], "odd": ["both fail", "not built"]}
    return [{"family": family, "model_type": family, "outcome": outcome, "verdict": outcome}
            for family, found in outcomes.items() for outcome in found]


def _synthetic(directory: pathlib.Path) -> None:
    """Results files of two torch releases, as the scripts write them, without running any."""
    files = {
        "export-time-torch-2.14": (_stamp("2.14", "2030-01-02T03:04:05+00:00"), {"rows": _export_rows(0.5)}),
        "export-time-torch-2.15": (_stamp("2.15", "2030-01-03T03:04:05+00:00", "def5678-dirty"),
                                   {"rows": _export_rows(0.25)}),
        "zoo-torch-2.15": (_stamp("2.15", "2030-01-04T03:04:05+00:00"), {"rows": _zoo_rows()}),
    }
    for name, (info, data) in files.items():
        (directory / f"{name}.json").write_text(json.dumps({"stamp": info, "data": data}))
        (directory / f"{name}.md").write_text(f"# {name}\n")
    (directory / "unrelated.json").write_text(json.dumps({"rows": []}))


_NUMBER = re.compile(r"\d+(?:\.\d+)*")


def test_the_index_lists_every_file_and_no_number_they_do_not_hold(results, tmp_path):
    _synthetic(tmp_path)
    index = results.write_index(tmp_path).read_text()
    for name in ("export-time-torch-2.14", "export-time-torch-2.15", "zoo-torch-2.15"):
        assert f"[{name}]({name}.md)" in index and f"({name}.json)" in index
    assert "unrelated" not in index
    assert index.index("## Export time") < index.index("### torch 2.15") < index.index("### torch 2.14") \
        < index.index("## Model zoo")
    assert "def5678-dirty" in index and "2030-01-03T03:04:05+00:00" in index
    stamps = " ".join(json.dumps(json.loads(p.read_text()).get("stamp")) + " " + p.name
                      for p in tmp_path.glob("*.json"))
    stated = set(_NUMBER.findall(stamps))
    assert set(_NUMBER.findall(index)) <= stated
    assert "0.0123" not in index and "0.0345" not in index  # the data stays on the pages


def test_the_index_of_an_empty_directory_says_there_is_nothing_yet(results, tmp_path):
    index = results.write_index(tmp_path).read_text()
    assert "No results yet" in index and not _NUMBER.search(index)


def test_the_plots_are_drawn_from_the_json_and_embedded_in_the_index(tmp_path):
    pytest.importorskip("matplotlib")
    _synthetic(tmp_path)
    done = subprocess.run([sys.executable, str(BENCHMARKS / "plots.py"), "--results-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    plots = ["plot-export-time-depth.png", "plot-ratio.png", "plot-zoo-torch-2.15.png"]
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(plots)
    for plot in plots:
        assert (tmp_path / plot).read_bytes().startswith(b"\x89PNG")
    index = (tmp_path / "index.md").read_text()
    assert all(f"]({plot})" in index for plot in plots)
    assert "skipped" not in done.stdout


def test_a_plot_without_data_is_skipped_and_said_so(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    plots = _load("plots")
    (tmp_path / "plot-ratio.png").write_bytes(b"left from earlier data")
    assert plots.main(["--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("skipped:") == 3 and "removed plot-ratio.png" in out
    assert list(tmp_path.glob("*.png")) == [] and "No results yet" in (tmp_path / "index.md").read_text()


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
