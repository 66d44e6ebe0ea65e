"""Helpers shared by the tests: trace a model and stop just before a given pass; compare
two pytrees of results."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from exporter.inputs import bind_inputs
from exporter._pipeline import run_passes
from exporter.passes import DEFAULT_PASSES, TRAINING_PASSES
from exporter._state import ExportState
from exporter.trace import trace


def traced_state(model: torch.nn.Module, args=(), kwargs=None, *, until=None, training: bool = False) -> ExportState:
    """Trace ``model`` and run the passes that come before ``until`` (all if None): the
    default pipeline, or with ``training`` the training-IR trace and pipeline."""
    state = trace(model, bind_inputs(model, args, kwargs), training=training)
    pipeline = TRAINING_PASSES if training else DEFAULT_PASSES
    passes = pipeline if until is None else pipeline[: pipeline.index(until)]
    run_passes(state, passes)
    return state


def call_targets(gm: torch.fx.GraphModule) -> list:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def specs_by_name(specs) -> dict:
    return {s.arg.name: s for s in specs}


def node_named(gm: torch.fx.GraphModule, name: str) -> torch.fx.Node:
    return next(n for n in gm.graph.nodes if n.name == name)


def tree_difference(ours: Any, ref: Any, *, rtol: float, atol: float, what: str = "") -> str | None:
    """None when the pytrees match (same structure; tensors of the same dtype and shape and
    close values; floats close; other leaves equal), else where and how the first differs."""
    ours_leaves, ours_spec = pytree.tree_flatten_with_path(ours)
    ref_leaves, ref_spec = pytree.tree_flatten_with_path(ref)
    if ours_spec != ref_spec:
        return f"{what or 'structure'}: structure {ours_spec} != {ref_spec}"
    for (path, a), (_, b) in zip(ours_leaves, ref_leaves):
        where = f"{what}{pytree.keystr(path)}" or "output"
        if isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"{where}: {type(a).__name__} instead of a tensor"
            if a.shape != b.shape or a.dtype != b.dtype:
                return f"{where}: {a.dtype}{list(a.shape)} != {b.dtype}{list(b.shape)}"
            if not torch.allclose(a.detach(), b.detach(), rtol=rtol, atol=atol, equal_nan=True):
                error = (a.detach().double() - b.detach().double()).abs().max().item()
                return f"{where}: values differ (max abs diff {error:.3g})"
        elif isinstance(b, float) and isinstance(a, (int, float)) and not isinstance(a, bool):
            if not math.isclose(a, b, rel_tol=rtol, abs_tol=atol) and not (math.isnan(a) and math.isnan(b)):
                return f"{where}: {a!r} != {b!r}"
        elif type(a) is not type(b) or a != b:
            return f"{where}: {a!r} != {b!r}"
    return None


def _value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"T{tuple(value.shape)}/{value.stride()}/{value.dtype}/{value.device}/{value.requires_grad}"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[{', '.join(_value(v) for v in value)}]"
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


def graph_fingerprint(gm: torch.fx.GraphModule) -> list[tuple]:
    """Every node of every graph with all of its metadata (object addresses and generated-file
    numbers masked): equal for two traces that recorded the same program."""
    rows = []
    for name, module in gm.named_modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            meta = {}
            for key, value in sorted(node.meta.items()):
                if key == "stack_trace":
                    value = re.sub(r"<eval_with_key>\.\d+", "<eval_with_key>", value or "")
                elif key == "tensor_meta":
                    value = repr(value)
                elif key == "eager_input_vals":
                    value = torch.fx.node.map_aggregate(value, _value)
                else:
                    value = _value(value) if key == "val" else repr(value)
                meta[key] = re.sub(r" at 0x[0-9a-f]+", "", value) if isinstance(value, str) else value
            rows.append((name, node.op, node.name, str(node.target), str(node.args), str(node.kwargs), meta))
        rows.append((name, "attributes", sorted(k for k in vars(module) if k.startswith("_tensor_constant"))))
    return rows


class OpsSeen(TorchDispatchMode):
    """A dispatch mode that lists the ops it sees (``.ops``, as strings) and runs them."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


# -- placeholder and output values against torch.export's ---------------------------------

KNOWN_VALUE_DIFFERENCES = {
    "requires_grad of an input forward writes to": (
        "a buffer or user input that forward writes a value requiring grad into, in grad mode: "
        "torch.export's placeholder `val` is the fake as forward left it, requires_grad=True (its "
        "own `tensor_meta` says False); exporter's describes the input as the program receives "
        "it, requires_grad=False. torch.export's is a leaf that requires grad, so the write "
        "cannot be made on it in grad mode: the training IR's graph cannot run on its own "
        "placeholder values, and a write-back of the update into the placeholder (ExecuTorch's) "
        "fails. tests/exporter/trace/test_tracer.py shows both"
    ),
}
"""Differences in placeholder and output values that exporter makes by design, with why."""


def _symbolic_text(value: Any, symbols: Mapping | None) -> str:
    if not isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
        return str(value)
    return str(value.node.expr.xreplace(symbols) if symbols else value.node.expr)


