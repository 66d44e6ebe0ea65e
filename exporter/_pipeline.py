"""The spine: bind inputs -> read dynamic_shapes -> trace -> check constraints -> passes ->
range constraints -> program -> verify."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import sympy
import torch
from torch.export import AdditionalInputs

from . import passes, verifier
from ._assumptions import Assumption, AssumptionKind, DraftReport
from ._dims import DynamicPlan, dim_names
from ._options import IR_LEVELS, TRACING_CHECKS, ExportOptions
from ._errors import Category, ConstraintError, InputSpecError, PassError, TraceError, VerificationError
from ._program import build_program
from ._state import ExportState
from ._timing import StageTimer
from .branches import BRANCH_MODES, DEFAULT_MAX_RUNS, capture
from .constraints import check_constraints, range_constraints
from .inputs import BoundInputs, bind_inputs, plan_dynamic_shapes, relaxed_dynamic_shapes
from ._notes import Note, NoteKind
from .experts import automatic_experts_implementation, check_against_unswitched, experts_implementation_applied, suggest_switch
from .trace import trace
from .trace.call_signatures import recording_calls
from .trace.draft import mark_checked
from .trace.explain import eager_failure, user_location
from .trace.fast import FAST_PATHS_ENV, FastPaths
from .trace.patches import gc_paused
from .trace.tracing_checks import answered

__all__ = ["ExportResult", "export", "export_timed", "run_passes"]

log = logging.getLogger(__name__)
draft_log = logging.getLogger("exporter.draft")
"""Where a draft export with assumptions says so (the command line shows them as a table)."""

VERIFY_EACH_PASS = "EXPORTER_VERIFY_EACH_PASS"
"""Environment variable: when set (not 0), the structural rules are checked after every pass."""

Pass = Callable[[ExportState], bool]


def run_passes(state: ExportState, pipeline: Sequence[Pass] | None = None) -> None:
    """Run ``pipeline`` (default ``passes.DEFAULT_PASSES``, ``passes.TRAINING_PASSES`` for a
    training-IR state) in order.

    A problem with the user's model that a pass finds (``InputSpecError``, ``TraceError``)
    is raised as it is; any other failure is a ``PassError`` naming the pass and the
    passes that ran before it.
    """
    if pipeline is None:
        pipeline = passes.TRAINING_PASSES if state.training else passes.DEFAULT_PASSES
    verify_each = os.environ.get(VERIFY_EACH_PASS, "") not in ("", "0")
    done: list[str] = []
    for p in pipeline:
        name = p.__name__
        try:
            changed = p(state)
            if verify_each:
                verifier.verify_structure(state.gm, state.input_specs, training=state.training)
        except (InputSpecError, TraceError):
            raise
        except VerificationError as e:
            e.message = f"after pass {name}: {e.message}"
            raise
        except PassError as e:
            e.pass_name = e.pass_name or name
            e.completed = tuple(done)
            e.message = f"pass {name} failed{_after(done)}: {e.message}"
            raise
        except Exception as e:
            raise PassError(
                f"pass {name} failed{_after(done)}: {type(e).__name__}: {e}",
                pass_name=name,
                completed=tuple(done),
                hint="this is a bug in exporter; please report it with the model",
            ) from e
        log.debug("pass %s %s", name, "changed the graph" if changed else "made no change")
        done.append(name)


def _after(done: list[str]) -> str:
    return f" (after {', '.join(done)})" if done else ""


def export(
    mod: torch.nn.Module,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    dynamic_shapes: Any = None,
    strict: bool = False,
    preserve_module_call_signature: tuple[str, ...] = (),
    prefer_deferred_runtime_asserts_over_guards: bool = False,
    draft: bool = False,
    experts_implementation: str | None = None,
    ir: str = "inference",
    fast_paths: bool | None = None,
    branches: str = "capture",
    max_branch_runs: int = DEFAULT_MAX_RUNS,
    max_iterations: int | None = None,
    tracing_checks: str = "traced",
) -> torch.export.ExportedProgram:
    """Export ``mod`` on example inputs to a functional ATen ``torch.export.ExportedProgram``.

    The program is the one
    ``torch.export.export(mod, args, kwargs, strict=False).run_decompositions({})`` gives:
    post-autograd, functional ATen (functional composites such as ``aten.linear`` kept
    whole), with a graph signature whose inputs are parameters (``p_``), buffers (``b_``),
    constants (``c_``) and user inputs, and whose outputs are buffer and input mutations
    followed by the user outputs. ``mod`` is left exactly as it was, also on failure. The
    parameters ``torch.export.export`` has are named as there and mean what they mean there,
    so a call written for it works unchanged.

    Args:
        mod: the module to export; its parameters and buffers become program inputs.
        args: positional example inputs of ``mod.forward``.
        kwargs: keyword example inputs of ``mod.forward``.
        dynamic_shapes: which input dimensions may vary, as for ``torch.export.export``: a
            dict by ``forward()`` parameter name or a tuple in order, holding ``Dim``,
            ``Dim.AUTO``/``Dim.DYNAMIC``/``Dim.STATIC`` per dimension, or an
            ``AdditionalInputs``. None exports every size as the example's.
        strict: must be False: exporter is non-strict (``strict=True`` is refused).
        preserve_module_call_signature: paths of submodules whose calling convention the
            program keeps in its module call graph, so ``torch.export.unflatten`` rebuilds
            them callable and swappable.
        prefer_deferred_runtime_asserts_over_guards: size conditions that decide no branch (a
            ``reshape`` needing a multiple of 4) become runtime asserts in the program instead
            of constraint errors.
        draft: where the export would stop on a data-dependent branch or loop, an operator
            without a fake kernel, or a ``dynamic_shapes`` spec the model does not fit, take
            what the example inputs do and go on; each assumption is checked when the program
            runs where it can be, and listed in ``ep.draft_report`` (a ``DraftReport``).
        experts_implementation: ``"batched_mm"`` or ``"grouped_mm"``: trace a transformers
            model's mixture-of-experts blocks with that implementation instead of their
            data-dependent loop, then check the program against the model as configured on
            the example inputs; ``"eager"``: trace their own loop over the experts a batch
            hits, captured as a ``torch.while_loop`` (needs ``branches="capture"``). The
            model's setting is restored. None (the default) switches a block that runs the
            loop to ``"batched_mm"``.
        ir: ``"inference"`` (the default) for the program above; ``"training"`` for
            torch.export's training IR, what ``torch.export.export`` returns before
            ``run_decompositions``: pre-dispatch ATen, autograd-visible, in-place writes kept
            as called, grad-mode and autocast blocks as higher-order ops. What pt2e
            quantization and fine-tuning start from.
        fast_paths: False traces with make_fx and torch's own fake-tensor machinery only; True
            takes every fast path (``exporter.trace.fast``) even where a torch release has not
            proven them; None (the default) follows ``EXPORTER_FAST_PATHS``, else the paths
            proven on the running release. The program is the same either way.
        branches: where forward branches on a tensor's value (``if x.sum() > 0:``,
            ``.item()`` compared, ``.any()``, a size only the data decides): ``"capture"``
            (the default) traces each side and joins them with ``torch.cond``, so the program
            is right on inputs that take either side, and ``ep.branch_report`` lists each
            decision; ``"refuse"`` fails there, naming the line; ``"draft"`` follows the
            example's side and checks it when the program runs (as ``draft=True``).
        max_branch_runs: how many runs of forward branch capture may make: one, and one more
            for each decision's other side. Past it the export fails naming the line.
        max_iterations: write each captured loop over a data-sized tensor as this many
            ``torch.cond`` steps in a row instead of a ``torch.while_loop``, for a consumer
            that cannot run one (ExecuTorch). Step ``k`` runs where the loop has more than
            ``k`` items; the program asserts the loop has no more than ``max_iterations``,
            and fails saying so on an input that needs more. None (the default) keeps the
            ``torch.while_loop``.
        tracing_checks: how the trace answers the model's libraries asking whether forward
            is traced (transformers' ``is_tracing()``, ``torch.compiler.is_exporting()``):
            ``"traced"`` (the default) answers yes, as torch.export does; ``"eager"`` answers
            as eager does, so the model takes its eager path and the value tests on it are
            captured as ``torch.cond``. For a model whose traced path computes something
            else (transformers drops an all-ones sdpa mask in eager only): ``--verify`` names
            the check when that is why a program differs from eager.

    Returns:
        The program, a genuine ``torch.export.ExportedProgram``: ``torch.export.save`` and
        ``load``, ``ep.module()``, ``ep.run_decompositions()``, AOTInductor and ExecuTorch take
        it. With ``draft=True`` it carries ``ep.draft_report``.

    Raises:
        InputSpecError: ``args``/``kwargs`` do not fit ``mod.forward`` (also when the model
            fails on them when run eagerly: the inputs, not the export, are wrong), or an
            argument is invalid.
        TraceError: running the model on fake tensors failed, or did something a program
            cannot express; the error names the category and the user's source line.
        ConstraintError: the model does not fit ``dynamic_shapes`` (a ``TraceError``); each
            violation comes with the spec to use.
        PassError: a graph pass failed: a bug in exporter (please report it).
        VerificationError: the program breaks a rule it must keep (a bug in exporter), or
            with ``experts_implementation`` differs from the model as configured.

    Examples:
        >>> import torch, exporter
        >>> from torch.export import Dim
        >>> model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU()).eval()
        >>> ep = exporter.export(model, (torch.randn(4, 16),), dynamic_shapes=({0: Dim("batch")},))
        >>> [spec.arg.name for spec in ep.graph_signature.input_specs]
        ['p_0_weight', 'p_0_bias', 'input']
        >>> ep.module()(torch.randn(9, 16)).shape
        torch.Size([9, 8])
    """
    options = ExportOptions(
        dynamic_shapes=dynamic_shapes,
        strict=strict,
        preserve_module_call_signature=preserve_module_call_signature,
        prefer_deferred_runtime_asserts_over_guards=prefer_deferred_runtime_asserts_over_guards,
        draft=draft,
        experts_implementation=experts_implementation,
        ir=ir,
        fast_paths=fast_paths,
        branches=branches,
        max_branch_runs=max_branch_runs,
        max_iterations=max_iterations,
        tracing_checks=tracing_checks,
    )
    return export_timed(mod, args, kwargs, options).program


@attrs.frozen
class ExportResult:
    """What ``export_timed`` returns: the program and what the export learned on the way."""

    program: torch.export.ExportedProgram
    timings: dict[str, float]
    """Seconds per stage: inputs, trace, constraints, passes, program."""
    inputs: BoundInputs
    """The example inputs bound to ``forward()``: flat leaves, their paths and labels."""
    plan: DynamicPlan | None
    """The ``dynamic_shapes`` spec as read (None for a static export)."""

    def dim_names(self) -> dict[sympy.Symbol, str]:
        """The user's Dim name of each size symbol of the program the spec named."""
        return dim_names(self.program, self.plan)


