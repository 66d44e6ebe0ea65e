"""The graph as data for the HTML drawing: modules as a tree, ops in them, dataflow between them."""

import torch
from torch.export import Dim

import exporter
from exporter._dims import dim_names
from exporter.cli.graph_data import NODE_FIELDS, graph_data
from exporter.inputs import bind_inputs, plan_dynamic_shapes


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return {"out": x + 1}


def test_modules_ops_and_dataflow_with_user_names():
    model, args = Net(), (torch.randn(2, 4),)
    spec = {"x": {0: Dim("batch", max=8)}}
    program = exporter.export(model, args, dynamic_shapes=spec)
    names = dim_names(program, plan_dynamic_shapes(model, bind_inputs(model, args, {}), spec))
    data = graph_data(program, names, ["x"])
    modules = {m[0]: (m[1], m[2]) for m in data["modules"]}
    paths = [m[0] for m in data["modules"]]
    assert modules[""] == ("Net", -1)
    assert modules["blocks.0"] == ("Block", 0) and modules["blocks.1.lin"] == ("Linear", paths.index("blocks.1"))
    nodes = [dict(zip(NODE_FIELDS, n)) for n in data["nodes"]]
    assert nodes[0]["kind"] == "input" and nodes[0]["label"] == "x" and nodes[0]["shape"] == "float32[batch, 4]"
    assert not any(n["name"].startswith("p_") for n in nodes), "parameters are not drawn"
    linears = [n for n in nodes if n["label"] == "linear"]
    assert [paths[n["module"]] for n in linears] == ["blocks.0.lin", "blocks.1.lin"]
    assert linears[0]["args"] == [0] and linears[0]["target"] == "aten.linear.default"
    relu0 = next(i for i, n in enumerate(nodes) if n["label"] == "relu")
    assert nodes.index(linears[1]) > relu0 and relu0 in linears[1]["args"], "the second block reads the first"
    output = nodes[-1]
    assert output["kind"] == "output" and output["label"] == "out" and nodes[output["args"][0]]["label"] == "add"
