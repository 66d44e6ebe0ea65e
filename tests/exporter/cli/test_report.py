"""The report's JSON schema and exit codes."""

from exporter import ErrorInfo, InputSpecError, ModuleStatus, SubmoduleNode, SubmoduleReport, TraceError
from exporter.cli.compare import Comparison, OutputDiff
from exporter.cli.report import REPORT_SCHEMA, ExportReport, describe_leaf
from exporter.cli.settings import ExportSettings


def test_the_json_has_every_documented_key():
    report = ExportReport(ExportSettings("m.py:M", dynamic=["x.0=b"]), status="ok", timings={"total": 1.23456789})
    report.verification = [Comparison("example", (OutputDiff("output", 0.0, 0.0, True),))]
    data = report.to_json()
    assert list(data) == [
        "schema", "status", "model", "inputs", "output_file", "ir", "artifacts", "timings", "dynamic",
        "range_constraints", "dims", "signature", "ops", "modules", "verification", "draft", "branches", "notes", "error", "submodules",
        "versions",
    ]
    assert data["draft"] is None
    assert data["schema"] == REPORT_SCHEMA == "exporter.report/1"
    assert data["timings"] == {"total": 1.234568} and data["dynamic"] == ["x.0=b"]
    assert data["verification"]["runs"] == [
        {"inputs": "example", "passed": True, "error": None, "eager_error": None,
         "outputs": [{"path": "output", "max_abs": 0.0, "max_rel": 0.0, "ok": True, "note": ""}],
         "seconds": None, "flag": None}
    ]
    assert data["error"] is None and data["submodules"] is None and "program" not in data


def test_the_submodule_tree_goes_into_the_json():
    report = ExportReport(ExportSettings("m.py:M", report_submodules=True))
    report.error = ErrorInfo.from_exception(TraceError("broke", location="m.py:3"))
    leaf = SubmoduleNode("gate", "Gate", ModuleStatus.FAILED, calls=1, error=report.error, seconds=0.5, frontier=True)
    root = SubmoduleNode("", "M", ModuleStatus.FAILED, calls=1, error=report.error, children=[leaf])
    report.submodules = SubmoduleReport(root, seconds=1.0)
    data = report.to_json()["submodules"]
    assert data["frontier"] == ["gate"] and data["seconds"] == 1.0
    assert data["root"]["children"][0] == {
        "name": "gate", "class": "Gate", "status": "failed", "calls": 1, "seconds": 0.5, "frontier": True,
        "error": {"type": "TraceError", "category": "trace", "message": "broke", "location": "m.py:3", "hint": None},
        "children": [],
    }


def test_exit_codes_follow_the_error():
    report = ExportReport(ExportSettings("m.py:M"))
    report.error = ErrorInfo.from_exception(InputSpecError("bad"))
    assert report.exit_code == 2 and report.to_json()["error"]["category"] == "input"
    report.error = ErrorInfo.from_exception(TraceError("broke"))
    assert report.exit_code == 1
    report.status, report.error = "ok", None
    assert report.exit_code == 0


def test_leaves_are_described_by_kind():
    import torch

    assert describe_leaf("args[0]", torch.zeros(2, 3, dtype=torch.int64)) == {
        "path": "args[0]", "kind": "tensor", "dtype": "int64", "shape": [2, 3]
    }
    assert describe_leaf("kwargs['s']", 0.5) == {"path": "kwargs['s']", "kind": "constant", "value": 0.5}
    assert describe_leaf("kwargs['d']", torch.float16)["value"] == "torch.float16"


def test_a_report_read_back_from_its_json_keeps_what_verdicts_and_baselines_need():
    from exporter import Category, ErrorInfo

    error = ErrorInfo("TraceError", Category.DATA_DEPENDENT_CONTROL_FLOW, "it branches", "m.py:3", "use torch.cond")
    report = ExportReport(ExportSettings("m.py:M"), timings={"total": 2.5}, parameters=7, ops={"aten.add.Tensor": 2},
                          error=error, versions={"torch": "2.13.0"}, ir="aten")
    back = ExportReport.from_json(report.to_json())
    assert (back.settings.model, back.status, back.parameters, back.ops, back.versions, back.ir) == (
        "m.py:M", "failed", 7, {"aten.add.Tensor": 2}, {"torch": "2.13.0"}, "aten")
    assert back.error == error and back.exit_code == 1 and back.timings == {"total": 2.5}
