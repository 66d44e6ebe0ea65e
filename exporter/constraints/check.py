"""Hold the guards the model needed against the declared ``dynamic_shapes``, then fix the ranges.

Violations found here are reported all at once, each with its fix; then the declared
equalities are imposed (``produce_guards``, where torch's own solver has the last word)
and the program's ``range_constraints`` are computed, as torch.export computes them.
"""

from __future__ import annotations

from .._errors import ConstraintError
from .._state import ExportState
from .._torch_internals import ConstraintViolationError
from .fixes import constraint_report, in_input_names
from .ranges import range_constraints
from .violations import find_violations

__all__ = ["check_constraints"]


def check_constraints(state: ExportState) -> None:
    """The traced model satisfies the declared dynamic shapes, or ConstraintError explains how not.

    Afterwards the declared equalities are in the ShapeEnv and ``state.range_constraints``
    maps every input symbol (and every data-dependent one) to its range.
    """
    shape_env = state.fake_mode.shape_env
    if state.dynamic is not None:
        violations = find_violations(state)
        if violations:
            raise ConstraintError(constraint_report(violations), violations=violations)
        try:
            shape_env.produce_guards(
                [t.fake for t in state.tracked],
                [t.source for t in state.tracked],
                input_contexts=[t.context for t in state.tracked],
                equalities_inputs=state.equalities,
                ignore_static=False,
            )
        except ConstraintViolationError as e:
            # our checks passed but torch's solver could not prove a guard for every declared size
            raise ConstraintError(
                "the model does not fit the declared dynamic shapes: torch's shape solver cannot prove, "
                "for every size the spec allows, what the model needs:\n" + in_input_names(str(e), state),
                hint="narrow the range of that dimension, declare it a multiple (k * NAME) or make it static (None)",
            ) from None
    shape_env.frozen = True
    state.range_constraints = range_constraints(state)
