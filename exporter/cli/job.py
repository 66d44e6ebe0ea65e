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

import attrs
import torch.utils._pytree as pytree

from .._errors import AbortError, Category, ConstraintError, ErrorInfo
from .._options import ExportOptions
from .._pipeline import export_timed
from .._timing import StageTimer
from ..constraints.fixes import constraint_report
from ..inputs import bind_inputs, describe_path, plan_dynamic_shapes
from ..submodules import report_submodules
from .analysis import (
    dim_rows,
    leaf_path,
    library_versions,
    module_op_counts,
    op_histogram,
    range_rows,
    signature_rows,
    symbol_names,
)
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


def run_export(settings: ExportSettings, on_stage: Callable[[str], None] | None = None) -> ExportReport:
    """Load, export, optionally lower, verify and save ``settings.model`` with the artifacts asked
    for (AOTInductor, ONNX); failures end up in the report."""
    report = ExportReport(settings)
    current = ["starting"]

    def stage(name: str) -> None:
        current[0] = name
        if on_stage is not None:
            on_stage(name)

    timer = StageTimer()
    model = examples = None
    try:
        stage("loading the model")
        loaded = load_model(settings.model, settings.init_args, train=settings.train)
        model = loaded.model
        report.model_name = loaded.name
        report.model_class = f"{type(model).__module__}.{type(model).__qualname__}"
        report.parameters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
        _require_outputs_writable(settings, loaded.name)
        timer.lap("load")

        stage("preparing example inputs")
        examples = resolve_example_inputs(settings.example_inputs, loaded)
        report.input_source = examples.source
        leaves = pytree.tree_flatten_with_path((examples.args, examples.kwargs))[0]
        report.inputs = [describe_leaf(describe_path(path), value) for path, value in leaves]
        dynamic_shapes = plan = None
        bound = bind_inputs(model, examples.args, examples.kwargs)
        input_paths = [leaf_path(path) for path in bound.paths]
        if bound.labels == [leaf["path"] for leaf in report.inputs]:  # the same leaves, in the same order
            report.input_paths = input_paths
        if settings.dynamic:
            dynamic_shapes = dynamic_shapes_from_flags(settings.dynamic, bound.by_name())
            plan = plan_dynamic_shapes(model, bound, dynamic_shapes)
        timer.lap("inputs")

        stage("exporting")
        options = ExportOptions(
            dynamic_shapes=dynamic_shapes,
            draft=settings.draft,
            experts_implementation=settings.experts_implementation,
            ir=settings.ir,
        )
        program, timings = export_timed(model, examples.args, examples.kwargs, options)
        timer.lap("export")
        timer.timings.update({f"export.{k}": v for k, v in timings.items()})
        report.ir = "training" if settings.ir == "training" else "aten"
        if settings.decompose:
            stage("lowering to core ATen")
            program = decompose(program, settings.decompose)
            report.ir = "core-aten"
            timer.lap("decompose")
        report.program = program
        report.draft = getattr(program, "draft_report", None)
        if report.draft is not None and settings.dynamic:  # the spec came as flags: fixes as flags
            report.draft = attrs.evolve(report.draft, assumptions=tuple(
                attrs.evolve(a, detail=f"fix: {_on_declaring_flag(a.flag, settings.dynamic)}") if a.flag else a
                for a in report.draft.assumptions
            ))
        names = symbol_names(program, plan)
        report.signature = signature_rows(program, names, input_paths)
        report.ops = op_histogram(program)
        report.modules = module_op_counts(program)
        report.range_constraints = range_rows(program)
        report.dims = dim_rows(program, names, plan, input_paths)
        report.graph = graph_data(program, names, input_paths)

        runs = []
        if settings.verify:
            stage("comparing with eager")
            runs = [("example", examples.args, examples.kwargs)]
            runs += [(f"fresh #{i}", *examples.fresh(i)) for i in range(1, settings.fresh_runs + 1)]
            if plan is not None:  # dynamic: also at the edges and inside of the ranges
                for i, draw in enumerate(size_draws(program, bound.flat), 1):
                    runs.append((draw.text(names), *inputs_at(program, bound.flat, bound.in_spec, draw, 100 + i)))
            report.verification = compare_with_eager(model, program, runs, rtol=settings.rtol, atol=settings.atol)
            timer.lap("verify")
            require_match(report.verification, rtol=settings.rtol, atol=settings.atol)

        # Every file is staged beside its destination and moved into place only once all of
        # them are built and checked: a failing step leaves no file, and existing ones as they were.
        program_path = settings.output or f"{loaded.name}.pt2"
        staging = Staging()
        try:
            if settings.save:
                stage("saving")
                staged = staging.path(program_path)
                with writing(program_path):
                    write_program(program, staged)
                seconds = _lap(timer, "save")
                report.artifacts.append(
                    Artifact("program", os.path.abspath(program_path), files_size(staged), seconds, report.ir, report.verification)
                )
            if settings.aoti is not None:
                stage("compiling with AOTInductor")
                path = settings.aoti or aoti_path_beside(program_path)
                staged = staging.path(path)
                build_aoti(program, staged)
                artifact = Artifact("aoti", os.path.abspath(path), files_size(staged), _lap(timer, "aoti"))
                report.artifacts.append(artifact)
                if runs:
                    stage("comparing the AOTInductor package with eager")
                    artifact.verification = compare_runner_with_eager(
                        model, load_aoti(staged), runs, rtol=settings.rtol, atol=settings.atol,
                        shared=program.constants.values(),
                    )
                    timer.lap("aoti.verify")
                    require_match(artifact.verification, rtol=settings.rtol, atol=settings.atol, what="AOTInductor package")
            if settings.onnx is not None:
                stage("converting to ONNX")
                staged = staging.path(settings.onnx)
                build_onnx(program, examples.args, examples.kwargs, staged)
                artifact = Artifact("onnx", os.path.abspath(settings.onnx), files_size(staged), _lap(timer, "onnx"))
                report.artifacts.append(artifact)
                if runs:
                    stage("comparing the ONNX model with eager in onnxruntime")
                    artifact.verification = compare_runner_with_eager(
                        model, load_onnx(staged, program), runs, rtol=settings.rtol, atol=settings.atol,
                        shared=program.constants.values(),
                    )
                    timer.lap("onnx.verify")
                    require_match(artifact.verification, rtol=settings.rtol, atol=settings.atol, what="ONNX model")
            staging.commit()
        finally:
            staging.discard()
        if settings.save:
            report.output_file = os.path.abspath(program_path)
        report.status = "ok"
    except SystemExit as e:
        report.error = ErrorInfo.from_exception(_exited(e, current[0]))
    except Exception as e:  # noqa: BLE001 - reported, not raised
        report.error = ErrorInfo.from_exception(_out_of_memory(e, current[0]) or e)
        if isinstance(e, ConstraintError) and settings.dynamic:
            report.error = _in_flags(report.error, e, settings.dynamic)
        # Not when there is a program (verification or saving failed: every module exports), nor
        # when the model or inputs were given wrongly (no module would run on them).
        export_failed = report.program is None and not report.error.is_input_error
        if settings.report_submodules and examples is not None and export_failed:
            stage("exporting submodules on their own")
            try:
                report.submodules = report_submodules(model, examples.args, examples.kwargs, root_error=report.error)
            except Exception as failure:  # noqa: BLE001 - the export's own error is what the report is about
                log.warning("--report-submodules: %s", ErrorInfo.from_exception(failure).headline)
    finally:
        report.timings = {**timer.timings, "total": timer.elapsed()}
        report.versions = library_versions(model)
    return report
