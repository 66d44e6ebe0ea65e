"""The documentation: every code block marked runnable runs and prints what the page shows,
what a reader copies holds no test scaffolding, and the project speaks of the project only.

Markers are HTML comments on the line right before a block's opening fence; the rendered
page does not show them.

``<!-- runnable -->``
    The block runs: a ``python`` block as a script, a ``bash`` block with ``bash -euo
    pipefail``, in a fresh directory holding a copy of ``examples/`` (so a block may use the
    examples by their repository paths), with the venv's Python first on ``PATH`` and the
    terminal ``COLUMNS`` wide. It must exit 0, or with ``exit=N`` (``<!-- runnable exit=1
    -->``, for a command that fails on purpose) exit N. The output it is held to is its
    stdout; ``output=stderr`` holds it to its stderr, ``output=all`` to both as one stream.
    With ``continue`` the block runs after the page's previous runnable block, in the same
    directory, as a reader runs one command after another (record a baseline, change the
    model, check it).
``<!-- file: PATH -->``
    The block is a file the reader makes: before each later runnable block of the page runs,
    its text is written to PATH in that block's directory (a path under ``examples/`` replaces
    that example). The fence's title names the file (```` ```python title="branchy.py"
    ````), so the reader sees a file, not a command.

A ``text`` block, or one with no language, after a runnable block, with only prose and other
such blocks between them (no heading), shows what the runnable block prints. It must equal
the output once both are normalised (``normalise``: times, sizes, absolute paths, temporary
names, and the runs of spaces and box-drawing characters that only align columns). A block
titled as an excerpt (```` ```text title="excerpt" ````) shows part of the output: a line
``...`` stands for lines left out and ``...`` within a line for text left out; everything
else must appear in the output, line for line and in that order. An output block after no
runnable block is not checked, and its title must say so: an excerpt, or an illustration
(```` ```text title="illustration: on torch 2.12" ````)."""

from __future__ import annotations

import difflib
import os
import pathlib
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
COLUMNS = 100
"""The terminal width the blocks run at, so that rich wraps tables and panels as the pages show."""

_FENCE = re.compile(
    r"^(?:<!--(?P<marker>[^\n]*?)-->\n)?```(?P<language>\w*)(?P<info>[^\n]*)\n(?P<code>.*?)^```[ \t]*$", re.S | re.M
)
_TITLE = re.compile(r'title="([^"]*)"')
_HEADING = re.compile(r"^#{1,6} ", re.M)
_OUTPUT_LANGUAGES = ("text", "")
_LANGUAGES = ("python", "bash")


@dataclass(frozen=True)
class Shown:
    """An output block: what a page says a runnable block prints, in full or as an excerpt."""

    where: str
    text: str
    excerpt: bool


@dataclass
class Runnable:
    """A runnable block, the files written before it runs, and the output blocks after it."""

    where: str
    language: str
    code: str
    exit_code: int = 0
    output: str = "stdout"
    files: dict[str, str] = field(default_factory=dict)
    shown: list[Shown] = field(default_factory=list)
    after: Runnable | None = None
    """The block this one continues (``continue``): run first, in the same directory."""


@dataclass
class Page:
    """What ``parse_page`` found on one page."""

    runnables: list[Runnable] = field(default_factory=list)
    unrun: list[tuple[str, str]] = field(default_factory=list)
    """(where, title) of each output block after no runnable block."""
    problems: list[str] = field(default_factory=list)


def _options(where: str, words: list[str], page: Page) -> dict[str, str]:
    options = {}
    for word in words:
        key, _, value = word.partition("=")
        if key == "exit" and value.isdigit() or key == "output" and value in ("stdout", "stderr", "all"):
            options[key] = value
        elif word == "continue":
            options[word] = "yes"
        else:
            page.problems.append(f"{where}: unknown runnable option {word!r} (exit=N, output=stdout|stderr|all, continue)")
    return options


