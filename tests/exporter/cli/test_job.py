"""run_export: one export start to finish, every outcome captured in the report."""

import pytest
import torch

import exporter

from exporter import Category
from exporter.cli.job import run_export
from exporter.cli.settings import ExportSettings


def test_a_good_export_is_reported_verified_and_saved(models):
    report = run_export(ExportSettings("unit_models.py:Net", verify=True, output="out/net.pt2"))
    assert report.ok and report.exit_code == 0 and report.error is None
    assert report.model_name == "Net" and report.model_class == "unit_models.Net" and report.parameters == 136
    assert report.inputs == [{"path": "args[0]", "kind": "tensor", "dtype": "float32", "shape": [3, 16]}]
    assert report.ops == {"aten.linear.default": 1}
    assert [c.label for c in report.verification] == ["example", "fresh #1", "fresh #2"]
    assert all(c.ok for c in report.verification)
    assert report.output_file == str(models / "out" / "net.pt2")
    assert torch.export.load(report.output_file).module()(torch.ones(3, 16)).shape == (3, 8)
    assert list(report.timings)[:3] == ["load", "inputs", "export"] and "total" in report.timings
    assert {"export.trace", "export.passes", "verify", "save"} <= set(report.timings)


def test_failures_are_captured_with_their_category(models):
    failed = run_export(ExportSettings("unit_models.py:Branchy", save=False))
    assert not failed.ok and failed.exit_code == 1
    assert failed.error.category is Category.DATA_DEPENDENT_CONTROL_FLOW
    loop_line = (models / "unit_models.py").read_text().splitlines().index("        for _ in range(x.gt(0).sum()):") + 1
    assert failed.error.location == f"{models / 'unit_models.py'}:{loop_line}"
    assert not (models / "Branchy.pt2").exists()

    missing = run_export(ExportSettings("unit_models.py:Nope"))
    assert missing.exit_code == 2 and missing.error.is_input_error and "has no 'Nope'" in missing.error.message


def test_a_program_that_differs_from_eager_fails_verification_and_is_not_saved(models):
    report = run_export(ExportSettings("unit_models.py:Noisy", verify=True))
    assert report.exit_code == 1 and report.error.type == "VerificationMismatch"
    assert report.error.category is Category.VERIFICATION
    assert report.error.message.startswith("program and eager differ (rtol 0.0001, atol 1e-05): example output: max abs error")
    assert report.verification and not all(c.ok for c in report.verification)
    assert not (models / "Noisy.pt2").exists()


def test_a_failed_export_reports_which_submodules_export_when_asked(models):
    report = run_export(ExportSettings("unit_models.py:Pipeline", save=False, report_submodules=True))
    assert report.exit_code == 1 and report.error.category is Category.DATA_DEPENDENT_CONTROL_FLOW
    submodules = report.submodules
    assert [(n.name, n.status.value) for n in submodules.root.walk()] == [
        ("", "failed"), ("pre", "ok"), ("gate", "failed"), ("post", "ok")
    ]
    assert submodules.root.error == report.error and submodules.root.seconds is None  # not exported twice
    assert [n.name for n in submodules.frontier] == ["gate"]
    assert submodules.frontier[0].error.location == report.error.location

    assert run_export(ExportSettings("unit_models.py:Pipeline", save=False)).submodules is None  # not asked
    exported = run_export(ExportSettings("unit_models.py:Net", save=False, report_submodules=True))
    assert exported.ok and exported.submodules is None
    # a program that differs from eager: every module exports, nothing to look for
    mismatch = run_export(ExportSettings("unit_models.py:Noisy", save=False, verify=True, report_submodules=True))
    assert mismatch.error.category is Category.VERIFICATION and mismatch.submodules is None
    wrong_inputs = run_export(
        ExportSettings("unit_models.py:Pipeline", example_inputs="f32[3,5]", save=False, report_submodules=True)
    )
    assert wrong_inputs.exit_code == 2 and wrong_inputs.submodules is None


def test_dynamic_flags_become_a_dynamic_shapes_spec(models):
    report = run_export(ExportSettings("unit_models.py:Net", save=False, dynamic=["x.0=batch:2..32"]))
    assert report.ok, report.error
    assert list(report.range_constraints.values()) == [[2, 32]]
    assert report.signature["inputs"][-1]["shape"][0] != 2  # symbolic


def test_when_an_artifact_fails_no_file_is_written(models, monkeypatch):
    from exporter.cli import job

    def broken(program, args, kwargs, path):
        open(path, "w").close()
        raise RuntimeError("the ONNX exporter gave up")

    monkeypatch.setattr(job, "build_onnx", broken)
    report = run_export(ExportSettings("unit_models.py:Net", onnx="net.onnx"))
    assert not report.ok and "the ONNX exporter gave up" in report.error.message
    assert sorted(p.name for p in models.iterdir() if p.name != "__pycache__") == ["unit_models.py"]
    assert [a.kind for a in report.artifacts] == ["program"]


def test_a_model_that_exits_or_runs_out_of_memory_fails_its_export_not_the_process(tmp_path, monkeypatch):
    (tmp_path / "dying.py").write_text(
        "import sys, torch\n"
        "class Exits(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        sys.exit(4)\n"
        "class Huge(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.w = torch.nn.Parameter(torch.ones(1 << 42))  # 16 TiB: refused by the allocator\n"
        "example_inputs = (torch.randn(2),)\n"
    )
    monkeypatch.chdir(tmp_path)
    exits = run_export(ExportSettings("dying.py:Exits", save=False))
    assert exits.error.category is Category.CRASH and exits.error.message == "the model called sys.exit(4) while exporting"
    huge = run_export(ExportSettings("dying.py:Huge", save=False))
    assert huge.error.category is Category.MEMORY
    assert huge.error.message.startswith("out of memory while loading the model: Huge() raised RuntimeError")
    assert huge.error.location.endswith("dying.py:8")


