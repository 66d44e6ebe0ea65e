"""What a built wheel must hold: the package with its data and licence files, under the
distribution name, and none of the repository's tests, benchmarks or docs.

    python -m tests.package dist/torch_exporter-0.1.0-py3-none-any.whl

Used by ``.ci/wheel`` on the wheel it installs, and by ``tests/test_package.py``."""

from __future__ import annotations

import sys
import zipfile

DISTRIBUTION = "torch-exporter"

NEEDED = (
    "exporter/__init__.py",
    "exporter/cli/report_assets/graph.js",
    "exporter/cli/report_assets/report.css",
    "exporter/passes/lift_constants.py",
    "exporter/verifier/__init__.py",
)
"""Files the installed package cannot work without (the HTML report's assets among them)."""

METADATA = ("Name: torch-exporter", "License-Expression: BSD-3-Clause", "License-File: LICENSE", "License-File: NOTICE")


def wheel_problems(path: str) -> list[str]:
    """Everything wrong with the wheel at ``path``; empty when it is right."""
    with zipfile.ZipFile(path) as wheel:
        names = wheel.namelist()
        top = {name.split("/")[0] for name in names}
        info = next((t for t in top if t.endswith(".dist-info")), None)
        if info is None:
            return ["no .dist-info directory"]
        metadata = wheel.read(f"{info}/METADATA").decode().splitlines()
    problems = []
    if top != {"exporter", info}:
        problems.append(f"top-level entries {sorted(top - {info})}, not just exporter")
    for needed in (*NEEDED, f"{info}/licenses/LICENSE", f"{info}/licenses/NOTICE"):
        if needed not in names:
            problems.append(f"missing {needed}")
    for name in names:
        if any(part in ("tests", "benchmarks", "docs", "examples") for part in name.split("/")[:-1]):
            problems.append(f"holds {name}")
    problems += [f"METADATA lacks {line!r}" for line in METADATA if line not in metadata]
    return problems


if __name__ == "__main__":
    found = wheel_problems(sys.argv[1])
    sys.exit("the wheel is wrong:\n  " + "\n  ".join(found) if found else 0)