def parse_page(text: str, name: str) -> Page:
    """The runnable blocks of a page with their files and shown outputs, and what is wrong with
    its markers."""
    page, files, current, end = Page(), {}, None, 0
    for match in _FENCE.finditer(text):
        if _HEADING.search(text, end, match.start()):
            current = None
        end = match.end()
        where = f"{name}:{text[: match.start('language')].count(chr(10)) + 1}"
        marker = (match.group("marker") or "").split()
        title = (_TITLE.search(match.group("info")) or [None, ""])[1]
        language, code = match.group("language"), match.group("code")
        if not marker and language in _OUTPUT_LANGUAGES:
            if current is not None:
                current.shown.append(Shown(where, code, excerpt=bool(re.search(r"\bexcerpt\b", title, re.I))))
            else:
                page.unrun.append((where, title))
            continue
        current = None
        if marker[:1] == ["runnable"]:
            if language not in _LANGUAGES:
                page.problems.append(f"{where}: a runnable block is python or bash, not {language!r}")
            options = _options(where, marker[1:], page)
            after = page.runnables[-1] if "continue" in options and page.runnables else None
            if "continue" in options and after is None:
                page.problems.append(f"{where}: continue, but no runnable block comes before it")
            exit_code, output = int(options.get("exit", 0)), options.get("output", "stdout")
            current = Runnable(where, language, code, exit_code, output, dict(files), after=after)
            page.runnables.append(current)
        elif marker[:1] == ["file:"] and len(marker) == 2:
            files[marker[1]] = code
            if title != marker[1]:
                page.problems.append(f"{where}: the file block for {marker[1]} is titled {title!r}, not by its path")
        elif marker and marker[0].startswith(("runnable", "file")):
            page.problems.append(f"{where}: malformed marker <!--{match.group('marker')}-->")
    return page


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ABSOLUTE = re.compile(r"(?<![\w.~/-])/(?:[\w.+@~-]+/)+")
_TEMPORARY = re.compile(r"\btmp[a-z0-9_]{8}\b")
_DURATION = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+)? ?(?:ns|us|µs|ms|s|seconds)\b")
_SIZE = re.compile(r"(?<![\w.])\d+(?:\.\d+)? ?(?:B|KB|MB|GB|KiB|MiB|GiB)\b")
_DECIMAL = re.compile(r"(?<!\S)\d+\.\d+(?!\S)")
_SECONDS_HEADER = re.compile(r"(?:^|(?<=\s))seconds(?=\s|$)")
_ALIGNING = re.compile(r"([─━═])\1+")


def _seconds_columns(lines: list[str]) -> list[str]:
    """Lines with each time in a table's ``seconds`` column made ``<time>``: a column runs from
    its header down while each line has a decimal number alone under it, aligned with the
    header on either side."""
    out, columns = [], []
    for line in lines:
        kept = []
        for start, end in columns:
            cell = next((m for m in _DECIMAL.finditer(line) if m.end() == end or m.start() == start), None)
            if cell:
                line = line[: cell.start()] + "<time>" + line[cell.end() :]
                kept.append((start, end))
        columns = kept + [m.span() for m in _SECONDS_HEADER.finditer(line)]
        out.append(line)
    return out


def normalise(text: str) -> list[str]:
    """``text`` as the comparison sees it, line by line: times, sizes, absolute directories and
    temporary names replaced by placeholders; runs of spaces and of box-drawing characters,
    which only align columns, made one; trailing spaces and leading and trailing blank lines
    dropped."""
    lines = _seconds_columns(_ANSI.sub("", text).expandtabs().splitlines())
    shown = []
    for line in lines:
        line = _ABSOLUTE.sub("<abs>/", line)
        line = _TEMPORARY.sub("<tmp>", line)
        line = _DURATION.sub("<time>", line)
        line = _SIZE.sub("<size>", line)
        line = _ALIGNING.sub(r"\1", re.sub(r" {2,}", " ", line)).rstrip()
        shown.append(line)
    while shown and not shown[0]:
        shown.pop(0)
    while shown and not shown[-1]:
        shown.pop()
    return shown


def _line_pattern(line: str) -> re.Pattern:
    return re.compile(".*".join(re.escape(part) for part in line.split("...")))


def _excerpt_matches(pattern: list[str], lines: list[str]) -> bool:
    """Whether ``lines`` fit ``pattern``: a ``...`` line matches any run of lines (none
    included), ``...`` within a line any text; every other line matches one line."""
    patterns = [None if line.strip() == "..." else _line_pattern(line) for line in pattern]
    reachable = {0}  # how many of ``lines`` the patterns so far can have consumed
    for p in patterns:
        if p is None:
            reachable = set(range(min(reachable), len(lines) + 1)) if reachable else set()
        else:
            reachable = {i + 1 for i in reachable if i < len(lines) and p.fullmatch(lines[i])}
    return len(lines) in reachable


