"""MkDocs hook: the "Reading failures" page's examples, each run when the site is built.

``<!-- failure-messages -->`` becomes one section per failure category: when it happens,
a model that fails that way, and the message exporter gives for it (``failure_examples.py``).
"""

from __future__ import annotations

import pathlib
import sys
import textwrap

_MARKER = "<!-- failure-messages -->"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if _MARKER not in markdown:
        return markdown
    sys.path.insert(0, str(pathlib.Path(config["docs_dir"])))
    try:
        import failure_examples
    finally:
        sys.path.pop(0)
    sections = []
    for example, (category, message) in zip(failure_examples.EXAMPLES, failure_examples.run_all()):
        if category != example.category:
            raise RuntimeError(f"the {example.category!r} example failed as {category!r}:\n{message}")
        code = textwrap.dedent(example.model).strip()
        how = f"```bash\npython -m exporter check {example.check}\n```\n\n" if example.check else ""
        sections.append(
            f"### {example.category}\n\n{example.what}\n\n"
            f'```python title="model.py"\n{code}\n```\n\n{how}```text\n{message}\n```\n'
        )
    return markdown.replace(_MARKER, "\n".join(sections))
