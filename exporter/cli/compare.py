"""Run the exported program and the eager model side by side and measure how far apart they are."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs
import torch
import torch.utils._pytree as pytree

from .._branch_report import RAISES_HERE
from .._errors import VerificationError
from ..inputs.containers import leaves_with_paths
from ..trace.patches import compiler_flags_as_traced
from ..trace.tracing_checks import library_checks_answering, loaded_checks
from ..trace.preserve import state_values_restored
from .analysis import output_path

__all__ = ["Comparison", "OutputDiff", "VerificationMismatch", "compare_runner_with_eager", "compare_with_eager", "require_match"]


@attrs.frozen
class OutputDiff:
    """One output leaf: how far the program's value is from eager's."""

    path: str
    max_abs: float
    max_rel: float
    """Largest absolute error divided by the largest magnitude of the eager output."""
    ok: bool
    note: str = ""


@attrs.frozen
class Comparison:
    """Program vs eager on one set of inputs."""

    label: str
    outputs: tuple[OutputDiff, ...]
    error: str | None = None
    eager_error: str | None = None
    """Eager itself failed on these inputs (a size inside a declared range the model does not
    support): nothing to compare, and not the program's fault, so not a mismatch."""
    seconds: float | None = None
    """How long the program (or artifact) took on these inputs."""
    flag: str | None = None
    """Where the outputs differ: the ``torch.compiler`` query (``torch.compiler.is_exporting()``)
    under which the eager model, run with it True, gives the program's outputs.  The model
    takes another path while exported, and the program holds that path."""
    model: str | None = None
    """The eager model's class name, with ``flag``."""

    @property
    def input_set(self) -> str:
        """``example``, ``fresh`` (new values, the example's sizes) or ``sizes`` (other sizes of
        the dynamic dims): the column of the artifacts table this run counts in."""
        if self.label == "example":
            return "example"
        return "fresh" if self.label.startswith("fresh") else "sizes"

    @property
    def max_abs(self) -> float | None:
        """The largest absolute error over the outputs (None when nothing was compared)."""
        return max((o.max_abs for o in self.outputs), default=None) if self.error is None and self.outputs else None

    @property
    def ok(self) -> bool:
        return self.error is None and all(o.ok for o in self.outputs)

    def failures(self) -> list[str]:
        """One line per way this run failed: an error, or an output beyond tolerance."""
        lines = [f"{self.label}: {self.error}"] if self.error else []
        for out in self.outputs:
            if not out.ok:
                note = f" ({out.note})" if out.note else ""
                lines.append(f"{self.label} {out.path}: max abs error {out.max_abs:.3g}, max rel error {out.max_rel:.3g}{note}")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "inputs": self.label,
            "passed": self.ok,
            "error": self.error,
            "eager_error": self.eager_error,
            "outputs": [attrs.asdict(o) for o in self.outputs],
            "seconds": None if self.seconds is None else round(self.seconds, 6),
            "flag": self.flag,
        }


_REFUSALS = ("Guard failed", "Runtime assertion failed", RAISES_HERE, "Expected input at")
"""How a program's own checks word a refusal: a guard torch recorded while tracing (checked
by ``ep.module()``), a deferred runtime assert (one of an input check forward makes says
so), an input outside the program's ranges."""


def _refused(comparison: Comparison) -> bool:
    """The program refused inputs eager ran on, by one of its own checks."""
    error = comparison.error
    return error is not None and comparison.eager_error is None and any(r in error for r in _REFUSALS)