def difference(shown: Shown, printed: str) -> str | None:
    """Why ``printed`` is not what ``shown`` shows, or None when it is."""
    want, got = normalise(shown.text), normalise(printed)
    if not shown.excerpt:
        if want == got:
            return None
        diff = "\n".join(difflib.unified_diff(want, got, "shown", "printed", lineterm=""))
        return f"{shown.where}: the output differs from the page (normalised):\n{diff}"
    if _excerpt_matches(want, got):
        return None
    found, at = None, 0
    for line in (line for line in want if line.strip() != "..."):
        pattern = _line_pattern(line)
        hits = [i for i in range(at, len(got)) if pattern.fullmatch(got[i])]
        if not hits:
            found = line
            break
        at = hits[0] + 1
    why = f"the line {found!r} is not in the output after the lines before it" if found else (
        "its lines are in the output, but not next to each other, or not at its start or end: mark lines left out with ..."
    )
    return f"{shown.where}: the excerpt does not match the output: {why}"


PARSED = {page.relative_to(ROOT).as_posix(): parse_page(page.read_text(), page.relative_to(ROOT).as_posix()) for page in PAGES}
RUNNABLES = [runnable for page in PARSED.values() for runnable in page.runnables]


def test_the_pages_have_runnable_blocks():
    assert len(RUNNABLES) >= 10
    assert sum(len(r.shown) for r in RUNNABLES) >= 10


def test_the_markers_are_well_formed():
    assert [problem for page in PARSED.values() for problem in page.problems] == []


def test_output_after_no_runnable_block_says_it_is_an_excerpt_or_an_illustration():
    unmarked = [
        where
        for page in PARSED.values()
        for where, title in page.unrun
        if not re.search(r"\b(excerpt|illustration)\b", title, re.I)
    ]
    assert unmarked == []


# What a test needs and a reader does not: exit codes swallowed, assertions by grep, examples
# edited in place, files made by heredocs (a file block shows the file instead).
_SCAFFOLDING = re.compile(r"\|\|\s*test \$\?|\btest \$\?|\bgrep\b|\bsed -i\b|\bcat\s*>[^\n]*<<")


def test_runnable_blocks_hold_no_test_scaffolding():
    found = [f"{r.where}: {m.group(0)!r}" for r in RUNNABLES if r.language == "bash" for m in _SCAFFOLDING.finditer(r.code)]
    assert found == []


def run_block(runnable: Runnable, directory: pathlib.Path) -> subprocess.CompletedProcess:
    """Run ``runnable`` in ``directory`` at ``COLUMNS``: a fresh directory gets a copy of
    ``examples/``, and the page's files are written where they are new or changed since the
    block it continues. Its ``stdout`` is the output the page is held to."""
    before = {} if runnable.after is None else runnable.after.files
    if runnable.after is None:
        shutil.copytree(ROOT / "examples", directory / "examples")
    for path, text in runnable.files.items():
        if before.get(path) != text:
            (directory / path).parent.mkdir(parents=True, exist_ok=True)
            (directory / path).write_text(text)
    code = runnable.code
    if runnable.language == "python":
        # run from a file, as a reader who saves the block does: branch capture reads the
        # source of the statement that asks, which `python -c` does not keep
        (directory / "snippet.py").write_text(code)
        command = [sys.executable, "snippet.py"]
    else:
        command = ["bash", "-euo", "pipefail", "-c", code]
    env = {**os.environ, "PATH": f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "COLUMNS": str(COLUMNS)}
    env.pop("FORCE_COLOR", None)  # rich would take the pipe for a terminal
    done = subprocess.run(
        command,
        cwd=directory,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if runnable.output == "all" else subprocess.PIPE,
        text=True,
        env=env,
        timeout=300,
    )
    if runnable.output == "stderr":
        done.stdout, done.stderr = done.stderr, done.stdout
    return done


def _chains() -> list[list[Runnable]]:
    """Each runnable block that starts a directory, with the blocks that continue it."""
    chains: list[list[Runnable]] = []
    for runnable in RUNNABLES:
        if runnable.after is None:
            chains.append([runnable])
        else:
            next(chain for chain in chains if chain[-1] is runnable.after).append(runnable)
    return chains


CHAINS = _chains()


