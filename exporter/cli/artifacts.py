"""The files a serving stack loads, made from the exported program: core ATen, an AOTInductor
package, an ONNX model; and a way to run each like the model, for ``--verify``.

Each builder consumes the finished ``ExportedProgram``; none traces the model again.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from typing import Any

import attrs
import torch
import torch.utils._pytree as pytree

from .._errors import InputSpecError
from ..executorch import MethodLowering
from .._torch_internals import aoti_compile_package, aoti_load_package
from .analysis import human_bytes as _bytes
from .compare import Comparison

__all__ = [
    "DECOMPOSITIONS",
    "INPUT_SETS",
    "ONNX_EXTRA",
    "Artifact",
    "artifacts_table",
    "lowering_lines",
    "aoti_path_beside",
    "build_aoti",
    "build_onnx",
    "decompose",
    "files_size",
    "load_aoti",
    "load_onnx",
    "require_onnx",
]

log = logging.getLogger(__name__)

DECOMPOSITIONS = ("core",)
"""``--decompose`` levels: ``core`` is core ATen, what ExecuTorch and other backends take."""

ONNX_EXTRA = ("onnxscript", "onnxruntime")
"""What ``pip install 'torch-exporter[onnx]'`` installs: torch's ONNX exporter needs onnxscript,
``--verify`` runs the file in onnxruntime."""


@attrs.define
class Artifact:
    """One file an export wrote (or would have, had it not failed), and its check against eager."""

    kind: str
    """``program`` (the .pt2), ``aoti`` (an AOTInductor package), ``onnx`` or ``executorch``."""
    path: str
    bytes: int
    """Its size on disk, with the companion files written beside it (ONNX external data)."""
    seconds: float
    """Time to build and write it (for the program: to save it)."""
    ir: str | None = None
    """For the program: ``aten`` (exporter's functional, post-autograd ATen) or ``core-aten``."""
    verification: list[Comparison] | None = None
    """With ``--verify``: the artifact run on the example and fresh inputs against eager."""
    lowering: tuple[MethodLowering, ...] | None = None
    """For ExecuTorch: per method, what the backend took and the ops left outside it."""

    def max_abs_errors(self) -> dict[str, float | None]:
        """The largest absolute error against eager on each input set (``Comparison.input_set``)
        that was run; None for a set where nothing was compared (eager failed, or the run did)."""
        errors: dict[str, float | None] = {}
        for comparison in self.verification or []:
            worst, now = errors.get(comparison.input_set), comparison.max_abs
            errors[comparison.input_set] = now if worst is None else worst if now is None else max(worst, now)
        return errors

    @property
    def seconds_per_run(self) -> float | None:
        """The median time of one run on the inputs ``--verify`` ran it on."""
        times = sorted(c.seconds for c in self.verification or [] if c.seconds is not None)
        return times[len(times) // 2] if times else None

    @property
    def verified(self) -> bool | None:
        """None when not checked; else whether every run matched eager."""
        return None if self.verification is None else all(c.ok for c in self.verification)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 6),
            "ir": self.ir,
            "lowering": None if self.lowering is None else [m.to_json() for m in self.lowering],
            "verification": None
            if self.verification is None
            else {
                "passed": self.verified,
                "max_abs_error": self.max_abs_errors(),
                "seconds_per_run": self.seconds_per_run,
                "runs": [c.to_json() for c in self.verification],
            },
        }


KINDS = {"program": "program", "aoti": "AOTInductor package", "onnx": "ONNX", "executorch": "ExecuTorch"}
IRS = {"aten": "ATen", "core-aten": "core ATen"}
INPUT_SETS = ("example", "fresh", "sizes")
"""The error columns of the artifacts table: the example inputs, fresh values, other sizes."""


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.2f} s"


def _check(artifact: Artifact) -> str:
    if artifact.verification is None:
        return "not run (--verify runs it)"
    runs = len(artifact.verification)
    if artifact.verified:
        skipped = sum(c.eager_error is not None for c in artifact.verification)
        return f"ok: {runs - skipped} of {runs} runs" if skipped else f"ok: {runs} runs"  # eager could not run the rest
    return f"MISMATCH on {sum(not c.ok for c in artifact.verification)} of {runs} runs"


def artifacts_table(artifacts: list[Artifact], relative: bool = True) -> tuple[list[str], list[list[str]]]:
    """The artifacts table the terminal and the HTML report show: per artifact its file and
    size, the largest absolute error against eager on each input set run, the time of one
    run, and the check's verdict (last column)."""
    sets = [s for s in INPUT_SETS if any(s in a.max_abs_errors() for a in artifacts)]
    rows = []
    for a in artifacts:
        errors = a.max_abs_errors()
        rows.append([
            KINDS.get(a.kind, a.kind) + (f" ({IRS.get(a.ir, a.ir)})" if a.ir else ""),
            os.path.relpath(a.path) if relative else a.path,
            _bytes(a.bytes),
            *("-" if errors.get(s) is None else f"{errors[s]:.2g}" for s in sets),
            _seconds(a.seconds_per_run),
            _check(a),
        ])
    return ["artifact", "file", "size", *sets, "per run", "check"], rows


