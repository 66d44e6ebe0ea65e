"""wrong: differs from eager (control-flow fuzzer, seed 210, shrunk).

A branch whose region is its `if` statement calls two helpers; the second returns early on
one side of a test asked as the `if` ends. The first helper's branch was joined first, and
the rest of the span after it lost the test that belonged to the span, so the program kept
its example side.

    on x=[-0.4471, -0.5748, -0.7226, -2.5766, 0.4581, -1.7698, -0.0397, 1.2792], labels=[-1, -1, -1, -1, -1, -1, -1, -1]: differs from eager
"""
import torch
from torch import nn


def helper_0(x, labels, h, acc):
    if x.abs().max().item() > 1.19:
        h = h * 1.21
    else:
        h = h + 0.21
    if x.abs().max().item() > 0.95:
        return h, acc
    acc = acc * 0.71 + 1.0
    return h, acc


def helper_1(x, labels, h, acc):
    if (h > 0.79).any():
        h = h * 0.48
    else:
        h = h + -0.52
    if (labels == 1).any():
        return h, acc
    acc = acc * 1.02 + 1.0
    return h, acc


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
        if x.abs().max().item() > 1.01:
            h, acc = helper_0(x, labels, h, acc)
            h, acc = helper_1(x, labels, h, acc)
        return h + acc


def make_model():
    torch.manual_seed(0)
    return Model()


EXAMPLE = (
    torch.tensor([0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.5, -0.3]),
    torch.tensor([0, 1, 2, 0, 1, 2, -1, 0]),
)
SEED = 210
FIXED = "exporter/branches/join.py hands the span's call on to the rest of the span after an earlier decision"
