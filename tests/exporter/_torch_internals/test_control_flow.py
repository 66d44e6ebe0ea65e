"""What branch capture needs of torch: facts a ShapeEnv takes as known without guarding them,
the value an unbacked symbol is bound to, expressions computed from numbers, the module stack
make_fx is in, and a retrace that keeps the node metadata of the graph it runs."""

import os

import pytest
import sympy
import torch
import torch.utils._pytree as pytree

from exporter import _torch_internals as internals
from exporter._torch_internals import (
    FakeTensorMode,
    GuardOnDataDependentSymNode,
    ShapeEnv,
    control_flow,
)


def _unbacked() -> tuple[ShapeEnv, torch.SymInt, sympy.Symbol]:
    shape_env = ShapeEnv()
    value = shape_env.create_unbacked_symint()
    return shape_env, value, value.node.expr


def _known(shape_env: ShapeEnv, expr: sympy.Basic):
    """What ``shape_env`` can tell about ``expr`` without a guard (None: nothing)."""
    return shape_env._maybe_evaluate_static(expr)


def test_the_helpers_are_reexported_by_the_torch_internals_package():
    for name in control_flow.__all__:
        assert getattr(internals, name) is getattr(control_flow, name)


def test_query_files_are_torchs_own_files_between_bool_and_the_shape_env():
    from torch.fx.experimental import symbolic_shapes

    assert os.path.abspath(symbolic_shapes.__file__) in control_flow.QUERY_FILES
    assert os.path.abspath(torch._tensor.__file__) in control_flow.QUERY_FILES
    assert all(os.path.isabs(f) and f.endswith(".py") for f in control_flow.QUERY_FILES)
    assert os.path.abspath(torch.nn.functional.__file__) not in control_flow.QUERY_FILES


def test_an_assumed_fact_makes_the_shape_env_know_what_follows_from_it():
    shape_env, value, u = _unbacked()
    assert _known(shape_env, sympy.Gt(u, 3)) is None
    control_flow.assume(shape_env, sympy.Gt(u, 3))
    assert _known(shape_env, sympy.Gt(u, 3)) == sympy.true
    assert _known(shape_env, sympy.Le(u, 3)) == sympy.false
    assert bool(value > 3) and not bool(value <= 3)  # answered, not a data-dependent error


def test_an_assumed_fact_is_not_a_guard_or_a_runtime_assert():
    shape_env, value, u = _unbacked()
    control_flow.assume(shape_env, sympy.Eq(u, 2))
    assert bool(value == 2)
    assert shape_env.guards == []
    assert not any(shape_env.deferred_runtime_asserts.values())


def test_a_negated_comparison_is_assumed_as_the_opposite_comparison():
    shape_env, _, u = _unbacked()
    control_flow.assume(shape_env, sympy.Not(sympy.Lt(u, 5)))
    assert _known(shape_env, sympy.Ge(u, 5)) == sympy.true
    assert _known(shape_env, sympy.Lt(u, 5)) == sympy.false


def test_a_boolean_that_is_not_a_comparison_is_not_assumed():
    shape_env, _, u = _unbacked()
    flag = sympy.Symbol("flag")
    control_flow.assume(shape_env, sympy.And(flag, sympy.Gt(u, 0)))
    assert shape_env.axioms == {}


def test_assumed_holds_inside_the_block_only():
    shape_env, value, u = _unbacked()
    with control_flow.assumed(shape_env, sympy.Eq(u, 2)):
        assert _known(shape_env, sympy.Eq(u, 2)) == sympy.true and bool(value == 2)
        assert _known(shape_env, sympy.Ne(u, 2)) == sympy.false
    assert _known(shape_env, sympy.Eq(u, 2)) is None
    assert shape_env.axioms == {}


def test_assumed_leaves_a_fact_known_before_the_block_known_after_it():
    shape_env, _, u = _unbacked()
    control_flow.assume(shape_env, sympy.Gt(u, 3))
    before = dict(shape_env.axioms)
    with control_flow.assumed(shape_env, sympy.Gt(u, 3)):
        pass
    assert shape_env.axioms == before and _known(shape_env, sympy.Gt(u, 3)) == sympy.true


