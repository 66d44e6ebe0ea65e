"""A model with torch.cond exported static, then dynamic, in one process (fuzz finding 001
in the form a serving pipeline meets it).

The cond bodies Dynamo compiled for the first export used to stay cached; the second
trace's cache lookup evaluated their size guards on its symbolic size and recorded
``s0 != 4``, a ConstraintError.  A fresh process, since Dynamo's caches are process-wide."""

import subprocess
import sys

import pytest


SCRIPT = """
import torch, exporter
from torch.export import Dim

def on_true(a, b):
    return a.cos() * b

def on_false(a, b):
    return torch.tanh(a) * b

class Model(torch.nn.Module):
    def forward(self, x):
        v = x.unsqueeze(0)
        return torch.cond(v.sum() > 0, on_true, on_false, (v, v.mean()))

exporter.export(Model(), (torch.randn(4, 3, 3),))
x = torch.randn(2, 2, 2)
program = exporter.export(Model(), (x,), dynamic_shapes={"x": {0: Dim("s0", min=2, max=16)}})
torch.testing.assert_close(program.module()(torch.randn(4, 2, 2)).shape, torch.Size([1, 4, 2, 2]))
print("ok")
"""


@pytest.mark.slow
def test_a_dynamic_export_after_a_static_one_of_the_same_cond_model():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert result.stdout.strip().endswith("ok"), result.stderr[-3000:]
