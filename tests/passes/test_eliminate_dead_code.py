import torch

from exporter.passes import eliminate_dead_code
from tests.support import call_targets, traced_state


class Wasteful(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.unused = torch.ones(3)

    def forward(self, x):
        x.detach()
        (x * 3).sum()
        _ = self.unused + 1
        return x + 1


def test_unused_values_and_their_constants_are_removed():
    state = traced_state(Wasteful(), (torch.randn(3),), until=eliminate_dead_code)
    targets = call_targets(state.gm)
    assert torch.ops.aten.mul.Tensor in targets and torch.ops.aten.detach.default in targets

    assert eliminate_dead_code(state) is True

    assert call_targets(state.gm) == [torch.ops.aten.add.Tensor]
    assert not any(n.op == "get_attr" for n in state.gm.graph.nodes)
    assert not state.gm._buffers, "the unused constant's attribute must go with its get_attr"
    # placeholders stay: they are the program's calling convention
    assert len([n for n in state.gm.graph.nodes if n.op == "placeholder"]) == len(state.input_specs)


def test_clean_graph_is_left_alone():
    state = traced_state(torch.nn.ReLU(), (torch.randn(3),), until=eliminate_dead_code)
    assert eliminate_dead_code(state) is False


class AssertsInForward(torch.nn.Module):
    def forward(self, x):
        torch._assert_async((x == x).all(), "nan in x")
        return x * 2


def test_side_effecting_nodes_survive():
    state = traced_state(AssertsInForward(), (torch.randn(3),), until=eliminate_dead_code)
    eliminate_dead_code(state)
    assert torch.ops.aten._assert_async.msg in call_targets(state.gm)


class Profiled(torch.nn.Module):
    def forward(self, x):
        with torch.profiler.record_function("region"):
            return x.sin()


def test_eager_profiling_regions_are_dropped():
    state = traced_state(Profiled(), (torch.randn(3),), until=eliminate_dead_code)
    assert torch.ops.profiler._record_function_exit._RecordFunction in call_targets(state.gm)
    assert eliminate_dead_code(state) is True
    assert call_targets(state.gm) == [torch.ops.aten.sin.default]


class AssertsOnOneSide(torch.nn.Module):
    """A torch.cond whose result nothing reads, one side of which asserts."""

    def forward(self, x):
        def checked(x):
            torch._assert_async((x > 0).all(), "negative on the true side")
            return x.clone()

        torch.cond(x.sum() > 0, checked, lambda x: x.clone(), (x,))
        return x * 2


def test_a_cond_whose_side_asserts_survives_though_its_result_is_unused():
    state = traced_state(AssertsOnOneSide(), (torch.randn(3),), until=eliminate_dead_code)
    assert torch.ops.higher_order.cond in call_targets(state.gm)
    eliminate_dead_code(state)
    assert torch.ops.higher_order.cond in call_targets(state.gm)
