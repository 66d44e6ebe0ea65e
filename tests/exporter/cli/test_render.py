"""Rendering reports for people: summaries, one-line verdicts, errors, the check table."""

import io
import os
import re

from rich.console import Console

from exporter import Category, ErrorInfo, InputSpecError, ModuleStatus, SubmoduleNode, SubmoduleReport, TraceError
from exporter.cli.check import CheckResult
from exporter.cli.job import run_export
from exporter.cli.render import (
    progress,
    render_check,
    render_error,
    render_export,
    render_quiet,
    render_submodules,
    shown_location,
    shown_path,
    shown_paths_in,
)
from exporter.cli.report import ExportReport
from exporter.cli.settings import ExportSettings


def _console() -> Console:
    return Console(file=io.StringIO(), width=100, record=True, emoji=False, color_system=None)


def _text(console: Console) -> str:
    return console.export_text()


def test_a_successful_export_shows_inputs_signature_ops_tree_and_verification(models):
    report = run_export(ExportSettings("unit_models.py:Net", verify=True, output="n.pt2"))
    console = _console()
    render_export(report, console, show_graph=True)
    text = _text(console)
    for expected in ("unit_models.Net, 136 parameters, eval mode", "inputs from example_inputs in unit_models.py",
                     "p_lin_weight", "aten.linear.default", "Net (Net): 1 op", "lin (Linear): 1 op",
                     "program vs eager (rtol 0.0001, atol 1e-05)", "fresh #2", "def forward(", "saved"):
        assert expected in text, expected
    quiet = _console()
    render_quiet(report, quiet)
    assert _text(quiet).startswith("ok unit_models.py:Net: 1 op -> ")


def test_errors_show_category_location_and_hint_and_the_traceback_only_when_verbose():
    try:
        raise TraceError("it broke\nsecond line", location="m.py:3", hint="do this", category=Category.MODEL_ERROR)
    except TraceError as e:
        error = ErrorInfo.from_exception(e)
    console = _console()
    render_error(error, console)
    text = _text(console)
    assert "export failed: model error" in text and "at m.py:3" in text and "hint: do this" in text
    assert "Traceback" not in text
    verbose = _console()
    render_error(error, verbose, verbose=True)
    assert "Traceback" in _text(verbose)

    internal = _console()
    render_error(ErrorInfo.from_exception(KeyError("k")), internal)
    internal_text = _text(internal)
    assert "export failed: internal" in internal_text and "run with -v for the traceback" in internal_text
    usage = _console()
    render_error(ErrorInfo.from_exception(InputSpecError("bad input")), usage)
    assert "input error" in _text(usage)


def test_a_failed_export_in_one_line():
    report = ExportReport(ExportSettings("m.py:M"))
    report.error = ErrorInfo.from_exception(TraceError("first\nsecond", location="m.py:9"))
    console = _console()
    render_quiet(report, console)
    assert _text(console).strip() == "FAILED m.py:M: [trace] first at m.py:9"


def test_a_failed_export_shows_the_submodule_tree_after_the_error(models):
    report = run_export(ExportSettings("unit_models.py:Pipeline", save=False, report_submodules=True))
    console = _console()
    render_export(report, console)
    text = _text(console)
    location = os.path.basename(report.error.location)
    tree = text[text.index("submodules exported on their own, static shapes"):].splitlines()[1:]
    assert [line.rstrip() for line in tree] == [
        "Pipeline ✗ data-dependent control flow",
        f"at {location}",
        f"├── pre (Linear) ✓ ok  {report.submodules.find('pre').seconds:.2f} s",
        f"├── gate (Branchy) ✗ data-dependent control flow  {report.submodules.find('gate').seconds:.2f} s  ← problem is here",
        f"│   at {location}",
        f"└── post (Linear) ✓ ok  {report.submodules.find('post').seconds:.2f} s",
        "the problem is in gate (Branchy)",
    ]
    assert text.index("export failed: data-dependent control flow") < text.index("submodules exported")
    quiet = _console()
    render_quiet(report, quiet)
    assert _text(quiet).rstrip().endswith(f"at {location}; fails in gate")


class _AsciiFile(io.StringIO):
    encoding = "ascii"


