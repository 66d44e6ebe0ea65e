"""The other sides of a zoo program's captured decisions: inputs that take them, and the
program held to eager on those inputs.

A program whose forward branched on a tensor's value holds a ``torch.cond`` per place the
runs parted.  The zoo's example takes one side of each; this module makes inputs that may
take the other: the example with each input changed in one way a real input differs (a mask
with its second half masked, or all zeros or ones; token ids ending in padding; a float
input negated, zeroed, scaled up or down).  The program runs each of them node by node,
which tells which way each cond went (and each inside the side it took); the inputs where
one went the other way are the ones that test a side the example did not, and the program
must match eager on each.
Where no input can (a detector with random weights finds boxes in every image), a family
may give other weights instead (``Built.weights``): the program's weights are its inputs
too, so it runs the example with them beside eager.

``other_sides(model, kwargs, program, compare)`` gives the verdict the zoo records.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import torch
import torch.utils._pytree as pytree

__all__ = ["Sides", "candidates", "decisions_taken", "other_sides"]


@attrs.define
class Sides:
    """What the other-side check found for one program."""

    conds: int
    """Top-level conds in the program."""
    other: int = 0
    """Changed inputs eager accepts on which some cond went another way than on the example."""
    mismatch: str | None = None
    """The first difference from eager on such an input, with the change that made it."""

    def describe(self) -> str:
        if self.mismatch:
            return f"other side differs: {self.mismatch}"
        if not self.other:
            return f"{self.conds} cond(s), no generated input takes another side"
        return f"{self.conds} cond(s), other side matches eager on {self.other} input(s)"


class _Recording(torch.fx.Interpreter):
    """Runs a graph node by node, noting each cond's predicate, those of the conds inside the
    side it takes after it: a cond on a concrete predicate runs that side, and so does this."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.taken: list[bool] = []

    def call_function(self, target, args, kwargs):
        if target is not torch.ops.higher_order.cond:
            return super().call_function(target, args, kwargs)
        predicate, if_true, if_false, operands = args
        taken = bool(predicate)
        side = _Recording(if_true if taken else if_false)
        out = side.run(*operands)
        self.taken += [taken, *side.taken]
        return out


def conds_in(program: torch.export.ExportedProgram) -> int:
    return sum(1 for n in program.graph.nodes if n.op == "call_function" and n.target is torch.ops.higher_order.cond)


def decisions_taken(module: torch.fx.GraphModule, kwargs: dict[str, Any]) -> tuple[Any, list[bool]]:
    """The output of ``module`` (``program.module()``) on ``kwargs``, and which way each of
    its conds went, in the order they ran.  ``kwargs`` keep the example's keys in its order, as the
    program's input spec flattened them."""
    flat = pytree.tree_leaves(((), kwargs))
    recording = _Recording(module)
    out = recording.run(*flat, enable_io_processing=False)
    spec = getattr(module, "_out_spec", None)
    return (pytree.tree_unflatten(list(out), spec) if spec is not None else out), recording.taken


def _pad_id(config: Any) -> int | None:
    for holder in (config, getattr(config, "text_config", None), getattr(config, "decoder", None)):
        pad = getattr(holder, "pad_token_id", None) if holder is not None else None
        if isinstance(pad, int):
            return pad
    return None


def candidates(kwargs: dict[str, Any], config: Any = None) -> list[tuple[str, dict[str, Any]]]:
    """The example with one input changed, each way a real input may differ from it."""
    out: list[tuple[str, dict[str, Any]]] = []
    pad = _pad_id(config)

    def changed(name: str, value: torch.Tensor, how: str) -> None:
        out.append((f"{name} {how}", {**kwargs, name: value}))

    for name, value in kwargs.items():
        if not isinstance(value, torch.Tensor) or value.numel() == 0:
            continue
        if value.dtype == torch.bool or ("mask" in name and not value.is_floating_point()):
            half = value.clone()
            half[..., value.shape[-1] // 2:] = 0
            changed(name, half, "with its second half masked")
            changed(name, torch.zeros_like(value), "all zeros")
            changed(name, torch.ones_like(value), "all ones")
        elif not value.is_floating_point() and name.endswith("ids") and pad is not None and value.dim() >= 1:
            padded = value.clone()
            padded[..., (value.shape[-1] + 1) // 2:] = pad
            changed(name, padded, "ending in padding")
        elif value.is_floating_point():
            for how, new in (("negated", -value), ("zeroed", value * 0), ("scaled by 100", value * 100),
                             ("scaled by 0.01", value * 0.01)):
                changed(name, new, how)
    return out


def _with_weights(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> torch.nn.Module:
    """A copy of ``program.module()`` holding the weights ``state`` changes (by the model's
    names, which the program keeps)."""
    module = copy.deepcopy(module)
    own = module.state_dict()
    missing = sorted(k for k in state if k not in own)
    if missing:
        raise KeyError(f"the program has no weight named {missing[0]}")
    module.load_state_dict(state, strict=False)
    return module


def other_sides(
    model: torch.nn.Module,
    kwargs: dict[str, Any],
    program: torch.export.ExportedProgram,
    compare: Callable[[Any, Any], tuple[str | None, float]],
    weights: Sequence[tuple[str, dict[str, torch.Tensor]]] = (),
) -> Sides | None:
    """Hold ``program`` to eager on every generated input that takes another side of one of
    its conds, and on the example with each of ``weights`` (what was changed, the changed
    weights by name, the rest the model's own); None for a program without conds."""
    conds = conds_in(program)
    if not conds:
        return None
    sides = Sides(conds)
    module = program.module()
    runs = [(how, changed, lambda kw: model(**kw), module) for how, changed in candidates(kwargs, getattr(model, "config", None))]
    for how, state in weights:
        eager = functools.partial(torch.func.functional_call, model, state, ())  # takes the kwargs dict
        runs.append((how, kwargs, eager, _with_weights(module, state)))
    with torch.no_grad():
        _, example = decisions_taken(module, kwargs)
        for how, changed, run_eager, run_program in runs:
            try:
                expected = run_eager(changed)
            except Exception:
                continue  # the model itself refuses this input: nothing to hold the program to
            try:
                actual, taken = decisions_taken(run_program, changed)
            except Exception as e:  # eager runs this input: the program must too
                first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
                sides.mismatch = f"{how}: the program raises {type(e).__name__}: {first}"
                return sides
            if taken == example:
                continue
            sides.other += 1
            difference, _ = compare(expected, actual)
            if difference is not None:
                sides.mismatch = f"{how}: {difference}"
                return sides
    return sides
