"""The one exception family exporter raises on purpose, its categories, and ``ErrorInfo``.

Every error says where (an input path such as ``args[0].shape[1]``, a pass, a graph
node, or the user's source line), what was found, and what to do next.  Each category
belongs to one error class: a failure of that kind is always raised as that class.
``ErrorInfo`` is the plain-data form of any failure, for reports, JUnit and tests.
"""

from __future__ import annotations

import enum
import traceback as traceback_module
from typing import Any, ClassVar

import attrs

__all__ = [
    "Category",
    "ConstraintError",
    "ErrorInfo",
    "AbortError",
    "ExportError",
    "InputSpecError",
    "PassError",
    "LoweringError",
    "TraceError",
    "VerificationError",
    "point_at",
]


class Category(enum.Enum):
    """What kind of failure; the value is the text reports, JSON and JUnit carry.

    Each category belongs to one error class (``owner``); on the command line ``input`` exits
    with 2 and every other category with 1.
    """

    INPUT = "input"
    """The model, its example inputs or the ``dynamic_shapes`` spec were given wrongly, or the
    model fails on the inputs even when run eagerly: fix the inputs or the model."""
    TRACE = "trace"
    """Tracing met something a program cannot hold that has no category of its own, such as an
    output that is neither a tensor, a number nor a container of them."""
    MODEL_ERROR = "model error"
    """The model raised while running on fake tensors though it runs eagerly: it needs real
    values or data the trace does not have."""
    DATA_DEPENDENT_CONTROL_FLOW = "data-dependent control flow"
    """A loop whose length a tensor's value decides, a branch on a value where branch capture
    is off (``branches="refuse"``), or a size read from a tensor and hashed."""
    BRANCH_CAPTURE = "branch capture"
    """A branch on a tensor's value whose sides cannot be one program: they return different
    structures, or tensors of shapes or dtypes ``torch.cond`` cannot join; or more decisions
    than the limit. The message names the line and the reason."""
    DATA_DEPENDENT_OUTPUT_SHAPE = "data-dependent output shape"
    """A size that depends on the values (``nonzero``, ``unique``) where a later step needs it
    fixed."""
    DATA_LEAVES_GRAPH = "data leaves the graph"
    """A tensor's values were handed to Python or NumPy (``.numpy()``), where the program cannot
    follow them."""
    UNSUPPORTED_OPERATOR = "unsupported operator"
    """An operator without a fake-tensor kernel, or with side effects a functional program cannot
    keep in order."""
    UNSUPPORTED_MUTATION = "unsupported mutation"
    """A write a program cannot express: an input resized or restrided in place, a tensor
    attribute changed in place."""
    UNSUPPORTED_TENSOR_SUBCLASS = "unsupported tensor subclass"
    """A tensor subclass exporter cannot take apart: a subclass input, or subclass state without
    ``__tensor_flatten__``."""
    CONSTANT = "constant"
    """A tensor the program would hold as a constant that cannot be one: it shares memory with a
    parameter (a tie made with ``.detach()``), or the trace did not see it being made
    (``.data``)."""
    DYNAMIC_SHAPE_CONSTRAINT = "dynamic shape constraint"
    """The model does not fit the declared ``dynamic_shapes``; each violation comes with the
    spec to use (``ConstraintError``)."""
    PASS = "pass"
    """A graph pass failed on a graph it should handle: a bug in exporter, to report with the
    model."""
    VERIFICATION = "verification"
    """The program breaks a rule it must keep (a bug in exporter, to report), or, where it was
    checked against eager (``--verify``, ``check``, ``experts_implementation``), its outputs
    differ from eager's; the message names the rule and, for a difference, its cause where
    one is found."""
    LOWERING = "lowering"
    """The program could not be lowered for a runtime (ExecuTorch): an operator the runtime or
    its backend does not take, named with the model's line."""
    TIMEOUT = "timeout"
    """``exporter check`` stopped the model's process at its time limit."""
    CRASH = "crash"
    """The model's process stopped before the export finished: it crashed, or exited
    (``sys.exit``, ``os._exit``, a signal)."""
    MEMORY = "memory"
    """``exporter check`` stopped the model's process at its memory limit."""
    INTERNAL = "internal"
    """An exception outside the ExportError family: a bug, wherever it came from (exporter,
    torch or the model's libraries); report it with the traceback (``--verbose``)."""

    @property
    def owner(self) -> type[ExportError] | None:
        """The error class failures of this kind are raised as (None for INTERNAL)."""
        return _OWNERS.get(self)


