"""MkDocs hook: ``<!-- error-table -->`` becomes the table of every failure category, made from
``exporter.Category`` (each member's docstring says what it means) and the error classes that
own them, so every page that shows errors shows the same table and none can drift."""

from __future__ import annotations

import pathlib

import griffe

_MARKER = "<!-- error-table -->"


def _class_name(cls: type | None) -> str:
    if cls is None:
        return "any other exception"
    bases = [b.__name__ for b in cls.__mro__[1:] if b.__name__ not in ("ExportError", "Exception", "BaseException", "object")]
    return f"`{cls.__name__}`" + (f" (a `{bases[0]}`)" if bases else "")


def error_table(root: pathlib.Path) -> str:
    """The table, one row per category in the order ``Category`` lists them."""
    from exporter import Category, ErrorInfo

    members = griffe.load("exporter._errors", search_paths=[str(root)])["Category"].members
    rows = ["| category | raised as | exit code | what it means |", "|---|---|---|---|"]
    for category in Category:
        doc = members[category.name].docstring
        meaning = " ".join(doc.value.split()) if doc else ""
        exit_code = 2 if ErrorInfo("", category, "").is_input_error else 1
        rows.append(f"| `{category.value}` | {_class_name(category.owner)} | {exit_code} | {_markdown(meaning)} |")
    return "\n".join(rows)


def _markdown(text: str) -> str:
    """A docstring's reStructuredText literals as Markdown code."""
    return text.replace("``", "`").replace("|", "\\|")


def on_page_markdown(markdown: str, page, config, files) -> str:
    if _MARKER not in markdown:
        return markdown
    return markdown.replace(_MARKER, error_table(pathlib.Path(config["config_file_path"]).parent))
