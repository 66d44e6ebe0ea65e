"""Helpers shared by the unit tests: trace a model and stop just before a given pass."""

from __future__ import annotations

import torch

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
