"""``check --shard K/N``: a deterministic, balanced share of the models for one CI machine.

Every shard computes the same split from the same inputs (the model list and the baseline),
so N machines each running their K cover every model exactly once without talking to each
other. Balanced by the durations the baseline recorded when it has them (longest first,
each to the least loaded shard), else by count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .._errors import InputSpecError

__all__ = ["parse_shard", "split"]

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> ``(2, 4)``: the second of four shares, counted from 1 as CI matrices are."""
    match = _SHARD.match(text)
    if not match:
        raise InputSpecError(f"--shard {text!r} is not of the form K/N", hint="write --shard 1/4 ... --shard 4/4")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise InputSpecError(f"--shard {text}: K must be between 1 and N", hint=f"write --shard 1/{max(count, 1)} ... --shard {max(count, 1)}/{max(count, 1)}")
    return index, count


def split(references: Sequence[str], count: int, durations: dict[str, float] | None = None) -> list[list[str]]:
    """``references`` in ``count`` disjoint shares covering all of them, each in the given order.

    With ``durations`` (seconds by reference, from the baseline), models are placed longest
    first on the least loaded share; a model without a recorded duration counts as the
    average of those recorded. Without any, every model weighs the same: shares differ in
    size by at most one. Ties go to the lower share, in reference order: the split depends
    only on its inputs.
    """
    known = {r: float(s) for r, s in (durations or {}).items() if r in references and s is not None and s >= 0}
    default = sum(known.values()) / len(known) if known else 1.0
    weight = {r: known.get(r, default) for r in references}
    loads = [0.0] * count
    members: list[set[str]] = [set() for _ in range(count)]
    for reference in sorted(references, key=lambda r: (-weight[r], r)):
        share = min(range(count), key=lambda i: (loads[i], len(members[i]), i))
        members[share].add(reference)
        loads[share] += weight[reference]
    return [[r for r in references if r in share] for share in members]
