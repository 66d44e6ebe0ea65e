"""MkDocs hook: the command-line reference, rendered from the argparse parsers themselves.

A page holding ``<!-- cli-reference: check -->`` gets that subcommand's usage and a table of
its arguments there (``<!-- cli-reference: export -->`` for the export command), so the
reference cannot drift from what the parser accepts."""

from __future__ import annotations

import argparse
import re

_MARKER = re.compile(r"<!-- cli-reference: (\w+) -->")


def _cell(text: str) -> str:
    """``text`` for a table cell: pipes escaped, and angle brackets outside code spans as
    entities, so ``<Name>.pt2`` shows rather than vanishing as an HTML tag."""
    parts = text.replace("|", "\\|").replace("\n", " ").split("`")
    for i in range(0, len(parts), 2):  # the even parts lie outside backticks
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    shown = []
    for flag in action.option_strings:
        if action.nargs == 0:
            shown.append(f"`{flag}`")
        elif action.choices:
            shown.append(f"`{flag} {{{','.join(map(str, action.choices))}}}`")
        else:
            metavar = action.metavar or action.dest.upper()
            shown.append(f"`{flag} [{metavar}]`" if action.nargs == "?" else f"`{flag} {metavar}`")
    return ", ".join(shown)


def render(parser: argparse.ArgumentParser) -> str:
    """Usage, description and one table row per argument of ``parser``."""
    usage = parser.format_usage().removeprefix("usage: ").strip()
    rows = ["| argument | default | meaning |", "|---|---|---|"]
    for action in parser._actions:  # argparse keeps no public list of its arguments
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)) or action.help == argparse.SUPPRESS:
            continue
        default = action.default
        shown = "" if default in (None, False, [], argparse.SUPPRESS) or action.nargs == 0 else f"`{default}`"
        help_text = (action.help or "") % {"default": default, "prog": parser.prog} if action.help else ""
        rows.append(f"| {_flags(action)} | {shown} | {_cell(help_text)} |")
    return "\n".join([f"```text\n{usage}\n```", "", _cell(parser.description or ""), "", *rows, ""])


def on_page_markdown(markdown: str, page, config, files) -> str:
    if "cli-reference:" not in markdown:
        return markdown
    from exporter.cli.main import parsers

    by_name = {name or "export": parser for name, parser in parsers().items()}
    return _MARKER.sub(lambda m: render(by_name[m.group(1)]), markdown)
