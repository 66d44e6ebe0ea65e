"""The compiler flags round-trip."""


import torch

from exporter import _torch_internals as internals


def test_compiler_flags_round_trip():
    saved = internals.compiler_flags()
    try:
        internals.set_compiler_flags(True, True)
        assert torch.compiler.is_compiling() and torch.compiler.is_exporting()
    finally:
        internals.set_compiler_flags(*saved)
    assert internals.compiler_flags() == saved


def test_the_dynamo_module_is_the_package_whose_config_is_looked_for():
    import importlib

    dynamo = importlib.import_module(internals.DYNAMO_MODULE)
    assert internals.loaded_dynamo_config() is dynamo.config
