"""Where the two sides of a branch meet again in the model's source.

A decision is asked by one statement of the model's code: ``if mask.any():``, ``y = a if
t.sum() > 0 else b``.  Whichever way it goes, Python goes on after that statement, so the
runs that took its two values can agree again from there (the statement's post-dominator),
and the branch need hold only what the statement does, not the rest of the function.  Where
a side leaves the statement early, the meeting point is further out:

- ``continue`` goes on with the loop's next step, so the sides meet at the end of this step;
- ``break`` leaves the loop, so they meet after it;
- ``return`` or ``yield`` leaves the function: no meeting point inside it (the region ends
  where the call returns).

A ``Meeting`` tells, for a node made later in the same run, whether the frame that asked is
still inside that extent.  It is a hint for where to look: the join still compares the runs
node by node from there and grows the region where they differ, so a point guessed too
early costs a comparison, never a wrong program."""

from __future__ import annotations

import ast
import linecache
from types import CodeType, FrameType
from typing import Any

import attrs

__all__ = ["Meeting", "has_else", "leaves_by_break", "meeting", "statement_at"]


@attrs.define(eq=False)
class Meeting:
    """The extent of the code a decision's sides may differ in, in one frame: lines
    ``first``..``last``, instructions after ``after`` (the test that asked; None: any, for a
    whole loop, whose steps go back before it), while the targets of the loops around it
    hold the values they held when it was asked."""

    frame: FrameType
    first: int
    last: int
    after: int | None
    targets: tuple[tuple[str, Any], ...]
    """(name, the object it was bound to) for each loop variable around the extent: a step of
    the loop binds them anew, which ends the extent."""
    key: str = ""
    """The name nodes made inside it carry in their stacks."""

    def holds(self, frame: FrameType) -> bool:
        """Whether ``frame`` (this meeting's frame, seen on the stack as a node is made) is
        still inside the extent."""
        if not self.first <= frame.f_lineno <= self.last:
            return False
        if self.after is not None and frame.f_lasti <= self.after:
            return False
        names = frame.f_locals if self.targets else {}
        return all(names.get(name, _UNBOUND) is value for name, value in self.targets)


_UNBOUND = object()


def meeting(frame: FrameType) -> Meeting | None:
    """Where the sides of a decision asked now by ``frame``'s current statement meet again;
    None where they meet only as the call returns (a ``return`` inside, the test of a
    ``while``) or the source is not to be had."""
    code = frame.f_code
    tree, parents = _parsed(code.co_filename)
    position = _position(code, frame.f_lasti) if tree is not None else None
    statement = _innermost(tree, position) if position is not None else None
    if statement is None or isinstance(statement, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return None  # a loop's own test or items: a loop the data ends, not a branch
    jumps = _jumps(statement)
    loops = _loops_around(parents, statement)
    if "return" in jumps or (jumps and not loops):
        return None
    if "break" in jumps:  # after the loop: the loops around it must stay on their step
        return _meeting(frame, loops[0].lineno, loops[0].end_lineno, None, loops[1:])
    if "continue" in jumps:  # at the loop's next step
        return _meeting(frame, loops[0].body[0].lineno, loops[0].body[-1].end_lineno, frame.f_lasti, loops)
    return _meeting(frame, statement.lineno, statement.end_lineno, frame.f_lasti, loops)


def leaves_by_break(frame: FrameType) -> bool:
    """Whether ``frame`` is at a ``break`` statement (Python drops a ``for`` loop's iterator
    there, before it jumps past the loop)."""
    return isinstance(statement_at(frame), ast.Break)


def statement_at(frame: FrameType) -> ast.stmt | None:
    """The innermost statement of the model's source ``frame`` runs now, where it can be read."""
    code = frame.f_code
    tree, _ = _parsed(code.co_filename)
    position = _position(code, frame.f_lasti) if tree is not None else None
    return _innermost(tree, position) if position is not None else None


def has_else(frame: FrameType) -> bool:
    """Whether the ``for`` statement ``frame`` is at has an ``else:`` block (which runs only
    where the loop ends without a ``break``); True where the source is not to be had."""
    statement = statement_at(frame)
    return not isinstance(statement, (ast.For, ast.AsyncFor)) or bool(statement.orelse)


def _meeting(frame: FrameType, first: int, last: int, after: int | None, loops: list[ast.AST]) -> Meeting:
    """The extent ``first``..``last`` of ``frame``, inside the steps the ``loops`` are on."""
    names = frame.f_locals
    targets = tuple(
        (node.id, names[node.id])
        for loop in loops if isinstance(loop, (ast.For, ast.AsyncFor))
        for node in ast.walk(loop.target) if isinstance(node, ast.Name) and node.id in names
    )
    return Meeting(frame, first, last, after, targets)


_TREES: dict[str, tuple[tuple[str, ...], ast.Module | None, dict[ast.AST, ast.AST]]] = {}
"""File name -> (its lines when parsed, its syntax tree, each node's parent)."""


def _parsed(filename: str) -> tuple[ast.Module | None, dict[ast.AST, ast.AST]]:
    lines = tuple(linecache.getlines(filename))
    known = _TREES.get(filename)
    if known is not None and known[0] == lines:
        return known[1], known[2]
    try:
        tree: ast.Module | None = ast.parse("".join(lines)) if lines else None
    except (SyntaxError, ValueError):
        tree = None
    parents: dict[ast.AST, ast.AST] = {}
    if tree is not None:
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node
    _TREES[filename] = (lines, tree, parents)
    return tree, parents


_POSITIONS: dict[CodeType, list] = {}


def _position(code: CodeType, lasti: int) -> tuple[int, int] | None:
    """The (line, column) of the instruction at byte offset ``lasti``."""
    positions = _POSITIONS.get(code)
    if positions is None:
        if len(_POSITIONS) > 10_000:
            _POSITIONS.clear()
        positions = _POSITIONS[code] = list(code.co_positions())
    index = lasti // 2
    if not 0 <= index < len(positions):
        return None
    line, _, column, _ = positions[index]
    if line is None or column is None:
        return None
    return line, column


def _innermost(tree: ast.Module, position: tuple[int, int]) -> ast.stmt | None:
    """The innermost statement whose source holds ``position``."""
    found = None
    nodes: list[ast.AST] = list(tree.body)
    while nodes:
        node = nodes.pop()
        if not isinstance(node, ast.stmt):
            continue
        if (node.lineno, node.col_offset) <= position < (node.end_lineno, node.end_col_offset):
            found = node
            nodes = [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt)]
    return found


def _jumps(statement: ast.stmt) -> set[str]:
    """The ways out of ``statement`` other than its end: ``return`` (also ``yield``),
    ``break`` and ``continue`` to a loop around it."""
    found: set[str] = set()

    def visit(node: ast.AST, in_loop: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)):
            found.add("return")
        elif isinstance(node, ast.Break) and not in_loop:
            found.add("break")
        elif isinstance(node, ast.Continue) and not in_loop:
            found.add("continue")
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, in_loop)
            visit(node.target if not isinstance(node, ast.While) else node.test, in_loop)
            if not isinstance(node, ast.While):
                visit(node.iter, in_loop)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, in_loop)

    visit(statement, False)
    return found


def _loops_around(parents: dict[ast.AST, ast.AST], statement: ast.stmt) -> list[ast.AST]:
    """The loops whose body holds ``statement``, innermost first, up to its function."""
    loops = []
    node: ast.AST = statement
    while node in parents:
        parent = parents[node]
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            break
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.While)) and node in parent.body:
            loops.append(parent)
        node = parent
    return loops

