"""Comparing two runs as general and special: the general run's symbols stand for the special
run's values, sizes compare by what they compute, and decisions fix symbols."""

from __future__ import annotations

import operator

import attrs
import sympy
import torch
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from exporter.branches.general import Generality, compose, facts, is_copy, is_size


def _unbacked(count: int) -> list[sympy.Symbol]:
    shape_env = ShapeEnv()
    return [shape_env.create_unbacked_symint().node.expr for _ in range(count)]


@attrs.define
class _Decision:
    expression: sympy.Basic
    value: bool


def test_a_decision_that_a_size_is_zero_fixes_it():
    u0, u1, u2 = _unbacked(3)
    found = facts([
        _Decision(sympy.Eq(4 * u0, 0), True),  # held: u0 is 0
        _Decision(sympy.Ne(u1 + 2, 5), False),  # not held: u1 is 3
        _Decision(sympy.Eq(u2, 0), False),  # not held: says nothing of u2's value
        _Decision(u0 > 3, True),  # not an equality
    ])
    assert found == {u0: 0, u1: 3}


def test_a_general_symbol_is_bound_on_first_meeting_and_checked_after():
    u0, u1 = _unbacked(2)
    gen = Generality("b")
    assert gen.same(u0, sympy.Integer(0))  # u0 of the general run is 0 in the special run
    assert gen.same(4 * u0 + 2, sympy.Integer(2))
    assert not gen.same(u0, sympy.Integer(1))
    assert gen.same(u1, u0)  # a symbol the special run has too
    assert gen.in_special(u1 * 2) == 2 * u0
    assert gen.tainted() == {u0}


def test_a_special_runs_facts_apply_to_what_its_values_are():
    u0, u1 = _unbacked(2)
    gen = Generality("b", facts={u1: sympy.Integer(0)})
    assert gen.same(u0, u1)  # u1 is 0 in the special run, so u0 stands for 0
    assert gen.values == {u0: 0}
    assert gen.in_special(u0 > 0) == sympy.false
    assert not gen.same(u0, sympy.Integer(1))


def test_a_symbol_the_comparison_never_met_is_not_known():
    (u0,) = _unbacked(1)
    assert Generality("a").in_special(u0 + 1) is None


def test_composing_maps_a_run_through_another_to_a_third():
    u0, u1, u2 = _unbacked(3)
    assert compose({u1: sympy.Integer(0)}, {u0: u1 + 1, u2: u2}) == {u0: 1}


def test_sizes_and_copies_are_told_apart_from_other_nodes():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(3)
    size = graph.call_function(torch.ops.aten.sym_size.int, (x, 0))
    size.meta["val"] = ShapeEnv().create_unbacked_symint()
    doubled = graph.call_function(operator.mul, (size, 2))
    doubled.meta["val"] = size.meta["val"] * 2
    copy = graph.call_function(torch.ops.aten.clone.default, (x,))
    relu = graph.call_function(torch.ops.aten.relu.default, (x,))
    assert is_size(size) and is_size(doubled) and not is_size(copy) and not is_size(relu)
    assert is_copy(copy) and not is_copy(relu) and not is_copy(x)
