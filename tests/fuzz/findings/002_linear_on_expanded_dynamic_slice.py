"""exporter's default IR refused a linear over an expanded slice of a dynamic input (a guard
``15*s2 != 75``) that torch.export exports; ir="training" exported it as torch does.

Found by the long fuzz run (seed 3781, shrunk). The linear's fake value is computed by its
CompositeImplicit decomposition (linear -> matmul), whose ``should_fold`` returns early when
the weight requires grad and otherwise compares the input's strides with a contiguous
layout's, ``guard_or_false(15*s2 == 75)``: on a backed size that records the guard
``s2 != 5``, which the Dim (min 2) does not declare. torch.export expands composites
autograd-visible, so the transposed weight requires grad and no stride is compared.
Fixed: kept-whole composites now expand autograd-visible too (kernels.py, ``_fake_rule``).
"""
FIXED = "exporter/trace/kernels.py expands kept-whole composites autograd-visible, as torch.export does"
import torch
from torch import nn
from torch.export import Dim


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin6 = nn.Linear(5, 5)

    def forward(self, feats1):
        feats1_1 = feats1[1]
        v4 = feats1_1[:, :, :1]
        v5 = v4.expand(-1, -1, 5, -1)
        v7 = self.lin6(v5)
        return v7


SIZES = {'s0': 3, 's1': 4, 's2': 4}
CHECK_SIZES = []


def make_inputs(sizes=SIZES, seed=0):
    g = torch.Generator().manual_seed(seed)
    s0 = sizes["s0"]
    s1 = sizes["s1"]
    s2 = sizes["s2"]
    args = ((torch.randn(4, 2, 3, generator=g), torch.randn(s0, 3, s2, 5, generator=g),), )
    kwargs = {}
    return args, kwargs


def make_model():
    torch.manual_seed(0)
    return Model()


def dynamic_shapes():
    s2 = Dim("s2", min=2)
    return {"feats1": (None, {2: s2},)}


if __name__ == "__main__":
    # PYTHONPATH=. python tests/fuzz/findings/002_linear_on_expanded_dynamic_slice.py
    from tests.fuzz.runner import check_source

    print(check_source(open(__file__).read()))