@gc_paused()  # a fresh pause per call: the whole export runs with the collector paused
def export_timed(
    mod: torch.nn.Module,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    options: ExportOptions = ExportOptions(),
    *,
    bound: BoundInputs | None = None,
) -> ExportResult:
    """``export`` with its settings as one record, also returning the time of each stage and
    the inputs and spec as read.  ``bound``: the inputs already bound (``bind_inputs(mod,
    args, kwargs)``), for a caller that needed them before exporting."""
    model, o = mod, options
    if o.strict:
        raise InputSpecError(
            "strict=True asks for torch.export's strict mode (tracing Python bytecode with Dynamo); "
            "exporter is non-strict by design",
            hint="drop strict=True (exporter.export is what torch.export.export(strict=False) does), "
            "or call torch.export.export(..., strict=True) for a strict trace",
        )
    if o.ir not in IR_LEVELS:
        raise InputSpecError(
            f"ir={o.ir!r} is not an IR exporter produces",
            hint="pass ir='inference' (functional post-autograd ATen, the default) or ir='training' "
            "(torch.export's pre-dispatch training IR)",
        )
    if o.branches not in BRANCH_MODES:
        raise InputSpecError(
            f"branches={o.branches!r} is not a way of exporting branches on tensor values",
            hint="pass branches='capture' (both sides as torch.cond, the default), 'refuse' or 'draft'",
        )
    if o.tracing_checks not in TRACING_CHECKS:
        raise InputSpecError(
            f"tracing_checks={o.tracing_checks!r} is not a way of answering a model that asks whether it is traced",
            hint="pass tracing_checks='traced' (as torch.export, the default) or 'eager' (the model's eager path)",
        )
    if o.max_iterations is not None and (
        isinstance(o.max_iterations, bool) or not isinstance(o.max_iterations, int) or o.max_iterations < 1
    ):
        raise InputSpecError(
            f"max_iterations={o.max_iterations!r} is not a number of loop steps",
            hint="pass a whole number of at least 1 (the most steps any captured loop may take), or None for "
            "torch.while_loop",
        )
    if o.experts_implementation == "eager" and (o.branches != "capture" or o.draft):
        raise InputSpecError(
            "experts_implementation='eager' traces the experts loop, which only branch capture can export",
            hint="drop draft and branches (branches='capture' is the default), or pick 'batched_mm'",
        )
    if o.branches == "draft" and not o.draft:
        o = attrs.evolve(o, draft=True)
    try:
        fast = FastPaths.resolve(o.fast_paths)
    except ValueError as e:
        raise InputSpecError(str(e), hint=f"set {FAST_PATHS_ENV} to 0 or 1, or unset it") from e
    timer = StageTimer()
    bound = bind_inputs(model, args, kwargs) if bound is None else bound
    dynamic_shapes = o.dynamic_shapes
    plan = plan_dynamic_shapes(model, bound, dynamic_shapes) if dynamic_shapes is not None else None
    timer.lap("inputs")
    # A loop over the experts a batch hits is one no capture can join: where the library
    # offers an implementation without it, take that one, held to the model as configured.
    switched = o.experts_implementation
    if switched is None and o.branches == "capture" and not o.draft:
        switched = automatic_experts_implementation(model)
    with experts_implementation_applied(model, switched):
        state = _trace(model, bound, plan, o, fast)
        timer.lap("trace")
        try:
            check_constraints(state)
        except ConstraintError as e:
            if not o.draft or isinstance(dynamic_shapes, AdditionalInputs):
                raise
            # as torch.export.draft_export does: every declared dim becomes Dim.AUTO in its range
            log.info("draft export: the model does not fit dynamic_shapes; tracing again with Dim.AUTO")
            relaxed = plan_dynamic_shapes(model, bound, relaxed_dynamic_shapes(model, bound, dynamic_shapes))
            state = _trace(model, bound, relaxed, o, fast)
            check_constraints(state)
            state.assumptions += _shape_assumptions(e)
    timer.lap("constraints")
    run_passes(state)
    if o.draft:
        state.assumptions = mark_checked(state.assumptions, state.gm)
    timer.lap("passes")
    state.range_constraints = range_constraints(state)
    try:
        with fast.program_code_deferred():
            program = build_program(state)
    except Exception as e:
        raise VerificationError(
            f"torch rejected the program: {type(e).__name__}: {e}",
            rule="exported-program",
            hint="this is a bug in exporter; please report it with the model",
        ) from e
    verifier.verify_program(program)
    if isinstance(dynamic_shapes, AdditionalInputs):
        _check_additional_inputs(program, dynamic_shapes)
    if o.draft:
        program.draft_report = DraftReport(tuple(state.assumptions))
        if state.assumptions:
            draft_log.warning("%s\n(the program is in ep.draft_report)", program.draft_report)
    program.notes = tuple(state.notes)
    if state.branch_report is not None:
        program.branch_report = state.branch_report
        log.info("%s", state.branch_report)
    for note in state.notes:
        log.warning("%s", note)
    if switched is not None:
        check_against_unswitched(program, model, bound.args, bound.kwargs, switched)
    if switched is not None and o.experts_implementation is None:
        note = Note(NoteKind.EXPERTS_SWITCHED, (
            f"{type(model).__name__}'s mixture-of-experts blocks loop over the experts a batch hits; the program "
            f"runs them with experts_implementation={switched!r} instead, checked against the model as "
            "configured on the example inputs"
        ))
        program.notes = (*program.notes, note)
        log.info("%s", note)
    timer.lap("program")
    return ExportResult(program, timer.timings, bound, plan)