def _value_fields(value: Any, symbols: Mapping | None = None) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        return {
            "shape": [_symbolic_text(s, symbols) for s in value.shape],
            "stride": [_symbolic_text(s, symbols) for s in value.stride()],
            "dtype": value.dtype,
            "device": str(value.device),
            "requires_grad": value.requires_grad,
        }
    if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
        return {"type": type(value).__name__, "value": _symbolic_text(value, symbols)}
    return {"type": type(value).__name__, "value": repr(value)}


def _written_in_place(graph: torch.fx.Graph) -> set[str]:
    """Placeholders an in-place op of the graph writes to, directly or through views (the
    training IR keeps writes in place, with no mutation outputs)."""
    base = {n: n.name for n in graph.nodes if n.op == "placeholder"}
    written = set()
    for node in graph.nodes:
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        if schema is None:
            continue
        returned = {name for a in schema.returns if a.alias_info for name in a.alias_info.before_set}
        for i, argument in enumerate(schema.arguments):
            value = node.args[i] if i < len(node.args) else node.kwargs.get(argument.name)
            if argument.alias_info is None or value not in base:
                continue
            if argument.alias_info.is_write:
                written.add(base[value])
            if set(argument.alias_info.before_set) & returned:
                base[node] = base[value]
    return written


def value_rows(program, symbols: Mapping | None = None) -> list[tuple[str, bool, dict[str, Any]]]:
    """Every placeholder's and every output's ``val`` (shape, strides, dtype, device and
    requires_grad of a tensor; type and value otherwise), in signature order, each as
    ``(where, written, fields)``: ``written`` marks a buffer or user input forward writes to.
    ``symbols`` renames sympy symbols in symbolic values (``{s17: args[0].shape[0]}``)."""
    signature = program.graph_signature
    written = set(signature.buffers_to_mutate.values()) | set(signature.user_inputs_to_mutate.values())
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    in_place = _written_in_place(program.graph)
    rows = []
    for i, spec in enumerate(signature.input_specs):
        node = placeholders.get(getattr(spec.arg, "name", None))
        value = node.meta.get("val") if node is not None else getattr(spec.arg, "value", None)
        name = spec.target or spec.arg.name
        is_written = spec.kind.name in ("BUFFER", "USER_INPUT") and (name in written or getattr(node, "name", None) in in_place)
        where = f"input {i} ({spec.kind.name} {spec.target or ''})".replace(" )", ")")
        rows.append((where, is_written, _value_fields(value, symbols)))
    outputs = program.graph.output_node().args[0]
    for i, (spec, value) in enumerate(zip(signature.output_specs, outputs)):
        value = value.meta.get("val") if isinstance(value, torch.fx.Node) else value
        where = f"output {i} ({spec.kind.name} {spec.target or ''})".replace(" )", ")")
        rows.append((where, False, _value_fields(value, symbols)))
    return rows


@dataclasses.dataclass(frozen=True)
class ValueDifference:
    """One field of one placeholder's or output's ``val`` that differs from the oracle's."""

    where: str
    """``input 3 (BUFFER ema)``, ``output 0 (USER_OUTPUT)``."""
    field: str
    """``shape``, ``stride``, ``dtype``, ``device``, ``requires_grad``; ``type`` or ``value``
    of a value that is not a tensor."""
    ours: Any
    oracle: Any


def value_field_differences(
    ours, oracle, *, ours_symbols: Mapping | None = None, oracle_symbols: Mapping | None = None
) -> tuple[list[ValueDifference], list[ValueDifference]]:
    """How ``ours``'s placeholder and output values differ from ``oracle``'s, field by field:
    ``(problems, known)``, ``known`` the differences ``KNOWN_VALUE_DIFFERENCES`` expects.
    ``ours_symbols`` and ``oracle_symbols`` rename each program's symbols (see ``value_rows``);
    a different count of inputs and outputs is one difference of field ``count``."""
    mine, theirs = value_rows(ours, ours_symbols), value_rows(oracle, oracle_symbols)
    if len(mine) != len(theirs):
        return [ValueDifference("inputs and outputs", "count", len(mine), len(theirs))], []
    problems, known = [], []
    for (where, written, a), (_, _, b) in zip(mine, theirs):
        fields = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        differences = [ValueDifference(where, k, a.get(k), b.get(k)) for k in fields]
        if written and fields == ["requires_grad"] and b["requires_grad"] and not a["requires_grad"]:
            known += differences
        else:
            problems += differences
    return problems, known


def value_differences(ours, oracle) -> tuple[list[str], list[str]]:
    """How ``ours``'s placeholder and output values differ from ``oracle``'s: ``(problems,
    known)``, one line for each input or output, ``known`` naming the
    ``KNOWN_VALUE_DIFFERENCES`` entry each expected one is."""
    problems, known = value_field_differences(ours, oracle)
    if problems and (problems[0].where, problems[0].field) == ("inputs and outputs", "count"):
        return [f"{problems[0].ours} inputs and outputs, the oracle has {problems[0].oracle}"], []
    return _lines(problems, ""), _lines(known, ": requires_grad of an input forward writes to")


def _lines(differences: list[ValueDifference], suffix: str) -> list[str]:
    by_place: dict[str, list[ValueDifference]] = {}
    for difference in differences:
        by_place.setdefault(difference.where, []).append(difference)
    return [
        f"{where}: " + ", ".join(f"{d.field} {d.ours} (oracle {d.oracle})" for d in group) + suffix
        for where, group in by_place.items()
    ]
