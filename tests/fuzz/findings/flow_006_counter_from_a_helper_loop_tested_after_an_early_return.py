"""wrong: differs from eager (control-flow fuzzer, seed 10376, shrunk).

A counter a helper's loop raises, tested after a branch that returns early: the same cause
as flow_005 (the counter's test placed before the branch it follows).

    on x=[-0.2976, -1.0744, -0.0588, -1.1001, -0.7746, -0.7071, -0.506, -0.4147], labels=[-1, -1, -1, -1, -1, -1, -1, -1]: differs from eager: [-1.2581098079681396, -1.9763221740722656, -1.035668134689331, -2.07015323638916, -1.756975769996643, -1.695070505142212, -1.4952850341796875, -1.405049204826355] where eager gives [-1.9523954391479492, -1.4825931787490845, -2.2248153686523438, -2.0928399562835693, -2.3606607913970947, -2.5530500411987305, -2.611436367034912, -2.664696455001831]
"""
import torch
from torch import nn

FIXED = "exporter/branches/align.py places a decision no earlier than the one asked before it"


def helper_0(x, labels, acc, n0):
    for c in torch.nonzero(x > 0.39)[:, 0]:
        n0 = n0 + 1
    return acc, n0


class Layer(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(0.5 + 0.25 * k))

    def forward(self, h):
        if h.mean() > 0.36:
            h = h * self.scale
        else:
            h = h - self.scale
        return h


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(-1.0, 1.0, 8))
        self.layers = nn.ModuleList([Layer(k) for k in range(3)])
        self.steps = 0

    def forward(self, x, labels):
        h = x * self.w
        acc = x.new_zeros(())
        n0, n1, f0, b0, b1, bad = 0, 0, 0.0, False, False, False
        items = []
        last = None
        acc, n0 = helper_0(x, labels, acc, n0)
        for layer in self.layers:
            h = layer(h)
        if h.mean() > -0.38:
            return h - acc
        if n0 >= 1:
            h = torch.tanh(h) + x
        return h


def make_model():
    torch.manual_seed(0)
    return Model()


EXAMPLE = (
    torch.tensor([0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.5, -0.3]),
    torch.tensor([0, 1, 2, 0, 1, 2, -1, 0]),
)

SEED = 10376
