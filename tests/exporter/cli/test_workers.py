"""Isolated workers: timeouts as the command line takes them, where a dump says the model
stopped, and what a worker's ending reports (the CLI cases are in test_check_isolation.py)."""

from __future__ import annotations

import os
import textwrap

import pytest

from exporter import Category, InputSpecError
from exporter.cli.settings import ExportSettings
from exporter.cli.workers import Limits, parse_timeout, run_isolated


@pytest.mark.parametrize("value, seconds", [("600", 600.0), (2.5, 2.5), ("0", None), (0, None)])
def test_timeouts_in_seconds_and_zero_is_no_limit(value, seconds):
    assert parse_timeout(value) == seconds


@pytest.mark.parametrize("value", ["soon", "-1", "inf", "nan", True])
def test_a_timeout_that_is_not_one_is_refused(value):
    with pytest.raises(InputSpecError, match="is not a number of seconds"):
        parse_timeout(value)


def test_the_location_is_the_innermost_frame_of_the_users_code():
    from exporter.cli.workers import _user_location

    dump = textwrap.dedent(
        f"""\
        Fatal Python error: Segmentation fault

        Thread 0x00007f0000000001 (most recent call first):
          File "/srv/models/other.py", line 3 in spin

        Current thread 0x00007f0000000002 (most recent call first):
          File "{os.path.dirname(os.__file__)}/ctypes/__init__.py", line 519 in string_at
          File "/srv/models/model.py", line 12 in forward
          File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1789 in _call_impl
        """
    )
    assert _user_location(dump) == "/srv/models/model.py:12"
    assert _user_location("") is None


@pytest.mark.slow
def test_reports_come_back_by_key_and_each_ending_is_announced(tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text(
        "import os, torch\n"
        "class Net(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x + 1\n"
        "class Quit(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        os._exit(0)\n"
        "example_inputs = (torch.randn(2),)\n"
    )
    monkeypatch.chdir(tmp_path)
    done = []
    outcomes = run_isolated(
        [("a", ExportSettings("m.py:Net", save=False)), ("b", ExportSettings("m.py:Quit", save=False))],
        Limits(timeout=30),
        workers=2,
        on_done=lambda key, outcome: done.append(key),
    )
    assert sorted(done) == ["a", "b"]
    assert outcomes["a"].report.ok and outcomes["a"].error is None and outcomes["a"].worker is None
    quit = outcomes["b"]
    assert quit.report is None and quit.error.category is Category.CRASH
    assert quit.worker["exit_code"] == 0 and "exited with code 0 while exporting" in quit.error.message