def _trace(model: torch.nn.Module, bound: BoundInputs, plan: Any, options: ExportOptions, fast: FastPaths) -> ExportState:
    try:
        with answered(options.tracing_checks), recording_calls(model, options.preserve_module_call_signature) as calls:
            if options.branches == "capture" and not options.draft:
                state = capture(
                    model, bound, plan, fast=fast,
                    prefer_deferred_runtime_asserts_over_guards=options.prefer_deferred_runtime_asserts_over_guards,
                    training=options.ir == "training", max_runs=options.max_branch_runs,
                    max_iterations=options.max_iterations,
                )
            else:
                state = trace(
                    model, bound, plan, fast=fast, draft=options.draft,
                    prefer_deferred_runtime_asserts_over_guards=options.prefer_deferred_runtime_asserts_over_guards,
                    training=options.ir == "training",
                )
        state.preserved_calls = [call for graph, call in calls if graph is state.gm.graph]
        return state
    except TraceError as e:
        if e.category is Category.MODEL_ERROR:
            _blame_inputs_if_eager_fails(model, bound, e)
        suggest_switch(model, e)
        raise


def _shape_assumptions(error: ConstraintError) -> list[Assumption]:
    """The violations a draft export traced past, as assumptions its input checks hold."""
    if not error.violations:
        return [Assumption(AssumptionKind.DYNAMIC_SHAPE, error.message, error.location, checked=True)]
    return [
        Assumption(
            AssumptionKind.DYNAMIC_SHAPE, v.message, v.location, v.code, detail=f"fix: {v.fix}", checked=True,
            flag=v.flag,
        )
        for v in error.violations
    ]


