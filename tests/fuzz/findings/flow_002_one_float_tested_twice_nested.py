"""raw exception from exporter.export (control-flow fuzzer, seed 70, shrunk).

A float read twice with .item() and tested inside its own first test: the inner decision's
expression was rewritten to the first read's symbol, but kept the second read's node, and
the join failed looking the first symbol up.

    KeyError: zuf0
"""
import torch
from torch import nn

FIXED = "exporter/branches/decide.py binds a canonical symbol to the node of the read it stands for"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(-1.0, 1.0, 8))

        self.steps = 0

    def forward(self, x, labels):
        h = x * self.w
        acc = x.new_zeros(())
        n0, n1, f0, b0, b1, bad = 0, 0, 0.0, False, False, False
        items = []
        last = None
        if x.abs().max().item() > 1.37:
            if x.abs().max().item() > 1.13:
                bad = bad or bool((x < -1.11).any())
        return h


def make_model():
    torch.manual_seed(0)
    return Model()


EXAMPLE = (
    torch.tensor([0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.5, -0.3]),
    torch.tensor([0, 1, 2, 0, 1, 2, -1, 0]),
)

SEED = 70
