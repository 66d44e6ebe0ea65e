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


def test_a_traced_tensors_fake_and_the_real_value_it_carries():
    with internals.real_tensor_propagation():
        fake_mode = internals.FakeTensorMode()
    real = torch.tensor([1, 2, 3])
    with internals.enable_python_dispatcher(), fake_mode:
        x = fake_mode.from_tensor(real)
        x.real_tensor = real
        doubled = x * 2
        with internals.functional_mode():
            wrapped = internals.FunctionalTensor.to_functional(doubled)
            found = internals.traced_fake(wrapped)
        value = internals.real_value(doubled)
        with internals.outside_modes():
            array = value.numpy()
    assert found is doubled and internals.traced_fake(real) is None and internals.traced_fake(3) is None
    assert type(value) is torch.Tensor and value.tolist() == [2, 4, 6] and array.tolist() == [2, 4, 6]
    plain_mode = internals.FakeTensorMode()  # without real-value propagation
    assert internals.real_value(plain_mode.from_tensor(torch.zeros(2))) is None


def test_fake_tensors_log_on_the_fake_tensor_logger():
    import logging

    from torch._subclasses import fake_tensor

    assert logging.getLogger(internals.FAKE_TENSOR_LOGGER) is fake_tensor.log