def _check_additional_inputs(program: torch.export.ExportedProgram, additional: AdditionalInputs) -> None:
    """The program accepts every input the ``AdditionalInputs`` spec was given, as torch.export checks."""
    try:
        additional.verify(program)
    except Exception as e:  # noqa: BLE001 - the program's input check says why
        raise ConstraintError(
            "the program traced from the example inputs does not accept all of the additional inputs "
            f"given in dynamic_shapes: {str(e).strip()}",
            hint="the model needs what the message says of these sizes; drop or change the additional "
            "inputs that break it, or give a dynamic_shapes spec with the ranges the model allows",
        ) from e


def _blame_inputs_if_eager_fails(model: torch.nn.Module, bound: BoundInputs, error: TraceError) -> None:
    """Raise InputSpecError if the model also fails eagerly on the example inputs.

    A model that cannot run on its example inputs at all (wrong shape, wrong dtype, a
    missing entry in an input dict) fails under fake tensors too; saying so points the
    user at the inputs instead of at export.  The model's buffers and the inputs are
    restored after the eager run.
    """
    ran, failure = eager_failure(model, bound.args, bound.kwargs)
    if not ran:
        return
    if failure is None:
        error.hint = f"{error.hint} (the model runs eagerly on these inputs, so this is an export problem)"
        return
    detail = str(failure).strip().splitlines()[0] if str(failure).strip() else ""
    raise InputSpecError(
        "the model fails on the example inputs even when run eagerly, so the problem is the "
        f"inputs or the model, not export: {type(failure).__name__}: {detail}",
        location=user_location(failure),
        hint="check the example inputs' number, shapes and dtypes against what forward() expects",
    ) from error
