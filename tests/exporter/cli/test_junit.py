"""JUnit XML: one test case per model; failures carry the category and the whole error text."""

import xml.etree.ElementTree as ET

from exporter import ErrorInfo, TraceError
from exporter.cli.check import CheckResult
from exporter.cli.junit import write_junit
from exporter.cli.report import ExportReport
from exporter.cli.settings import ExportSettings


def _result(reference, *, error=None, drift=()):
    report = ExportReport(ExportSettings(reference), status="failed" if error else "ok", timings={"total": 0.5})
    report.error = error
    report.ops = {"aten.relu.default": 2}
    return CheckResult(reference, report, drift=list(drift))


def test_cases_failures_and_drift(tmp_path):
    error = ErrorInfo.from_exception(TraceError("first line\nsecond", location="m.py:4", hint="do this"))
    results = [_result("ok.py:M"), _result("bad.py:M", error=error), _result("drift.py:M", drift=["op histogram changed:"])]
    path = tmp_path / "deep" / "j.xml"
    write_junit(str(path), results)
    suite = ET.parse(path).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("time")) == ("3", "2", "1.500")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["ok.py:M"].find("failure") is None
    failure = cases["bad.py:M"].find("failure")
    assert (failure.get("type"), failure.get("message")) == ("trace", "first line")
    assert failure.text == error.to_text() == "first line\nsecond\n  at m.py:4\n  hint: do this"
    assert cases["drift.py:M"].find("failure").get("type") == "drift"
    assert cases["ok.py:M"].find("system-out").text == "ops: 2, parameters: None"


def test_a_model_with_no_baseline_entry_is_a_failed_case_saying_so(tmp_path):
    """It counts as a failure (check exits 1), so CI must show the case failed too."""
    missing = _result("new.py:M")
    missing.note = "no baseline entry; record one with --update-baseline"
    path = tmp_path / "j.xml"
    write_junit(str(path), [_result("ok.py:M"), missing])
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite.get("failures") == "1"
    failure = {c.get("name"): c for c in suite.findall("testcase")}["new.py:M"].find("failure")
    assert failure.get("type") == "no baseline" and "--update-baseline" in failure.get("message")