class VerificationMismatch(VerificationError):
    """The program and the eager model disagree beyond tolerance on some inputs, or the
    program refused inputs eager ran on."""

    def __init__(self, comparisons: list[Comparison], *, rtol: float, atol: float, what: str = "program") -> None:
        failures = [line for c in comparisons for line in c.failures()]
        failed = [c for c in comparisons if not c.ok]
        flags = {(c.model, c.flag) for c in failed}
        if failed and len(flags) == 1 and None not in next(iter(flags)):
            model, flag = next(iter(flags))
            hint = (
                f"{model} takes a different path under {flag}, which is True while exporting: eager "
                f"with it set gives the {what}'s outputs, so the {what} is what the model computes when "
                f"exported. Look for {flag} in the model's code; if that path is meant to compute the "
                "same, the difference is the model's"
            )
            hint += (
                "; to export the path eager takes, export with tracing_checks='eager' "
                "(--tracing-checks eager): its tests on tensor values become torch.cond"
            )
        elif failed and all(_refused(c) for c in failed):
            hint = (
                f"the {what} refuses sizes eager runs on ({', '.join(c.label for c in failed)}): a condition "
                "torch recorded while tracing does not hold there. If those sizes lie inside your declared "
                "ranges, narrow them to where it holds (a minimum of 1 or 2 for a size that may not be 0: "
                "--dynamic x.0=batch:1..); if they must be supported, find what in forward() made the condition"
            )
        else:
            how = "compare node by node with torch.fx.Interpreter" if what == "program" else "check the program itself with --verify"
            hint = (
                f"the {what} disagrees with eager beyond tolerance; {how}, or loosen --rtol/--atol if the "
                "difference is rounding"
            )
        super().__init__(
            f"{what} and eager differ (rtol {rtol:g}, atol {atol:g}): " + "; ".join(failures),
            rule="matches-eager",
            hint=hint,
        )
        self.comparisons = comparisons


def _clone(tree: Any) -> Any:
    return pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), tree)


_COMPILER_FLAGS = (
    ("torch.compiler.is_exporting()", {"compiling": False, "exporting": True}),
    ("torch.compiler.is_compiling()", {"compiling": True, "exporting": False}),
    ("torch.compiler.is_compiling() and is_exporting()", {"compiling": True, "exporting": True}),
)
"""What a trace sets that a model may branch on: each alone, then both as a trace sets them."""


@contextlib.contextmanager
def _library_checks_as_traced() -> Iterator[None]:
    """The compiler flags as a trace sets them, and the libraries' own tracing checks
    (transformers' ``is_tracing()``) answering yes."""
    with compiler_flags_as_traced(), library_checks_answering(True):
        yield


def _flag_explaining(
    model: torch.nn.Module, args: Any, kwargs: Any, ours: Any, restore: Callable[[], None], rtol: float, atol: float
) -> str | None:
    """The tracing check (a ``torch.compiler`` query, or a library's) under which the eager
    model gives ``ours`` (the program's outputs), run with it answering yes; None when no
    such run does."""
    ours_leaves, ours_spec = leaves_with_paths(ours)
    candidates = [(query, lambda flags=flags: compiler_flags_as_traced(**flags)) for query, flags in _COMPILER_FLAGS]
    checks = _checks_named(loaded_checks())
    if checks is not None:
        candidates.append((checks, _library_checks_as_traced))
    for name, answering in candidates:
        restore()
        try:
            with answering(), torch.no_grad():
                flagged = _clone(model(*_clone(args), **_clone(kwargs)))
        except Exception:  # noqa: BLE001 - that path does not run: not the one the program took
            continue
        finally:
            restore()
        leaves, spec = leaves_with_paths(flagged)
        if spec == ours_spec and all(
            _diff("", o, r, rtol, atol).ok for (_, o), (_, r) in zip(ours_leaves, leaves)
        ):
            return name
    return None


_POSSESSIVE = {True: "'", False: "'s"}


def _checks_named(names: list[str]) -> str | None:
    """``transformers' tracing checks (is_tracing(), ...)`` for the dotted names of checks."""
    if not names:
        return None
    libraries: dict[str, list[str]] = {}
    for name in names:
        libraries.setdefault(name.partition(".")[0], []).append(name.rpartition(".")[2])
    return " and ".join(
        f"{library}{_POSSESSIVE[library.endswith('s')]} tracing checks ({', '.join(functions)})"
        for library, functions in libraries.items()
    )


