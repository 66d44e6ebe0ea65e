"""An export stopped mid-trace (an exception or KeyboardInterrupt from the model) leaves
the model, torch's global state and Python's builtins exactly as they were."""

from __future__ import annotations

import builtins
import math

import pytest
import torch

import exporter
from exporter import ExportError


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(8, 8)
        self.second = torch.nn.Linear(8, 8)
        self.norm = torch.nn.BatchNorm1d(8)
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        self.steps.add_(1)
        h = self.norm(torch.relu(self.first(x)))
        return self.second(h)[:, : max(x.shape[0], 2)]


def _global_state():
    linear = torch.ops.aten.linear.default
    return {
        "grad": torch.is_grad_enabled(),
        "dtype": torch.get_default_dtype(),
        "max": builtins.max,
        "min": builtins.min,
        "pow": math.pow,
        "getitem": torch.Tensor.__getitem__,
        "tensor": torch.tensor,
        "linear kernels": dict(linear.py_kernels),
        "dispatch mode stack": torch._C._len_torch_dispatch_stack(),
        "function mode stack": torch._C._len_torch_function_stack(),
        "compiling": torch.compiler.is_compiling(),
        "exporting": torch.compiler.is_exporting(),
    }


def _model_state(model):
    return (
        {k: v.clone() for k, v in model.state_dict().items()},
        {name: m.training for name, m in model.named_modules()},
        {name: (dict(m._forward_hooks), dict(m._forward_pre_hooks)) for name, m in model.named_modules()},
        {name: sorted(vars(m)) for name, m in model.named_modules()},
    )


def _same(a, b):
    state_a, *rest_a = a
    state_b, *rest_b = b
    assert state_a.keys() == state_b.keys()
    for key in state_a:
        assert torch.equal(state_a[key], state_b[key]), key
    assert rest_a == rest_b


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError], ids=["KeyboardInterrupt", "exception"])
@pytest.mark.parametrize("where", ["first", "second"])
def test_a_trace_stopped_from_a_forward_hook_leaves_everything_as_it_was(stop, where):
    model = Net().train()
    x = torch.randn(4, 8)
    model(x)  # BatchNorm statistics and the step counter are not at their initial values
    before_model, before_global = _model_state(model), _global_state()

    def interrupt(module, args, output):
        if isinstance(output, torch.Tensor) and type(output) is not torch.Tensor:  # only while tracing
            raise stop("stopped mid-trace")

    handle = getattr(model, where).register_forward_hook(interrupt)
    hooked = _model_state(model)
    expected = KeyboardInterrupt if stop is KeyboardInterrupt else ExportError
    with pytest.raises(expected):
        exporter.export(model, (x,))
    assert _global_state() == before_global
    _same(_model_state(model), hooked)
    handle.remove()
    _same(_model_state(model), before_model)
    # and the next export in this process is unaffected
    program = exporter.export(model.eval(), (x,))
    torch.testing.assert_close(program.module()(x), model(x))