@pytest.mark.docs
@pytest.mark.parametrize("chain", CHAINS, ids=[chain[0].where for chain in CHAINS])
def test_a_runnable_block_runs(chain, tmp_path):
    """The block, and the blocks that continue it, exit as marked and print what the page shows."""
    differences = []
    for runnable in chain:
        done = run_block(runnable, tmp_path)
        printed = f"{done.stdout[-6000:]}\n{(done.stderr or '')[-3000:]}"
        assert done.returncode == runnable.exit_code, f"{runnable.where} exited {done.returncode}:\n{printed}"
        found = [d for d in (difference(shown, done.stdout) for shown in runnable.shown) if d]
        differences += [*found, f"{runnable.where} printed:\n{done.stdout}"] if found else []
    assert differences == [], "\n\n".join(differences)


# -- the check itself --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "printed, shown",
    [
        ("program (ATen)  MLP.pt2  15.7 KB  ok\n", "program (ATen) MLP.pt2 15.5 KB ok"),
        ("ok m.py:M: 4 ops -> M.pt2 (2.14 s)", "ok m.py:M: 4 ops -> M.pt2 (0.50 s)"),
        ("program  59.8 ms  ok: 3 runs", "program  1.2 s  ok: 3 runs"),
        ("│ m.py  │  ok  │  0.23s │", "│ m.py │ ok │ 12.40s │"),
        ("saved /data/runs/pytest-3/test_a0/MLP.pt2 (2.6 KB)", "saved /abs/path/MLP.pt2 (528 B)"),
        ("wrote /scratch/tmpk3x_9z0a/model.pt2", "wrote /abs/tmpab12cd34/model.pt2"),
        ("┏━━━━━━━━━┳━━━━━━━┓\n┃ op      ┃ count ┃", "┏━━━━━━━━━━━━━┳━━━┓\n┃ op ┃ count ┃"),
        ("╭─ export failed ─────────╮\n│ at m.py:6     │\n╰──────╯", "╭─ export failed ─╮\n│ at m.py:6 │\n╰─────────────╯"),
        ("\nstage    seconds\nload       0.007\ntotal     12.470\nsaved m.pt2", "stage seconds\nload    1.000\ntotal   2.000\nsaved m.pt2\n\n"),
        ("x  \t\n", "x"),
    ],
)
def test_the_normaliser_makes_what_varies_from_run_to_run_equal(printed, shown):
    assert normalise(printed) == normalise(shown)


@pytest.mark.parametrize(
    "printed, shown",
    [
        ("TinyTransformer ok 59 ops", "TinyTransformer ok 53 ops"),
        ("saved MLP.pt2", "saved /abs/path/MLP.pt2"),
        ("at branchy.py:6", "at /abs/path/branchy.py:6"),
        ("aten.linear.default 2", "aten.linear.default 3"),
        ("max abs error 1e-05", "max abs error 2e-05"),
        ("a\nb", "a b"),
        ("┃ op ┃", "┃ op ┃ count ┃"),
        ("examples/mlp.py:MLP  mlp.MLP, 676 parameters", "examples/mlp.py:MLP  mlp.MLP, 677 parameters"),
        ("stage seconds\nexport 1.0\nsaved 2 files", "stage seconds\nexport 1.0\nsaved 3 files"),
    ],
)
def test_the_normaliser_keeps_what_the_page_claims(printed, shown):
    assert normalise(printed) != normalise(shown)


_PRINTED = "header\ninputs\n╭─ export failed ─╮\n│ at m.py:6 │\n╰─╯\ntime\ntotal 1.2 s\n"


@pytest.mark.parametrize(
    "shown, fits",
    [
        ("header\ninputs\n╭─ export failed ─╮\n│ at m.py:6 │\n╰─╯\ntime\ntotal 3 s", True),
        ("...\n╭─ export failed ─╮\n│ at m.py:6 │\n╰─╯\n...", True),
        ("header\n...\ntime\n...", True),
        ("header\n...\n│ at m.py:... │\n...", True),
        ("...\nheader\ninputs\n...\ntotal 1.2 s", True),
        ("...\n│ at m.py:7 │\n...", False),
        ("...\ninputs\nheader\n...", False),
        ("...\ninputs\n╭─ export failed ─╮\n╰─╯\n...", False),
        ("╭─ export failed ─╮\n│ at m.py:6 │\n╰─╯\n...", False),
        ("...\n╭─ export failed ─╮\n│ at m.py:6 │\n╰─╯", False),
    ],
)
def test_an_excerpt_is_the_output_with_lines_left_out_only_where_it_says(shown, fits):
    found = difference(Shown("page.md:1", shown, excerpt=True), _PRINTED)
    assert (found is None) is fits, found
    if not fits:
        assert found.startswith("page.md:1: the excerpt does not match the output")


