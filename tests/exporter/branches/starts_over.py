"""A program the control-flow fuzzer generated whose runs start over many times: input checks
that raise on several paths, loops whose steps change numbers, and branches around them."""
import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(0.5 + 0.25 * k))

    def forward(self, h):
        if h.mean() > -0.44:
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
        if acc > 1.8:
            for c in labels[x > 0.56].unique():
                f0 = f0 + x[labels == c].sum().item()
                n1 = n1 + 1
            if bad:
                raise ValueError("negative input")
        else:
            if x.sum() > 1.08:
                if x.sum() > 2.08:
                    h = torch.tanh(h) + x
                    if (x > 1.8).any():
                        raise ValueError("x too large")
                else:
                    if f0 > -0.36:
                        bad = bad or bool((x < -1.33).any())
                acc = acc * 0.76
            for c in torch.unique(labels[labels >= 0]):
                if n0 >= 2:
                    break
                h = h + (labels == c).float() * -0.11
        for layer in self.layers:
            h = layer(h)
        for c in torch.unique(labels[labels >= 0]):
            if x[labels == c].sum() < 0.52:
                continue
            last = c
        for k in range(2):
            if (labels == k).sum() > 1:
                break
        if h.mean() > 0.27:
            if (x > 1.86).any():
                raise ValueError("x too large")
        else:
            for c in torch.unique(labels[labels >= 2]):
                n0 += 1
                h = h + (labels == c).float() * -0.0
        return h + f0 + n0 + (torch.stack(items).sum() if items else 0.0)


def make_model():
    torch.manual_seed(0)
    return Model()


EXAMPLE = (
    torch.tensor([0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.5, -0.3]),
    torch.tensor([0, 1, 2, 0, 1, 2, -1, 0]),
)
