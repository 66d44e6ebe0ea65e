"""One export of a model reference, start to finish, as the CLI and CI run it; the result is data.

``run_export(ExportSettings(...))`` loads the model, finds its inputs, exports it, optionally
checks the program against eager and saves it, and returns an ``ExportReport``: everything a
person or a CI system wants to know, ready to render (``_report.py``) or dump as JSON.
Failures are captured in the report, never raised.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs
import torch
import torch.utils._pytree as pytree

from ._compare import Comparison, compare_with_eager
from ._errors import ExportError
from ._dynamic import inputs_by_name
from ._dynamic_flags import dynamic_shapes_from_flags
from ._inputs import bind_inputs, describe_path
from ._loading import load_model, resolve_example_inputs
from ._pipeline import export_timed

__all__ = ["ExportSettings", "ExportReport", "run_export", "REPORT_SCHEMA"]

REPORT_SCHEMA = "exporter.report/1"


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


@attrs.define
class ExportReport:
    """Everything one export produced; ``to_json()`` is the documented report schema."""

    settings: ExportSettings
    status: str = "failed"
    model_name: str | None = None
    model_class: str | None = None
    parameters: int | None = None
    inputs: list[dict[str, Any]] = attrs.field(factory=list)
    input_source: str | None = None
    output_file: str | None = None
    timings: dict[str, float] = attrs.field(factory=dict)
    signature: dict[str, list[dict[str, Any]]] | None = None
    range_constraints: dict[str, list[Any]] = attrs.field(factory=dict)
    ops: dict[str, int] = attrs.field(factory=dict)
    modules: list[dict[str, Any]] = attrs.field(factory=list)
    verification: list[Comparison] | None = None
    error: dict[str, Any] | None = None
    versions: dict[str, str] = attrs.field(factory=dict)
    program: Any = None
    """The ExportedProgram (not part of the JSON report)."""
    exception: BaseException | None = None
    """The exception behind ``error`` (not part of the JSON report; shown with --verbose)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def exit_code(self) -> int:
        if self.ok:
            return 0
        return 2 if self.error and self.error.get("category") == "input" else 1

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "status": self.status,
            "model": {
                "reference": self.settings.model,
                "name": self.model_name,
                "class": self.model_class,
                "parameters": self.parameters,
                "train": self.settings.train,
                "init_args": self.settings.init_args,
            },
            "inputs": {"source": self.input_source, "leaves": self.inputs},
            "output_file": self.output_file,
            "timings": {k: round(v, 6) for k, v in self.timings.items()},
            "dynamic": self.settings.dynamic,
            "range_constraints": self.range_constraints,
            "signature": self.signature,
            "ops": self.ops,
            "modules": self.modules,
            "verification": None
            if self.verification is None
            else {
                "passed": all(c.ok for c in self.verification),
                "rtol": self.settings.rtol,
                "atol": self.settings.atol,
                "runs": [
                    {
                        "inputs": c.label,
                        "passed": c.ok,
                        "error": c.error,
                        "outputs": [attrs.asdict(o) for o in c.outputs],
                    }
                    for c in self.verification
                ],
            },
            "error": self.error,
            "versions": self.versions,
        }


# -- what goes into a report -----------------------------------------------------------------


def _describe_leaf(path, value) -> dict[str, Any]:
    where = describe_path(path)
    if isinstance(value, torch.Tensor):
        return {"path": where, "kind": "tensor", "dtype": str(value.dtype).replace("torch.", ""), "shape": list(value.shape)}
    return {"path": where, "kind": "constant", "value": value if isinstance(value, (int, float, bool, str, type(None))) else repr(value)}


def _value_meta(val: Any) -> dict[str, Any]:
    if isinstance(val, torch.Tensor):
        return {"shape": [int(s) if isinstance(s, int) else str(s) for s in val.shape], "dtype": str(val.dtype).replace("torch.", "")}
    if isinstance(val, torch.SymInt):
        return {"shape": None, "dtype": "SymInt"}
    return {"shape": None, "dtype": type(val).__name__}


def _json_bound(value) -> int | None:
    try:
        return int(value)
    except (TypeError, OverflowError, ValueError):
        return None  # unbounded


def signature_rows(program: torch.export.ExportedProgram) -> dict[str, list[dict[str, Any]]]:
    """Input and output specs as plain rows: kind, name, target, persistent, shape, dtype."""
    nodes = {n.name: n for n in program.graph.nodes}

    def row(spec) -> dict[str, Any]:
        name = getattr(spec.arg, "name", "")
        node = nodes.get(name)
        val = node.meta.get("val") if node is not None else getattr(spec.arg, "value", None)
        out = {"kind": spec.kind.name, "name": name, "target": spec.target}
        if getattr(spec, "persistent", None) is not None:
            out["persistent"] = spec.persistent
        if not isinstance(val, (torch.Tensor, torch.SymInt)):
            out["value"] = val if isinstance(val, (int, float, bool, str, type(None))) else repr(val)
        out.update(_value_meta(val))
        return out

    sig = program.graph_signature
    return {"inputs": [row(s) for s in sig.input_specs], "outputs": [row(s) for s in sig.output_specs]}


