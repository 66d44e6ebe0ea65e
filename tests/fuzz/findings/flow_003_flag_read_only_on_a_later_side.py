"""wrong: raises where eager returns (control-flow fuzzer, seed 271, shrunk).

A flag decided first (`bad`) whose value the program needs only after a later decision
takes the side no run with the flag's other value took: the runs that took the flag two
ways agreed node for node, so the flag got no cond, and the check held on the later
decision's other side (for `bad`) was asserted for every input.

    on x=[0.5476, 0.637, 0.7884, 0.4164, 1.0828, 0.5916, 1.1264, 0.3362], labels=[-1, -1, -1, -1, -1, -1, -1, -1]: raises where eager returns: RuntimeError: forward() raises for this input at /fuzz/fuzz_program_59.py:22 (`if x.sum() > 1.08:`): ValueError: negative input, at /fuzz/fuzz_program_59.py:24; the program runs only the side that does not [the program checks Ne(u5, 1)]
"""
import torch
from torch import nn

FIXED = "exporter/branches/align.py compares the Python state each run asks its later questions in"


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
        bad = bad or bool((x < -1.34).any())
        if x.abs().max().item() > 1.17:
            return h - acc
        if x.sum() > 1.08:
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

SEED = 271
