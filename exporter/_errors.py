"""The one exception family exporter raises on purpose.

Every error says where (an input path such as ``args[0].shape[1]``, a pass, a graph
node, or the user's source line), what was found, and what to do next.  The CLI maps
``InputSpecError`` to exit code 2 and every other ``ExportError`` to exit code 1.
"""

from __future__ import annotations

__all__ = [
    "ExportError",
    "InputSpecError",
    "TraceError",
    "PassError",
    "VerificationError",
    "ConstraintError",
]


class ExportError(Exception):
    """Base class: an export failed for a reason exporter can explain.

    Attributes:
        category: short machine-readable kind of failure (``"input"``,
            ``"data-dependent control flow"``, ``"unsupported operator"``, ...).
        location: ``"file.py:LINE"`` of the user's source that triggered it, if known.
        hint: the next step to take, if one is known.
    """

    category = "export"

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        location: str | None = None,
        category: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.location = location
        if category is not None:
            self.category = category

    def __str__(self) -> str:
        lines = [self.message]
        if self.location:
            lines.append(f"  at {self.location}")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)


class InputSpecError(ExportError):
    """The model, its example inputs or the dynamic-shape spec were given wrongly."""

    category = "input"


class TraceError(ExportError):
    """Running the model under fake tensors failed or did something a program cannot express."""

    category = "trace"


class ConstraintError(TraceError):
    """The traced model does not fit the declared ``dynamic_shapes``: the message lists each
    violation with its input dimension, the source line that forced it and the spec to use."""

    category = "dynamic shape constraint"

    def __init__(self, message: str, *, violations=(), **kw) -> None:
        super().__init__(message, **kw)
        self.violations = list(violations)
        if self.location is None and self.violations:
            self.location = self.violations[0].location
        if self.hint is None:
            self.hint = (
                "apply the fixes listed above to dynamic_shapes (with --dynamic: NAME:MIN..MAX "
                "for a range, the same NAME for equal sizes, 2*NAME for a multiple)"
            )


class PassError(ExportError):
    """A graph pass failed; the message names the pass and the passes that ran before it."""

    category = "pass"

    def __init__(self, message: str, *, pass_name: str, completed: tuple[str, ...] = (), **kw) -> None:
        super().__init__(message, **kw)
        self.pass_name = pass_name
        self.completed = completed


class VerificationError(ExportError):
    """The program breaks an IR rule; the message names the node, the rule and what was found."""

    category = "verification"

    def __init__(self, message: str, *, rule: str, node: str | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.rule = rule
        self.node = node