def op_histogram(program: torch.export.ExportedProgram) -> dict[str, int]:
    """call_function targets, counted over the graph and its subgraphs, most frequent first."""
    counts: Counter[str] = Counter()
    for module in program.graph_module.modules():
        if isinstance(module, torch.fx.GraphModule):
            counts.update(str(n.target) for n in module.graph.nodes if n.op == "call_function")
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def module_op_counts(program: torch.export.ExportedProgram) -> list[dict[str, Any]]:
    """Per module path (from nn_module_stack): class, ops recorded directly in it, and in total."""
    own: Counter[str] = Counter()
    classes: dict[str, str] = {}
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        stack = node.meta.get("nn_module_stack") or {}
        paths = [path for path, _ in stack.values()]
        for path, cls in stack.values():
            classes.setdefault(path, cls.rsplit(".", 1)[-1])
        own[paths[-1] if paths else ""] += 1
    total: Counter[str] = Counter()
    for path, count in own.items():
        parts = path.split(".") if path else []
        total[""] += count
        for i in range(1, len(parts) + 1):
            total[".".join(parts[:i])] += count
    rows = []
    for path in sorted(set(total) | set(classes), key=lambda p: [(0, int(a)) if a.isdigit() else (1, a) for a in p.split(".")] if p else []):
        if total[path] == 0 and path not in classes:
            continue
        rows.append({"path": path, "class": classes.get(path, ""), "ops": own[path], "total_ops": total[path]})
    return rows


def library_versions(model: torch.nn.Module | None) -> dict[str, str]:
    """Python, torch, exporter, and the distributions the model's classes come from."""
    from . import __version__

    versions = {"python": platform.python_version(), "torch": torch.__version__, "exporter": __version__}
    if model is None:
        return versions
    roots = {type(m).__module__.split(".")[0] for m in model.modules()}
    for root in sorted(roots - {"torch", "builtins", "__main__"}):
        try:
            versions[root] = importlib.metadata.version(root)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def error_info(error: BaseException) -> dict[str, Any]:
    if isinstance(error, ExportError):
        return {
            "type": type(error).__name__,
            "category": error.category,
            "message": error.message,
            "location": error.location,
            "hint": error.hint,
        }
    return {"type": type(error).__name__, "category": "internal", "message": str(error), "location": None, "hint": None}


def _save_atomically(program: torch.export.ExportedProgram, path: str) -> None:
    # Written to a temporary file next to the target and moved into place, so a failed save
    # leaves an existing file untouched.
    directory = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".exporter-", suffix=".pt2", dir=directory)
    os.close(fd)
    try:
        torch.export.save(program, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class _VerifyFailed(Exception):
    def __init__(self, failed: list[Comparison]) -> None:
        super().__init__()
        self.failed = failed

    def summary(self) -> str:
        parts = []
        for run in self.failed:
            if run.error:
                parts.append(f"{run.label}: {run.error}")
            for out in run.outputs:
                if not out.ok:
                    parts.append(
                        f"{run.label} {out.path}: max abs error {out.max_abs:.3g}, max rel error {out.max_rel:.3g}"
                        + (f" ({out.note})" if out.note else "")
                    )
        return "program and eager differ: " + "; ".join(parts)


def run_export(settings: ExportSettings, on_stage: Callable[[str], None] | None = None) -> ExportReport:
    """Load, export, optionally verify and save ``settings.model``; failures end up in the report."""
    report = ExportReport(settings)
    stage = on_stage or (lambda name: None)
    clock = time.perf_counter()
    started = clock

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        report.timings[name] = report.timings.get(name, 0.0) + now - clock
        clock = now

    model = None
    try:
        stage("loading the model")
        loaded = load_model(settings.model, settings.init_args, train=settings.train)
        model = loaded.model
        report.model_name = loaded.name
        report.model_class = f"{type(model).__module__}.{type(model).__qualname__}"
        report.parameters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
        lap("load")

        stage("preparing example inputs")
        examples = resolve_example_inputs(settings.example_inputs, loaded)
        report.input_source = examples.source
        report.inputs = [_describe_leaf(p, v) for p, v in pytree.tree_flatten_with_path((examples.args, examples.kwargs))[0]]
        lap("inputs")

        dynamic_shapes = None
        if settings.dynamic:
            named = inputs_by_name(model, bind_inputs(model, examples.args, examples.kwargs))
            dynamic_shapes = dynamic_shapes_from_flags(settings.dynamic, named)

        stage("exporting")
        program, timings = export_timed(model, examples.args, examples.kwargs, dynamic_shapes=dynamic_shapes)
        lap("export")
        report.timings.update({f"export.{k}": v for k, v in timings.items()})
        report.program = program
        report.signature = signature_rows(program)
        report.ops = op_histogram(program)
        report.modules = module_op_counts(program)
        report.range_constraints = {
            str(expr): [_json_bound(vr.lower), _json_bound(vr.upper)] for expr, vr in program.range_constraints.items()
        }

        if settings.verify:
            stage("comparing with eager")
            runs = [("example", examples.args, examples.kwargs)]
            runs += [(f"fresh #{i}", *examples.fresh(i)) for i in range(1, settings.fresh_runs + 1)]
            report.verification = compare_with_eager(model, program, runs, rtol=settings.rtol, atol=settings.atol)
            lap("verify")
            failed = [c for c in report.verification if not c.ok]
            if failed:
                raise _VerifyFailed(failed)

        if settings.save:
            stage("saving")
            path = settings.output or f"{loaded.name}.pt2"
            _save_atomically(program, path)
            report.output_file = os.path.abspath(path)
            lap("save")
        report.status = "ok"
    except _VerifyFailed as e:
        report.error = {
            "type": "VerificationMismatch",
            "category": "verification",
            "message": e.summary(),
            "location": None,
            "hint": "the program disagrees with eager beyond tolerance; compare node by node with "
            "torch.fx.Interpreter, or loosen --rtol/--atol if the difference is rounding",
        }
    except Exception as e:  # noqa: BLE001 - reported, not raised
        report.error = error_info(e)
        report.exception = e
    finally:
        report.timings["total"] = time.perf_counter() - started
        report.versions = library_versions(model)
    return report