def test_the_submodule_tree_in_ascii_with_the_frontier_error_when_it_differs():
    model_error = ErrorInfo.from_exception(TraceError("the model failed", location="m.py:3"))
    inner = ErrorInfo.from_exception(TraceError("inner failure\nmore", location="m.py:9", hint="fix it", category=Category.MODEL_ERROR))
    leaf = SubmoduleNode("a.b", "Leaf", ModuleStatus.FAILED, calls=1, error=inner, seconds=0.25, frontier=True)
    skipped = SubmoduleNode("a.c", "Deep", ModuleStatus.SKIPPED, calls=1)
    container = SubmoduleNode("a", "ModuleList", ModuleStatus.NOT_CALLED, children=[leaf, skipped])
    root = SubmoduleNode("", "M", ModuleStatus.FAILED, calls=1, error=model_error, children=[container])
    console = Console(file=_AsciiFile(), width=100, record=True, emoji=False, color_system=None)
    render_submodules(SubmoduleReport(root, seconds=1.5), console)
    assert [line.rstrip() for line in _text(console).splitlines()] == [
        "submodules exported on their own, static shapes (1.50 s)",
        "M FAIL trace",
        "at m.py:3",
        "`-- a (ModuleList) not called itself",
        "    +-- b (Leaf) FAIL model error  0.25 s  <- problem is here",
        "    |   at m.py:9",
        "    |   inner failure",
        "    |   hint: fix it",
        "    `-- c (Deep) skipped",
        "the problem is in a.b (Leaf)",
    ]

    exports = _console()
    render_submodules(SubmoduleReport(SubmoduleNode("", "M", ModuleStatus.OK, calls=1, seconds=0.1), seconds=0.2), exports)
    assert _text(exports).splitlines()[1:] == ["M ✓ ok  0.10 s", "M exports on its own"]


def test_the_check_table_and_the_failure_panels():
    ok = ExportReport(ExportSettings("a.py:A"), status="ok", parameters=1234, ops={"aten.relu.default": 3}, timings={"total": 0.25})
    bad = ExportReport(ExportSettings("b.py:B"), timings={"total": 0.5})
    bad.error = ErrorInfo.from_exception(TraceError("no good", hint="try this"))
    console = _console()
    render_check([CheckResult("a.py:A", ok, drift=["op histogram changed:", "  x: 0 -> 1 (+1)"]), CheckResult("b.py:B", bad)], console)
    text = _text(console)
    assert "1,234" in text and "2 lines" in text and "0.25s" in text
    assert "a.py:A: drift from baseline" in text and "x: 0 -> 1 (+1)" in text
    assert "b.py:B: trace" in text and "hint: try this" in text
    assert "0/2 models passed" in text


def test_progress_is_silent_off_a_terminal():
    console = _console()
    with progress(console) as stage:
        stage("exporting")
    assert _text(console) == ""


LONG_NAMES = """
import torch

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_projection_with_a_long_name = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.attention_projection_with_a_long_name(x).relu()

class Deep(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder_stack_with_a_rather_long_name = torch.nn.ModuleList([Block() for _ in range(20)])
        self.final_normalization_layer = torch.nn.LayerNorm(4)

    def forward(self, x):
        for block in self.encoder_stack_with_a_rather_long_name:
            x = block(x)
        return {"hidden_states_of_the_whole_encoder_stack": x, "logits": [self.final_normalization_layer(x)]}

example_inputs = (torch.randn(2, 4),)
"""


def _narrow_console() -> Console:
    return Console(file=io.StringIO(), width=80, record=True, emoji=False, color_system=None)


def test_a_deep_model_summarised_at_80_columns_without_cutting_names(tmp_path, monkeypatch):
    (tmp_path / "deep_models.py").write_text(LONG_NAMES)
    monkeypatch.chdir(tmp_path)
    report = run_export(ExportSettings("deep_models.py:Deep", save=False))
    console = _narrow_console()
    render_export(report, console)
    text = _text(console)
    assert max(len(line) for line in text.splitlines()) <= 80 and "…" not in text
    for expected in (
        "signature: 1 input, 2 outputs",
        "42 parameters (408 elements, 1.6 KB) by module",
        "input   x                                         float32  [2, 4]",
        "output  hidden_states_of_the_whole_encoder_stack  float32  [2, 4]",
        "output  logits[0]",
        "encoder_stack_with_a_rather_long_name.0-19",
        "0-19 (Block x20): 2 ops each",
    ):
        assert expected in text, expected
    assert text.count("attention_projection_with_a_long_name (Linear)") == 1, "identical layers shown once"

    full = _narrow_console()
    render_export(report, full, signature="full")
    full_text = _text(full)
    assert max(len(line) for line in full_text.splitlines()) <= 80 and "…" not in full_text
    assert len(re.findall(r"^parameter ", full_text, re.M)) == 42, "every parameter on its own row"
    assert "logits[0] = " in full_text, "the graph's name beside the user's"
    assert full_text.count("  attention_projection_with_a_long_name.weight") == 20, "listed under its layer, whole"
    assert "encoder_stack_with_a_rather_long_name.19." in full_text


