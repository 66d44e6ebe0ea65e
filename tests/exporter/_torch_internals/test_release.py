"""The supported releases: the running one is among them, the package's dependency range says
the same, and any other release is refused at import with one line."""

import os
import pathlib
import subprocess
import sys
import tomllib

import attrs
import pytest

from exporter._torch_internals import release
from exporter.trace.fast import FastPaths

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    "version, expected",
    [("2.13.0", (2, 13)), ("2.15.0+cu132", (2, 15)), ("2.14.1+cpu", (2, 14)), ("2.16.0.dev20261201", (2, 16))],
)
def test_releases_are_read_from_version_strings(version, expected):
    assert release.parse_release(version) == expected


def test_a_string_that_is_no_version_is_refused():
    with pytest.raises(ValueError, match="not a torch version"):
        release.parse_release("nightly")


def test_the_running_release_is_supported_and_the_dependency_range_says_so():
    assert release.RELEASE in release.SUPPORTED
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert release.supported_range() in dependencies
    assert release.at_least(*release.RELEASE) and not release.at_least(release.RELEASE[0], release.RELEASE[1] + 1)


def test_every_fast_path_has_a_switch_and_a_proven_list():
    assert set(release.FAST_PATHS) == set(attrs.fields_dict(FastPaths)) == set(release.FAST_PATHS_PROVEN)


def _import_exporter_as(version: str, **env: str) -> subprocess.CompletedProcess:
    code = f"import torch; torch.__version__ = {version!r}; import exporter; print(exporter.trace.fast.FastPaths.resolve())"
    environment = {k: v for k, v in os.environ.items() if k != release.ALLOW_UNSUPPORTED} | env
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, cwd=ROOT)


@pytest.mark.slow
@pytest.mark.parametrize("version", ["2.12.1", "2.16.0", "3.0.0"])
def test_an_unsupported_release_is_refused_at_import_with_one_line(version):
    done = _import_exporter_as(version)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        f"exporter.UnsupportedTorch: exporter supports torch 2.13 to 2.15 and found torch {version}: install a "
        f"supported release (pip install 'torch>=2.13,<2.16'), or set {release.ALLOW_UNSUPPORTED}=1 to try this "
        "one with the fast paths off"
    )
    assert "AttributeError" not in done.stderr


@pytest.mark.slow
def test_an_unsupported_release_may_be_tried_on_the_plain_path():
    done = _import_exporter_as("2.16.0", **{release.ALLOW_UNSUPPORTED: "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr(FastPaths())


def _command_line_as(version: str, tmp_path: pathlib.Path, *args: str, script: bool = False) -> subprocess.CompletedProcess:
    """The command line in a process whose torch says it is ``version`` (set by a sitecustomize
    before anything imports exporter)."""
    (tmp_path / "sitecustomize.py").write_text(f"import torch\ntorch.__version__ = {version!r}\n")
    environment = {k: v for k, v in os.environ.items() if k != release.ALLOW_UNSUPPORTED}
    environment["PYTHONPATH"] = os.pathsep.join([str(tmp_path), environment.get("PYTHONPATH", "")])
    command = [str(pathlib.Path(sys.executable).with_name("exporter"))] if script else [sys.executable, "-m", "exporter"]
    return subprocess.run([*command, *args], capture_output=True, text=True, env=environment, cwd=ROOT)


@pytest.mark.slow
@pytest.mark.parametrize("script", [False, True], ids=["python -m exporter", "exporter script"])
def test_the_command_line_refuses_an_unsupported_release_with_one_line_and_exit_2(tmp_path, script):
    done = _command_line_as("2.12.1", tmp_path, "examples/mlp.py:MLP", script=script)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "exporter: error: exporter supports torch 2.13 to 2.15 and found torch 2.12.1: install a supported release "
        f"(pip install 'torch>=2.13,<2.16'), or set {release.ALLOW_UNSUPPORTED}=1 to try this one with the fast "
        "paths off"
    ]
    assert done.stdout == ""


@pytest.mark.slow
def test_the_command_line_shows_the_refusals_traceback_with_verbose(tmp_path):
    done = _command_line_as("2.12.1", tmp_path, "examples/mlp.py:MLP", "--verbose")
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("exporter.UnsupportedTorch: exporter supports torch")


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["python", "-m", "exporter", "m.py:M"], True),
        (["python", "-X", "importtime", "-m", "exporter"], True),
        (["python", "-mexporter"], True),
        (["python", "-m", "pytest"], False),
        (["python", "-c", "import exporter"], False),
        (["python", "serve.py"], False),
        (["python", "/venv/bin/exporter", "check"], True),
    ],
)
def test_the_command_line_is_told_from_other_programs(monkeypatch, argv, expected):
    monkeypatch.setattr(sys, "orig_argv", argv)
    monkeypatch.setattr(sys, "argv", ["-c"] if "-c" in argv else argv[1:] if argv[1] != "-m" else [argv[2]])
    assert release.started_as_command_line() is expected
