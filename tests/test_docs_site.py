"""The documentation site as built: generated pages and tables hold what the code says, the
diagram renders offline, and a failure example whose optional package is missing shows the
message it stored."""

from __future__ import annotations

import importlib
import pathlib
import re
import sys

import pytest

import exporter

# The site's hooks read the code with griffe, which comes with the docs extra
# (pip install -e '.[docs]'); a venv without it (another torch release's) skips the module.
pytest.importorskip("griffe")

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "hooks"))
sys.path.insert(0, str(DOCS))
import cli_reference  # noqa: E402
import error_table  # noqa: E402
import failure_examples  # noqa: E402
import failure_messages  # noqa: E402

sys.path.remove(str(DOCS / "hooks"))
sys.path.remove(str(DOCS))
PAGES = [p for p in DOCS.rglob("*.md") if "results" not in p.parts]


def test_the_api_reference_renders_every_public_name():
    api = (DOCS / "reference" / "api.md").read_text()
    shown = set(re.findall(r"^::: exporter\.(\w+)", api, re.M))
    assert set(exporter.__all__) - {"__version__"} <= shown


def test_every_environment_variable_is_in_the_command_line_reference():
    used = set()
    for path in [*(ROOT / "exporter").rglob("*.py"), *(ROOT / "passes").rglob("*.py"), *(ROOT / "verifier").rglob("*.py")]:
        used |= set(re.findall(r"\bEXPORTER_[A-Z_]+\b", path.read_text()))
    cli = (DOCS / "reference" / "cli.md").read_text()
    assert used and {name for name in used if f"`{name}" not in cli} == set()


def test_the_error_table_has_a_row_for_every_category_with_its_class_and_exit_code():
    table = error_table.error_table(ROOT).splitlines()
    rows = {line.split(" | ")[0].strip("| `"): line for line in table[2:]}
    assert list(rows) == [c.value for c in exporter.Category]
    assert "| `InputSpecError` | 2 |" in rows["input"]
    assert "`ConstraintError` (a `TraceError`) | 1 |" in rows["dynamic shape constraint"]
    assert "| any other exception | 1 |" in rows["internal"]
    assert all(row.split(" | ")[3].strip(" |") for row in rows.values()), "every category says what it means"


@pytest.mark.parametrize("page", ["guides/failures.md", "guides/library.md", "design.md", "reference/api.md"])
def test_the_pages_that_show_errors_use_the_generated_table(page):
    text = (DOCS / page).read_text()
    assert "<!-- error-table -->" in text
    assert not re.search(r"^\| class \|", text, re.M), "a hand-written error table"


def test_the_command_line_reference_shows_angle_brackets_outside_code():
    assert cli_reference._cell("default: <Name>.pt2 here, or `a <b>`") == "default: &lt;Name&gt;.pt2 here, or `a <b>`"


def test_the_diagram_is_an_image_that_renders_offline():
    for page in PAGES:
        assert "```mermaid" not in page.read_text(), page
    config = (ROOT / "mkdocs.yml").read_text()
    assert "mermaid" not in config and not re.search(r"https?://[^\s]+\.js", config)
    design = (DOCS / "design.md").read_text()
    assert "](assets/pipeline.svg)" in design
    svg = (DOCS / "assets" / "pipeline.svg").read_text()
    labels = re.findall(r"<b>(\w+)</b>", (DOCS / "assets" / "pipeline.dot").read_text())
    assert labels and all(f">{label}</text>" in svg for label in labels), "redraw the SVG from pipeline.dot"


def test_a_failure_example_whose_package_is_missing_shows_its_stored_message(monkeypatch):
    needing = [e for e in failure_examples.EXAMPLES if e.needs]
    assert needing and all(e.stored for e in needing)
    missing = failure_examples.Example("lowering", "what", "raise SystemExit", needs="no_such_package_here", stored="Stored: it failed")
    monkeypatch.setattr(failure_examples, "EXAMPLES", [missing])
    monkeypatch.setattr(failure_examples, "run_all", lambda examples: [])
    monkeypatch.setitem(sys.modules, "failure_examples", failure_examples)
    page = failure_messages.on_page_markdown("<!-- failure-messages -->", None, {"docs_dir": str(DOCS)}, None)
    assert "`no_such_package_here` is not installed where this page was built" in page
    assert "```text\nStored: it failed\n```" in page


@pytest.mark.executorch
def test_the_stored_messages_are_what_the_examples_give_where_the_package_is_installed():
    needing = [e for e in failure_examples.EXAMPLES if e.needs]
    for example in needing:
        importlib.import_module(example.needs)
    found = failure_examples.run_all(needing)
    assert [(e.category, e.stored) for e in needing] == found
