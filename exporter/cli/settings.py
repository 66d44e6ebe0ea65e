"""What the command line asked for: one export, or a check of many models."""

from __future__ import annotations

from typing import Any

import attrs

from .workers import DEFAULT_TIMEOUT

__all__ = ["CheckSettings", "ExportSettings", "ModelEntry"]


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
    branches: str = "capture"
    """``--branches``: where forward branches on a tensor's value, ``capture`` both sides as
    torch.cond, ``refuse`` (fail naming the line) or ``draft`` (as ``--draft``)."""
    max_iterations: int | None = None
    """``--max-iterations``: each captured loop as that many torch.cond steps, not a torch.while_loop."""
    tracing_checks: str = "traced"
    """``--tracing-checks``: how the trace answers the model asking whether it is traced,
    ``traced`` (as torch.export) or ``eager`` (the model's eager path)."""
    experts_implementation: str | None = None
    """``--experts-implementation``: run transformers' mixture-of-experts blocks this way for the export."""
    ir: str = "inference"
    """``--ir training``: export torch.export's training IR instead of the functional default."""
    report_submodules: bool = False
    """When the export fails, export the submodules on their own to find where it fails."""
    decompose: str | None = None
    """``--decompose core``: lower the program to core ATen (``run_decompositions()``) before saving."""
    aoti: str | None = None
    """``--aoti [PATH]``: also compile an AOTInductor package; ``""`` puts it beside the .pt2."""
    onnx: str | None = None
    """``--onnx OUT.onnx``: also convert the program with torch's ONNX exporter."""
    executorch: str | None = None
    """``--executorch OUT.pte``: also lower the program to ExecuTorch."""
    backend: str = "xnnpack"
    """``--backend``: what ``--executorch`` delegates to (``xnnpack`` or ``portable``)."""


@attrs.frozen
class ModelEntry:
    """One model ``check`` exports: its reference, and the flags ``export`` would take for it."""

    reference: str
    """As the user wrote it: the name in reports and the baseline's key."""
    model: str | None = None
    """What to load, when it differs from ``reference`` (a file path relative to the directory
    ``check`` runs in, for a reference written relative to the pyproject.toml)."""
    example_inputs: str | None = None
    dynamic: tuple[str, ...] = ()
    init_args: dict[str, Any] = attrs.field(factory=dict)

    def export_settings(self, *, rtol: float, atol: float) -> ExportSettings:
        """The export ``check`` runs for this model: verified, not saved."""
        return ExportSettings(
            model=self.model or self.reference,
            example_inputs=self.example_inputs,
            init_args=dict(self.init_args),
            dynamic=list(self.dynamic),
            verify=True,
            save=False,
            rtol=rtol,
            atol=atol,
        )


def _entries(models: list[str | ModelEntry]) -> list[ModelEntry]:
    return [m if isinstance(m, ModelEntry) else ModelEntry(m) for m in models]


@attrs.define
class CheckSettings:
    """``check``: which models, the baseline to hold them to, and how to run them."""

    models: list[ModelEntry] = attrs.field(converter=_entries)
    """References (``path/to/file.py:Name``) or entries with their own inputs and flags."""
    baseline: str | None = None
    update_baseline: bool = False
    jobs: int = 1
    rtol: float = 1e-4
    atol: float = 1e-5
    shard: tuple[int, int] | None = None
    """``--shard K/N``: check only the K-th (1-based) of N balanced, disjoint shares."""
    timeout: float | None = DEFAULT_TIMEOUT
    """``--timeout``: seconds one model's worker may run before it is stopped; None: no limit."""
    max_memory: int | None = None
    """``--max-memory``: bytes of resident memory one model's worker may hold; None: no limit."""
