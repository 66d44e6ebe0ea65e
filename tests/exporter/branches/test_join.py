"""Joining runs of forward into one graph: a torch.cond where runs part on a decision, with
each run's nodes as a branch, the predicate read from the graph, branches that never return
their inputs' memory, nested decisions as nested conds, and the runs that cannot be joined."""

import pytest
import sympy
import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import CallMethodKey

from exporter._torch_internals import ShapeEnv
from exporter.branches.align import Run, Unjoinable
from exporter.branches.decide import ITEM_OPS, Decider
from exporter.branches.join import (
    Branch,
    DataLoop,
    MAX_REPEATS,
    Joiner,
    Predicate,
    cond,
    interpreted,
)
from exporter.inputs import bind_inputs
from exporter.trace import tracer

nn = torch.nn


def _runs(model, *inputs):
    """``run_of(schedule)`` for ``model``, every run in one shared fake world as branch capture
    traces them, and the runs made so far."""
    request = tracer.prepare(model, bind_inputs(model, inputs, None), None, shared_world=True)
    runs = {}

    def run_of(schedule):
        key = frozenset(schedule.items())
        if key not in runs:
            decider = Decider(schedule)
            runs[key] = Run(tracer.run(request, decider), list(decider.decisions), dict(schedule))
        return runs[key]

    return run_of, runs


def _join(model, *inputs, universe=()):
    """The joiner and the joined graph of ``model``'s runs on ``inputs``."""
    run_of, _ = _runs(model, *inputs)
    joiner = Joiner(run_of, list(universe))
    return joiner, joiner.build(run_of({}))


def _calls(gm: torch.fx.GraphModule, target) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is target]


def _branches(gm: torch.fx.GraphModule, node: torch.fx.Node) -> tuple[Branch, Branch]:
    """The true and false branch of ``cond`` node ``node``."""
    return tuple(getattr(gm, n.target) for n in node.args[1:3])


def _same_as_eager(joined, model, inputs_list):
    """The joined graph of a model without state, run on real inputs, gives what the model gives."""
    for inputs in inputs_list:
        (out,) = joined(*inputs)
        torch.testing.assert_close(out, model(*inputs), rtol=0, atol=0)


def _x(*shape, sign=1.0):
    return sign * (torch.rand(*shape) + 0.1)


