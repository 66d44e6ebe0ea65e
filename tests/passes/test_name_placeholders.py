import torch
from torch.export.graph_signature import InputKind, OutputKind

from exporter.passes import name_placeholders
from tests.support import traced_state


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.ModuleList([torch.nn.Linear(2, 2)])
        self.register_buffer("Running_Mean", torch.zeros(2))
        self.table = torch.ones(2)

    def forward(self, Inputs, *args, scale=1.0):
        out = self.encoder[0](Inputs["a"]) + Inputs["b-c"][0] + args[0]
        return out * scale + self.Running_Mean + self.table


def _placeholder_names(state):
    return [n.name for n in state.gm.graph.nodes if n.op == "placeholder"]


def test_names_follow_forward_signature_and_fqns():
    args = ({"a": torch.randn(2), "b-c": [torch.randn(2)]}, torch.randn(2))
    state = traced_state(Nested(), args, {"scale": 2.0}, until=name_placeholders)
    assert name_placeholders(state) is True
    assert _placeholder_names(state) == [
        "p_encoder_0_weight", "p_encoder_0_bias", "b_running_mean", "c_table",
        "inputs_a", "inputs_b_c_0", "args_0", "scale",
    ]
    assert [s.arg.name for s in state.input_specs] == _placeholder_names(state)
    assert [s.kind for s in state.input_specs][:4] == [
        InputKind.PARAMETER, InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR,
    ]


class Collides(torch.nn.Module):
    def forward(self, add, mul_1):
        mul_1.mul_(2)
        return (add + 1) + (add + 2) * mul_1


def test_user_names_win_over_node_names_and_mutation_targets_follow():
    state = traced_state(Collides(), (torch.randn(2), torch.randn(2)), until=name_placeholders)
    name_placeholders(state)
    assert _placeholder_names(state) == ["add", "mul_1"]
    names = [n.name for n in state.gm.graph.nodes]
    assert len(names) == len(set(names))
    mutation = next(s for s in state.output_specs if s.kind == OutputKind.USER_INPUT_MUTATION)
    assert mutation.target == "mul_1"
    assert mutation.arg.name in names
    # the same names torch.export gives
    ref = torch.export.export(Collides(), (torch.randn(2), torch.randn(2)), strict=False).run_decompositions({})
    assert names == [n.name for n in ref.graph.nodes]


class Branches(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: self.lin(t), lambda t: t.cos(), (x,))


def test_subgraph_inputs_take_the_operand_names():
    state = traced_state(Branches(), (torch.randn(2),), until=name_placeholders)
    name_placeholders(state)
    cond = next(n for n in state.gm.graph.nodes if n.target is torch.ops.higher_order.cond)
    operand_names = [a.name for a in cond.args[3]]
    for branch in cond.args[1:3]:
        sub = getattr(state.gm, branch.target)
        assert [n.name for n in sub.graph.nodes if n.op == "placeholder"] == operand_names