_OWNERS: dict[Category, type[ExportError]] = {}


def _describe(message: str, location: str | None, hint: str | None) -> str:
    lines = [message]
    if location:
        lines.append(f"  at {location}")
    if hint:
        lines.append(f"  hint: {hint}")
    return "\n".join(lines)


def point_at(text: str, column: int) -> str:
    """Two indented lines: ``text`` and a caret under ``column``, where parsing stopped."""
    return f"  {text}\n  {' ' * max(column, 0)}^"


class ExportError(Exception):
    """Base class: an export failed for a reason exporter can explain.

    ``str(error)`` is the message, then ``at LOCATION`` and ``hint: ...`` lines where known.
    """

    categories: ClassVar[tuple[Category, ...]] = ()
    """The categories this class owns; the first is the default."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for category in cls.__dict__.get("categories", ()):
            if category in _OWNERS:
                raise TypeError(f"{category} already belongs to {_OWNERS[category].__name__}")
            _OWNERS[category] = cls

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        location: str | None = None,
        category: Category | None = None,
    ) -> None:
        super().__init__(message)
        if not self.categories:
            raise TypeError(f"{type(self).__name__} owns no category; raise one of its subclasses")
        category = self.categories[0] if category is None else category
        if category not in self.categories:
            raise TypeError(f"{type(self).__name__} cannot carry {category}; it belongs to {category.owner}")
        self.message = message
        """What was found, without the location and the hint."""
        self.hint = hint
        """The next step to take, if one is known."""
        self.location = location
        """``file.py:LINE`` of the user's source that triggered it, if known."""
        self.category = category
        """The kind of failure, one of the class's ``categories``."""

    def __str__(self) -> str:
        return _describe(self.message, self.location, self.hint)


class InputSpecError(ExportError):
    """The model, its example inputs or the dynamic-shape spec were given wrongly."""

    categories = (Category.INPUT,)


class TraceError(ExportError):
    """Running the model under fake tensors failed or did something a program cannot express."""

    categories = (
        Category.TRACE,
        Category.MODEL_ERROR,
        Category.DATA_DEPENDENT_CONTROL_FLOW,
        Category.BRANCH_CAPTURE,
        Category.DATA_DEPENDENT_OUTPUT_SHAPE,
        Category.DATA_LEAVES_GRAPH,
        Category.UNSUPPORTED_OPERATOR,
        Category.UNSUPPORTED_MUTATION,
        Category.UNSUPPORTED_TENSOR_SUBCLASS,
        Category.CONSTANT,
    )


class ConstraintError(TraceError):
    """The traced model does not fit the declared ``dynamic_shapes``: the message lists each
    violation with its input dimension, the source line that forced it and the spec to use."""

    categories = (Category.DYNAMIC_SHAPE_CONSTRAINT,)

    def __init__(self, message: str, *, violations: tuple = (), **kw: Any) -> None:
        super().__init__(message, **kw)
        self.violations = list(violations)
        """Each way the model does not fit the spec: the input dimension, the source line that
        forced it, and the spec to use instead."""
        if self.location is None and self.violations:
            self.location = self.violations[0].location
        if self.hint is None:
            self.hint = (
                "apply the fixes listed above to dynamic_shapes (with --dynamic: NAME:MIN..MAX "
                "for a range, the same NAME for equal sizes, 2*NAME for a multiple)"
            )


class PassError(ExportError):
    """A graph pass failed on a graph it should handle: a bug in exporter.  The message names
    the pass and the passes that ran before it."""

    categories = (Category.PASS,)

    def __init__(
        self, message: str, *, pass_name: str | None = None, completed: tuple[str, ...] = (), **kw: Any
    ) -> None:
        super().__init__(message, **kw)
        self.pass_name = pass_name
        """The pass that failed."""
        self.completed = completed
        """The passes that ran before it, in order."""


