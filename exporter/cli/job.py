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
from collections.abc import Callable

import torch.utils._pytree as pytree

from .._errors import ErrorInfo
from .._pipeline import export_timed
from .._timing import StageTimer
from ..inputs import bind_inputs, describe_path
from ..submodules import report_submodules
from .analysis import library_versions, module_op_counts, op_histogram, range_rows, signature_rows
from .compare import compare_with_eager, require_match
from .dynamic_flags import dynamic_shapes_from_flags
from .loading import load_model, resolve_example_inputs
from .report import ExportReport, describe_leaf
from .save import save_program
from .settings import ExportSettings

__all__ = ["run_export"]

log = logging.getLogger(__name__)


def run_export(settings: ExportSettings, on_stage: Callable[[str], None] | None = None) -> ExportReport:
    """Load, export, optionally verify and save ``settings.model``; failures end up in the report."""
    report = ExportReport(settings)
    stage = on_stage or (lambda name: None)
    timer = StageTimer()
    model = examples = None
    try:
        stage("loading the model")
        loaded = load_model(settings.model, settings.init_args, train=settings.train)
        model = loaded.model
        report.model_name = loaded.name
        report.model_class = f"{type(model).__module__}.{type(model).__qualname__}"
        report.parameters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
        timer.lap("load")

        stage("preparing example inputs")
        examples = resolve_example_inputs(settings.example_inputs, loaded)
        report.input_source = examples.source
        leaves = pytree.tree_flatten_with_path((examples.args, examples.kwargs))[0]
        report.inputs = [describe_leaf(describe_path(path), value) for path, value in leaves]
        dynamic_shapes = None
        if settings.dynamic:
            bound = bind_inputs(model, examples.args, examples.kwargs)
            dynamic_shapes = dynamic_shapes_from_flags(settings.dynamic, bound.by_name())
        timer.lap("inputs")

        stage("exporting")
        program, timings = export_timed(
            model,
            examples.args,
            examples.kwargs,
            dynamic_shapes=dynamic_shapes,
            draft=settings.draft,
            experts_implementation=settings.experts_implementation,
        )
        timer.lap("export")
        timer.timings.update({f"export.{k}": v for k, v in timings.items()})
        report.program = program
        report.draft = getattr(program, "draft_report", None)
        report.signature = signature_rows(program)
        report.ops = op_histogram(program)
        report.modules = module_op_counts(program)
        report.range_constraints = range_rows(program)

        if settings.verify:
            stage("comparing with eager")
            runs = [("example", examples.args, examples.kwargs)]
            runs += [(f"fresh #{i}", *examples.fresh(i)) for i in range(1, settings.fresh_runs + 1)]
            report.verification = compare_with_eager(model, program, runs, rtol=settings.rtol, atol=settings.atol)
            timer.lap("verify")
            require_match(report.verification, rtol=settings.rtol, atol=settings.atol)

        if settings.save:
            stage("saving")
            path = settings.output or f"{loaded.name}.pt2"
            save_program(program, path)
            report.output_file = os.path.abspath(path)
            timer.lap("save")
        report.status = "ok"
    except Exception as e:  # noqa: BLE001 - reported, not raised
        report.error = ErrorInfo.from_exception(e)
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
