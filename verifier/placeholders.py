"""Placeholder names follow the kind prefixes of the signature."""

from __future__ import annotations

import torch
from torch.export.graph_signature import InputKind

from exporter._errors import VerificationError

__all__ = ["verify_placeholder_names", "verify_placeholders_match_specs", "KIND_PREFIXES"]

KIND_PREFIXES = {
    InputKind.PARAMETER: "p_",
    InputKind.BUFFER: "b_",
    InputKind.CONSTANT_TENSOR: "c_",
    InputKind.CUSTOM_OBJ: "obj_",
    InputKind.TOKEN: "token",
}


def verify_placeholders_match_specs(gm: torch.fx.GraphModule, input_specs) -> None:
    """Placeholders and input specs correspond one to one, in order."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    names = [spec.arg.name for spec in input_specs]
    for i, node in enumerate(placeholders):
        if i >= len(names) or names[i] != node.name:
            raise VerificationError(
                f"placeholder {node.name} has no input spec"
                + (f" (spec {i} describes {names[i]!r})" if i < len(names) else ""),
                rule="placeholder-has-spec",
                node=node.name,
            )
    if len(names) > len(placeholders):
        raise VerificationError(
            f"input spec {names[len(placeholders)]!r} has no placeholder",
            rule="placeholder-has-spec",
        )


def verify_placeholder_names(gm: torch.fx.GraphModule, input_specs) -> None:
    """Each non-user placeholder's name starts with its kind's prefix (p_, b_, c_, obj_, token)."""
    verify_placeholders_match_specs(gm, input_specs)
    kinds = {spec.arg.name: spec.kind for spec in input_specs}
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        kind = kinds[node.name]
        prefix = KIND_PREFIXES.get(kind)
        if prefix is not None and not node.name.startswith(prefix):
            raise VerificationError(
                f"placeholder {node.name} is a {kind.name} input; its name must start with {prefix!r}",
                rule="placeholder-prefix",
                node=node.name,
            )
