"""The graph signature describes the graph exactly and points at real state."""

from __future__ import annotations

from torch.export.graph_signature import (
    ConstantArgument,
    InputKind,
    OutputKind,
)

from exporter._errors import VerificationError
from exporter._ir import STATE_MUTATIONS

from .placeholders import verify_placeholders_match_specs

__all__ = ["verify_signature"]


def _fail(message: str, rule: str, node: str | None = None):
    raise VerificationError(message, rule=rule, node=node)


def verify_signature(program) -> None:
    """Placeholders and input specs match one to one and in order, as do output values and
    output specs; every state target exists in the state dict or the constants table; every
    mutation output updates an input of the matching kind, and comes before user outputs."""
    gm = program.graph_module
    sig = program.graph_signature
    verify_placeholders_match_specs(gm, sig.input_specs)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, spec in zip(placeholders, sig.input_specs):
        if spec.kind == InputKind.PARAMETER or (spec.kind == InputKind.BUFFER and spec.persistent):
            if spec.target not in program.state_dict:
                _fail(
                    f"{spec.kind.name} input {node.name} targets {spec.target!r}, missing from the state dict",
                    "state-target-exists",
                    node.name,
                )
        elif spec.kind in (InputKind.BUFFER, InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
            if spec.target not in program.constants:
                _fail(
                    f"{spec.kind.name} input {node.name} targets {spec.target!r}, missing from the constants",
                    "state-target-exists",
                    node.name,
                )

    output_node = gm.graph.output_node()
    values = list(output_node.args[0])
    if len(values) != len(sig.output_specs):
        _fail(
            f"the graph returns {len(values)} values but the signature has "
            f"{len(sig.output_specs)} output specs",
            "output-spec-count",
        )
    inputs_by_target = {s.target: s for s in sig.input_specs if s.target is not None}
    user_inputs = {s.arg.name for s in sig.input_specs if s.kind == InputKind.USER_INPUT}
    seen_user_output = False
    for i, (value, spec) in enumerate(zip(values, sig.output_specs)):
        if isinstance(spec.arg, ConstantArgument):
            if hasattr(value, "name"):
                _fail(f"output {i} is node {value.name} but its spec is a constant", "output-spec-order")
        elif getattr(value, "name", None) != spec.arg.name:
            _fail(
                f"output {i} is {getattr(value, 'name', value)!r} but its spec names {spec.arg.name!r}",
                "output-spec-order",
            )
        if spec.kind == OutputKind.USER_OUTPUT:
            seen_user_output = True
            continue
        if seen_user_output:
            _fail(f"mutation output {spec.arg.name} comes after a user output", "mutations-first")
        if spec.kind == OutputKind.USER_INPUT_MUTATION:
            if spec.target not in user_inputs:
                _fail(
                    f"output {spec.arg.name} mutates {spec.target!r}, which is not a user input",
                    "mutation-target",
                )
        elif spec.kind in STATE_MUTATIONS:
            source = inputs_by_target.get(spec.target)
            if source is None or source.kind != STATE_MUTATIONS[spec.kind]:
                _fail(
                    f"output {spec.arg.name} is a {spec.kind.name} of {spec.target!r}, "
                    f"which is not a {STATE_MUTATIONS[spec.kind].name} input",
                    "mutation-target",
                )
