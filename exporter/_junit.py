"""JUnit XML for ``exporter check``: one test case per model, which CI systems display."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

__all__ = ["write_junit"]


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
            err = report.error
            failure = ET.SubElement(case, "failure", message=err["message"].splitlines()[0], type=err.get("category") or "error")
            details = [err["message"]]
            if err.get("location"):
                details.append(f"at {err['location']}")
            if err.get("hint"):
                details.append(f"hint: {err['hint']}")
            failure.text = "\n".join(details)
        elif result.drift:
            failure = ET.SubElement(case, "failure", message="signature or op histogram drifted from the baseline", type="drift")
            failure.text = "\n".join(result.drift)
        out = ET.SubElement(case, "system-out")
        out.text = f"ops: {sum(report.ops.values())}, parameters: {report.parameters}"
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
