"""Placeholders correspond to the input specs, and their names follow their kind's prefix."""

from __future__ import annotations

import torch

from exporter._errors import VerificationError
from exporter._ir import PLACEHOLDER_PREFIXES

__all__ = ["verify_placeholder_names", "verify_placeholders_match_specs"]


def _placeholders(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def verify_placeholders_match_specs(gm: torch.fx.GraphModule, input_specs) -> None:
    """Placeholders and input specs correspond one to one, in order, by name."""
    placeholders = _placeholders(gm)
    names = [spec.arg.name for spec in input_specs]
    if len(placeholders) != len(names):
        raise VerificationError(
            f"the graph has {len(placeholders)} placeholders but the signature {len(names)} input specs",
            rule="input-spec-count",
        )
    for i, (node, name) in enumerate(zip(placeholders, names)):
        if node.name != name:
            found = "is described by another input spec" if node.name in names else "has no input spec"
            raise VerificationError(
                f"placeholder {node.name} {found}: input spec {i} describes {name!r}",
                rule="input-spec-order",
                node=node.name,
            )


def verify_placeholder_names(gm: torch.fx.GraphModule, input_specs) -> None:
    """Each placeholder's name starts with its kind's prefix (p_, b_, c_, obj_, token).

    Placeholders are paired with specs in order; ``verify_placeholders_match_specs``
    checks that the pairing is one to one."""
    for node, spec in zip(_placeholders(gm), input_specs):
        prefix = PLACEHOLDER_PREFIXES.get(spec.kind, "")
        if not node.name.startswith(prefix):
            raise VerificationError(
                f"placeholder {node.name} is a {spec.kind.name} input; its name must start with {prefix!r}",
                rule="placeholder-prefix",
                node=node.name,
            )
