"""Which sides of a program's conds and how many steps of its while_loops some inputs take:
what a test of a program with captured branches must show before it claims every side.

    from exporter.testing import assert_every_side, sides_taken

    assert_every_side(program, [(x,), (-x,)])       # each cond took both sides
    print(sides_taken(program, [(x,)]).missing())    # what no input reached
"""

from __future__ import annotations

import copy
import linecache
from collections.abc import Iterable
from typing import Any

import attrs
import torch
import torch.utils._pytree as pytree

from .._ir import node_frame

__all__ = ["Sides", "assert_every_side", "count_sides", "sides_taken"]


@attrs.define
class Sides:
    """The sides each cond took and the step counts each while_loop went round, by place: a
    cond or loop inside another's side or body counts apart from one elsewhere."""

    conds: dict[str, set[bool]] = attrs.field(factory=dict)
    """``where`` -> the predicate values the cond saw (``True``, ``False``)."""
    loops: dict[str, set[int]] = attrs.field(factory=dict)
    """``where`` -> how many times the while_loop went round, each time it ran."""
    lines: dict[str, str] = attrs.field(factory=dict)
    """``where`` -> the user's line the cond or loop came from (``model.py:12 `if x.sum() > 0:```)."""

    def missing(self, loops: bool = True, empty_loops: bool = True) -> list[str]:
        """What no input reached, in words: a cond's side never taken; with ``loops``, a
        while_loop never gone round more than once, or (with ``empty_loops``, for loops over
        a tensor that may be empty) no times."""
        found = []
        for where, seen in self.conds.items():
            for side in (True, False):
                if side not in seen:
                    found.append(f"the cond at {self._at(where)} never took its {str(side).lower()} side")
        if loops:
            for where, counts in self.loops.items():
                if empty_loops and 0 not in counts:
                    found.append(f"the while_loop at {self._at(where)} never went round no times")
                if not any(c >= 2 for c in counts):
                    found.append(f"the while_loop at {self._at(where)} never went round more than once")
        return found

    def _at(self, where: str) -> str:
        line = self.lines.get(where)
        return f"{line} ({where})" if line else where


def sides_taken(program: torch.export.ExportedProgram, inputs: Iterable[Any]) -> Sides:
    """Run ``program`` on each of ``inputs`` (an argument tuple, or ``(args, kwargs)`` where
    the second is a dict) node by node, recording the side each cond takes and the steps
    each while_loop makes.  The program's state (a buffer it writes) carries from one input
    to the next, as in one ``program.module()``, on a copy: the program is left as it was."""
    module = copy.deepcopy(program.module())
    sides = Sides()
    for given in inputs:
        count_sides(module, sides, given)
    return sides


def count_sides(module: torch.nn.Module, sides: Sides, given: Any) -> list[Any]:
    """Run ``module`` (a program's ``module()``, which this may change: a buffer it writes) on
    one input (as ``sides_taken`` takes them), adding to ``sides`` what it reached; return the
    program's outputs, flat."""
    args, kwargs = _split(given)
    flat = pytree.tree_leaves((tuple(args), dict(kwargs)))
    with torch.no_grad():
        return _Interpreter(module, sides, "").run(*flat)


def assert_every_side(
    program: torch.export.ExportedProgram, inputs: Iterable[Any], *, loops: bool = True, empty_loops: bool = True
) -> Sides:
    """Fail unless ``inputs`` take every side of every cond of ``program`` (and, with
    ``loops``, go round each while_loop more than once and, with ``empty_loops``, no times:
    turn it off where the tensor looped over is never empty); return what they took."""
    __tracebackhide__ = True
    sides = sides_taken(program, inputs)
    missing = sides.missing(loops=loops, empty_loops=empty_loops)
    if missing:
        raise AssertionError("the inputs do not reach every side: " + "; ".join(missing))
    return sides


def _split(given: Any) -> tuple[tuple, dict]:
    if isinstance(given, tuple) and len(given) == 2 and isinstance(given[0], tuple) and isinstance(given[1], dict):
        return given
    return (tuple(given) if isinstance(given, (tuple, list)) else (given,)), {}


class _Interpreter(torch.fx.Interpreter):
    """Runs a graph, taking each cond's side and each while_loop's steps in Python so it can
    count them (and runs the sides and bodies the same way)."""

    def __init__(self, module: torch.nn.Module, sides: Sides, prefix: str) -> None:
        super().__init__(module)
        self.sides, self.prefix = sides, prefix
        self.node: torch.fx.Node | None = None

    def run_node(self, n: torch.fx.Node) -> Any:
        self.node = n
        return super().run_node(n)

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        if target is torch.ops.higher_order.cond:
            predicate, true_side, false_side, operands = args
            value = bool(predicate)
            where = self._where(true_side, false_side)
            self.sides.conds.setdefault(where, set()).add(value)
            side = true_side if value else false_side
            return _Interpreter(side, self.sides, f"{where}/{str(value).lower()}:").run(*operands)
        if target is torch.ops.higher_order.while_loop:
            condition, body, carried, additional = args
            where = self._where(body)
            steps = 0
            carried = tuple(carried)
            while bool(_Interpreter(condition, self.sides, f"{where}/condition:").run(*carried, *additional)):
                carried = tuple(_Interpreter(body, self.sides, f"{where}/body:").run(*carried, *additional))
                steps += 1
            self.sides.loops.setdefault(where, set()).add(steps)
            return carried
        return super().call_function(target, args, kwargs)

    def _where(self, *inside: torch.nn.Module) -> str:
        """The cond's or loop's place, and its user line: that of the cond's predicate (the
        line that decided), the node's own, or else the first line the nodes of its sides or
        body came from."""
        node = self.node
        where = f"{self.prefix}{node.name}"
        if where not in self.sides.lines:
            predicate = node.args[0] if node.target is torch.ops.higher_order.cond and node.args else None
            frame = node_frame(predicate) if isinstance(predicate, torch.fx.Node) else None
            frame = frame or node_frame(node)
            for graph in (m.graph for m in inside if isinstance(m, torch.fx.GraphModule)):
                frame = frame or next((f for f in map(node_frame, graph.nodes) if f is not None), None)
            if frame is not None:
                code = frame.line or linecache.getline(frame.filename, frame.lineno).strip()
                self.sides.lines[where] = f"{frame.filename}:{frame.lineno}" + (f" `{code}`" if code else "")
        return where
