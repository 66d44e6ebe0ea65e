"""Every bad input answered: each row is a command line with one thing wrong. It must end with a
message naming the input and saying what to do, exit 2 (usage) or 1 (export failure), show no
traceback, and leave every file that was there byte for byte as it was, with no temporary
file beside it."""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable

import attrs
import pytest

from exporter.cli.main import main

MODEL = textwrap.dedent(
    """
    import torch

    class Net(torch.nn.Module):
        def __init__(self, hidden: int = 8):
            super().__init__()
            self.lin = torch.nn.Linear(4, hidden)

        def forward(self, x):
            return self.lin(x)

    example_inputs = (torch.randn(2, 4),)
    """
)

INPUTS = textwrap.dedent(
    """
    def raises():
        raise RuntimeError("no data here")

    def text():
        return "tensor please"

    def objects():
        return [object()]

    def nothing():
        return None
    """
)

BASELINE = json.dumps({"schema": "exporter.baseline/1", "models": {"net.py:Net": {"ops": {"aten.linear.default": 1}}}}, indent=2)

FILES = {
    "net.py": MODEL,
    "inputs.py": INPUTS,
    "sys_exit.py": "import sys\nsys.exit(5)\n",
    "os_exit.py": "import os\nos._exit(3)\n",
    "out.pt2": "an accepted program",
    "report.json": '{"an": "earlier report"}\n',
    "baseline.json": BASELINE + "\n",
    "broken.json": "{not json\n",
    "cut.json": BASELINE[: len(BASELINE) // 2],
    "newer.json": '{"schema": "exporter.baseline/2", "models": {}, "shards": []}\n',
}


def _unwritable_dir(tmp_path) -> str:
    """A directory no file can be made in: read-only by mode, or (as root, whom modes do not
    stop) under /sys, which takes no new files."""
    if os.geteuid() == 0:
        return "/sys/exporter-test"
    directory = tmp_path / "read-only"
    directory.mkdir()
    (directory / "out.pt2").write_text("an accepted program")
    directory.chmod(0o555)
    return str(directory)


def _disk_fills_while_writing_json(monkeypatch) -> None:
    def dump(data, f, **kwargs):
        f.write('{"half": ')
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(json, "dump", dump)


@attrs.frozen
class Row:
    id: str
    args: tuple[str, ...]
    code: int
    message: str
    """A regex the output must match (panel borders and line breaks removed)."""
    patch: Callable | None = None


ROWS = [
    Row(
        "shorthand-needs-more-memory-than-the-machine-has",
        ("net.py:Net", "--example-inputs", "f32[100000,100000,100]", "-o", "out.pt2"),
        2,
        r"--example-inputs 'f32\[100000, 100000, 100\]' needs 3\.6 TiB for its tensors \(f32\[100000, 100000, 100\] alone "
        r"3\.6 TiB\), more than the [\d.]+ [GMT]iB of memory available hint: give smaller sizes",
    ),
    Row(
        "corrupted-baseline",
        ("check", "net.py:Net", "--baseline", "broken.json", "--update-baseline", "--json", "report.json"),
        2,
        r"--baseline broken.json is not valid JSON: Expecting property name .* \(line 1, column 2\) "
        r"hint: fix the file or delete it and record it again with --update-baseline",
    ),
    Row(
        "truncated-baseline",
        ("check", "net.py:Net", "--baseline", "cut.json", "--update-baseline"),
        2,
        r"--baseline cut.json is not valid JSON: it ends early, as a file cut short does",
    ),
    Row(
        "baseline-of-a-newer-schema",
        ("check", "net.py:Net", "--baseline", "newer.json", "--update-baseline"),
        2,
        r"--baseline newer.json was written by a newer exporter \(schema exporter.baseline/2\); this one reads "
        r"exporter.baseline/1 hint: upgrade exporter",
    ),
    Row(
        "merge-with-a-shard-of-a-newer-schema",
        ("merge", "newer.json", "--junit", "report.json"),
        2,
        r"newer.json is not the --json of `exporter check`",
    ),
    Row("unwritable-output", ("net.py:Net", "-o", "{unwritable}/out.pt2"), 2,
        r"cannot write -o {unwritable}/out.pt2: Permission denied hint: choose a location you can write to"),
    Row("unwritable-check-report", ("check", "net.py:Net", "--json", "{unwritable}/report.json"), 2,
        r"cannot write --json {unwritable}/report.json: Permission denied"),
    Row("unwritable-check-html", ("check", "net.py:Net", "--html", "{unwritable}/report.html"), 2,
        r"cannot write --html {unwritable}/report.html: Permission denied"),
    Row("output-is-a-directory", ("net.py:Net", "-o", "inputs_dir"), 2, r"-o inputs_dir is a directory hint: give -o a file name"),
    Row("output-location-has-too-little-space", ("net.py:Net", "-o", "out.pt2"), 2,
        r"cannot write .*out.pt2: No space left on device \(the program needs about 160 bytes, 100 are free\); "
        r"the file already there is left as it was hint: free some space there, or write the file elsewhere",
        lambda monkeypatch: monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 100, 100))),
    Row("report-location-fills-up", ("net.py:Net", "-o", "new.pt2", "--json", "report.json"), 2,
        r"cannot write report.json: No space left on device; the file already there is left as it was",
        _disk_fills_while_writing_json),
    Row("model-file-not-utf8", ("latin1.py:Net", "-o", "out.pt2"), 2,
        r"MODEL 'latin1.py:Net': latin1.py is not UTF-8 text: byte 0xe9 at line 3, column 12 .* hint: save the file as UTF-8"),
    Row("model-file-calls-sys-exit-at-import", ("sys_exit.py:Net", "-o", "out.pt2"), 2,
        r"MODEL 'sys_exit.py:Net': importing sys_exit.py ends the process: it calls sys.exit\(5\) .*"
        r"hint: a model file must not exit when imported"),
    Row("model-file-calls-os-exit-at-import", ("os_exit.py:Net", "-o", "out.pt2"), 2,
        r"importing os_exit.py ends the process: it calls os._exit\(3\)"),
    Row("init-args-not-json", ("net.py:Net", "--init-args", "{hidden: 3}", "-o", "out.pt2"), 2,
        r"--init-args is not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
    Row("init-args-not-an-object", ("net.py:Net", "--init-args", "[3]", "-o", "out.pt2"), 2,
        r"--init-args must be a JSON object of keyword arguments, got a JSON list"),
    Row("init-args-the-constructor-rejects", ("net.py:Net", "--init-args", '{"hidden": "big"}', "-o", "out.pt2"), 2,
        r"Net\(hidden='big'\) raised TypeError: .* hint: fix the constructor, or pass different --init-args"),
    Row("init-args-the-constructor-lacks", ("net.py:Net", "--init-args", '{"width": 3}', "-o", "out.pt2"), 2,
        r"--init-args do not fit Net\(hidden: int = 8\): got an unexpected keyword argument 'width'"),
    Row("example-inputs-function-raises", ("net.py:Net", "--example-inputs", "inputs.py:raises", "-o", "out.pt2"), 2,
        r"the example-inputs function inputs.py:raises raised RuntimeError: no data here"),
    Row("example-inputs-function-returns-a-string", ("net.py:Net", "--example-inputs", "inputs.py:text", "-o", "out.pt2"), 2,
        r"example inputs from inputs.py:text are a str \('tensor please'\), not inputs for forward\(\)"),
    Row("example-inputs-function-returns-non-tensors", ("net.py:Net", "--example-inputs", "inputs.py:objects", "-o", "out.pt2"), 2,
        r"args\[0\] is a builtins.object; example inputs may only hold tensors"),
    Row("example-inputs-function-returns-none", ("net.py:Net", "--example-inputs", "inputs.py:nothing", "-o", "out.pt2"), 2,
        r"example inputs from inputs.py:nothing are a NoneType \(None\)"),
]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "latin1.py").write_bytes("import torch\n\nNAME = 'caf\u00e9'\n".encode("latin-1"))
    (tmp_path / "inputs_dir").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "300")
    return tmp_path


