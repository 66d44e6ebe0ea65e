"""The first signature of a trace: specs for state, user inputs, updates and outputs."""

import torch
from torch.export.graph_signature import ConstantArgument, InputKind, OutputKind, SymIntArgument, TensorArgument

from exporter.inputs import bind_inputs
from exporter.trace import trace
from exporter.trace.signature import argument_spec, constant_attribute_fqns


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.register_buffer("count", torch.zeros(()))
        self.register_buffer("cache", torch.zeros(2), persistent=False)
        self.scale = torch.tensor(3.0)

    def forward(self, x, flag):
        self.count.add_(1)
        x.mul_(2)
        return self.lin(x) * self.scale + self.cache, flag


def test_specs_follow_the_traced_function():
    model = Counter()
    state = trace(model, bind_inputs(model, (torch.randn(2), True), {}))
    assert [(s.kind, s.target, getattr(s, "persistent", None)) for s in state.input_specs] == [
        (InputKind.PARAMETER, "lin.weight", None),
        (InputKind.PARAMETER, "lin.bias", None),
        (InputKind.BUFFER, "count", True),
        (InputKind.BUFFER, "cache", False),
        (InputKind.USER_INPUT, None, None),
        (InputKind.USER_INPUT, None, None),
    ]
    assert isinstance(state.input_specs[-1].arg, ConstantArgument) and state.input_specs[-1].arg.value is True
    placeholders = [n.name for n in state.gm.graph.nodes if n.op == "placeholder"]
    assert [(s.kind, s.target) for s in state.output_specs] == [
        (OutputKind.BUFFER_MUTATION, "count"),
        (OutputKind.USER_INPUT_MUTATION, placeholders[4]),
        (OutputKind.USER_OUTPUT, None),
        (OutputKind.USER_OUTPUT, None),
    ]
    assert isinstance(state.output_specs[-1].arg, ConstantArgument)


def test_state_names_and_argument_kinds():
    model = Counter()
    assert constant_attribute_fqns(model) == {id(model.scale): ["scale"]}
    graph = torch.fx.Graph()
    node = graph.placeholder("n")
    assert argument_spec(node, torch.empty(1)) == TensorArgument(name="n")
    assert isinstance(argument_spec(7, 7), ConstantArgument)
    shape_env = torch.fx.experimental.symbolic_shapes.ShapeEnv()
    size = shape_env.create_unbacked_symint()
    assert argument_spec(node, size) == SymIntArgument(name="n")


def test_symbolic_float_and_bool_outputs_get_their_argument_kinds():
    class Items(torch.nn.Module):
        def forward(self, x):
            return x.sum().item(), (x > 0).any().item()

    state = trace(Items(), bind_inputs(Items(), (torch.randn(3),), {}))
    assert [type(s.arg).__name__ for s in state.output_specs] == ["SymFloatArgument", "SymBoolArgument"]