def _diff(path: str, ours: Any, ref: Any, rtol: float, atol: float) -> OutputDiff:
    if isinstance(ref, torch.Tensor):
        if not isinstance(ours, torch.Tensor):
            return OutputDiff(path, float("nan"), float("nan"), False, f"program gave {type(ours).__name__}")
        if ours.shape != ref.shape or ours.dtype != ref.dtype:
            note = f"program gave {ours.dtype} {tuple(ours.shape)}, eager {ref.dtype} {tuple(ref.shape)}"
            return OutputDiff(path, float("nan"), float("nan"), False, note)
        if ref.numel() == 0:
            return OutputDiff(path, 0.0, 0.0, True)
        if ref.device.type == "meta":
            return OutputDiff(path, 0.0, 0.0, True, "meta device: shape and dtype only")
        a, b = ours.detach().double(), ref.detach().double()
        err = (a - b).abs()
        both_nan = torch.isnan(a) & torch.isnan(b)
        err = torch.where(both_nan, torch.zeros_like(err), err)
        max_abs = float(err.max())
        scale = float(b.abs().nan_to_num(0.0).max())
        max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
        ok = bool(torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
        return OutputDiff(path, max_abs, max_rel, ok)
    if ours == ref:
        return OutputDiff(path, 0.0, 0.0, True)
    return OutputDiff(path, float("nan"), float("nan"), False, f"program gave {ours!r}, eager {ref!r}")


def compare_with_eager(
    model: torch.nn.Module,
    program: torch.export.ExportedProgram,
    inputs: list[tuple[str, tuple[Any, ...], dict[str, Any]]],
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> list[Comparison]:
    """For each ``(label, args, kwargs)``: outputs of ``program.module()`` vs ``model``.

    Both start from the same state (the program shares the model's tensors, and a model
    in train mode updates its buffers), and the model's parameters and buffers are put
    back afterwards.
    """
    return compare_runner_with_eager(
        model, program.module(), inputs, rtol=rtol, atol=atol, shared=program.constants.values()
    )


def compare_runner_with_eager(
    model: torch.nn.Module,
    runner: Callable[..., Any],
    inputs: list[tuple[str, tuple[Any, ...], dict[str, Any]]],
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    shared: Iterable[Any] = (),
) -> list[Comparison]:
    """``compare_with_eager`` for anything called like the model: the program's module, an
    AOTInductor package, an ONNX Runtime session wrapped to take and return pytrees, an
    ExecuTorch method.
    ``shared``: more tensors both sides may write to (the program's constants, which are
    the model's own plain tensors), put back between runs as the state is."""
    results = []
    with state_values_restored(model, shared) as restore:
        for label, args, kwargs in inputs:
            try:
                with torch.no_grad():
                    ref = _clone(model(*_clone(args), **_clone(kwargs)))
            except Exception as e:  # noqa: BLE001 - reported per run
                restore()
                results.append(Comparison(label, (), eager_error=f"{type(e).__name__}: {e}"))
                continue
            try:
                restore()
                start = time.perf_counter()
                with torch.no_grad():
                    ours = runner(*_clone(args), **_clone(kwargs))
                # a runner that times its own work (ExecuTorch: not the load that resets its state)
                seconds = getattr(runner, "seconds", None) or time.perf_counter() - start
                restore()
            except Exception as e:  # noqa: BLE001 - reported per run
                restore()
                results.append(Comparison(label, (), f"{type(e).__name__}: {e}"))
                continue
            ours_leaves, ours_spec = leaves_with_paths(ours)
            ref_leaves, ref_spec = leaves_with_paths(ref)
            if ours_spec != ref_spec:
                results.append(
                    Comparison(label, (), f"output structure differs: program {ours_spec}, eager {ref_spec}")
                )
                continue
            diffs = tuple(
                _diff(output_path(path), o, r, rtol, atol)
                for (path, o), (_, r) in zip(ours_leaves, ref_leaves)
            )
            flag = None
            if not all(d.ok for d in diffs):
                flag = _flag_explaining(model, args, kwargs, ours, restore, rtol, atol)
            if flag is not None:
                note = f"eager with {flag} True gives this value"
                diffs = tuple(d if d.ok else attrs.evolve(d, note="; ".join(filter(None, (d.note, note)))) for d in diffs)
            model_name = type(model).__name__ if flag is not None else None
            results.append(Comparison(label, diffs, seconds=seconds, flag=flag, model=model_name))
    return results


def require_match(comparisons: list[Comparison], *, rtol: float, atol: float, what: str = "program") -> None:
    """Raise ``VerificationMismatch`` (holding the comparisons) unless every run matched;
    ``what`` names the side compared with eager (the program, an artifact)."""
    if not all(c.ok for c in comparisons):
        raise VerificationMismatch(comparisons, rtol=rtol, atol=atol, what=what)