class VerificationError(ExportError):
    """The program breaks a rule it must keep; the message names the rule, the node (when
    one is at fault) and what was found."""

    categories = (Category.VERIFICATION,)

    def __init__(self, message: str, *, rule: str, node: str | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.rule = rule
        """The rule broken (``functional-ops``, ``placeholder-prefix``, ``matches-eager``, ...)."""
        self.node = node
        """The graph node at fault, when one is."""
        if self.hint is None:
            self.hint = (
                "this is a bug in exporter (or in a graph pass run on its program); please report it with the model"
            )


class LoweringError(ExportError):
    """The program could not be lowered for a runtime (ExecuTorch): the message names the op,
    the location the model's line it came from, and the hint the next step."""

    categories = (Category.LOWERING,)


class AbortError(ExportError):
    """The model's process stopped before the export could finish: it crashed or exited
    (``sys.exit``, ``os._exit``, a signal), or ``exporter check`` stopped it for running past
    its time or memory limit. The message names the stage it was in and the exit code or signal."""

    categories = (Category.CRASH, Category.TIMEOUT, Category.MEMORY)


@attrs.frozen
class ErrorInfo:
    """Any failure as plain data: what reports, JUnit, the pytest helper and the CLI show.

    Built with ``ErrorInfo.from_exception(error)`` from any exception: an ``ExportError``
    keeps its category, location and hint; any other exception becomes category
    ``internal``.

    Examples:
        >>> import torch, exporter
        >>> try:
        ...     exporter.export(torch.nn.Linear(16, 4), (torch.randn(2, 8),))
        ... except exporter.ExportError as error:
        ...     info = exporter.ErrorInfo.from_exception(error)
        >>> info.category, info.type, info.is_input_error
        (<Category.INPUT: 'input'>, 'InputSpecError', True)
        >>> sorted(info.to_json())
        ['category', 'hint', 'location', 'message', 'type']
        >>> exporter.ErrorInfo.from_exception(KeyError("x")).category
        <Category.INTERNAL: 'internal'>
    """

    type: str
    """The exception's class name (``TraceError``, or ``RuntimeError`` for an internal one)."""
    category: Category
    """The kind of failure; ``Category.INTERNAL`` for an exception outside the ExportError family."""
    message: str
    """What was found: the error's message without its location and hint lines."""
    location: str | None = None
    """``file.py:LINE`` of the user's source that triggered it, where known."""
    hint: str | None = None
    """The next step to take, where one is known."""
    traceback: str | None = attrs.field(default=None, eq=False)
    """The formatted traceback, for ``--verbose``; not part of the JSON."""

    @classmethod
    def from_exception(cls, error: BaseException) -> ErrorInfo:
        """The plain-data form of ``error``.

        Args:
            error: any exception; an ``ExportError`` keeps its own fields.

        Returns:
            The record, its ``traceback`` formatted from ``error``. Anything outside the
            ExportError family gets category ``INTERNAL`` and its text as the message.
        """
        trace = "".join(traceback_module.format_exception(error))
        if isinstance(error, ExportError):
            return cls(type(error).__name__, error.category, error.message, error.location, error.hint, trace)
        message = str(error) or type(error).__name__
        return cls(type(error).__name__, Category.INTERNAL, message, None, None, trace)

    @property
    def is_input_error(self) -> bool:
        """The user gave the model, inputs or spec wrongly (a usage error: exit code 2)."""
        return self.category is Category.INPUT

    @property
    def headline(self) -> str:
        """The first line of the message."""
        return self.message.splitlines()[0] if self.message else self.type

    def to_json(self) -> dict[str, Any]:
        """The record as reports write it: type, category (its value), message, location, hint."""
        return {
            "type": self.type,
            "category": self.category.value,
            "message": self.message,
            "location": self.location,
            "hint": self.hint,
        }

    def to_text(self) -> str:
        """The message, then ``at LOCATION`` and ``hint: ...`` lines where known."""
        return _describe(self.message, self.location, self.hint)
