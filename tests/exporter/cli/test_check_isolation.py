"""check end to end through the command line: a model that crashes, exits, hangs or eats memory
fails alone, with its reason in the table, the JSON and the JUnit file; the others keep theirs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET

import pytest

from exporter.cli.main import main

GOOD = textwrap.dedent(
    """
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x)

    example_inputs = (torch.randn(2, 4),)
    """
)

BAD = textwrap.dedent(
    """
    import ctypes, os, subprocess, sys, time
    import torch

    class Segfault(torch.nn.Module):
        def forward(self, x):
            ctypes.string_at(0)
            return x

    class Exit(torch.nn.Module):
        def forward(self, x):
            os._exit(3)

    class SysExit(torch.nn.Module):
        def forward(self, x):
            sys.exit(4)

    class Hang(torch.nn.Module):
        def forward(self, x):
            child = subprocess.Popen(["sleep", "1000"])
            with open("child.pid", "w") as f:
                f.write(f"{child.pid} {os.getpid()}")
            while True:
                time.sleep(0.05)

    class Hog(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = []
            for _ in range(16):  # 4 GiB, 256 MiB at a time, as a model loading its weights does
                self.blocks.append(torch.ones(64 << 20))
                time.sleep(0.02)

        def forward(self, x):
            return x

    example_inputs = (torch.randn(2, 4),)
    """
)


@pytest.fixture
def run(tmp_path, monkeypatch, capsys):
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "segv_at_import.py").write_text("import ctypes\nctypes.string_at(0)\n")
    (tmp_path / "exit_at_import.py").write_text("import os\nos._exit(3)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str) -> tuple[int, str]:
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    return run


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
def test_each_way_a_model_can_die_fails_that_model_alone(run, tmp_path):
    models = ["good.py:Net", "bad.py:Segfault", "bad.py:Exit", "bad.py:SysExit", "bad.py:Hang", "exit_at_import.py:Net"]
    code, out = run("check", *models, "-j", "2", "--timeout", "3", "--json", "c.json", "--junit", "c.xml")
    assert code == 1
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") == 7}
    expected = {
        "good.py:Net": "ok",
        "bad.py:Segfault": "crash",
        "bad.py:Exit": "crash",
        "bad.py:SysExit": "crash",
        "bad.py:Hang": "timeout",
        "exit_at_import.py:Net": "input",
    }
    for model, reason in expected.items():
        assert reason in rows[model], (model, rows[model])
    for text in (
        "the worker was killed by SIGSEGV while exporting",
        "the worker exited with code 3 while exporting",
        "the model called sys.exit(4) while exporting",
        "stopped after 3 s (--timeout) while exporting",
        "importing exit_at_import.py ends the process: it calls os._exit(3)",
        "1/6 models passed",
    ):
        assert text in " ".join(out.replace("│", " ").split()), text
    assert "at bad.py:7" in out, "a segfault points at the model's line, relative to the working directory"
    assert "Fatal Python error" not in out, "the stacks only with -v"
    assert "at bad.py:24" in out, "so does a hang"

    summary = {m["reference"]: m for m in json.loads((tmp_path / "c.json").read_text())["models"]}
    assert summary["good.py:Net"]["status"] == "ok" and summary["good.py:Net"]["report"]["ops"]
    categories = {ref: m["report"]["error"]["category"] for ref, m in summary.items() if m["report"]["error"]}
    assert categories == {ref: reason for ref, reason in expected.items() if reason != "ok"}
    assert summary["bad.py:Segfault"]["worker"]["signal"] == "SIGSEGV"
    assert summary["bad.py:Exit"]["worker"]["exit_code"] == 3

    cases = {c.get("name"): c for c in ET.parse(tmp_path / "c.xml").iter("testcase")}
    assert cases["good.py:Net"].find("failure") is None
    assert {ref: cases[ref].find("failure").get("type") for ref in categories} == categories
    assert "bad.py\", line 7 in forward" in cases["bad.py:Segfault"].find("system-err").text

    child, worker = map(int, (tmp_path / "child.pid").read_text().split())
    assert not _alive(worker) and not _alive(child), "the hanging worker's own child was killed with it"


@pytest.mark.slow
def test_a_model_over_max_memory_fails_alone(run, tmp_path):
    # A timeout of its own: on a slow machine, touching the first GiB may take longer than the
    # few seconds the hanging model above is given.
    code, out = run("check", "good.py:Net", "bad.py:Hog", "-j", "2", "--timeout", "300", "--max-memory", "1G", "--json", "c.json")
    assert code == 1
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") == 7}
    assert "ok" in rows["good.py:Net"] and "memory" in rows["bad.py:Hog"], rows
    assert "MiB resident, over --max-memory 1,024 MiB, while loading the model" in " ".join(out.replace("│", " ").split())
    hog = {m["reference"]: m for m in json.loads((tmp_path / "c.json").read_text())["models"]}["bad.py:Hog"]
    assert hog["report"]["error"]["category"] == "memory"
    assert 1 << 30 < hog["worker"]["peak_memory"] < 3 << 30, "stopped soon after it passed the limit, long before its 4 GiB"


def test_one_worker_at_a_time_survives_a_crash_at_import(run, tmp_path):
    code, out = run("check", "segv_at_import.py:Net", "good.py:Net", "--json", "c.json")
    assert code == 1
    assert "the worker was killed by SIGSEGV while loading the model" in " ".join(out.replace("│", " ").split())
    statuses = [m["status"] for m in json.loads((tmp_path / "c.json").read_text())["models"]]
    assert statuses == ["failed", "ok"]


def test_verbose_shows_the_stacks_of_a_crashed_worker(run):
    code, out = run("check", "bad.py:Segfault", "-v")
    assert code == 1 and "Fatal Python error: Segmentation fault" in out and 'bad.py", line 7 in forward' in out


def test_shards_with_crashes_merge_into_one_report(run, tmp_path):
    models = ["good.py:Net", "bad.py:Exit"]
    for k in (1, 2):
        run("check", *models, "--shard", f"{k}/2", "--json", f"s{k}.json")
    code, out = run("merge", "s1.json", "s2.json", "--junit", "m.xml", "--json", "m.json")
    assert code == 1 and "1/2 models passed" in out and "crash" in out
    merged = json.loads((tmp_path / "m.json").read_text())
    assert [m["report"]["error"] and m["report"]["error"]["category"] for m in merged["models"]] == [None, "crash"]
    assert merged["models"][1]["worker"]["exit_code"] == 3
    failures = [c.find("failure") for c in ET.parse(tmp_path / "m.xml").iter("testcase")]
    assert failures[0] is None and failures[1].get("type") == "crash"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--timeout", "soon"], "--timeout 'soon' is not a number of seconds"),
        (["--timeout", "-1"], "--timeout '-1' is not a number of seconds"),
        (["--max-memory", "lots"], "--max-memory 'lots' is not a size"),
    ],
)
def test_limits_given_wrongly_are_usage_errors(run, args, message):
    code, out = run("check", "good.py:Net", *args)
    assert code == 2 and message in " ".join(out.replace("│", " ").split())


def test_the_limits_come_from_pyproject(run, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.exporter]\nmodels = ["bad.py:Hang"]\ntimeout = 2\nmax-memory = "2G"\n')
    code, out = run("check", "--json", "c.json")
    assert code == 1 and "stopped after 2 s (--timeout)" in " ".join(out.replace("│", " ").split())
    assert os.path.exists(tmp_path / "child.pid")


@pytest.mark.slow
def test_a_cancelled_check_leaves_no_worker_running(run, tmp_path):
    """CI cancels a job with SIGTERM: the workers and what they started go with the run."""
    check = subprocess.Popen([sys.executable, "-m", "exporter", "check", "bad.py:Hang", "--timeout", "0"], cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if (tmp_path / "child.pid").exists() and len((tmp_path / "child.pid").read_text().split()) == 2:
                break
            time.sleep(0.1)
        child, worker = map(int, (tmp_path / "child.pid").read_text().split())
        check.send_signal(signal.SIGTERM)
        assert check.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        check.kill()
    for _ in range(50):  # the worker's group is killed as the run exits; give the kernel a moment
        if not (_alive(worker) or _alive(child)):
            break
        time.sleep(0.1)
    assert not _alive(worker) and not _alive(child)
