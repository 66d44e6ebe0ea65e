"""wrong: differs from eager (control-flow fuzzer, seed 37, shrunk).

One value tested in two places, with a branch between them that continues on one side: the
runs that took the first test's other side never reached the second test, so the side that
reached it kept the example's outcome for inputs of either value. Now refused, naming the
first test.

    on x=[0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.5, -0.3], labels=[0, 1, 2, 0, 1, 2, -1, 0]: differs from eager
"""
import torch
from torch import nn


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
        for c in torch.nonzero(x > -0.05)[:, 0]:
            acc = acc + x[c].sum() * 0.49
        for k in range(4):
            if (labels == k).any():
                pass
        for k in range(4):
            if acc < 0.03:
                continue
            if (labels == k).any():
                pass
            else:
                h = h * 1.08
        return h


def make_model():
    torch.manual_seed(0)
    return Model()


EXAMPLE = (
    torch.tensor([0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.5, -0.3]),
    torch.tensor([0, 1, 2, 0, 1, 2, -1, 0]),
)

SEED = 37
FIXED = "refused: the later side that tests the value again is refused (join.Retested)"
