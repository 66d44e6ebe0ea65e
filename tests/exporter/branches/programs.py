"""What the branch and loop tests ask of a program: where a marked line is, how many calls
of a higher-order op it holds at every depth, and that it matches eager."""

from __future__ import annotations

import copy

import torch

from exporter.testing import assert_every_side


def marked_line(path: str, marker: str) -> str:
    """``path:N`` of the line of ``path`` carrying ``line-marker: <marker>``."""
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if f"line-marker: {marker}" in line:
                return f"{path}:{i}"
    raise AssertionError(marker)


def calls_of(program: torch.export.ExportedProgram, target) -> int:
    """Calls of ``target`` (torch.cond, torch.while_loop) at every depth of the program."""
    return sum(
        node.target is target
        for module in program.graph_module.modules()
        if isinstance(module, torch.fx.GraphModule)
        for node in module.graph.nodes
    )


def matches_eager(
    program, model, inputs: list[tuple], rtol: float = 0, atol: float = 0, empty_loops: bool = True
) -> None:
    """The program (one module, its state carried from call to call) against a copy of the
    exported model fed the same inputs in the same order; and the inputs take every side of
    every cond of the program and go round each while_loop more than once and (with
    ``empty_loops``: its tensor may be empty) no times, so that the comparison covers all of it."""
    assert_every_side(program, inputs, empty_loops=empty_loops)
    eager, ours = copy.deepcopy(model), program.module()
    for args in inputs:
        torch.testing.assert_close(ours(*args), eager(*args), rtol=rtol, atol=atol)
