"""wrong: returns where eager raises ValueError (control-flow fuzzer, seed 113, shrunk).

A check held on a float read with .item() (the decision `x.abs().max().item() > 0.84`,
whose other side raises when `bad`): the program asserted nothing, since torch's
runtime-assert pass takes a bound on one float symbol for a range it asserts elsewhere.

    on x=[-0.0294, 3.5246, 0.0999, -1.3348, -2.4306, -0.6698, -2.0693, 1.8897], labels=[-1, -1, -1, -1, -1, -1, -1, -1]: returns where eager raises ValueError: negative input
"""
import torch
from torch import nn

FIXED = "exporter/_torch_internals/control_flow.py asserts a fact about a float with a node of its own"


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
        bad = bad or bool((x < -1.52).any())
        if x.abs().max().item() > 0.82:
            if x.abs().max().item() > 0.84:
                if x.sum() > -1.48:
                    if bad:
                        raise ValueError("negative input")
        return h


def make_model():
    torch.manual_seed(0)
    return Model()


EXAMPLE = (
    torch.tensor([0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.5, -0.3]),
    torch.tensor([0, 1, 2, 0, 1, 2, -1, 0]),
)

SEED = 113
