"""CI and the shipped workflows cover every supported torch release, and their commands parse."""

import pathlib
import re
import shlex

from exporter._torch_internals.release import SUPPORTED, parse_release

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_ci_runs_the_suite_on_every_supported_release():
    run = (ROOT / ".ci" / "run").read_text()
    default = re.findall(r"pip install torch==([\d.]+)", run)
    others = re.findall(r"^\.ci/release ([\d.]+)$", run, flags=re.M)
    assert len(default) == 1 and "python -m pytest -q -n 2\n" in run
    assert sorted(parse_release(v) for v in default + others) == sorted(SUPPORTED)
    assert re.search(r"^\.ci/wheel [\d.]+$", run, flags=re.M), "CI installs and runs the built wheel"
    release = (ROOT / ".ci" / "release").read_text()
    assert "PIP_CONFIG_FILE=/dev/null" in release and "python\" -m pytest -q -n 2" in release


def test_the_workflow_matrix_is_the_supported_releases_and_its_check_parses():
    from exporter.cli.main import _check_parser

    text = (ROOT / "examples" / "ci" / "exporter-check.yml").read_text()
    matrix = re.search(r"torch: \[([^\]]*)\]", text).group(1)
    releases = [parse_release(v.strip().strip('"')) for v in matrix.split(",")]
    assert releases == sorted(SUPPORTED)
    joined = text.replace("\\\n", " ").replace("${{ matrix.torch }}", "2.15.0")
    command = next(line for line in joined.splitlines() if "python -m exporter check" in line and "#" not in line)
    parsed = _check_parser().parse_args(shlex.split(command.split("python -m exporter", 1)[1])[1:])
    assert parsed.baseline == "exporter-baseline-torch-2.15.0.json" and parsed.junit == "exporter-junit.xml"
