"""MkDocs hook: the "Reading failures" page's examples, each run when the site is built.

``<!-- failure-messages -->`` becomes one section per failure category: when it happens,
a model that fails that way, and the message exporter gives for it (``failure_examples.py``).
An example whose optional package is missing shows the message it stored, and says so; the
build fails when an example that can run does not fail with its category.
"""

from __future__ import annotations

import pathlib
import sys
import textwrap

_MARKER = "<!-- failure-messages -->"


def _wrapped(text: str, width: int) -> str:
    """``text`` with each line longer than ``width`` wrapped, its continuation indented past the
    line's own indent, as a terminal of that width shows it (a panel's lines already fit)."""
    lines = []
    for line in text.splitlines():
        indent = " " * (len(line) - len(line.lstrip()))
        lines += textwrap.wrap(line, width, subsequent_indent=indent + "    ", break_on_hyphens=False) or [""]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if _MARKER not in markdown:
        return markdown
    sys.path.insert(0, str(pathlib.Path(config["docs_dir"])))
    try:
        import failure_examples
    finally:
        sys.path.pop(0)
    runnable = [e for e in failure_examples.EXAMPLES if failure_examples.available(e)]
    found = dict(zip(map(id, runnable), failure_examples.run_all(runnable)))
    sections = []
    for example in failure_examples.EXAMPLES:
        note = ""
        if id(example) in found:
            category, message = found[id(example)]
            if category != example.category:
                raise RuntimeError(f"the {example.category!r} example failed as {category!r}:\n{message}")
        else:  # the optional package is missing here: the message it gave where it is installed
            message = example.stored
            note = (
                f"*`{example.needs}` is not installed where this page was built: the message below is the "
                "one this example gives where it is.*\n\n"
            )
        message = _wrapped(message, failure_examples.PANEL_WIDTH)
        code = textwrap.dedent(example.model).strip()
        how = f"```bash\npython -m exporter check {example.check}\n```\n\n" if example.check else ""
        sections.append(
            f"### {example.category}\n\n{example.what}\n\n"
            f'```python title="model.py"\n{code}\n```\n\n{how}{note}```text\n{message}\n```\n'
        )
    return markdown.replace(_MARKER, "\n".join(sections))