def test_a_dynamic_spec_given_as_flags_is_answered_with_the_flags_that_fix_it(models, tmp_path):
    source = tmp_path / "shapes.py"
    source.write_text(
        "import torch\n"
        "class Doubled(torch.nn.Module):\n"
        "    def forward(self, x, y):\n"
        "        return torch.cat([x, x], 0) + y\n"
        "class Bounded(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        torch._check(x.shape[0] <= 16)\n"
        "        return x.view(x.shape[0] // 2, 2, -1)\n"
        "class Fixed(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x.view(3, -1)\n"
    )
    cases = [
        ("Doubled", "f32[3,4] f32[6,4]", ["x.0=a", "y.0=b"], ["fix: --dynamic y.0=2*a"]),
        ("Bounded", "f32[4,3]", ["x.0=b"], ["fix: --dynamic x.0=2*b_2", "fix: --dynamic x.0=b:..16"]),
        ("Fixed", "f32[3,4]", ["x.0=b"], ["fix: --dynamic x.0=static"]),
    ]
    for name, inputs, flags, fixes in cases:
        report = run_export(ExportSettings(f"{source}:{name}", example_inputs=inputs, dynamic=flags, save=False))
        assert report.exit_code == 1 and report.error.category is Category.DYNAMIC_SHAPE_CONSTRAINT, name
        for fix in fixes:
            assert fix in report.error.message, (name, report.error.message)
        assert "dynamic_shapes" not in report.error.message.split("fix:", 1)[1], report.error.message
        assert "--dynamic flags as listed above" in report.error.hint

    # a draft export takes the example's sizes past the violation and lists the flag to fix it
    drafted = run_export(ExportSettings(f"{source}:Doubled", example_inputs="f32[3,4] f32[6,4]", dynamic=["x.0=a", "y.0=b"], draft=True, save=False))
    assert drafted.ok, drafted.error
    assert [a.detail for a in drafted.draft.assumptions] == ["fix: --dynamic y.0=2*a"]

    # the library keeps writing dynamic_shapes entries
    namespace: dict = {}
    exec(source.read_text(), namespace)
    a, b = torch.export.Dim("a"), torch.export.Dim("b")
    with pytest.raises(exporter.ConstraintError) as info:
        exporter.export(namespace["Doubled"](), (torch.randn(3, 4), torch.randn(6, 4)), dynamic_shapes=({0: a}, {0: b}))
    assert 'fix: "y": {0: 2 * a}' in info.value.message and "--dynamic y.0" not in info.value.message


def test_a_failed_export_still_names_its_inputs_by_forward_parameter(models):
    from exporter.cli.analysis import input_names

    failed = run_export(ExportSettings("unit_models.py:Branchy", example_inputs="f32[3]", save=False))
    assert failed.exit_code == 1 and failed.signature is None
    assert [leaf["path"] for leaf in failed.inputs] == ["args[0]"]  # the JSON keeps the inputs as given
    assert input_names(failed.signature, failed.inputs, failed.input_paths) == ["x"]


def test_the_inputs_are_bound_and_the_spec_read_once_per_export(models, monkeypatch):
    """The command line binds the inputs (its flags need forward()'s names) and hands them to
    the export, which reads the spec; the Dim names come back with the program."""
    import exporter._pipeline as pipeline
    import exporter.cli.job as job
    from exporter.inputs import bind_inputs, plan_dynamic_shapes

    calls = []
    monkeypatch.setattr(job, "bind_inputs", lambda *a: calls.append("bind") or bind_inputs(*a))
    monkeypatch.setattr(pipeline, "bind_inputs", lambda *a: calls.append("bind") or bind_inputs(*a))
    monkeypatch.setattr(pipeline, "plan_dynamic_shapes", lambda *a: calls.append("plan") or plan_dynamic_shapes(*a))
    report = run_export(ExportSettings("unit_models.py:Net", dynamic=["x.0=batch:2..32"], save=False, verify=True))
    assert report.ok, report.error
    assert calls == ["bind", "plan"]
    assert [row["name"] for row in report.dims] == ["batch"]


def test_an_input_that_holds_no_tensor_is_an_input_the_flags_can_name(models, tmp_path):
    source = tmp_path / "options.py"
    source.write_text(
        "import torch\n"
        "class Options(torch.nn.Module):\n"
        "    def forward(self, x, opts=None):\n"
        "        return x * (1.0 + len(opts or {}))\n"
        "def example_inputs():\n"
        "    return (), {'x': torch.randn(3, 4), 'opts': {}}\n"
    )
    report = run_export(ExportSettings(f"{source}:Options", dynamic=["x.0=batch"], save=False, verify=True))
    assert report.ok, report.error
    assert report.program.call_spec.in_spec == torch.utils._pytree.tree_structure(((), {"x": 0, "opts": {}}))

    wrong = run_export(ExportSettings(f"{source}:Options", dynamic=["x.0=batch", "opts.0=seq"], save=False))
    assert wrong.exit_code == 2 and "dynamic_shapes['opts'] has a spec for 0, which opts does not have" in wrong.error.message
    assert wrong.error.hint == "opts is empty: nothing in it can be dynamic, so give it {} or None"
