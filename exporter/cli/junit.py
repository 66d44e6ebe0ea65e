"""JUnit XML for ``exporter check``: one test case per model, which CI systems display."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from .._errors import Category
from .save import write_atomically

__all__ = ["write_junit"]

_STOPPED = (Category.CRASH, Category.TIMEOUT, Category.MEMORY)


def write_junit(path: str, results, suite: str = "exporter.check") -> None:
    """Write ``results`` (CheckResult-like: reference, report, drift lines) as a JUnit XML file."""
    failures = sum(1 for r in results if not r.passed)
    total_time = sum(r.report.timings.get("total", 0.0) for r in results)
    root = ET.Element("testsuites", name=suite, tests=str(len(results)), failures=str(failures), time=f"{total_time:.3f}")
    node = ET.SubElement(
        root, "testsuite", name=suite, tests=str(len(results)), failures=str(failures), errors="0", time=f"{total_time:.3f}"
    )
    for result in results:
        report = result.report
        case = ET.SubElement(
            node, "testcase", classname=suite, name=result.reference, time=f"{report.timings.get('total', 0.0):.3f}"
        )
        if report.error:
            error = report.error
            failure = ET.SubElement(case, "failure", message=error.headline, type=error.category.value)
            failure.text = error.to_text()
        elif result.drift:
            failure = ET.SubElement(case, "failure", message="signature or op histogram drifted from the baseline", type="drift")
            failure.text = "\n".join(result.drift)
        elif not result.passed:  # exported, but nothing to hold it to: no baseline entry
            failure = ET.SubElement(case, "failure", message=result.note or result.status, type=result.status)
            failure.text = result.note or result.status
        out = ET.SubElement(case, "system-out")
        out.text = f"ops: {sum(report.ops.values())}, parameters: {report.parameters}"
        if report.error and report.error.category in _STOPPED and report.error.traceback:
            # where the worker crashed or hung: every thread's stack, as faulthandler wrote it
            ET.SubElement(case, "system-err").text = report.error.traceback
    write_atomically(path, lambda tmp: ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True), suffix=".xml")