def test_a_full_output_block_allows_no_lines_left_out():
    assert difference(Shown("page.md:1", _PRINTED, excerpt=False), _PRINTED) is None
    found = difference(Shown("page.md:1", "header\n...\ntotal 1.2 s", excerpt=False), _PRINTED)
    assert found is not None and "-..." in found and "+inputs" in found


_PAGE = '''
Run it:

<!-- runnable exit=1 output=all -->
```bash
python -m exporter branchy.py:Gate
```

It prints:

```text title="excerpt"
...
│ at branchy.py:6 │
...
```

and then

```
exit 1
```

<!-- file: branchy.py -->
```python title="branchy.py"
import torch
```

<!-- runnable -->
```python
print("hi")
```

```json
{"not": "output"}
```

```text
after no runnable block
```

<!-- runnable -->
```bash
true
```

## A new section

```text title="illustration"
after a heading
```

<!-- runnable continue -->
```bash
ls
```

<!-- runnable exit=one -->
```yaml
a: 1
```

<!-- file: other.py -->
```python title="else.py"
pass
```
'''


def test_a_page_is_read_into_runnable_blocks_their_files_and_their_outputs():
    page = parse_page(_PAGE, "page.md")
    first, second, third, fourth, fifth = page.runnables
    assert (first.where, first.language, first.exit_code, first.output, first.files) == ("page.md:5", "bash", 1, "all", {})
    assert first.code == "python -m exporter branchy.py:Gate\n" and first.after is None
    assert [(s.where, s.excerpt) for s in first.shown] == [("page.md:11", True), ("page.md:19", False)]
    assert first.shown[1].text == "exit 1\n"
    assert (second.where, second.files, second.shown) == ("page.md:29", {"branchy.py": "import torch\n"}, [])
    assert third.shown == [] and fourth.after is third and fourth.files == third.files
    assert fifth.language == "yaml"
    assert page.unrun == [("page.md:37", ""), ("page.md:48", "illustration")]
    assert page.problems == [
        "page.md:58: a runnable block is python or bash, not 'yaml'",
        "page.md:58: unknown runnable option 'exit=one' (exit=N, output=stdout|stderr|all, continue)",
        "page.md:63: the file block for other.py is titled 'else.py', not by its path",
    ]
    assert parse_page("<!-- runnable continue -->\n```bash\nls\n```\n", "p.md").problems == [
        "p.md:2: continue, but no runnable block comes before it"
    ]


def _check_table(text: str, model: str) -> re.Match:
    return re.search(rf"^(│ {re.escape(model)} +│ ok +│ +)(\d+)( │)", text, re.M)


def test_a_changed_op_count_on_the_page_fails_the_check():
    """The CI guide's check table, with TinyTransformer's op count changed, no longer matches the
    output the page shows (which the docs run holds to the real output)."""
    shown = next(s for r in PARSED["docs/guides/ci.md"].runnables for s in r.shown if _check_table(s.text, "examples/tiny_transformer.py:TinyTransformer"))
    row = _check_table(shown.text, "examples/tiny_transformer.py:TinyTransformer")
    changed = shown.text[: row.start(2)] + str(int(row.group(2)) - 6) + shown.text[row.end(2) :]
    assert difference(shown, shown.text) is None
    found = difference(Shown(shown.where, changed, shown.excerpt), shown.text)
    assert found is not None and f"TinyTransformer │ ok │ {int(row.group(2)) - 6} │" in found


@pytest.mark.docs
def test_a_changed_op_count_fails_against_a_real_run(tmp_path):
    model = "examples/tiny_transformer.py:TinyTransformer"
    runnable = next(r for r in PARSED["docs/guides/ci.md"].runnables if any(_check_table(s.text, model) for s in r.shown))
    assert runnable.after is None
    shown = next(s for s in runnable.shown if _check_table(s.text, model))
    done = run_block(runnable, tmp_path)
    count = int(_check_table(done.stdout, model).group(2))
    row = _check_table(shown.text, model)
    assert difference(shown, done.stdout) is None and int(row.group(2)) == count
    changed = shown.text[: row.start(2)] + str(count - 6) + shown.text[row.end(2) :]
    assert difference(Shown(shown.where, changed, shown.excerpt), done.stdout) is not None


# -- the project speaks of the project only -------------------------------------------------------

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
