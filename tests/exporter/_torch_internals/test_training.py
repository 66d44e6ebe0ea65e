"""The names a training-IR trace records."""


import torch

from exporter import _torch_internals as internals


def test_training_ir_names():
    assert internals.training_dialect().dialect == "TRAINING"
    assert internals.SET_GRAD_ENABLED is torch._C._set_grad_enabled
    assert callable(internals.ENTER_AUTOCAST) and callable(internals.EXIT_AUTOCAST)