def test_assumptions_undone_restores_what_the_shape_env_knew_before():
    shape_env, value, u = _unbacked()
    control_flow.assume(shape_env, sympy.Ge(u, 0))
    before = dict(shape_env.axioms)
    with control_flow.assumptions_undone(shape_env):
        control_flow.assume(shape_env, sympy.Gt(u, 7))
        assert _known(shape_env, sympy.Gt(u, 7)) == sympy.true
    assert shape_env.axioms == before
    assert _known(shape_env, sympy.Gt(u, 7)) is None
    with pytest.raises(GuardOnDataDependentSymNode):
        bool(value > 7)
    assert bool(value >= 0)  # what it knew before the block it still knows


def test_an_answer_given_inside_assumptions_undone_is_not_given_after_it():
    shape_env, value, u = _unbacked()
    with control_flow.assumptions_undone(shape_env):
        control_flow.assume(shape_env, sympy.Gt(u, 7))
        assert bool(value > 7)
    assert shape_env.axioms == {}
    with pytest.raises(GuardOnDataDependentSymNode):
        bool(value > 7)


def test_an_answer_given_inside_assumed_is_not_given_after_it():
    shape_env, value, u = _unbacked()
    with control_flow.assumed(shape_env, sympy.Eq(u, 2)):
        assert bool(value == 2)
    assert shape_env.axioms == {}
    with pytest.raises(GuardOnDataDependentSymNode):
        bool(value == 2)


def test_assumptions_undone_restores_them_when_the_block_raises():
    shape_env, _, u = _unbacked()
    with pytest.raises(ValueError), control_flow.assumptions_undone(shape_env):
        control_flow.assume(shape_env, sympy.Gt(u, 7))
        raise ValueError
    assert shape_env.axioms == {}


def test_forget_pending_symbols_drops_the_unbound_ones():
    shape_env, _, u = _unbacked()
    assert u in shape_env.pending_fresh_unbacked_symbols
    control_flow.forget_pending_symbols(shape_env)
    assert shape_env.pending_fresh_unbacked_symbols == []


def test_bound_value_follows_a_keypath_of_pytree_keys():
    value = {"a": [1, (2, 3)]}
    keypath = (pytree.MappingKey("a"), pytree.SequenceKey(1), pytree.SequenceKey(0))
    assert control_flow.bound_value(value, keypath) == 2
    assert control_flow.bound_value(value, ()) is value


def test_bound_value_reaches_the_symbol_each_unbacked_binding_names():
    mode = FakeTensorMode(shape_env=ShapeEnv())

    def f(x):
        return x.nonzero(), (x > 0).sum().item()

    with mode:
        gm = internals.make_fx(f)(mode.from_tensor(torch.randn(5)))
    bound = {}
    for node in gm.graph.nodes:
        for symbol, keypath in (node.meta.get("unbacked_bindings") or {}).items():
            value = control_flow.bound_value(node.meta["val"], keypath)
            assert isinstance(value, torch.SymInt) and value.node.expr == symbol
            bound[str(node.target)] = keypath
    assert set(bound) == {"aten.nonzero.default", "aten._local_scalar_dense.default"}
    assert bound["aten._local_scalar_dense.default"] == ()  # the number itself
    assert len(bound["aten.nonzero.default"]) == 2  # its size, then the dimension


def test_evaluate_expression_computes_with_python_numbers():
    a, b = sympy.symbols("a b")
    assert control_flow.evaluate_expression(2 * a + b, {a: 3, b: 1}) == 7
    assert control_flow.evaluate_expression(sympy.Eq(a, 1), {a: 1}) is True
    assert control_flow.evaluate_expression(sympy.And(sympy.Gt(a, 0), sympy.Lt(b, 2)), {a: 1, b: 5}) is False
    assert control_flow.evaluate_expression(sympy.Gt(a, 0.5), {a: 0.25}) is False


