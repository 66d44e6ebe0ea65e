"""Inputs for ``--verify`` at other sizes than the example's: the edges and the inside of each
dynamic size's range.

A dynamic program is most often wrong away from the example sizes (a size the trace took
as a constant, a broadcast that only held at the example), so ``--verify`` also compares it
with eager with every size at its minimum, at its maximum, and at random sizes in between.
Sizes are chosen per symbol of the program's input shapes, so inputs sharing a Dim get the
same size and a derived Dim (``2*seq``) follows its root.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
import sympy
import torch
import torch.utils._pytree as pytree

from .analysis import expr_text
from .loading import redraw_like

__all__ = ["SizeDraw", "size_draws"]

_SCAN = 1024
"""How far from a range's edge to look for a size every derived size accepts."""
_UNBOUNDED_FACTOR = 4
"""An unbounded size's "max" is this many times its example size."""
_LARGEST = 512
_LARGEST_FACTOR = 8
"""A declared max beyond both ``_LARGEST`` and ``_LARGEST_FACTOR`` times the example size is not
run (``seq:..131072`` would have eager attend over 131072 positions): the largest size drawn is
the larger of the two, and the run says which max it left out."""


@attrs.frozen
class SizeDraw:
    """One set of input sizes: a label (``max``) and each size symbol's value."""

    label: str
    values: dict[Any, int]
    not_run: dict[Any, int] = attrs.field(factory=dict)
    """For a ``large`` draw: the declared maxima left out as too large to run, by symbol."""

    def text(self, names: dict[Any, str]) -> str:
        sizes = " ".join(f"{expr_text(s, names)}={v}" for s, v in self.values.items())
        skipped = ", ".join(f"{expr_text(s, names)} {v}" for s, v in self.not_run.items())
        return f"{self.label} {sizes}" + (f" (max {skipped} not run)" if skipped else "")


def _input_shapes(program: torch.export.ExportedProgram) -> list[list[Any] | None]:
    """The symbolic shape of every user input (None for a constant), in flat input order."""
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    shapes = []
    for spec in program.graph_signature.input_specs:
        if spec.kind.name != "USER_INPUT":
            continue
        val = nodes[spec.arg.name].meta.get("val") if getattr(spec.arg, "name", None) in nodes else None
        shapes.append(
            [s.node.expr if isinstance(s, torch.SymInt) else sympy.Integer(s) for s in val.shape]
            if isinstance(val, torch.Tensor)
            else None
        )
    return shapes


def _bounds(program: torch.export.ExportedProgram, expr: Any) -> tuple[int, int | None]:
    vr = program.range_constraints.get(expr)
    if vr is None:
        return 0, None
    try:
        high = int(vr.upper)
    except (TypeError, OverflowError, ValueError, AttributeError):
        high = None  # unbounded
    return int(vr.lower), high


def _fits(program: torch.export.ExportedProgram, exprs: list[Any], values: dict[Any, int]) -> bool:
    """Every size expression, at these symbol values, within its own range and not negative."""
    for expr in exprs:
        if not expr.free_symbols <= set(values):
            continue
        value = int(expr.xreplace({s: sympy.Integer(v) for s, v in values.items()}))
        low, high = _bounds(program, expr) if expr in program.range_constraints else (0, None)
        if value < low or (high is not None and value > high):
            return False
    return True


def size_draws(
    program: torch.export.ExportedProgram, examples: list[Any], randoms: int = 2, seed: int = 0
) -> list[SizeDraw]:
    """Sets of sizes for the symbols of the program's input shapes: all at their minimum, all
    at their maximum (``4x`` the example size when unbounded; a max too large to run is
    replaced by a ``large`` size, see ``_LARGEST``), and ``randoms`` random draws,
    each size an integer every expression of it accepts. ``examples`` are the flat example
    inputs, whose sizes give each symbol's example value. Empty for a static program."""
    shapes = _input_shapes(program)
    exprs = list(dict.fromkeys(e for shape in shapes if shape for e in shape if not e.is_number))
    example: dict[Any, int] = {}
    for shape, leaf in zip(shapes, examples):
        if shape and isinstance(leaf, torch.Tensor):
            for expr, size in zip(shape, leaf.shape):
                if isinstance(expr, sympy.Symbol):
                    example.setdefault(expr, int(size))
    symbols = sorted({s for e in exprs for s in e.free_symbols}, key=str)
    if not symbols or any(s not in example for s in symbols):
        return []
    ranges, too_large = {}, {}
    for s in symbols:
        low, high = _bounds(program, s)
        if high is None:
            high = max(example[s] * _UNBOUNDED_FACTOR, low + 1)
        largest = max(example[s] * _LARGEST_FACTOR, _LARGEST, low)
        if high > largest:
            too_large[s] = high
            high = largest
        ranges[s] = (low, high)

    def pick(start: int, step: int, s: Any, chosen: dict[Any, int]) -> int | None:
        low, high = ranges[s]
        value = start
        for _ in range(_SCAN):
            if value < low or value > high:
                return None
            if _fits(program, exprs, {**chosen, s: value}):
                return value
            value += step
        return None

    draws = []
    generator = random.Random(seed)
    plans = [("min", lambda s: (ranges[s][0], 1)), ("max", lambda s: (ranges[s][1], -1))]
    plans += [(f"random #{i}", lambda s: (generator.randint(*ranges[s]), 1)) for i in range(1, randoms + 1)]
    for label, start in plans:
        chosen: dict[Any, int] = {}
        for s in symbols:
            begin, step = start(s)
            value = pick(begin, step, s, chosen)
            if value is None:
                value = pick(begin, -step, s, chosen)
            if value is None:
                break
            chosen[s] = value
        else:
            if chosen != example and all(chosen != d.values for d in draws):
                if label == "max" and too_large:
                    draws.append(SizeDraw("large", chosen, too_large))
                else:
                    draws.append(SizeDraw(label, chosen))
    return draws


def _resized(leaf: Any, shape: list[Any] | None, values: dict[Any, int]) -> Any:
    """The example tensor's values tiled into the new shape (so its value range stays)."""
    if shape is None or not isinstance(leaf, torch.Tensor):
        return leaf
    size = [int(e.xreplace({s: sympy.Integer(v) for s, v in values.items()})) for e in shape]
    if leaf.device.type == "meta":
        return torch.empty(size, dtype=leaf.dtype, device="meta")
    numel = 1
    for n in size:
        numel *= n
    flat = leaf.detach().reshape(-1)
    if flat.numel() == 0:
        return torch.zeros(size, dtype=leaf.dtype)
    repeats = -(-numel // flat.numel())
    return flat.repeat(repeats)[:numel].reshape(size).clone()


def inputs_at(
    program: torch.export.ExportedProgram, flat: list[Any], in_spec: pytree.TreeSpec, draw: SizeDraw, seed: int
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` like the example inputs (``flat`` leaves, ``in_spec``) at ``draw``'s
    sizes, values drawn afresh within each example tensor's own range."""
    shapes = _input_shapes(program)
    leaves = [_resized(leaf, shape, draw.values) for leaf, shape in zip(flat, shapes)]
    args, kwargs = pytree.tree_unflatten(leaves, in_spec)
    return redraw_like((args, kwargs), seed)
