"""Aligning two runs of forward that took one decision's two values: where they part, where
they meet again (the exit of the module call the decision was asked in, or further out), the
values that leave each region, and the runs that cannot be aligned."""

import itertools

import pytest
import sympy
import torch

from exporter._torch_internals import EXPORT_ROOT
from exporter.trace.stacks import is_extent
from exporter.branches.align import (
    Extend,
    Parted,
    Region,
    Run,
    Unjoinable,
    _states_differ,
    align,
)
from exporter.branches.decide import ITEM_OPS, Decider
from exporter.branches.general import Generality
from exporter.branches.state import Expr
from exporter.inputs import bind_inputs
from exporter.trace import tracer

ROOT = EXPORT_ROOT
aten = torch.ops.aten


def _runs(model, *inputs):
    """``run_of(schedule)``: the run of forward of ``model`` that takes the scheduled
    decisions, every run in one shared fake world as branch capture traces them."""
    request = tracer.prepare(model, bind_inputs(model, inputs, None), None, shared_world=True)
    runs = {}

    def run_of(schedule):
        key = frozenset(schedule.items())
        if key not in runs:
            decider = Decider(schedule)
            runs[key] = Run(tracer.run(request, decider), list(decider.decisions), dict(schedule))
        return runs[key]

    return run_of


def _both_sides(model, *inputs):
    """The run that took the first decision's first value, the run that took its other, and the decision."""
    run_of = _runs(model, *inputs)
    a = run_of({})
    decision = a.decisions[0]
    return a, run_of({decision.site: not decision.value}), decision


def _targets(run: Run, start: int, end: int) -> list:
    return [n.target for n in run.nodes[start:end]]


