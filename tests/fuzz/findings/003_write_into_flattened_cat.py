"""exporter raised ConstraintError on a write into a flattened cat of a dynamic input (guard
``2*s*Min(25, 50*s) == 50*s``); torch.export exports it.

Found by the long fuzz run (seed 4816, shrunk). Functionalizing ``v2.copy_(...)`` replays the
view chain, whose stride computation records that guard; it holds for every ``s >= 1`` but
torch's solver, deciding by value ranges, cannot show it, and exporter's own prover
(constraints/proofs.py, sizes written as lower bound + offset) left torch's ``Min`` unordered:
torch's size ``Min``/``Max`` do not use the offset's non-negativity. The prover now rewrites
them as sympy's, which do.
"""
import torch
from torch import nn
from torch.export import Dim

FIXED = "constraints/proofs.py orders torch's size Min/Max by the offsets' non-negativity"


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, inputs0):
        inputs0_1 = inputs0[1]
        v1 = torch.cat([inputs0_1, inputs0_1], dim=1)
        v2 = v1.flatten(0, 1)
        v2.copy_(torch.zeros_like(v2))
        return v2


SIZES = {'s0': 5, 's1': 5}
CHECK_SIZES = []


def make_inputs(sizes=SIZES, seed=0):
    g = torch.Generator().manual_seed(seed)
    s0 = sizes["s0"]
    s1 = sizes["s1"]
    args = ([torch.randn(s1, 2*s1, generator=g), torch.randn(s0, s0, s1, 5, generator=g)], )
    kwargs = {}
    return args, kwargs


def make_model():
    torch.manual_seed(0)
    return Model()


def dynamic_shapes():
    s0 = Dim("s0", min=2)
    return {"inputs0": [None, {1: s0}]}


if __name__ == "__main__":
    # PYTHONPATH=. python tests/fuzz/findings/003_write_into_flattened_cat.py
    from tests.fuzz.runner import check_source

    print(check_source(open(__file__).read()))
