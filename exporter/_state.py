"""ExportState: the one object the tracer fills in and every pass reads and updates."""

from __future__ import annotations

from typing import Any

import attrs
import torch
from torch.export.graph_signature import ExportGraphSignature, InputSpec, OutputSpec
from torch.utils._pytree import KeyPath, TreeSpec

__all__ = ["ExportState"]


@attrs.define(eq=False)
class ExportState:
    """Everything known about one export between tracing and building the program.

    The graph's placeholders line up one to one with ``input_specs`` and the output
    node's values with ``output_specs``; passes keep that true.
    """

    root: torch.nn.Module
    """The user's module. Read-only: nothing in the pipeline may change it."""

    gm: torch.fx.GraphModule
    """The graph under construction.  ``gm.graph`` is the truth: passes do not regenerate
    the top-level module's code (the program is built from the graph), but they do
    recompile a higher-order-op subgraph module they change, since the program reuses it."""

    input_specs: list[InputSpec]
    output_specs: list[OutputSpec]
    fake_mode: Any
    """The FakeTensorMode (with its ShapeEnv) the graph's ``val`` metadata lives in."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    in_spec: TreeSpec
    out_spec: TreeSpec
    user_input_paths: list[KeyPath]
    """Pytree key path of every user input leaf, rooted at forward()'s parameter names."""

    forward_arg_names: list[str]
    constants: dict[str, torch.Tensor] = attrs.field(factory=dict)
    """Lifted constants and non-persistent buffers, by FQN."""

    constant_fqns: dict[int, list[str]] = attrs.field(factory=dict)
    """id(tensor) -> FQNs of the plain tensor attributes of ``root`` (neither parameter nor buffer)."""

    range_constraints: dict[Any, Any] = attrs.field(factory=dict)
    dynamic: Any = None
    """The parsed ``dynamic_shapes`` (a DynamicPlan), or None for a static export."""
    tracked: list[tuple[int, Any, Any, Any]] = attrs.field(factory=list)
    """(leaf index, fake, source, symbolic context) of the user's tensor inputs, when dynamic."""
    equalities: Any = None
    """The EqualityConstraint the dynamic_shapes spec declares (shared and derived Dims)."""
    timings: dict[str, float] = attrs.field(factory=dict)

    @property
    def signature(self) -> ExportGraphSignature:
        return ExportGraphSignature(input_specs=self.input_specs, output_specs=self.output_specs)

    def placeholders(self) -> list[torch.fx.Node]:
        return [n for n in self.gm.graph.nodes if n.op == "placeholder"]

    def output_node(self) -> torch.fx.Node:
        return self.gm.graph.output_node()
