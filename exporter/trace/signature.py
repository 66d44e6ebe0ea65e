"""The first graph signature of a trace: what each placeholder and each output stands for.

Placeholders come in the traced function's argument order (parameters, buffers, user
input leaves); outputs are the state and input updates, in input order, then the user's
outputs.  Targets are the FQNs the tracer swapped fakes in under; the passes later lift
constants, order and name everything as torch.export does.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.export.graph_signature import (
    ConstantArgument,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymBoolArgument,
    SymFloatArgument,
    SymIntArgument,
    TensorArgument,
)

__all__ = ["argument_spec", "constant_attribute_fqns", "input_specs", "output_specs"]


def constant_attribute_fqns(root: torch.nn.Module) -> dict[int, list[str]]:
    """id(tensor) -> FQNs of plain tensor attributes (neither parameter nor buffer), in module order."""
    state_ids = {id(t) for t in root.parameters()} | {id(t) for t in root.buffers()}
    found: dict[int, list[str]] = {}
    for prefix, module in root.named_modules(remove_duplicate=False):
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor) and id(value) not in state_ids:
                found.setdefault(id(value), []).append(f"{prefix}.{name}" if prefix else name)
    return found


def argument_spec(value: Any, val: Any):
    """The signature argument for a graph input or output: tensor, symbolic number or constant."""
    if isinstance(value, torch.fx.Node):
        if isinstance(val, torch.SymInt):
            return SymIntArgument(name=value.name)
        if isinstance(val, torch.SymFloat):
            return SymFloatArgument(name=value.name)
        if isinstance(val, torch.SymBool):
            return SymBoolArgument(name=value.name)
        if isinstance(val, torch.Tensor):
            return TensorArgument(name=value.name)
        return ConstantArgument(name=value.name, value=val)
    return ConstantArgument(name="", value=value)


def _val(value: Any) -> Any:
    return value.meta.get("val") if isinstance(value, torch.fx.Node) else value


def input_specs(
    placeholders: list[torch.fx.Node], parameters: list[str], buffers: list[str], non_persistent: set[str]
) -> list[InputSpec]:
    """One spec per placeholder: parameters, then buffers (by FQN), then user inputs."""
    specs = []
    for i, node in enumerate(placeholders):
        if i < len(parameters):
            spec = InputSpec(InputKind.PARAMETER, TensorArgument(node.name), target=parameters[i])
        elif i < len(parameters) + len(buffers):
            name = buffers[i - len(parameters)]
            spec = InputSpec(
                InputKind.BUFFER, TensorArgument(node.name), target=name, persistent=name not in non_persistent
            )
        else:
            spec = InputSpec(InputKind.USER_INPUT, argument_spec(node, node.meta.get("val")), target=None)
        specs.append(spec)
    return specs


def output_specs(
    outputs: list[Any], mutated: list[int], placeholders: list[torch.fx.Node], parameters: list[str], buffers: list[str]
) -> list[OutputSpec]:
    """One spec per output: an update of the input at each index in ``mutated`` (flat input
    order: parameters, buffers, user leaves), then the user outputs."""
    state_names = [*parameters, *buffers]
    specs = []
    for value, index in zip(outputs, mutated):
        if index < len(parameters):
            kind, target = OutputKind.PARAMETER_MUTATION, state_names[index]
        elif index < len(state_names):
            kind, target = OutputKind.BUFFER_MUTATION, state_names[index]
        else:
            kind, target = OutputKind.USER_INPUT_MUTATION, placeholders[index].name
        specs.append(OutputSpec(kind, argument_spec(value, _val(value)), target=target))
    for value in outputs[len(mutated) :]:
        specs.append(OutputSpec(OutputKind.USER_OUTPUT, argument_spec(value, _val(value)), target=None))
    return specs
