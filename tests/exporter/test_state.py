"""ExportState holds one export's facts; its signature is built from the specs it holds."""

import torch
from torch.export.graph_signature import InputKind

from exporter.inputs import bind_inputs
from exporter.trace import trace


def test_state_from_a_trace_lines_up_specs_with_the_graph():
    model = torch.nn.Linear(3, 2)
    state = trace(model, bind_inputs(model, (torch.randn(4, 3),), {}))
    placeholders = [n.name for n in state.gm.graph.nodes if n.op == "placeholder"]
    assert [s.arg.name for s in state.input_specs] == placeholders
    assert [s.kind for s in state.signature.input_specs] == [InputKind.PARAMETER, InputKind.PARAMETER, InputKind.USER_INPUT]
    assert state.signature.output_specs == state.output_specs
    assert state.dynamic is None and state.tracked == [] and state.equalities is None
    assert state.root is model


def test_replace_node_moves_users_and_specs_to_the_new_node():
    model = torch.nn.ReLU()
    state = trace(model, bind_inputs(model, (torch.randn(3),), {}))
    relu = next(n for n in state.gm.graph.nodes if n.op == "call_function")
    with state.gm.graph.inserting_after(relu):
        other = state.gm.graph.call_function(torch.ops.aten.neg.default, relu.args)
    state.replace_node(relu, other)
    assert relu not in state.gm.graph.nodes
    assert state.output_specs[0].arg.name == other.name
    assert list(state.gm.graph.output_node().args[0]) == [other]
