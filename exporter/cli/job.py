"""One export of a model reference, start to finish, as the CLI and CI run it; the result is data.

``run_export(ExportSettings(...))`` loads the model, finds its inputs, exports it, optionally
checks the program against eager and saves it (or, when the export fails, finds which
submodules export on their own), and returns an ``ExportReport``: everything a person or a
CI system wants to know, ready to render (``render``) or dump as JSON.
Failures are captured in the report, never raised.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from typing import Any

import attrs
import torch.utils._pytree as pytree

from .._errors import AbortError, Category, ConstraintError, ErrorInfo
from .._options import ExportOptions
from .._branch_report import branch_report
from .._dims import dim_names
from .._notes import notes_of
from .._pipeline import ExportResult, export_timed
from .._timing import StageTimer
from ..constraints.fixes import constraint_report
from ..inputs import BoundInputs, bind_inputs, describe_path
from ..submodules import report_submodules
from .analysis import (
    dim_rows,
    leaf_path,
    library_versions,
    module_op_counts,
    op_histogram,
    range_rows,
    signature_rows,
)
from ..executorch import load_executorch, to_executorch
from .artifacts import Artifact, aoti_path_beside, build_aoti, build_onnx, decompose, files_size, load_aoti, load_onnx
from .compare import compare_runner_with_eager, compare_with_eager, require_match
from .dynamic_flags import dynamic_shapes_from_flags
from .graph_data import graph_data
from .loading import load_model, resolve_example_inputs
from .report import ExportReport, describe_leaf
from .save import Staging, require_writable, write_program, writing
from .settings import ExportSettings
from .sizes import inputs_at, size_draws

__all__ = ["run_export"]

log = logging.getLogger(__name__)


def _lap(timer: StageTimer, stage: str) -> float:
    timer.lap(stage)
    return timer.timings[stage]


_RANGED = re.compile(r"^--dynamic (?P<path>[^=\s]+)=(?P<name>[A-Za-z_]\w*):(?P<range>\S*)(?P<rest>.*)$")


def _on_declaring_flag(fix: str, flags: list[str]) -> str:
    """A new range for a named Dim, put on the flag that gave the name its range (a name's
    range is given once), with the flag it replaces."""
    match = _RANGED.match(fix)
    if match is None or match["name"] in ("auto", "dynamic", "static"):
        return fix
    name = match["name"]
    naming = [f for f in flags if re.match(rf"^[^=]+={name}(:|$)", f)]
    ranged = [f for f in naming if f.split("=", 1)[1].startswith(f"{name}:")]
    declaring = (ranged or naming or [None])[0]
    if declaring is None:
        return fix
    path = declaring.split("=", 1)[0]
    return f"--dynamic {path}={name}:{match['range']}{match['rest']}  (for --dynamic {declaring})"


def _in_flags(error: ErrorInfo, constraint: ConstraintError, flags: list[str]) -> ErrorInfo:
    """A ConstraintError for a spec given as ``--dynamic`` flags, its fixes written as flags
    where they can be (the library's message writes ``dynamic_shapes`` entries)."""
    if not any(v.flag for v in constraint.violations) or constraint.message != constraint_report(constraint.violations):
        return error
    violations = [attrs.evolve(v, flag=_on_declaring_flag(v.flag, flags)) if v.flag else v for v in constraint.violations]
    return attrs.evolve(
        error,
        message=constraint_report(violations, flags=True),
        hint="change the --dynamic flags as listed above (in pyproject.toml, the `dynamic` list of the model); "
        "flags sharing a NAME share the Dim, and a NAME's range is given once",
    )


def _exited(exit: SystemExit, stage: str) -> AbortError:
    """A model that calls ``sys.exit`` would end the CLI (and every other model of a check)
    without a word: it fails this export instead."""
    error = AbortError(
        f"the model called sys.exit({exit.code!r}) while {stage}",
        category=Category.CRASH,
        hint="a model must not exit the process: raise an exception instead",
    )
    error.__cause__ = exit
    return error


def _require_outputs_writable(settings: ExportSettings, name: str) -> None:
    """An unwritable or mistyped output location fails before the export, not after it."""
    if settings.save:
        require_writable(settings.output or f"{name}.pt2", "-o" if settings.output else "the program")
    if settings.aoti:
        require_writable(settings.aoti, "--aoti")
    if settings.onnx:
        require_writable(settings.onnx, "--onnx")
    if settings.executorch:
        require_writable(settings.executorch, "--executorch")


def _out_of_memory(error: Exception, stage: str) -> AbortError | None:
    """An allocation the machine refused, as a MEMORY failure rather than an internal error."""
    if not (isinstance(error, MemoryError) or "can't allocate memory" in str(error)):
        return None
    headline = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    failure = AbortError(
        f"out of memory while {stage}: {headline}",
        category=Category.MEMORY,
        location=getattr(error, "location", None),
        hint="give smaller example inputs or a smaller model, or export on a machine with more memory",
    )
    failure.__cause__ = error
    return failure


@attrs.define
class _Job:
    """One run of ``run_export``: its settings, the report it fills, and what each stage hands
    to the next."""

    settings: ExportSettings
    report: ExportReport
    on_stage: Callable[[str], None] | None
    timer: StageTimer = attrs.field(factory=StageTimer)
    stage: str = "starting"
    """What the job is doing now, for a failure's message."""
    loaded: Any = None
    model: Any = None
    examples: Any = None
    bound: BoundInputs | None = None
    dynamic_shapes: Any = None
    result: ExportResult | None = None
    program: Any = None
    names: dict = attrs.field(factory=dict)
    """The user's Dim name of each size symbol, for the report and the size draws."""
    runs: list = attrs.field(factory=list)
    """(label, args, kwargs) of every input set ``--verify`` compared on."""

    def enter(self, stage: str) -> None:
        self.stage = stage
        if self.on_stage is not None:
            self.on_stage(stage)


def _load(job: _Job) -> None:
    job.enter("loading the model")
    settings, report = job.settings, job.report
    job.loaded = load_model(settings.model, settings.init_args, train=settings.train)
    job.model = model = job.loaded.model
    report.model_name = job.loaded.name
    report.model_class = f"{type(model).__module__}.{type(model).__qualname__}"
    report.parameters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    _require_outputs_writable(settings, job.loaded.name)
    job.timer.lap("load")


def _prepare_inputs(job: _Job) -> None:
    """The example inputs, bound to forward() once (the export takes them bound), and the
    ``--dynamic`` flags as a ``dynamic_shapes`` spec over them."""
    job.enter("preparing example inputs")
    report = job.report
    job.examples = examples = resolve_example_inputs(job.settings.example_inputs, job.loaded)
    report.input_source = examples.source
    leaves = pytree.tree_flatten_with_path((examples.args, examples.kwargs))[0]
    report.inputs = [describe_leaf(describe_path(path), value) for path, value in leaves]
    job.bound = bind_inputs(job.model, examples.args, examples.kwargs)
    if job.bound.labels == [leaf["path"] for leaf in report.inputs]:  # the same leaves, in the same order
        report.input_paths = [leaf_path(path) for path in job.bound.paths]
    if job.settings.dynamic:
        job.dynamic_shapes = dynamic_shapes_from_flags(job.settings.dynamic, job.bound.by_name())
    job.timer.lap("inputs")


def _export(job: _Job) -> None:
    job.enter("exporting")
    settings, report, timer = job.settings, job.report, job.timer
    options = ExportOptions(
        dynamic_shapes=job.dynamic_shapes,
        draft=settings.draft,
        branches=settings.branches,
        max_iterations=settings.max_iterations,
        tracing_checks=settings.tracing_checks,
        experts_implementation=settings.experts_implementation,
        ir=settings.ir,
    )
    job.result = export_timed(job.model, job.examples.args, job.examples.kwargs, options, bound=job.bound)
    job.program = job.result.program
    timer.lap("export")
    timer.timings.update({f"export.{k}": v for k, v in job.result.timings.items()})
    report.ir = "training" if settings.ir == "training" else "aten"
    if settings.decompose:
        job.enter("lowering to core ATen")
        job.program = decompose(job.program, settings.decompose)
        report.ir = "core-aten"
        timer.lap("decompose")
    report.program = job.program
    report.draft = getattr(job.program, "draft_report", None)
    report.branches = branch_report(job.result.program)
    report.notes = list(notes_of(job.result.program))
    if report.draft is not None and settings.dynamic:  # the spec came as flags: fixes as flags
        report.draft = attrs.evolve(report.draft, assumptions=tuple(
            attrs.evolve(a, detail=f"fix: {_on_declaring_flag(a.flag, settings.dynamic)}") if a.flag else a
            for a in report.draft.assumptions
        ))


def _describe(job: _Job) -> None:
    """The program's signature, ops, modules, ranges, dims and graph, in the user's names."""
    program, report, plan = job.program, job.report, job.result.plan
    job.names = names = dim_names(program, plan)
    input_paths = [leaf_path(path) for path in job.bound.paths]
    report.signature = signature_rows(program, names, input_paths)
    report.ops = op_histogram(program)
    report.modules = module_op_counts(program)
    report.range_constraints = range_rows(program)
    report.dims = dim_rows(program, names, plan, input_paths)
    report.graph = graph_data(program, names, input_paths)


def _verify(job: _Job) -> None:
    """The program against eager on the example inputs, fresh draws, and (dynamic) sizes at
    the edges and inside of the ranges."""
    settings, examples, bound, program = job.settings, job.examples, job.bound, job.program
    job.enter("comparing with eager")
    job.runs = [("example", examples.args, examples.kwargs)]
    job.runs += [(f"fresh #{i}", *examples.fresh(i)) for i in range(1, settings.fresh_runs + 1)]
    if job.result.plan is not None:
        for i, draw in enumerate(size_draws(program, bound.flat), 1):
            job.runs.append((draw.text(job.names), *inputs_at(program, bound.flat, bound.in_spec, draw, 100 + i)))
    job.report.verification = compare_with_eager(job.model, program, job.runs, rtol=settings.rtol, atol=settings.atol)
    job.timer.lap("verify")
    require_match(job.report.verification, rtol=settings.rtol, atol=settings.atol)


def _write_artifacts(job: _Job) -> None:
    """The program and the artifacts asked for, each checked against eager with ``--verify``.

    Every file is staged beside its destination and moved into place only once all of them
    are built and checked: a failing step leaves no file, and existing ones as they were."""
    settings, report, program = job.settings, job.report, job.program
    program_path = settings.output or f"{job.loaded.name}.pt2"
    staging = Staging()
    try:
        if settings.save:
            job.enter("saving")
            staged = staging.path(program_path)
            with writing(program_path):
                write_program(program, staged)
            seconds = _lap(job.timer, "save")
            report.artifacts.append(
                Artifact("program", os.path.abspath(program_path), files_size(staged), seconds, report.ir, report.verification)
            )
        if settings.aoti is not None:
            job.enter("compiling with AOTInductor")
            path = settings.aoti or aoti_path_beside(program_path)
            staged = staging.path(path)
            build_aoti(program, staged)
            _artifact(job, Artifact("aoti", os.path.abspath(path), files_size(staged), _lap(job.timer, "aoti")),
                      lambda: load_aoti(staged), "AOTInductor package", "aoti.verify")
        if settings.onnx is not None:
            job.enter("converting to ONNX")
            staged = staging.path(settings.onnx)
            build_onnx(program, job.examples.args, job.examples.kwargs, staged)
            _artifact(job, Artifact("onnx", os.path.abspath(settings.onnx), files_size(staged), _lap(job.timer, "onnx")),
                      lambda: load_onnx(staged, program), "ONNX model", "onnx.verify", "in onnxruntime")
        if settings.executorch is not None:
            job.enter(f"lowering to ExecuTorch ({settings.backend})")
            staged = staging.path(settings.executorch)
            lowered = to_executorch(program, staged, backend=settings.backend)
            artifact = Artifact("executorch", os.path.abspath(settings.executorch), lowered.bytes,
                                _lap(job.timer, "executorch"), lowering=lowered.methods)
            _artifact(job, artifact, lambda: load_executorch(staged, program), "ExecuTorch program",
                      "executorch.verify", "in the ExecuTorch runtime")
        staging.commit()
    finally:
        staging.discard()
    if settings.save:
        report.output_file = os.path.abspath(program_path)


def _artifact(job: _Job, artifact: Artifact, load: Callable[[], Any], what: str, lap: str, where: str = "") -> None:
    """Report ``artifact`` and, with ``--verify``, run it against eager on the same inputs."""
    job.report.artifacts.append(artifact)
    if not job.runs:
        return
    settings = job.settings
    job.enter(f"comparing the {what} with eager{' ' + where if where else ''}")
    artifact.verification = compare_runner_with_eager(
        job.model, load(), job.runs, rtol=settings.rtol, atol=settings.atol, shared=job.program.constants.values()
    )
    job.timer.lap(lap)
    require_match(artifact.verification, rtol=settings.rtol, atol=settings.atol, what=what)


def _record_failure(job: _Job, error: BaseException) -> None:
    """The failure in the report, in the command line's terms; with ``--report-submodules``,
    which submodules export on their own."""
    settings, report = job.settings, job.report
    if isinstance(error, SystemExit):
        report.error = ErrorInfo.from_exception(_exited(error, job.stage))
        return
    report.error = ErrorInfo.from_exception(_out_of_memory(error, job.stage) or error)
    if isinstance(error, ConstraintError) and settings.dynamic:
        report.error = _in_flags(report.error, error, settings.dynamic)
    # Not when there is a program (verification or saving failed: every module exports), nor
    # when the model or inputs were given wrongly (no module would run on them).
    export_failed = report.program is None and not report.error.is_input_error
    if settings.report_submodules and job.examples is not None and export_failed:
        job.enter("exporting submodules on their own")
        try:
            report.submodules = report_submodules(job.model, job.examples.args, job.examples.kwargs, root_error=report.error)
        except Exception as failure:  # noqa: BLE001 - the export's own error is what the report is about
            log.warning("--report-submodules: %s", ErrorInfo.from_exception(failure).headline)


def run_export(settings: ExportSettings, on_stage: Callable[[str], None] | None = None) -> ExportReport:
    """Load, export, optionally lower, verify and save ``settings.model`` with the artifacts asked
    for (AOTInductor, ONNX); failures end up in the report."""
    job = _Job(settings, ExportReport(settings), on_stage)
    try:
        _load(job)
        _prepare_inputs(job)
        _export(job)
        _describe(job)
        if settings.verify:
            _verify(job)
        _write_artifacts(job)
        job.report.status = "ok"
    except (SystemExit, Exception) as e:  # noqa: BLE001 - reported, not raised
        _record_failure(job, e)
    finally:
        job.report.timings = {**job.timer.timings, "total": job.timer.elapsed()}
        job.report.versions = library_versions(job.model)
    return job.report
