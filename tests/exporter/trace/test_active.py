"""The active trace: make_fx's, or a registered recorder's, whichever is recording."""

import torch

from exporter._torch_internals import record_module_calls
from exporter.trace.active import recording, traced_graph, traced_node


def test_make_fx_s_graph_and_nodes_outside_any_recorder():
    seen = {}

    def relu(x):
        y = x.relu()
        seen["graph"], seen["node"] = traced_graph(), traced_node(y)
        return y

    gm = record_module_calls(relu, torch.nn.Module(), {}, [torch.randn(2)])
    assert seen["graph"] is gm.graph and seen["node"].target is torch.ops.aten.relu.default
    assert traced_graph() is None and traced_node(torch.randn(2)) is None


class _Recorder:
    def __init__(self):
        self.graph = torch.fx.Graph()
        self.refused = None
        self.value = torch.zeros(1)
        self.node = self.graph.placeholder("x")

    def node_of(self, value):
        return self.node if value is self.value else None


def test_a_registered_recorder_answers_until_it_refuses_and_leaves():
    recorder = _Recorder()
    with recording(recorder):
        assert traced_graph() is recorder.graph
        assert traced_node(recorder.value) is recorder.node and traced_node(torch.ones(1)) is None
        recorder.refused = "a symbolic input"
        assert traced_graph() is None  # make_fx takes over (none is running here)
    assert traced_graph() is None and traced_node(recorder.value) is None