def test_verification_at_sizes_the_model_itself_cannot_run_is_a_note_not_a_mismatch():
    from exporter.cli.compare import Comparison, OutputDiff

    report = ExportReport(ExportSettings("m.py:M"), status="ok")
    report.verification = [
        Comparison("max batch=16 seq=512", (OutputDiff("logits", 0.0, 0.0, True),)),
        Comparison("min batch=1 seq=0", (), eager_error="RuntimeError: cannot reshape tensor of 0 elements"),
    ]
    console = _narrow_console()
    render_export(report, console)
    text = _text(console)
    assert "max batch=16 seq=512  logits" in text and "eager fails" in text
    assert "min batch=1 seq=0: eager fails at these inputs" in text and "MISMATCH" not in text


def test_the_range_table_shows_accepted_and_declared_ranges_and_why_they_differ():
    report = ExportReport(ExportSettings("m.py:M"), status="ok", model_name="M")
    report.signature = {"inputs": [], "outputs": []}
    report.dims = [
        {"name": "batch", "symbol": "s0", "kind": "named", "min": 1, "max": 16, "declared": [1, 16],
         "inputs": ["input_ids.shape[0]"], "note": ""},
        {"name": "past", "symbol": "s2", "kind": "named", "min": 0, "max": 60, "declared": [0, 60],
         "inputs": [f"cache.layers[{i}].{kv}.shape[2]" for i in range(32) for kv in ("keys", "values")], "note": ""},
        {"name": "s1", "symbol": "s1", "kind": "auto", "min": 2, "max": None, "declared": [0, None],
         "inputs": ["x.shape[1]"], "note": "min 2: torch traces sizes 0 and 1 as constants"},
    ]
    console = _narrow_console()
    render_export(report, console)
    text = _text(console)
    assert "batch  named  1..16    1..16     input_ids.shape[0]" in text
    assert "s1     auto   2..      0..       x.shape[1]" in text and "s1: min 2: torch traces" in text
    assert "cache.layers[1].keys.shape[2], 61 more" in text, "a size used all over names a few places"


def test_a_run_of_many_outputs_is_one_row_unless_one_of_them_mismatches():
    from exporter.cli.compare import Comparison, OutputDiff

    report = ExportReport(ExportSettings("m.py:M"), status="ok")
    paths = ["logits", *(f"cache.layers[{i}].{kv}" for i in range(8) for kv in ("keys", "values"))]
    report.verification = [
        Comparison("example", tuple(OutputDiff(p, 1e-7, 1e-8, True) for p in paths)),
        Comparison("max past=60", tuple(OutputDiff(p, 0.5 if p == "logits" else 0.0, 0.1, p != "logits") for p in paths)),
    ]
    console = _narrow_console()
    render_export(report, console)
    text = _text(console)
    assert re.search(r"example +all 17 +1e-07 +1e-08  ok", text)
    assert re.search(r"max past=60 +logits +0.5 +0.1  MISMATCH", text)
    assert text.count("cache.layers[7].values") == 1, "the failing run lists every output"


def test_the_artifact_check_counts_only_the_runs_eager_could_run():
    from exporter.cli.artifacts import Artifact
    from exporter.cli.compare import Comparison, OutputDiff

    runs = [Comparison("example", (OutputDiff("logits", 0.0, 0.0, True),)), Comparison("min seq=0", (), eager_error="E: e")]
    report = ExportReport(ExportSettings("m.py:M"), status="ok", verification=runs)
    report.artifacts = [Artifact("program", os.path.abspath("Llama.pt2"), 486_195, 0.83, "aten", runs)]
    console = _narrow_console()
    render_export(report, console)
    text = _text(console)
    assert "ok: 1 of 2 runs" in text
    assert re.search(r"program \(ATen\) +Llama.pt2 +474.8 KB +0 +- +- +ok", text), text


def test_the_artifacts_table_has_the_error_on_each_input_set_and_the_time_of_a_run():
    from exporter.cli.artifacts import Artifact
    from exporter.cli.compare import Comparison, OutputDiff
    from exporter.executorch import MethodLowering

    def run(label, error, seconds):
        return Comparison(label, (OutputDiff("out", error, error, error < 1e-3),), seconds=seconds)

    program = [run("example", 0.0, 0.002), run("fresh #1", 0.0, 0.004), run("max batch=16", 0.0, 0.003)]
    pte = [run("example", 2e-6, 0.010), run("fresh #1", 3e-6, 0.030), run("max batch=16", 5e-2, 0.020)]
    report = ExportReport(ExportSettings("m.py:M"), status="ok", verification=program)
    report.artifacts = [
        Artifact("program", os.path.abspath("M.pt2"), 2048, 0.1, "aten", program),
        Artifact("executorch", os.path.abspath("m.pte"), 4096, 2.0, verification=pte,
                 lowering=(MethodLowering("forward", 3, {"aten.topk.default": 1}),)),
    ]
    console = _narrow_console()
    render_export(report, console)
    text = _text(console)
    assert re.search(r"artifact +file +size +example +fresh +sizes +per run +check", text), text
    assert re.search(r"program \(ATen\) +M.pt2 +2.0 KB +0 +0 +0 +3.0 ms +ok: 3 runs", text), text
    assert re.search(r"ExecuTorch +m.pte +4.0 KB +2e-06 +3e-06 +0.05 +20.0 ms +MISMATCH on 1 of", text), text
    assert "3 delegated parts; outside the delegate: aten.topk.default x1" in text
    row = report.artifacts[1].to_json()["verification"]
    assert row["max_abs_error"] == {"example": 2e-6, "fresh": 3e-6, "sizes": 5e-2}
    assert row["seconds_per_run"] == 0.02


