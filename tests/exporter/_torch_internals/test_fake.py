"""Functionalization helpers on fake tensors."""


import torch

from exporter import _torch_internals as internals


def test_functionalization_helpers():
    fake_mode, mode = internals.FakeTensorMode(), internals.functional_mode()
    with internals.enable_python_dispatcher(), fake_mode:
        x = fake_mode.from_tensor(torch.zeros(3, 4))
        with mode:
            written = internals.FunctionalTensor.to_functional(x)
            written.add_(1)
            restrided = internals.FunctionalTensor.to_functional(x)
            restrided.transpose_(0, 1)
            states = internals.functional_state(written), internals.functional_state(restrided)
            value = internals.unwrap_functional(restrided)
    assert states == ((False, False, True), (False, True, False))
    assert isinstance(value, internals.FakeTensor) and value.shape == (4, 3)
    assert internals.effect_tokens(mode) == []
