"""wrong: differs from eager (control-flow fuzzer, seed 11877, shrunk).

An early return inside a helper, after a branch in it: the region of the first branch grew
to hold the second, but the second stayed marked as joined by the abandoned attempt, so the
grown region copied its example side.

    on x=[2.6627, -1.2789, 1.0324, -0.8144, 1.0074, 0.7448, 0.014, 1.112], labels=[-1, -1, -1, -1, -1, -1, -1, -1]: differs from eager: [-3.434868335723877, 1.178392767906189, -0.5707431435585022, 0.1500782072544098, 0.18564261496067047, 0.4117935001850128, 0.012878179550170898, 1.4344269037246704] where eager gives [-2.554868221282959, 2.0583927631378174, 0.3092568516731262, 1.0300781726837158, 1.0656425952911377, 1.2917934656143188, 0.8928781747817993, 2.314426898956299]
"""
import torch
from torch import nn

FIXED = "exporter/branches/join.py forgets what an abandoned attempt at a region joined"


def helper_0(x, labels, h, acc):
    if (h > 0.73).any():
        h = h * 1.29
    else:
        h = h + 0.29
    if labels.max() >= 1:
        return h, acc
    acc = acc * 0.79 + 1.0
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
        if acc > -0.63:
            h, acc = helper_0(x, labels, h, acc)
        acc = acc * 0.88
        return h + acc


def make_model():
    torch.manual_seed(0)
    return Model()


EXAMPLE = (
    torch.tensor([0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.5, -0.3]),
    torch.tensor([0, 1, 2, 0, 1, 2, -1, 0]),
)

SEED = 11877
