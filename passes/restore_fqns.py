"""Make every state target an FQN of the user's module, with the oracle's persistence rules."""

from __future__ import annotations

import torch
from torch.export.graph_signature import InputKind

from exporter._ir import STATE_MUTATIONS

from exporter._errors import PassError
from exporter._state import ExportState
from exporter._torch_internals import own_buffers, own_parameters, own_submodules

__all__ = ["restore_fqns"]


def _lookup(root: torch.nn.Module, fqn: str):
    owner = root
    *path, name = fqn.split(".")
    for atom in path:
        owner = own_submodules(owner).get(atom) if isinstance(owner, torch.nn.Module) else None
        if owner is None:
            return None
    if name in own_parameters(owner):
        return own_parameters(owner)[name]
    if name in own_buffers(owner):
        return own_buffers(owner)[name]
    return vars(owner).get(name)


def restore_fqns(state: ExportState) -> bool:
    """Parameter, buffer and constant targets name the user's own tensors by FQN.

    * Every PARAMETER and BUFFER target resolves, on the original module, to the very
      tensor that was traced, including each alias of a tied weight or shared submodule
      (``named_parameters(remove_duplicate=False)``), so ``ep.state_dict`` holds the
      user's tensors under the user's names; the inner tensors of a tensor-subclass
      parameter are named ``parametrizations.<name>.original<i>``, as torch.export names them.
    * Buffers registered with ``persistent=False`` are marked ``persistent=False`` and
      their values move to ``constants``, out of the state dict, as torch.export does.
    * Mutation outputs target the same FQNs as the inputs they update.
    """
    changed = False
    root = state.root
    persistent_state = dict(root.named_parameters(remove_duplicate=False))
    persistent_state.update(root.named_buffers(remove_duplicate=False))
    for spec in state.input_specs:
        if spec.kind not in (InputKind.PARAMETER, InputKind.BUFFER):
            continue
        value = state.subclass_leaves.get(spec.target)
        if value is None:
            value = _lookup(root, spec.target)
        if value is None or value is not persistent_state.get(spec.target, state.subclass_leaves.get(spec.target)):
            raise PassError(
                f"input {spec.arg.name} targets {spec.target!r}, which is not a "
                f"{spec.kind.name.lower()} of {type(root).__name__}",
                pass_name="restore_fqns",
            )
        if spec.kind == InputKind.BUFFER and spec.persistent is False:
            if state.constants.get(spec.target) is not value:
                state.constants[spec.target] = value
                changed = True
    input_targets = {s.target for s in state.input_specs if s.target is not None}
    for spec in state.output_specs:
        if spec.kind in STATE_MUTATIONS:
            if spec.target not in input_targets:
                raise PassError(
                    f"output {spec.arg.name} updates {spec.target!r}, which no input reads",
                    pass_name="restore_fqns",
                )
    return changed
