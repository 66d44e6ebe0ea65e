"""What a report says about a program: signature rows, op counts, module tree, ranges, versions."""

from __future__ import annotations

import importlib.metadata
import platform
from collections import Counter
from typing import Any

import torch

from .._ir import graph_modules

__all__ = ["library_versions", "module_op_counts", "op_histogram", "range_rows", "signature_rows"]


def _value_meta(val: Any) -> dict[str, Any]:
    if isinstance(val, torch.Tensor):
        return {"shape": [int(s) if isinstance(s, int) else str(s) for s in val.shape], "dtype": str(val.dtype).replace("torch.", "")}
    if isinstance(val, torch.SymInt):
        return {"shape": None, "dtype": "SymInt"}
    return {"shape": None, "dtype": type(val).__name__}


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
    for module in graph_modules(program.graph_module):
        counts.update(str(n.target) for n in module.graph.nodes if n.op == "call_function")
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _path_order(path: str) -> list[tuple[int, Any]]:
    """Module paths in tree order, numbered children by number (``layers.2`` before ``layers.10``)."""
    return [(0, int(a)) if a.isdigit() else (1, a) for a in path.split(".")] if path else []


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
    for path in sorted(set(total) | set(classes), key=_path_order):
        if total[path] == 0 and path not in classes:
            continue
        rows.append({"path": path, "class": classes.get(path, ""), "ops": own[path], "total_ops": total[path]})
    return rows


def _json_bound(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, OverflowError, ValueError, AttributeError):
        return None  # unbounded (sympy fails on int(int_oo) in one of these ways, depending on its version)


def range_rows(program: torch.export.ExportedProgram) -> dict[str, list[int | None]]:
    """Each range constraint as ``expression -> [min, max]`` (None where unbounded)."""
    return {str(expr): [_json_bound(vr.lower), _json_bound(vr.upper)] for expr, vr in program.range_constraints.items()}


def library_versions(model: torch.nn.Module | None) -> dict[str, str]:
    """Python, torch, exporter, and the distributions the model's classes come from."""
    from .. import __version__

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
