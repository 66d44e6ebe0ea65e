"""Helpers shared by the tests: trace a model and stop just before a given pass; compare
two pytrees of results."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.utils._pytree as pytree

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