class Sign(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x.relu()
        return -x


class Layer(torch.nn.Module):
    def forward(self, h):
        if h.sum() > 0:
            h = h.relu()
        else:
            h = h.tanh()
        return h * 2


class AroundLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = Layer()

    def forward(self, x):
        return self.layer(x + 1) - 3


def test_a_run_indexes_its_graph_and_places_each_decision_after_the_value_it_reads():
    a, b, decision = _both_sides(Sign(), torch.randn(4))
    assert a.nodes == list(a.graph.nodes) and a.output is a.nodes[-1]
    assert [n.op for n in a.placeholders] == ["placeholder"] and a.updates == {}
    assert a.results == list(a.output.args[0])
    assert a.nodes[decision.position - 1].target in ITEM_OPS  # the .item() the predicate reads
    assert a.nodes[decision.position].target is aten.relu.default
    assert b.decisions[0].value is False and b.nodes[b.decisions[0].position].target is aten.neg.default
    assert a.decision_at(decision.site) is decision and b.decision_at(decision.site) is b.decisions[0]
    assert a.decision_at(None) is None


def test_a_run_knows_the_module_calls_each_node_is_in():
    a, _, decision = _both_sides(AroundLayer(), torch.randn(4))
    # innermost, the extent of the statement that asked, after which its sides meet again
    assert decision.stack[:2] == (ROOT, f"{ROOT}.layer") and len(decision.stack) == 3
    assert is_extent(decision.stack[2])
    assert a.stacks[0] == ()  # the input
    by_target = {n.target: stack for n, stack in zip(a.nodes, a.stacks)}
    assert by_target[aten.relu.default] == (ROOT, f"{ROOT}.layer")
    assert by_target[aten.sub.Tensor] == (ROOT,)
    assert a.stacks[-1] == (ROOT,)  # the output node keeps the last stack


def test_a_region_ends_where_the_module_call_of_its_decision_returns():
    a, b, decision = _both_sides(AroundLayer(), torch.randn(4))
    comparison = align(a, b, decision, [], {})
    (region,) = comparison.regions
    assert region.call == f"{ROOT}.layer"
    assert (region.start_a, region.start_b) == (decision.position, b.decisions[0].position)
    assert _targets(a, region.start_a, region.end_a) == [aten.relu.default, aten.mul.Tensor]
    assert _targets(b, region.start_b, region.end_b) == [aten.tanh.default, aten.mul.Tensor]
    after_a, after_b = a.nodes[region.end_a], b.nodes[region.end_b]
    assert after_a.target is aten.sub.Tensor and comparison.mapping[after_b] is after_a
    assert region.holds_a(region.start_a) and not region.holds_a(region.end_a)
    assert region.holds_b(region.end_b - 1) and not region.holds_b(region.start_b - 1)


def test_the_runs_agree_before_the_region_node_for_node():
    a, b, decision = _both_sides(AroundLayer(), torch.randn(4))
    comparison = align(a, b, decision, [], {})
    for x, y in zip(a.nodes[: decision.position], b.nodes[: decision.position]):
        assert comparison.mapping[y] is x
    (region,) = comparison.regions
    assert not any(y in comparison.mapping for y in b.nodes[region.start_b : region.end_b])


def test_each_value_read_after_a_region_is_a_slot_of_both_runs_values():
    a, b, decision = _both_sides(AroundLayer(), torch.randn(4))
    (region,) = align(a, b, decision, [], {}).regions
    ((x, y),) = region.slots
    assert x is a.nodes[region.end_a - 1] and y is b.nodes[region.end_b - 1]  # each side's h * 2
    assert region.slot_of == {x: 0}


def test_a_branch_of_the_model_itself_ends_with_the_root_call():
    a, b, decision = _both_sides(Sign(), torch.randn(4))
    (region,) = align(a, b, decision, [], {}).regions
    assert region.call == ROOT and region.end_a == len(a.nodes) - 1
    assert [(x.target, y.target) for x, y in region.slots] == [(aten.relu.default, aten.neg.default)]


class TellsTheCaller(torch.nn.Module):
    """The decision's module call leaves the caller to branch again, on a Python value."""

    def forward(self, h):
        if h.sum() > 0:
            self.took = True
            h = h.relu()
        else:
            self.took = False
            h = h.tanh()
        return h * 2


class ReadsWhatItWasTold(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = TellsTheCaller()

    def forward(self, x):
        h = self.layer(x + 1)
        if self.layer.took:
            return h - 3
        return h + 3


def test_runs_that_part_again_after_the_call_need_the_region_to_end_further_out():
    a, b, decision = _both_sides(ReadsWhatItWasTold(), torch.randn(4))
    with pytest.raises(Extend) as extend:
        align(a, b, decision, [], {})
    assert extend.value.args == (0,)
    (region,) = align(a, b, decision, [], {0: 1}).regions
    assert region.call == ROOT and region.end_a == len(a.nodes) - 1
    assert _targets(a, region.start_a, region.end_a)[-1] is aten.sub.Tensor
    assert _targets(b, region.start_b, region.end_b)[-1] is aten.add.Tensor
    (region,) = align(a, b, decision, [], {0: 2}).regions  # past the outermost call: the end of forward
    assert region.call is None


class FlagLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, h, flag):
        h = self.lin(h)
        if flag:
            h = h * 2
        return h


class FlagSharedByLayers(torch.nn.Module):
    def __init__(self, layers=3):
        super().__init__()
        self.layers = torch.nn.ModuleList([FlagLayer() for _ in range(layers)])

    def forward(self, h, marks):
        flag = marks.any()
        for layer in self.layers:
            h = layer(h, flag)
        return h


def test_each_use_of_a_decision_is_a_region_ending_with_its_own_call():
    model = FlagSharedByLayers(3).eval()
    a, b, decision = _both_sides(model, torch.randn(2, 4), torch.ones(3, dtype=torch.bool))
    assert len(decision.uses) == 3
    regions = align(a, b, decision, [], {}).regions
    assert [r.call for r in regions] == [f"{ROOT}.layers.{i}" for i in range(3)]
    for r in regions:  # the flag on: h * 2; off: nothing but the flag's read
        assert [t for t in _targets(a, r.start_a, r.end_a) if t not in ITEM_OPS] == [aten.mul.Tensor]
        assert [t for t in _targets(b, r.start_b, r.end_b) if t not in ITEM_OPS] == []
    assert all(earlier.end_a <= later.start_a for earlier, later in itertools.pairwise(regions))


class BufferWrittenOnOneSide(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        if x.sum() > 0:
            self.count += 1
        return x * self.count


def test_a_write_on_one_side_is_an_output_of_that_run_and_the_input_itself_of_the_other():
    a, b, decision = _both_sides(BufferWrittenOnOneSide(), torch.rand(4) + 0.1)
    assert list(a.updates) == [0] and b.updates == {}
    assert a.outputs([0])[0] is a.updates[0] and b.outputs([0])[0] is b.placeholders[0]
    assert len(a.outputs([0])) == len(a.outputs([])) + 1
    (region,) = align(a, b, decision, [0], {}).regions
    assert (a.updates[0], b.placeholders[0]) in region.slots


class DifferentStructures(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x, x
        return x


def test_runs_that_return_different_structures_cannot_be_aligned():
    a, b, decision = _both_sides(DifferentStructures(), torch.randn(4))
    with pytest.raises(Extend):
        align(a, b, decision, [], {})
    with pytest.raises(Unjoinable) as unjoinable:
        align(a, b, decision, [], {0: 1})
    assert unjoinable.value.args == (a, b)


_TRACES = [0]


class DifferentEachRun(torch.nn.Module):
    """Forward does something else each time it runs, before its branch."""

    def forward(self, x):
        _TRACES[0] += 1
        x = x + 1 if _TRACES[0] % 2 else x.abs()
        if x.sum() > 0:
            return x.relu()
        return -x


def test_runs_that_differ_before_the_decision_have_parted():
    a, b, decision = _both_sides(DifferentEachRun(), torch.randn(4))
    with pytest.raises(Parted) as parted:
        align(a, b, decision, [], {})
    assert parted.value.args == (decision.site,)


def test_a_region_holds_half_open_ranges_of_each_run():
    region = Region(2, 5, 3, 3, None)
    assert [i for i in range(7) if region.holds_a(i)] == [2, 3, 4]
    assert not any(region.holds_b(j) for j in range(7))
    assert region.slots == [] and region.slot_of == {}


def test_a_general_runs_symbol_stands_for_the_special_runs_number_only_where_it_is_that_number():
    u0, u1, u2 = (sympy.Symbol(f"u{k}", integer=True) for k in range(3))

    def counts(*values):  # a frame's list of per-image counts, as a snapshot fingerprints it
        items = tuple((f"[{k}]", ("int", v) if isinstance(v, int) else ("symbolic", "SymInt", Expr(v))) for k, v in enumerate(values))
        return {(0, "boxes_per_image"): (("object", "list", len(values)), items)}

    general = counts(sympy.Min(1000, u0), u1)
    empty_first = Generality("a", {u0: sympy.Integer(0), u1: u2})
    assert not _states_differ([general], [counts(0, u2)], empty_first)  # u0 is 0 there
    assert _states_differ([general], [counts(3, u2)], empty_first)  # 0, not 3
    assert _states_differ([general], [counts(0, u2)], Generality("a", {u1: u2}))  # u0 unknown there
    assert _states_differ([general], [counts(0, u2)])  # compared alike, a number is not a symbol
    # the special run is the first one: the same, the other way round
    assert not _states_differ([counts(0, u2)], [general], Generality("b", {u0: sympy.Integer(0), u1: u2}))
