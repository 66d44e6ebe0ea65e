"""Helpers shared by the tests: trace a model and stop just before a given pass; compare
two pytrees of results."""

from __future__ import annotations

import math
import re
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