def _files(directory) -> dict[str, bytes]:
    return {
        os.path.relpath(os.path.join(root, name), directory): open(os.path.join(root, name), "rb").read()
        for root, _, names in os.walk(directory)
        for name in names
        if "__pycache__" not in root
    }


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_every_bad_input_is_answered_and_nothing_is_lost(row, workdir, monkeypatch, capsys):
    unwritable = _unwritable_dir(workdir)
    before = _files(workdir)
    if row.patch is not None:
        row.patch(monkeypatch)

    code = main([arg.replace("{unwritable}", unwritable) for arg in row.args])

    captured = capsys.readouterr()
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", captured.out + captured.err).split())
    assert re.search(row.message.replace("{unwritable}", re.escape(unwritable)), text), text
    assert code == row.code, text
    assert "Traceback" not in text
    after = _files(workdir)
    assert {name: after.get(name) for name in before} == before, "a file that was there changed"
    assert not [name for name in after if ".exporter-" in name], "a temporary file was left behind"


@pytest.mark.slow
def test_a_disk_that_fills_while_the_program_is_written_is_answered_not_aborted(workdir):
    """A real failing write (a file size limit: the kernel refuses the write as a full disk
    would), where torch's own zip writer would abort the process."""

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    before = _files(workdir)
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "net.py:Net", "-o", "out.pt2"],
        cwd=workdir, capture_output=True, text=True, preexec_fn=small_files, timeout=300, check=False,
        env=dict(os.environ, COLUMNS="300"),
    )
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.stdout + result.stderr).split())
    assert result.returncode == 2, text
    assert re.search(r"cannot write .*out.pt2: File too large; the file already there is left as it was", text), text
    assert "Traceback" not in text and "terminate called" not in text
    after = _files(workdir)
    assert {name: after.get(name) for name in before} == before
    assert not [name for name in after if ".exporter-" in name]
