"""pytest helpers: keep a model exportable in a test suite.

    from exporter.testing import assert_exportable

    def test_model_exports():
        assert_exportable("models/net.py:Net")                  # inputs from the model file
        assert_exportable(MyModel().eval(), (torch.randn(2, 8),))  # or an instance and inputs
"""

from __future__ import annotations

from typing import Any

import torch

from ._compare import compare_with_eager
from ._errors import ExportError
from ._job import ExportSettings, run_export
from ._loading import redraw_like
from ._pipeline import export

__all__ = ["assert_exportable"]


def _describe_failures(comparisons) -> str:
    lines = []
    for run in comparisons:
        if run.error:
            lines.append(f"  {run.label}: {run.error}")
        for out in run.outputs:
            if not out.ok:
                lines.append(
                    f"  {run.label} {out.path}: max abs {out.max_abs:.3g}, max rel {out.max_rel:.3g} {out.note}".rstrip()
                )
    return "\n".join(lines)


def assert_exportable(
    model: torch.nn.Module | str,
    args: tuple[Any, ...] | None = None,
    kwargs: dict[str, Any] | None = None,
    *,
    example_inputs: str | None = None,
    init_args: dict[str, Any] | None = None,
    verify: bool = True,
    fresh_runs: int = 2,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> torch.export.ExportedProgram:
    """Export ``model`` and (by default) check the program against eager; return the program.

    ``model`` is either an ``nn.Module`` with ``args``/``kwargs``, or a reference
    ``"path/to/file.py:Name"`` / ``"package.module:Name"`` resolved as the CLI does (with
    ``example_inputs`` and ``init_args`` as ``--example-inputs`` / ``--init-args``).
    Verification compares outputs on the example inputs and on ``fresh_runs`` fresh draws
    of the same shapes and value ranges. Raises ``AssertionError`` with the reason
    (category, user source line, hint) when the model does not export or does not match.
    """
    if isinstance(model, str):
        report = run_export(
            ExportSettings(
                model=model,
                example_inputs=example_inputs,
                init_args=dict(init_args or {}),
                save=False,
                verify=verify,
                fresh_runs=fresh_runs,
                rtol=rtol,
                atol=atol,
            )
        )
        if not report.ok:
            err = report.error
            where = f"\n  at {err['location']}" if err.get("location") else ""
            hint = f"\n  hint: {err['hint']}" if err.get("hint") else ""
            raise AssertionError(f"{model} is not exportable [{err['category']}]: {err['message']}{where}{hint}")
        return report.program

    args = () if args is None else args
    kwargs = {} if kwargs is None else kwargs
    try:
        program = export(model, args, kwargs)
    except ExportError as e:
        raise AssertionError(f"{type(model).__name__} is not exportable [{e.category}]: {e}") from e
    if verify:
        runs = [("example", args, kwargs)]
        runs += [(f"fresh #{i}", *redraw_like((args, kwargs), i)) for i in range(1, fresh_runs + 1)]
        comparisons = compare_with_eager(model, program, runs, rtol=rtol, atol=atol)
        if not all(c.ok for c in comparisons):
            raise AssertionError(
                f"{type(model).__name__}: the exported program differs from eager "
                f"(rtol {rtol:g}, atol {atol:g}):\n{_describe_failures(comparisons)}"
            )
    return program
