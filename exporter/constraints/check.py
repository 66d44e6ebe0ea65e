"""Hold the guards the model needed against the declared ``dynamic_shapes``.

torch's own shape solver decides, as it does for torch.export: ``produce_guards`` with the
declared equalities, then the solver's forced specializations; a ``Dim.DYNAMIC`` the
trace fixed to a constant is refused too.  When the solver refuses, the error lists
every violation our own analysis found, each with where it was forced and the spec to
paste, or, if the analysis found none, torch's message in the user's input names.
"""

from __future__ import annotations

from .._errors import ConstraintError
from .._state import ExportState
from .._torch_internals import ConstraintViolationError, solver_may_specialize
from .fixes import constraint_report, in_input_names
from .proofs import holds_on_ranges
from .violations import find_violations

__all__ = ["check_constraints"]


def _solver_refusal(state: ExportState) -> ConstraintViolationError | None:
    """What torch's shape solver holds against the trace, or None if it accepts it.

    If the solver refuses, it is asked again without the guards ``holds_on_ranges`` proves
    true on the declared ranges (they constrain nothing), and its second answer stands.
    """
    shape_env = state.fake_mode.shape_env
    refusal = _produce_guards(state, None)
    if refusal is not None:
        ranges = shape_env.var_to_range
        unproven = [g for g in shape_env.guards if not holds_on_ranges(shape_env.simplify(g.expr), ranges)]
        if len(unproven) == len(shape_env.guards):
            return refusal
        refusal = _produce_guards(state, unproven)
        if refusal is not None:
            return refusal
    solver = shape_env.dim_constraints
    if solver is None or not solver_may_specialize(solver):
        return None
    solver.solve()
    forced = solver.forced_specializations()
    if forced:
        fixed = ", ".join(f"{name} = {value}" for name, value in forced.items())
        return ConstraintViolationError(f"dimensions declared dynamic must be constant:\n  - {fixed}")
    return None


def _produce_guards(state: ExportState, guards: list | None) -> ConstraintViolationError | None:
    try:
        state.fake_mode.shape_env.produce_guards(
            [t.fake for t in state.tracked],
            [t.source for t in state.tracked],
            guards=guards,
            input_contexts=[t.context for t in state.tracked],
            equalities_inputs=state.equalities,
            ignore_static=False,
        )
    except ConstraintViolationError as e:
        return e
    return None


def check_constraints(state: ExportState) -> None:
    """The traced model satisfies the declared dynamic shapes, or ConstraintError explains how not.

    Afterwards the declared equalities are in the ShapeEnv, which takes no new facts.
    """
    shape_env = state.fake_mode.shape_env
    if state.dynamic is not None:
        # Our analysis reads the ShapeEnv as the trace left it, before the solver runs.
        violations = find_violations(state)
        refusal = _solver_refusal(state)
        if refusal is not None or any(v.always for v in violations):
            if violations:
                raise ConstraintError(constraint_report(violations), violations=violations)
            raise ConstraintError(
                "the model does not fit the declared dynamic shapes: torch's shape solver cannot prove, "
                "for every size the spec allows, what the model needs:\n" + in_input_names(str(refusal), state),
                hint="narrow the range of that dimension, declare it a multiple (k * NAME) or make it static (None)",
            )
    shape_env.frozen = True
