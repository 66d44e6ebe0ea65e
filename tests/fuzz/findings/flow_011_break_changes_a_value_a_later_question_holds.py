"""wrong: differs from eager (control-flow fuzzer, seed 953, shrunk).

Only the break changes `acc`; a question after the loop returns early on one side. The
run joined goes on, reads the loop's `acc`, but the later question's other side was traced
from a run whose steps left `acc` alone, so it read the value from before the loop.

    on x=[0.5209, 0.4829, 0.5783, 0.8245, 0.5737, 0.3278, 0.646, 0.5134], labels=[3, 0, 1, -1, 3, -1, 3, 3]: differs from eager: [-0.5209128856658936, -0.34489706158638, -0.24784286320209503, -0.11778503656387329, 0.08195135742425919, 0.14050552248954773, 0.4614036977291107, 0.5133678317070007] where eager gives [3.986898183822632, 4.162913799285889, 4.259968280792236, 4.390026092529297, 4.589762210845947, 4.648316383361816, 4.969214916229248, 5.021178722381592]
"""
import torch
from torch import nn

FIXED = "exporter/branches/join.py refuses a value only one side of a step's branch changes, held at a later question"


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
        if (labels == 3).any():
            if x.sum() > 1.2:
                for c, c_at in zip(torch.unique(labels[labels >= 0]), torch.nonzero(x > -0.22)[:, 0]):
                    if x[labels == c].sum() > 0.9:
                        acc = acc + x[labels == c].sum() * 2
                        break
            if x.abs().max().item() > 1.03:
                return h - acc
        return h + acc


def make_model():
    torch.manual_seed(0)
    return Model()


EXAMPLE = (
    torch.tensor([0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.5, -0.3]),
    torch.tensor([0, 1, 2, 0, 1, 2, -1, 0]),
)

SEED = 953
