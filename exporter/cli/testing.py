"""pytest helpers: keep a model exportable in a test suite.

    from exporter.testing import assert_exportable

    def test_model_exports():
        assert_exportable("models/net.py:Net")                  # inputs from the model file
        assert_exportable(MyModel().eval(), (torch.randn(2, 8),))  # or an instance and inputs
"""

from __future__ import annotations

from typing import Any

import torch

from .._errors import ErrorInfo, ExportError
from .._pipeline import export
from .compare import compare_with_eager, require_match
from .job import run_export
from .loading import redraw_like
from .settings import ExportSettings

__all__ = ["assert_exportable"]


def _not_exportable(name: str, error: ErrorInfo) -> AssertionError:
    return AssertionError(f"{name} is not exportable [{error.category.value}]: {error.to_text()}")


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
    The failure is reported on its own, without the trace's internal frames; the
    ``ExportError`` behind it is kept as the assertion's ``export_error`` attribute.
    """
    __tracebackhide__ = True  # pytest shows the test's line, not this helper's
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
            raise _not_exportable(model, report.error) from None
        return report.program

    args = () if args is None else args
    kwargs = {} if kwargs is None else kwargs
    name = type(model).__name__
    try:
        program = export(model, args, kwargs)
        if verify:
            runs = [("example", args, kwargs)]
            runs += [(f"fresh #{i}", *redraw_like((args, kwargs), i)) for i in range(1, fresh_runs + 1)]
            require_match(compare_with_eager(model, program, runs, rtol=rtol, atol=atol), rtol=rtol, atol=atol)
    except ExportError as e:
        failure = _not_exportable(name, ErrorInfo.from_exception(e))
        failure.export_error = e
        # the message holds the category, the model's line and the hint; torch's frames
        # and the chain behind it would bury them, so they are left out of the report
        raise failure from None
    return program
