"""ExportState: the one object the tracer fills in and every later stage reads and updates."""

from __future__ import annotations

from typing import Any

import attrs
import sympy
import torch
from torch.export.graph_signature import ExportGraphSignature, InputSpec, OutputSpec
from torch.utils._pytree import KeyPath, TreeSpec

from ._assumptions import Assumption
from ._branch_report import BranchReport
from ._dims import DynamicPlan
from ._notes import Note
from ._torch_internals import (
    EqualityConstraint,
    FakeTensorMode,
    Source,
    StatelessSymbolicContext,
    SymIntSymbolicContext,
    ValueRanges,
)

__all__ = ["ExportState", "PreservedCall", "TrackedInput"]


@attrs.frozen
class TrackedInput:
    """A user input traced symbolically (a tensor with symbolic sizes, or a symbolic int),
    as the ShapeEnv knows it."""

    leaf: int
    """Index among the flat user inputs."""
    fake: torch.Tensor | torch.SymInt
    """Its fake tensor, with a symbol for each dynamic dimension, or its symbolic int."""
    source: Source
    """Where it comes from (``L['x']``); the ShapeEnv names its guards after it."""
    context: StatelessSymbolicContext | SymIntSymbolicContext | None
    """Which dimensions were made dynamic and their declared constraints (None: an int
    that may become a constant)."""


@attrs.define(eq=False)
class PreservedCall:
    """One call of a submodule named in ``preserve_module_call_signature``: the values that
    went in and came out, as graph nodes (tensors) or constants, in pytree-flattened order."""

    fqn: str
    """The module's path, ``@n`` appended for its n-th call after the first (``block@1``)."""
    in_spec: TreeSpec
    """The pytree structure of ``(args, kwargs)`` as the module was called."""
    out_spec: TreeSpec
    inputs: list[Any]
    outputs: list[Any]


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
    fake_mode: FakeTensorMode
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

    subclass_leaves: dict[str, torch.Tensor] = attrs.field(factory=dict)
    """The inner tensors of tensor-subclass parameters and buffers, by the name they are
    inputs under (``parametrizations.weight.original0``): the program holds these."""

    range_constraints: dict[sympy.Expr, ValueRanges] = attrs.field(factory=dict)
    """Value range of every input size expression and data-dependent symbol."""

    dynamic: DynamicPlan | None = None
    """The parsed ``dynamic_shapes``, or None for a static export."""
    tracked: list[TrackedInput] = attrs.field(factory=list)
    """The user's tensor inputs traced with symbolic sizes (only when ``dynamic`` is set)."""
    equalities: EqualityConstraint | None = None
    """The equalities the ``dynamic_shapes`` spec declares (shared and derived Dims)."""
    assumptions: list[Assumption] = attrs.field(factory=list)
    """What a draft export took from the example inputs (always empty otherwise)."""
    notes: list[Note] = attrs.field(factory=list)
    """What the program does differently from eager (a buffer replaced with another shape)."""
    branch_report: BranchReport | None = None
    """The branches on tensor values the program captured as torch.cond (None: none)."""
    preserved_calls: list[PreservedCall] = attrs.field(factory=list)
    """The calls of the submodules whose call signature the program keeps, in call order."""
    training: bool = False
    """The graph is torch.export's training IR (pre-dispatch ATen, writes kept in place,
    grad/autocast regions as higher-order ops) rather than functional post-autograd ATen."""

    @property
    def signature(self) -> ExportGraphSignature:
        return ExportGraphSignature(input_specs=self.input_specs, output_specs=self.output_specs)

    def replace_node(self, old: torch.fx.Node, new: torch.fx.Node) -> None:
        """Make every user of ``old`` (and every spec naming it) use ``new``, then erase ``old``."""
        old.replace_all_uses_with(new)
        self.rename_value(old, new)
        old.graph.erase_node(old)

    def rename_value(self, old: torch.fx.Node, new: torch.fx.Node) -> None:
        """Make the signature and the preserved call signatures name ``new`` where they named ``old``."""
        for spec in (*self.input_specs, *self.output_specs):
            if getattr(spec.arg, "name", None) == old.name:
                spec.arg.name = new.name
        for call in self.preserved_calls:
            call.inputs = [new if value is old else value for value in call.inputs]
            call.outputs = [new if value is old else value for value in call.outputs]
