"""torch.export's training IR: what a pre-dispatch trace records for grad-mode and
autocast changes and torch.func levels, and the TRAINING dialect a program carries."""

from __future__ import annotations


import torch

__all__ = [
    "ENTER_AUTOCAST",
    "EXIT_AUTOCAST",
    "PREDISPATCH_FUNCTIONS",
    "SET_GRAD_ENABLED",
    "training_dialect",
]


SET_GRAD_ENABLED = torch._C._set_grad_enabled
"""What a pre-dispatch trace records for ``torch.no_grad()``/``enable_grad()`` entry and exit."""
ENTER_AUTOCAST = torch.amp.autocast_mode._enter_autocast
EXIT_AUTOCAST = torch.amp.autocast_mode._exit_autocast
"""What a pre-dispatch trace records for entering and leaving a ``torch.autocast`` block."""


def training_dialect() -> type:
    """The verifier class an ExportedProgram of torch.export's training IR carries as its
    dialect ("TRAINING"): ``ep.run_decompositions`` functionalizes such programs, and the
    ExportedProgram validates with it (mutating ops allowed).  Looked up by dialect name,
    as ``torch.export.load`` does; exporter never calls it."""
    from torch._export.verifier import load_verifier

    return load_verifier("TRAINING")


def _predispatch_functions() -> frozenset:
    import torch._functorch.predispatch as predispatch
    from torch.fx.experimental.symbolic_shapes import cast_symbool_to_symint_guardless

    names = (
        "_add_batch_dim", "_remove_batch_dim", "_vmap_increment_nesting", "_vmap_decrement_nesting",
        "lazy_load_decompositions", "_make_dual", "_unpack_dual", "_jvp_increment_nesting",
        "_jvp_decrement_nesting", "_unwrap_for_grad", "_enter_dual_level", "_exit_dual_level",
    )
    found = {getattr(predispatch, name) for name in names if hasattr(predispatch, name)}
    return frozenset(found | {cast_symbool_to_symint_guardless})


PREDISPATCH_FUNCTIONS = _predispatch_functions()
"""What a pre-dispatch trace records as calls for ``torch.vmap``/``torch.func.jvp`` levels and
batch dims (torch.func transforms run inside the model), kept in torch.export's training IR
and allowed by its TRAINING dialect."""
