"""Placeholder names follow the kind prefixes of the signature."""

from __future__ import annotations

import torch
from torch.export.graph_signature import InputKind

from exporter._errors import VerificationError

__all__ = ["verify_placeholder_names", "KIND_PREFIXES"]

KIND_PREFIXES = {
    InputKind.PARAMETER: "p_",
    InputKind.BUFFER: "b_",
    InputKind.CONSTANT_TENSOR: "c_",
    InputKind.CUSTOM_OBJ: "obj_",
    InputKind.TOKEN: "token",
}


def verify_placeholder_names(gm: torch.fx.GraphModule, input_specs) -> None:
    """Each non-user placeholder's name starts with its kind's prefix (p_, b_, c_, obj_, token)."""
    kinds = {spec.arg.name: spec.kind for spec in input_specs}
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        kind = kinds.get(node.name)
        if kind is None:
            raise VerificationError(
                f"placeholder {node.name} has no input spec",
                rule="placeholder-has-spec",
                node=node.name,
            )
        prefix = KIND_PREFIXES.get(kind)
        if prefix is not None and not node.name.startswith(prefix):
            raise VerificationError(
                f"placeholder {node.name} is a {kind.name} input; its name must start with {prefix!r}",
                rule="placeholder-prefix",
                node=node.name,
            )
