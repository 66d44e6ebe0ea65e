"""exporter raises ConstraintError on a torch.cond model after another cond model was exported in the same process; torch.export exports it.

Found by the long fuzz run (seed 656, shrunk; the program run first is seed 640, partly
shrunk). Exported in a fresh process, this program matches eager. After the program in
RUN_FIRST has been checked (exported with a size predicate `x.shape[0] > 3`, run eagerly)
in the same process, exporter.export refuses it:

    the model needs s0 != 4, which fails for s0 > 3 inside the declared range [2, 16]
    forced at ...: `v4 = torch.cond(v1.sum() > 0, true_fn3, false_fn3, (v1, v1.mean()))`

while torch.export.export(strict=False) in that same process exports it. Calling
torch._dynamo.reset() between the two makes exporter succeed: state Dynamo keeps from
the earlier torch.cond compilations (torch.cond compiles its body with Dynamo in
non-strict export) leaks a size guard into the next trace. Not root-caused further.
test_fuzz.py runs RUN_FIRST, then this program, in a fresh process.
"""
import torch
from torch import nn
from torch.export import Dim

FIXED = "exporter/trace/patches.py forgets the higher-order-op bodies Dynamo compiled during a trace"

def true_fn3(a, b):
    return a.cos() * b

def false_fn3(a, b):
    return torch.tanh(a) * b


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x1):
        v1 = x1.unsqueeze(0)
        v4 = torch.cond(v1.sum() > 0, true_fn3, false_fn3, (v1, v1.mean()))
        return v4


SIZES = {'s0': 2, 's1': 2}
CHECK_SIZES = []


def make_inputs(sizes=SIZES, seed=0):
    g = torch.Generator().manual_seed(seed)
    s0 = sizes["s0"]
    s1 = sizes["s1"]
    args = (torch.randn(s0, s1, s1, generator=g), )
    kwargs = {}
    return args, kwargs


def make_model():
    torch.manual_seed(0)
    return Model()


def dynamic_shapes():
    s0 = Dim("s0", min=2, max=16)
    return {"x1": {0: s0}}


RUN_FIRST = ['"""Fuzz program (tests/fuzz, seed 640)."""\nimport torch\nfrom torch import nn\nfrom torch.export import Dim\n\ndef true_fn5(a, b):\n    return a * 2.0 - b\n\ndef false_fn5(a, b):\n    return torch.tanh(a) * b\n\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.lin3 = nn.Linear(3, 3)\n\n    def forward(self, pair0):\n        pair0_0 = pair0[0]\n        pair0_1 = pair0[1]\n        v1 = pair0_1 * pair0_1.amax(0, keepdim=True)\n        v2 = torch.relu(pair0_0)\n        v4 = self.lin3(v2)\n        v6 = torch.cond(pair0_0.shape[0] > 3, true_fn5, false_fn5, (v2, v4))\n        v6.sub_(2.0)\n        return (v1,)\n\n\nSIZES = {\'s0\': 5, \'s1\': 3}\nCHECK_SIZES = []\n\n\ndef make_inputs(sizes=SIZES, seed=0):\n    g = torch.Generator().manual_seed(seed)\n    s0 = sizes["s0"]\n    s1 = sizes["s1"]\n    args = ((torch.randn(s1, 4, s1, 3, generator=g), torch.randn(s0, generator=g),), )\n    kwargs = {}\n    return args, kwargs\n\n\ndef make_model():\n    torch.manual_seed(0)\n    return Model()\n\n\ndef dynamic_shapes():\n    s0 = Dim("s0", min=1)\n    s1 = Dim("s1", min=2, max=25)\n    return {"pair0": ({0: s1, 2: s1}, {0: s0},)}\n\n\nif __name__ == "__main__":\n    import exporter\n\n    args, kwargs = make_inputs()\n    ep = exporter.export(make_model(), args, kwargs, dynamic_shapes=dynamic_shapes())\n    print(ep)\n']


if __name__ == "__main__":
    # PYTHONPATH=. python tests/fuzz/findings/001_cond_after_earlier_cond_export.py
    from tests.fuzz.runner import check_source

    for first in RUN_FIRST:
        print("run first:", check_source(first).klass)
    print(check_source(open(__file__).read()))