def test_evaluate_expression_traced_records_the_ops_that_make_the_value():
    a = sympy.Symbol("a")

    def f(x):
        return control_flow.evaluate_expression(sympy.Gt(2 * a, 3), {a: x.shape[0]})

    shape_env = ShapeEnv()
    mode = FakeTensorMode(shape_env=shape_env)
    context = internals.StatelessSymbolicContext(dynamic_sizes=[internals.DimDynamic.DYNAMIC], constraint_sizes=[None])
    fake = mode.from_tensor(torch.randn(5), symbolic_context=context, source=internals.constant_source("x"))
    with mode:
        result = f(fake)
    assert isinstance(result, torch.SymBool)
    assert result.node.expr.free_symbols == {fake.shape[0].node.expr}


class _Inner(torch.nn.Module):
    def __init__(self, seen):
        super().__init__()
        self.seen = seen

    def forward(self, x):
        self.seen.append(control_flow.current_module_stack())
        return x + 1


class _Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = []
        self.inner = _Inner(self.seen)
        self.layers = torch.nn.ModuleList([_Inner(self.seen)])

    def forward(self, x):
        self.seen.append(control_flow.current_module_stack())
        x = self.inner(x)
        x = self.inner(x)
        return self.layers[0](x)


def _traced(model: torch.nn.Module, *inputs) -> torch.fx.GraphModule:
    holder = torch.nn.Module()
    setattr(holder, internals.EXPORT_ROOT, model)
    return internals.record_module_calls(lambda *a: getattr(holder, internals.EXPORT_ROOT)(*a), holder, {}, list(inputs))


def test_current_module_stack_names_each_call_the_trace_is_inside():
    model = _Outer()
    _traced(model, torch.randn(3))
    root = internals.EXPORT_ROOT
    assert model.seen == [
        [root],
        [root, f"{root}.inner"],
        [root, f"{root}.inner@1"],  # a module's second call is a call of its own
        [root, f"{root}.layers.0"],
    ]


def test_current_module_stack_is_empty_outside_a_trace_that_records_it():
    assert control_flow.current_module_stack() == []
    model = _Outer()
    model(torch.randn(3))
    internals.make_fx(model)(torch.randn(3))  # make_fx without recording module calls
    assert model.seen and all(stack == [] for stack in model.seen)


def test_retrace_graph_keeps_the_stack_trace_and_module_stack_of_each_node():
    source = _traced(_Outer(), torch.randn(3))
    adds = [n for n in source.graph.nodes if n.op == "call_function"]
    assert all(n.meta.get("stack_trace") and n.meta.get("nn_module_stack") for n in adds)

    def run(*flat):
        return torch.fx.Interpreter(source).run(*flat)

    retraced = control_flow.retrace_graph(run, [torch.randn(3)])
    again = [n for n in retraced.graph.nodes if n.op == "call_function"]
    assert [n.target for n in again] == [n.target for n in adds]
    for old, new in zip(adds, again):
        assert new.meta["stack_trace"] == old.meta["stack_trace"]
        assert new.meta["nn_module_stack"] == old.meta["nn_module_stack"]
    plain = internals.make_fx(run)(torch.randn(3))  # what a retrace without it loses
    assert not any(n.meta.get("nn_module_stack") for n in plain.graph.nodes)


def test_retrace_graph_traces_a_graph_that_calls_cond():
    def branches(x):
        return torch.cond(x.sum() > 0, lambda x: x.relu(), lambda x: -x, (x,))

    source = internals.make_fx(branches)(torch.randn(3))
    retraced = control_flow.retrace_graph(lambda *flat: torch.fx.Interpreter(source).run(*flat), [torch.randn(3)])
    assert any(n.target is torch.ops.higher_order.cond for n in retraced.graph.nodes)
    for x in (torch.rand(3) + 0.1, -torch.rand(3) - 0.1):
        torch.testing.assert_close(retraced(x), branches(x))