def test_state_updates_are_outputs_that_say_so():
    report = ExportReport(ExportSettings("m.py:M"), status="ok", model_name="M")
    report.signature = {
        "inputs": [{"kind": "BUFFER", "name": "b_count", "target": "count", "persistent": True, "shape": [], "dtype": "float32",
                    "numel": 1, "bytes": 4},
                   {"kind": "USER_INPUT", "name": "x", "target": None, "path": "x", "shape": [2, 4], "dtype": "float32"}],
        "outputs": [{"kind": "BUFFER_MUTATION", "name": "add_", "target": "count", "shape": [], "dtype": "float32"},
                    {"kind": "USER_OUTPUT", "name": "mul", "target": None, "path": "output", "shape": [2, 4], "dtype": "float32"}],
    }
    console = _narrow_console()
    render_export(report, console)
    text = _text(console)
    assert "output  updates buffer count" in text and "1 buffer (1 element, 4 B) by module" in text


def test_paths_under_the_current_directory_are_shown_relative_and_others_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    here = os.getcwd()
    elsewhere = os.path.dirname(here)
    cases = [
        (os.path.join(here, "MLP.pt2"), "MLP.pt2"),
        (os.path.join(here, "out", "MLP.pt2"), os.path.join("out", "MLP.pt2")),
        ("out/MLP.pt2", "out/MLP.pt2"),
        (os.path.join(elsewhere, "MLP.pt2"), os.path.join(elsewhere, "MLP.pt2")),
        (here + "-other" + os.sep + "m.py", here + "-other" + os.sep + "m.py"),
    ]
    for path, shown in cases:
        assert shown_path(path) == shown, path
    assert shown_location(os.path.join(here, "branchy.py") + ":6") == "branchy.py:6"
    assert shown_location(os.path.join(elsewhere, "m.py") + ":6") == os.path.join(elsewhere, "m.py") + ":6"
    assert shown_location("<string>:3") == "<string>:3"
    inside, outside = os.path.join(here, "m.py"), os.path.join(elsewhere, "m.py")
    assert shown_paths_in(f"u0 = aten.item at {inside}:6; see {outside}:2") == f"u0 = aten.item at m.py:6; see {outside}:2"
    assert shown_paths_in(f"copied to /mirror{inside}") == f"copied to /mirror{inside}"


LOOP = """
import torch

class Repeat(torch.nn.Module):
    def forward(self, x, n):
        for _ in range(n):
            x = x * 2
        return x

example_inputs = (torch.ones(3), torch.tensor(3))
"""


def test_the_terminal_shows_written_files_and_source_lines_relative_and_the_report_keeps_them_absolute(models):
    report = run_export(ExportSettings("unit_models.py:Net", output="out/n.pt2"))
    assert report.ok and os.path.isabs(report.output_file) and report.to_json()["output_file"] == report.output_file
    console = _narrow_console()
    render_export(report, console)
    text = _text(console)
    assert re.search(r"program \(ATen\) +out/n.pt2 ", text), text
    assert re.search(r"^saved out/n.pt2 \(", text, re.M), text
    assert str(models) not in text
    quiet = _console()
    render_quiet(report, quiet)
    assert " -> out/n.pt2 (" in _text(quiet)

    (models / "loop.py").write_text(LOOP)
    failed = run_export(ExportSettings("loop.py:Repeat"))
    assert os.path.isabs(failed.error.location) and failed.to_json()["error"]["location"] == failed.error.location
    console = _console()
    render_export(failed, console)
    text = _text(console)
    assert re.search(r"│ at loop.py:6 +│", text), text
    assert str(models) not in text
    quiet = _console()
    render_quiet(failed, quiet)
    assert _text(quiet).strip().endswith(" at loop.py:6"), _text(quiet)

    drafted = run_export(ExportSettings("loop.py:Repeat", draft=True, save=False))
    assert any(os.path.isabs(a.location) and str(models) in (a.detail or "") for a in drafted.draft.assumptions)
    console = _console()
    render_export(drafted, console)
    text = _text(console)
    assert "aten.item at" in text and text.count("loop.py:6") == 2, text  # where, and the detail's location
    assert str(models) not in text
