"""The documentation: every code block marked runnable runs, and the project speaks of the
project only.

A block is runnable when the line before its fence is ``<!-- runnable -->``.  Python blocks
run as a script, ``bash`` blocks with bash, each in a fresh directory holding a copy of
``examples/``, so what a block writes lands there and a block may use the examples by their
repository paths."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
_BLOCK = re.compile(r"^<!-- runnable -->\n```(\w+)[^\n]*\n(.*?)^```$", re.S | re.M)


def runnable_blocks() -> list[tuple[str, str, str]]:
    """(page:line, language, code) of every runnable block."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in _BLOCK.finditer(text):
            line = text[: match.start()].count("\n") + 2
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group(1), match.group(2)))
    return found


BLOCKS = runnable_blocks()


def test_the_pages_have_runnable_blocks():
    assert len(BLOCKS) >= 10
    assert {language for _, language, _ in BLOCKS} <= {"python", "bash"}


@pytest.mark.docs
@pytest.mark.parametrize("where, language, code", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_a_runnable_block_runs(where, language, code, tmp_path):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    command = [sys.executable, "-c", code] if language == "python" else ["bash", "-euo", "pipefail", "-c", code]
    env = {**os.environ, "PATH": f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, f"{where} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


# Words about how work on the project is organised, which belong in commit messages only.
_WORK_WORDS = re.compile(
    r"\bstops? \d+\b|\bthis stop\b|\bissues? \d+\b|\bthe issue\b|\bthis issue\b"
    r"|\b(this|a|an|earlier|previous|next|last|one) session\b|\bsessions? \d+\b"
    r"|\bhelper agents?\b|\bsubagents?\b|\ba helper(?:'s)? (?:run|wrote|found)\b"
    r"|(?<![\w.])/(?:work|tmp|root|home)/",
    re.I,
)
_SCANNED = ("exporter", "passes", "verifier", "tests", "examples", "benchmarks", "docs", ".ci")
_SCANNED_FILES = ("README.md", "pyproject.toml", "mkdocs.yml")


def _project_files() -> list[pathlib.Path]:
    files = [ROOT / name for name in _SCANNED_FILES]
    for directory in _SCANNED:
        files += [p for p in (ROOT / directory).rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".yml", ".toml", "")]
    skipped = {"__pycache__", ".ruff_cache", ".pytest_cache"}
    return [p for p in files if not skipped & set(p.parts) and p != pathlib.Path(__file__).resolve()]


def test_the_project_speaks_of_the_project_only():
    found = []
    for path in _project_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = _WORK_WORDS.search(line)
            if match:
                found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r} in {line.strip()[:100]}")
    assert found == []
