import torch

from exporter.passes import check_conversions
from tests.support import call_targets, traced_state

ASSERT = torch.ops.aten._assert_tensor_metadata.default


class Conversions(torch.nn.Module):
    def forward(self, x, i):
        return x.to(torch.float64), i.float(), x.to("cpu"), x.to(i)


def test_each_conversion_is_guarded_by_its_input_metadata_once():
    state = traced_state(
        Conversions(), (torch.randn(2), torch.arange(2)), until=check_conversions, training=True
    )
    assert ASSERT not in call_targets(state.gm)

    assert check_conversions(state) is True

    nodes = list(state.gm.graph.nodes)
    for node in nodes:
        if node.target in (torch.ops.aten.to.dtype, torch.ops.aten.to.device, torch.ops.aten.to.dtype_layout):
            check = node.prev
            assert check.target is ASSERT and check.args[0] is node.args[0]
            value = node.args[0].meta["val"]
            assert check.kwargs == {"dtype": value.dtype, "device": value.device, "layout": value.layout}
            assert check.meta.get("nn_module_stack") == node.meta.get("nn_module_stack")
    # aten.to.other reads its dtype from a tensor; torch.export leaves it unguarded
    guarded = call_targets(state.gm).count(ASSERT)
    assert check_conversions(state) is False  # already guarded: nothing added twice
    assert call_targets(state.gm).count(ASSERT) == guarded


def test_a_graph_without_conversions_is_left_alone():
    state = traced_state(torch.nn.ReLU(), (torch.randn(2),), until=check_conversions, training=True)
    assert check_conversions(state) is False
