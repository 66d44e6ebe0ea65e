"""ExportState -> torch.export.ExportedProgram."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from ._state import ExportState
from ._torch_internals import ModuleCallEntry, ModuleCallSignature

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


def _module_call_graph(state: ExportState) -> list[ModuleCallEntry]:
    entries = [
        ModuleCallEntry(fqn=fqn, signature=None)
        for fqn, _ in state.root.named_modules(remove_duplicate=False)
    ]
    entries[0].signature = ModuleCallSignature(
        inputs=[],
        outputs=[],
        in_spec=state.in_spec,
        out_spec=state.out_spec,
        forward_arg_names=state.forward_arg_names,
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
    )