def lowering_lines(artifacts: list[Artifact]) -> list[str]:
    """For each ExecuTorch method: how many parts the backend took, the ops left outside."""
    lines = []
    for a in artifacts:
        for method in a.lowering or ():
            outside = ", ".join(f"{op} x{n}" for op, n in method.outside_delegate.items()) or "none"
            name = f"{method.name}: " if len(a.lowering) > 1 else ""
            parts = f"{method.delegated} delegated part{'' if method.delegated == 1 else 's'}"
            lines.append(f"{name}{parts}; outside the delegate: {outside}")
    return lines


def files_size(path: str) -> int:
    """Bytes of ``path`` and of the files named after it beside it (``model.onnx.data``)."""
    directory, name = os.path.split(os.path.abspath(path))
    return sum(
        os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory) if f == name or f.startswith(name + ".")
    )


def decompose(program: torch.export.ExportedProgram, level: str) -> torch.export.ExportedProgram:
    """The program lowered to ``level`` (``core``: core ATen, torch's default decomposition table)."""
    if level != "core":
        raise InputSpecError(f"--decompose {level!r}: unknown level", hint=f"choose one of {', '.join(DECOMPOSITIONS)}")
    return program.run_decompositions()


def aoti_path_beside(program_path: str) -> str:
    """``model.pt2`` -> ``model.aoti.pt2``, so the package sits beside the program it came from."""
    stem = program_path[: -len(".pt2")] if program_path.endswith(".pt2") else program_path
    return f"{stem}.aoti.pt2"


def build_aoti(program: torch.export.ExportedProgram, path: str) -> None:
    """Compile ``program`` with AOTInductor into the package ``path``."""
    aoti_compile_package(program, path)


def load_aoti(path: str) -> Callable[..., Any]:
    """The package at ``path``, called with the model's inputs and returning its outputs."""
    return aoti_load_package(path)


def require_onnx() -> None:
    """Raise ``InputSpecError`` saying how to install the extra unless its packages import."""
    missing = []
    for name in ONNX_EXTRA:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise InputSpecError(
            f"--onnx needs {' and '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not installed",
            hint="install the extra: pip install 'torch-exporter[onnx]' (onnxscript and onnxruntime)",
        )


def build_onnx(program: torch.export.ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any], path: str) -> None:
    """Convert ``program`` with torch's ONNX exporter and save it at ``path`` (large weights go
    to ``path.data`` beside it, as the ONNX exporter decides)."""
    onnx_program = torch.onnx.export(program, args, kwargs=kwargs, dynamo=True, verbose=False)
    onnx_program.save(path)


def _user_input_names(program: torch.export.ExportedProgram) -> list[str | None]:
    """Per flattened user input, in the program's order: the placeholder's name, or None for a
    constant (the ONNX graph has no input for it)."""
    names = []
    for spec in program.graph_signature.input_specs:
        if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT:
            names.append(spec.arg.name if isinstance(spec.arg, torch.export.graph_signature.TensorArgument) else None)
    return names


def load_onnx(path: str, program: torch.export.ExportedProgram) -> Callable[..., Any]:
    """An onnxruntime session on ``path``, called like the model: inputs flattened the way the
    program flattens them, outputs put back in the program's output structure."""
    import onnxruntime

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    wanted = [i.name for i in session.get_inputs()]
    names = _user_input_names(program)
    in_spec, out_spec = program.call_spec.in_spec, program.call_spec.out_spec

    def run(*args: Any, **kwargs: Any) -> Any:
        if in_spec is not None and in_spec.num_children == 2:
            order = in_spec.child(1).context or []
            kwargs = {k: kwargs[k] for k in order if k in kwargs}
        leaves = pytree.tree_leaves((args, kwargs))
        feed = {
            name: leaf.detach().cpu().numpy()
            for name, leaf in zip(names, leaves)
            if name in wanted and isinstance(leaf, torch.Tensor)
        }
        if sorted(feed) != sorted(wanted):
            raise RuntimeError(f"the ONNX model takes inputs {wanted}, the program's tensor inputs are {sorted(feed)}")
        outputs = [torch.from_numpy(value) for value in session.run(None, feed)]
        if out_spec is None:
            return outputs
        if len(outputs) != out_spec.num_leaves:
            raise RuntimeError(f"the ONNX model gave {len(outputs)} outputs, the program {out_spec.num_leaves}")
        return pytree.tree_unflatten(outputs, out_spec)

    return run
