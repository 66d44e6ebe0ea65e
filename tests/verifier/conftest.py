import copy
import types

import pytest
import torch

import exporter


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.register_buffer("steps", torch.zeros(()))
        self.table = torch.ones(3)

    def forward(self, x, y):
        self.steps.add_(1)
        y.mul_(2)
        return self.lin(x) + self.table + y


@pytest.fixture(scope="module")
def program():
    return exporter.export(Small(), (torch.randn(2, 3), torch.randn(3)))


@pytest.fixture
def parts(program):
    """A mutable copy of the program's pieces, shaped like an ExportedProgram for the checks."""
    gm = copy.deepcopy(program.graph_module)
    sig = copy.deepcopy(program.graph_signature)
    return types.SimpleNamespace(
        graph_module=gm,
        graph=gm.graph,
        graph_signature=sig,
        state_dict=dict(program.state_dict),
        constants=dict(program.constants),
    )

