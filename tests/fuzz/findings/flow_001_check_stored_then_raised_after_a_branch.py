"""wrong: raises where eager returns (control-flow fuzzer, seed 129, shrunk).

An input check computed first and raised after a branch on another value: the run that
raised held the last decision's other side, `acc > 0.18`, so the program asserted it and
refused its own example. The side that raises is that of the stored check.

    on x=[0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.5, -0.3], labels=[0, 1, 2, 0, 1, 2, -1, 0]: raises where eager returns: RuntimeError: forward() raises for this input at /fuzz/fuzz_program_23.py:20 (`if acc > 0.18:`); the program runs only the side that does not [the program checks u4 >= 1]
"""
import torch
from torch import nn

FIXED = "exporter/branches/capture.py searches the path of decisions for the side that raises"


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
        bad = bad or bool((x < -1.2).any())
        if acc > 0.18:
            return h - acc
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

SEED = 129
