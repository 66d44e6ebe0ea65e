"""What the command line asked for: one export, or a check of many models."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["CheckSettings", "ExportSettings"]


@attrs.define
class ExportSettings:
    """What to export and what to do with the program."""

    model: str
    """``path/to/file.py:Name`` or ``package.module:Name``."""
    example_inputs: str | None = None
    init_args: dict[str, Any] = attrs.field(factory=dict)
    train: bool = False
    output: str | None = None
    """Where to save the program; None: ``<Name>.pt2`` in the current directory."""
    save: bool = True
    verify: bool = False
    fresh_runs: int = 2
    """With ``verify``: fresh input draws compared besides the example inputs."""
    rtol: float = 1e-4
    atol: float = 1e-5
    dynamic: list[str] = attrs.field(factory=list)
    """``--dynamic`` flags: ``x.0=batch:1..64``."""
    draft: bool = False
    """``--draft``: take what the example inputs do where the export would stop, and report it."""
    experts_implementation: str | None = None
    """``--experts-implementation``: run transformers' mixture-of-experts blocks this way for the export."""
    report_submodules: bool = False
    """When the export fails, export the submodules on their own to find where it fails."""


@attrs.define
class CheckSettings:
    """``check``: which models, the baseline to hold them to, and how to run them."""

    models: list[str]
    baseline: str | None = None
    update_baseline: bool = False
    jobs: int = 1
    rtol: float = 1e-4
    atol: float = 1e-5
