"""What a draft export assumed: one record per place the example inputs decided for the program.

``exporter.export(..., draft=True)`` keeps going where an export would stop: a branch or
loop on a tensor's value, a size hashed, ``.numpy()`` on a tensor, an operator without a fake
kernel, a dynamic-shape spec the model does not fit.  Each time it takes what the example inputs do and records an ``Assumption``;
the program carries the list as ``ep.draft_report``.
"""

from __future__ import annotations

import enum

import attrs

__all__ = ["Assumption", "AssumptionKind", "DraftReport", "draft_report"]


class AssumptionKind(enum.Enum):
    """Why the example inputs had to decide; the value is the text reports carry."""

    DATA_DEPENDENT = "data-dependent value"
    """Python needed a tensor's value (``if x.sum() > 0``, ``range(n.item())``, a size that
    depends on data, such a size hashed by ``set()`` or a dict); the example's value was used,
    and an assert checks it at run time."""
    TENSOR_VALUES = "tensor values"
    """``.numpy()`` handed a tensor's values to Python; the example's values were given, and
    the program asserts the tensor holds them when it runs."""
    MISSING_FAKE_KERNEL = "operator without a fake kernel"
    """The operator ran for real on the example inputs, and its outputs' sizes became
    data-dependent symbols; the dtype, device and layout it returned are asserted."""
    DYNAMIC_SHAPE = "dynamic shape"
    """The model does not fit the declared ``dynamic_shapes``; the dimension was traced as
    ``Dim.AUTO`` (dynamic where the model allows it), and the program's input checks hold
    what it needs."""


@attrs.frozen
class Assumption:
    """One place where the example inputs decided for the program, and whether the program
    checks it when it runs."""

    kind: AssumptionKind
    """Why the example had to decide."""
    assumed: str
    """What was taken, in the graph's terms: ``Ne(u0, 0) is True``, ``u1 is 3``."""
    location: str | None = None
    """``file.py:LINE`` of the user's code that needed it."""
    code: str | None = None
    """That line's source."""
    detail: str | None = None
    """Where the values in ``assumed`` come from (``u0 = aten._local_scalar_dense at file:line``),
    or the operator."""
    checked: bool = False
    """Whether the program checks it when it runs (an assert node, or its input checks)."""
    occurrences: int = 1
    """How many times the trace met it (a loop asks on every pass)."""
    flag: str | None = None
    """For a dynamic-shape assumption: its fix as ``--dynamic`` flags (``detail`` has it as a
    ``dynamic_shapes`` entry), which the command line shows instead."""

    def to_json(self) -> dict:
        """The record as the JSON report writes it."""
        return {
            "kind": self.kind.value,
            "assumed": self.assumed,
            "location": self.location,
            "code": self.code,
            "detail": self.detail,
            "checked": self.checked,
            "occurrences": self.occurrences,
        }

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        code = f": `{self.code}`" if self.code else ""
        check = "checked when the program runs" if self.checked else "NOT checked when the program runs"
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.kind.value}{where}{code}\n    assumed {self.assumed}{detail}; {check}"


@attrs.frozen
class DraftReport:
    """Every assumption a draft export made; empty if the export needed none (it is sound)."""

    assumptions: tuple[Assumption, ...] = ()
    """Each assumption, in the order the trace met them."""

    @property
    def sound(self) -> bool:
        """No assumption: the program is what a normal export would give."""
        return not self.assumptions

    def to_json(self) -> dict:
        """``{"sound": ..., "assumptions": [...]}``, as the JSON report writes it."""
        return {"sound": self.sound, "assumptions": [a.to_json() for a in self.assumptions]}

    def __str__(self) -> str:
        if self.sound:
            return "draft export: nothing assumed; exporter.export without draft=True gives the same program"
        lines = [f"draft export: {len(self.assumptions)} assumption(s) taken from the example inputs"]
        lines += [f"{i}. {a}" for i, a in enumerate(self.assumptions, 1)]
        return "\n".join(lines)


def draft_report(program: object) -> DraftReport | None:
    """The report a draft export attached to ``program`` (None for a normal export)."""
    return getattr(program, "draft_report", None)