class Sign(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x.relu()
        return -x


class Layer(nn.Module):
    def forward(self, h):
        if h.sum() > 0:
            h = h.relu()
        else:
            h = h.tanh()
        return h * 2


class AroundLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = Layer()

    def forward(self, x):
        return self.layer(x + 1) - 3


def test_where_runs_part_the_joined_graph_calls_cond_with_each_runs_nodes_as_a_branch():
    joiner, joined = _join(AroundLayer(), torch.randn(4))
    (node,) = _calls(joined, cond)
    true_branch, false_branch = _branches(joined, node)
    assert (true_branch.value, false_branch.value) == (True, False)
    assert [n.target for n in _calls(true_branch.gm, torch.ops.aten.relu.default)]
    assert [n.target for n in _calls(false_branch.gm, torch.ops.aten.tanh.default)]
    assert not _calls(joined, torch.ops.aten.relu.default) and not _calls(joined, torch.ops.aten.tanh.default)
    assert len(_calls(joined, torch.ops.aten.sub.Tensor)) == 1  # the nodes both runs share, once
    ((_, context, regions),) = joiner.decisions
    assert context == {} and regions == 1


def test_the_joined_graph_computes_what_the_model_does_on_either_side():
    _, joined = _join(AroundLayer(), torch.randn(4))
    _same_as_eager(joined, AroundLayer(), [(_x(4),), (_x(4, sign=-2),), (torch.randn(4),)])


def test_interpreted_runs_the_joined_graph_node_by_node():
    _, joined = _join(Sign(), torch.randn(4))
    for x in (_x(4), _x(4, sign=-1)):
        torch.testing.assert_close(interpreted(joined)(x), joined(x))


def test_a_bool_tensors_branch_reads_the_tensor_itself_and_no_value_out_of_the_graph():
    _, joined = _join(Sign(), torch.randn(4))
    (node,) = _calls(joined, cond)
    predicate = node.args[0]
    assert predicate.meta["val"].dtype == torch.bool and predicate.meta["val"].numel() == 1
    assert not [n for n in joined.graph.nodes if n.target in ITEM_OPS]


class ItemThreshold(nn.Module):
    def forward(self, x):
        if x.max().item() > 0.5:
            return x * 2
        return x - 1


def test_a_branch_on_a_number_computes_its_predicate_from_the_numbers_node():
    _, joined = _join(ItemThreshold(), _x(4) + 1)
    (node,) = _calls(joined, cond)
    predicate = node.args[0]
    assert isinstance(predicate.target, Predicate)
    (item,) = predicate.args
    assert item.target in ITEM_OPS and item.args[0].target is torch.ops.aten.max.default
    _same_as_eager(joined, ItemThreshold(), [(_x(4) * 0.4,), (_x(4) + 1,)])


def test_a_predicate_computes_its_expression_from_the_values_that_bind_its_symbols():
    u, s = sympy.symbols("u0 s0")
    over = Predicate(sympy.Gt(u, 0.5), [u], [()])
    assert over.__name__ == "predicate"
    assert over(0.75) is True and over(0.25) is False
    size = (CallMethodKey("size"), pytree.SequenceKey(0))  # the size of dimension 0 of a tensor
    empty = Predicate(sympy.Eq(s, 0), [s], [size])
    assert empty(torch.zeros(0, 2)) is True and empty(torch.zeros(3, 2)) is False


class ReturnsItsInput(nn.Module):
    def forward(self, h):
        if h.sum() > 0:
            return h
        return h * 2


class PassesThrough(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = ReturnsItsInput()

    def forward(self, x):
        return self.inner(x + 1)


def test_a_branch_that_returns_its_operand_returns_a_copy():
    _, joined = _join(PassesThrough(), _x(4))
    (node,) = _calls(joined, cond)
    true_branch, _ = _branches(joined, node)
    (result,) = true_branch.gm.graph.output_node().args[0]
    assert result.op == "call_function" and result.target is torch.ops.aten.clone.default
    assert result.args[0].op == "placeholder"
    x = _x(4)
    (out,) = joined(x)
    torch.testing.assert_close(out, x + 1, rtol=0, atol=0)
    operand = x + 1
    (h,) = true_branch(operand)
    assert h.data_ptr() != operand.data_ptr()


class SliceOnOneSide(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x[:2]
        return x


def test_a_branch_that_returns_a_view_of_its_operand_returns_a_copy():
    _, joined = _join(SliceOnOneSide(), _x(4, 3))
    (node,) = _calls(joined, cond)
    for branch in _branches(joined, node):
        (result,) = branch.gm.graph.output_node().args[0]
        assert result.target is torch.ops.aten.clone.default
        operand = _x(4, 3)
        (value,) = branch(operand)
        assert value.untyped_storage().data_ptr() != operand.untyped_storage().data_ptr()


class Nested(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            if x.mean() > 0.5:
                y = x * 3
            else:
                y = x * 2
        else:
            y = -x
        return y + 1


def test_a_decision_inside_a_branch_is_a_cond_inside_that_branch():
    joiner, joined = _join(Nested(), _x(4) + 1)
    (outer,) = _calls(joined, cond)
    true_branch, false_branch = _branches(joined, outer)
    (inner,) = _calls(true_branch.gm, cond)
    assert not _calls(false_branch.gm, cond)
    inner_true, inner_false = _branches(true_branch.gm, inner)
    assert _calls(inner_true.gm, torch.ops.aten.mul.Tensor)[0].args[1] == 3
    assert _calls(inner_false.gm, torch.ops.aten.mul.Tensor)[0].args[1] == 2
    (first, _, _), (_, context, _) = joiner.decisions
    assert context == {first.site: True}  # joined with the outer decision held at its first value
    _same_as_eager(joined, Nested(), [(_x(4) + 1,), (_x(4) * 0.4,), (_x(4, sign=-1),)])


class FlagLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, h, flag):
        h = self.lin(h)
        if flag:
            h = h * 2
        return h


class FlagSharedByLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([FlagLayer() for _ in range(3)])

    def forward(self, h, marks):
        flag = marks.any()
        for layer in self.layers:
            h = layer(h, flag)
        return h


def test_one_decision_used_in_each_layer_is_a_cond_per_layer_from_two_runs():
    model = FlagSharedByLayers().eval()
    run_of, runs = _runs(model, torch.randn(2, 4), torch.ones(3, dtype=torch.bool))
    joiner = Joiner(run_of, [])
    joined = joiner.build(run_of({}))
    assert len(_calls(joined, cond)) == 3 and len(runs) == 2
    ((_, _, regions),) = joiner.decisions
    assert regions == 3
    state = [p.detach() for p in model.parameters()]
    for marks in (torch.zeros(3, dtype=torch.bool), torch.tensor([False, True, False])):
        h = torch.randn(2, 4)
        (out,) = joined(*state, h, marks)
        torch.testing.assert_close(out, model(h, marks), rtol=0, atol=0)


class BufferWrittenOnOneSide(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        if x.sum() > 0:
            self.count += 1
        return x * self.count


def test_an_input_written_on_one_side_is_an_output_of_the_cond_on_both():
    _, joined = _join(BufferWrittenOnOneSide(), _x(4), universe=[0])
    (node,) = _calls(joined, cond)
    assert all(len(b.gm.graph.output_node().args[0]) == 2 for b in _branches(joined, node))
    for sign, expected in ((1, 1.0), (-1, 0.0)):
        count, x = torch.zeros(()), _x(4, sign=sign)
        new_count, out = joined(count, x)
        assert new_count.item() == expected
        torch.testing.assert_close(out, x * expected, rtol=0, atol=0)


class StopsWhenTheDataSays(nn.Module):
    def forward(self, x):
        for _ in range(10):
            x = x - 0.3
            if (x < 0).all():
                break
        return x


def test_a_decision_asked_again_and_again_inside_its_own_branches_is_a_data_loop():
    run_of, _ = _runs(StopsWhenTheDataSays(), _x(4))
    base = run_of({})
    with pytest.raises(DataLoop) as loop:
        Joiner(run_of, []).build(base)
    (decision,) = loop.value.args
    assert decision.site.location == base.decisions[0].site.location and decision.site.occurrence == MAX_REPEATS


class TwoTestsOnOneLine(nn.Module):
    def forward(self, x):
        if (x[0] > 0).all() and (x[1] > 0).all():  # the second asked only where the first holds
            return x * 2
        return x - 1


def test_two_tests_on_one_line_join_as_nested_conds():
    joiner, joined = _join(TwoTestsOnOneLine(), torch.ones(2, 3))
    assert len(joiner.decisions) == 2
    _same_as_eager(joined, TwoTestsOnOneLine(), [(torch.ones(2, 3),), (-torch.ones(2, 3),), (torch.tensor([[1.0, 1, 1], [-1, 1, 1]]),)])


class DifferentStructures(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x, x
        return x


def test_sides_that_return_different_structures_cannot_be_joined():
    run_of, _ = _runs(DifferentStructures(), torch.randn(4))
    with pytest.raises(Unjoinable):
        Joiner(run_of, []).build(run_of({}))


def _asks_over_three(n):
    return bool(n > 3)


def _asking_graph() -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    graph.output((graph.call_function(_asks_over_three, (graph.placeholder("n"),)),))
    return torch.fx.GraphModule({}, graph)


@pytest.mark.parametrize("value", [True, False])
def test_a_branch_runs_its_graph_assuming_the_predicate_has_its_value(value):
    shape_env = ShapeEnv()
    n = shape_env.create_unbacked_symint()
    branch = Branch(_asking_graph(), value)
    branch.predicate = n > 3
    assert branch(n) == (value,)
    assert shape_env.axioms == {}  # only while it runs


def test_a_branch_on_a_plain_predicate_just_runs_its_graph():
    graph = torch.fx.Graph()
    graph.output((graph.call_function(torch.ops.aten.neg.default, (graph.placeholder("x"),)),))
    branch = Branch(torch.fx.GraphModule({}, graph), False)
    branch.predicate = torch.tensor(False)
    (out,) = branch(torch.ones(2))
    torch.testing.assert_close(out, -torch.ones(2))


def test_the_two_branches_of_one_predicate_each_see_their_own_value_in_one_shape_env():
    shape_env = ShapeEnv()
    n = shape_env.create_unbacked_symint()
    sides = [Branch(_asking_graph(), value) for value in (True, False)]
    for side in sides:
        side.predicate = n > 3
    assert [side(n) for side in sides] == [(True,), (False,)]


class ConstantOnTheOtherSide(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.tensor([1.0, 2.0, 3.0])  # a plain tensor attribute: a constant in each run

    def forward(self, x):
        s = self.scale * 2
        if x.sum() > 0:
            return x * s
        return x - self.scale  # the other run's own constant, read inside its branch


def test_a_constant_the_other_side_reads_is_one_operand_of_the_cond():
    _, joined = _join(ConstantOnTheOtherSide(), torch.ones(3))
    _same_as_eager(joined, ConstantOnTheOtherSide(), [(torch.ones(3),), (-torch.ones(3),)])
