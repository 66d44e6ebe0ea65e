"""build_program wraps the finished state in a genuine ExportedProgram holding the user's own tensors."""

import torch
from torch.export.graph_signature import InputKind

from exporter._program import build_program
from tests.support import traced_state


class Stateful(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.register_buffer("kept", torch.ones(3))
        self.register_buffer("scratch", torch.zeros(3), persistent=False)

    def forward(self, x, *, scale=1.0):
        return self.lin(x) * scale + self.kept + self.scratch


def test_program_holds_the_users_state_and_call_signature():
    model = Stateful()
    state = traced_state(model, (torch.randn(2, 3),), {"scale": 2.0})
    program = build_program(state)
    assert isinstance(program, torch.export.ExportedProgram)
    assert program.state_dict["lin.weight"] is model.lin.weight
    assert program.state_dict["kept"] is model.kept
    assert "scratch" not in program.state_dict and program.constants["scratch"] is model.scratch
    assert [s.kind for s in program.graph_signature.input_specs].count(InputKind.BUFFER) == 2
    entries = program.module_call_graph
    assert [e.fqn for e in entries] == ["", "lin"]
    assert entries[0].signature.forward_arg_names == ["x", "scale"]
    assert program.example_inputs[1] == {"scale": 2.0}
    x = torch.randn(2, 3)
    torch.testing.assert_close(program.module()(x, scale=2.0), model(x, scale=2.0))


def test_a_training_state_makes_a_program_of_the_training_dialect():
    import exporter

    ep = exporter.export(torch.nn.BatchNorm1d(3).train(), (torch.randn(4, 3),), ir="training")
    assert ep.dialect == "TRAINING"
    assert torch.ops.aten.add_.Tensor in [n.target for n in ep.graph.nodes]  # num_batches_tracked += 1
    assert exporter.export(torch.nn.BatchNorm1d(3).train(), (torch.randn(4, 3),)).dialect == "ATEN"
