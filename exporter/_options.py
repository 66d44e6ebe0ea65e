"""How to export: every setting ``exporter.export`` takes besides the model and its inputs,
as one record the pipeline and the command line share."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["IR_LEVELS", "ExportOptions"]

TRACING_CHECKS = ("traced", "eager")
"""How a trace answers a model asking whether it is traced (``ExportOptions.tracing_checks``)."""

IR_LEVELS = ("inference", "training")
"""What ``export(..., ir=...)`` produces: functional post-autograd ATen (torch.export's
program after ``run_decompositions({})``), or torch.export's pre-dispatch training IR."""


@attrs.frozen
class ExportOptions:
    """The settings of one export; each means what ``exporter.export``'s keyword of the same
    name means (see its docstring)."""

    dynamic_shapes: Any = None
    strict: bool = False
    preserve_module_call_signature: tuple[str, ...] = ()
    prefer_deferred_runtime_asserts_over_guards: bool = False
    draft: bool = False
    experts_implementation: str | None = None
    ir: str = "inference"
    fast_paths: bool | None = None
    """True or False turns every fast path on or off; None leaves it to ``EXPORTER_FAST_PATHS``
    and the running torch release (``exporter.trace.fast``)."""
    branches: str = "capture"
    """Where forward branches on a tensor's value: ``capture`` (both sides, as torch.cond),
    ``refuse`` (fail naming the line) or ``draft`` (follow the example, as ``draft=True``)."""
    max_branch_runs: int = 32
    """How many runs of forward branch capture may make (one per decision, and one)."""
    max_iterations: int | None = None
    """Where set, each captured loop is that many conds in a row instead of a
    ``torch.while_loop``, for consumers that cannot run one."""
    tracing_checks: str = "traced"
    """How the trace answers a model asking whether it is traced: ``traced`` (as
    torch.export) or ``eager`` (``exporter.trace.tracing_checks``)."""
