"""wrong: differs from eager (control-flow fuzzer, seed 10819, shrunk).

A flag a loop sets, tested after a later branch: the test read the loop's result, made before
the branch's predicate, so its graph position came before the branch's and the join never
made it a cond on the branch's other side, which kept the example's answer.

    on x=[-0.8118, -1.3065, 0.4157, -0.2814, 0.8102, 1.183, -0.6847, 0.2925], labels=[-1, -1, -1, -1, -1, -1, -1, -1]: differs from eager: [1.8117971420288086, 1.9332327842712402, 0.8218448758125305, 1.040207028388977, 1.1157454252243042, 1.507010579109192, 0.5109241008758545, 1.2925323247909546] where eager gives [0.8117971420288086, 0.9332327842712402, -0.17815513908863068, 0.04020697996020317, 0.11574540287256241, 0.5070105791091919, -0.4890758693218231, 0.292532354593277]
"""
import torch
from torch import nn

FIXED = "exporter/branches/align.py places a decision no earlier than the one asked before it"


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
        for c in torch.unique(labels[labels >= 0]):
            b0 = True
        if (labels == 3).any():
            h = torch.tanh(h) + x
        return h + (1.0 if b0 else 0.0)


def make_model():
    torch.manual_seed(0)
    return Model()


EXAMPLE = (
    torch.tensor([0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.5, -0.3]),
    torch.tensor([0, 1, 2, 0, 1, 2, -1, 0]),
)

SEED = 10819
