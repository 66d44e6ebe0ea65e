"""ExportState -> torch.export.ExportedProgram."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import ConstantArgument, InputKind, TensorArgument

from ._state import ExportState
from ._torch_internals import ModuleCallEntry, ModuleCallSignature, training_dialect

__all__ = ["build_program"]


def _state_dict(state: ExportState) -> dict[str, torch.Tensor]:
    """The user's own parameters and persistent buffers (not copies), under every alias,
    as the program's inputs name them (a tensor-subclass one as its inner tensors)."""
    every = {
        **dict(state.root.named_parameters(remove_duplicate=False)),
        **dict(state.root.named_buffers(remove_duplicate=False)),
        **state.subclass_leaves,
    }
    return {
        spec.target: every[spec.target]
        for spec in state.input_specs
        if spec.kind == InputKind.PARAMETER or (spec.kind == InputKind.BUFFER and spec.persistent)
    }


def _argument(value: object) -> TensorArgument | ConstantArgument:
    if isinstance(value, torch.fx.Node):
        return TensorArgument(name=value.name)
    return ConstantArgument(name="", value=value)


def _module_call_graph(state: ExportState) -> list[ModuleCallEntry]:
    """Every module path of the root, then each further call of a preserved module
    (``block@1``), as torch.export lists them; preserved calls carry their signature."""
    preserved = {call.fqn: call for call in state.preserved_calls}
    entries = [
        ModuleCallEntry(fqn=fqn, signature=None)
        for fqn, _ in state.root.named_modules(remove_duplicate=False)
    ]
    entries += [ModuleCallEntry(fqn=fqn, signature=None) for fqn in preserved if "@" in fqn]
    entries[0].signature = ModuleCallSignature(
        inputs=[],
        outputs=[],
        in_spec=state.in_spec,
        out_spec=state.out_spec,
        forward_arg_names=state.forward_arg_names,
    )
    for entry in entries[1:]:
        call = preserved.get(entry.fqn)
        if call is not None:
            entry.signature = ModuleCallSignature(
                inputs=[_argument(v) for v in call.inputs],
                outputs=[_argument(v) for v in call.outputs],
                in_spec=call.in_spec,
                out_spec=call.out_spec,
                forward_arg_names=None,
            )
    return entries


def build_program(state: ExportState) -> ExportedProgram:
    """Wrap the finished graph, signature and state into a genuine ExportedProgram."""
    return ExportedProgram(
        root=state.gm,
        graph=state.gm.graph,
        graph_signature=state.signature,
        state_dict=_state_dict(state),
        range_constraints=dict(state.range_constraints),
        module_call_graph=_module_call_graph(state),
        example_inputs=(state.args, state.kwargs),
        constants=dict(state.constants),
        verifiers=[training_dialect()] if state.training else None,
    )
