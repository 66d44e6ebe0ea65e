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


def test_an_unsupported_release_may_be_tried_on_the_plain_path():
    done = _import_exporter_as("2.16.0", **{release.ALLOW_UNSUPPORTED: "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr(FastPaths())
