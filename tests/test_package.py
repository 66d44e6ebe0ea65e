"""The package a stranger installs: its distribution name, licence, version and changelog, and a
built wheel that holds the package, its data and its licence files and nothing else."""

from __future__ import annotations

import importlib.metadata
import pathlib
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest

import exporter
from tests.package import DISTRIBUTION, wheel_problems

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
DERIVED_FROM_PYTORCH = sorted((ROOT / "tests" / "parity").glob("cases_*.py"))


def test_the_distribution_has_its_own_name_and_a_licence():
    assert PROJECT["name"] == DISTRIBUTION == "torch-exporter"
    assert PROJECT["license"] == "BSD-3-Clause"
    assert set(PROJECT["license-files"]) == {"LICENSE", "NOTICE"}
    assert (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License")
    assert PROJECT["scripts"] == {"exporter": "exporter.cli:main"}


def test_numpy_is_a_dependency_so_torch_does_not_warn_on_import():
    assert any(d.split(">")[0].split("=")[0].strip() == "numpy" for d in PROJECT["dependencies"])


def test_the_version_comes_from_the_package_metadata():
    assert exporter.__version__ == importlib.metadata.version(DISTRIBUTION) == PROJECT["version"]


def test_the_changelog_has_an_entry_for_this_version():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{PROJECT['version']}] - " in changelog and "## [Unreleased]" in changelog


def test_the_cases_derived_from_pytorch_keep_its_notice():
    notice = (ROOT / "NOTICE").read_text()
    assert "Copyright (c) 2016-     Facebook, Inc" in notice and "Redistribution and use in source and binary forms" in notice
    assert len(DERIVED_FROM_PYTORCH) == 5
    for path in DERIVED_FROM_PYTORCH:
        assert path.name in notice
        assert path.read_text().startswith("# Derived from PyTorch's test/export/test_export.py"), path
        assert "see NOTICE" in path.read_text().splitlines()[1], path


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    """The wheel ``python -m build`` makes, built from a copy of the sources (a build writes
    into the tree it builds)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("exporter", "passes", "verifier"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE", "NOTICE", "CHANGELOG.md", "MANIFEST.in"):
        shutil.copy(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(list(out.glob("torch_exporter-*.tar.gz"))) == 1
    (found,) = out.glob("torch_exporter-*.whl")
    return found


@pytest.mark.slow
def test_the_wheel_holds_the_package_its_data_and_licence_files_only(wheel):
    assert wheel_problems(str(wheel)) == []


@pytest.mark.slow
def test_the_wheel_check_fails_on_a_wheel_with_the_wrong_files(wheel, tmp_path):
    broken = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as good, zipfile.ZipFile(broken, "w") as bad:
        for item in good.infolist():
            if not item.filename.endswith(("licenses/NOTICE", "report.css")):
                bad.writestr(item, good.read(item))
        bad.writestr("tests/test_x.py", "")
        bad.writestr("exporter/docs/index.md", "")
    problems = wheel_problems(str(broken))
    assert "top-level entries ['exporter', 'tests'], not just exporter" in problems
    assert "missing exporter/cli/report_assets/report.css" in problems
    assert any(p.startswith("missing ") and p.endswith("/licenses/NOTICE") for p in problems)
    assert "holds exporter/docs/index.md" in problems and "holds tests/test_x.py" in problems
