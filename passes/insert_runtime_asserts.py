"""Turn the shape facts the trace could only defer into runtime assertion nodes."""

from __future__ import annotations

import re

import sympy
import torch

from exporter._state import ExportState
from exporter._torch_internals import held_checks, insert_deferred_runtime_asserts

__all__ = ["insert_runtime_asserts"]


def insert_runtime_asserts(state: ExportState) -> bool:
    """Every fact about a data-dependent size (``nonzero``, ``.item()``, ``torch._check``) that
    tracing assumed is checked by an ``aten._assert_scalar`` node when the program runs.

    Facts about input sizes are not asserted in the graph: ``ep.module()`` checks inputs
    against the program's range constraints before running it, as torch.export arranges.
    """
    shape_env = getattr(state.fake_mode, "shape_env", None)
    if shape_env is None or not any(shape_env.deferred_runtime_asserts.values()) and not shape_env.var_to_range:
        return False
    graph = state.gm.graph
    before = len(graph.nodes)
    insert_deferred_runtime_asserts(state.gm, shape_env, "exported program", export=True)
    _say_why(state.gm, held_checks(shape_env))
    for node in graph.nodes:
        if node.op == "call_function":
            node.meta.setdefault("val", None)
    # torch's pass may compute a returned size anew (a fresh sym_size node): the output
    # specs follow the output node, position by position.
    for spec, value in zip(state.output_specs, graph.output_node().args[0]):
        if isinstance(value, torch.fx.Node) and hasattr(spec.arg, "name"):
            spec.arg.name = value.name
    return len(graph.nodes) != before


_TORCHS = re.compile(r"Runtime assertion failed for expression (.*) on node '[^']*'", re.S)


def _say_why(gm: torch.fx.GraphModule, held: list[tuple[sympy.Basic, str]]) -> None:
    """torch's asserts name only an expression (``u1 >= 1``): each that checks a fact held
    because forward raises on its other side, or a bound that fact implies (torch asserts
    ``Eq(u1, 1)`` as ``u1 >= 1`` and ``u1 <= 1`` first), says so, naming the user's line,
    and keeps the expression."""
    if not held:
        return
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.target is not torch.ops.aten._assert_scalar.default or len(node.args) < 2:
                continue
            torchs = _TORCHS.fullmatch(str(node.args[1]))
            if torchs is None:
                continue
            expression = torchs.group(1)
            message = next((m for fact, m in held if str(fact) == expression), None)
            if message is None:
                message = next((m for fact, m in held if _implied(expression, fact)), None)
            if message is not None:
                node.args = (node.args[0], f"{message} [the program checks {expression}]", *node.args[2:])


def _implied(expression: str, fact: sympy.Basic) -> bool:
    """Whether the assert ``expression`` holds wherever ``fact`` does, for a fact about one
    symbol (any other: not known, so not implied)."""
    if len(fact.free_symbols) != 1:
        return False
    (symbol,) = fact.free_symbols
    domain = sympy.S.Integers if symbol.is_integer else sympy.S.Reals
    try:
        asserted = sympy.sympify(expression, locals={str(symbol): symbol})
        if asserted.free_symbols != {symbol}:
            return False
        return sympy.solveset(fact, symbol, domain).is_subset(sympy.solveset(asserted, symbol, domain)) is True
    except (sympy.SympifyError, TypeError, ValueError, NotImplementedError, AttributeError):
        return False  # an expression sympy cannot solve (torch's FloorDiv, Mod, ...)
