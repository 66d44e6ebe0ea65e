"""Keep the example models exportable: run with `python -m pytest examples/test_exportable.py`."""

import os

import torch

from exporter.testing import assert_exportable

HERE = os.path.dirname(__file__)


def test_mlp_from_its_file():
    assert_exportable(os.path.join(HERE, "mlp.py:MLP"))


def test_cnn_with_init_args():
    assert_exportable(os.path.join(HERE, "cnn.py:SmallCNN"), init_args={"channels": 4})


def test_keyword_inputs_from_a_function():
    assert_exportable(os.path.join(HERE, "keyword_inputs.py:Scorer"), example_inputs=":make_inputs")


def test_an_instance_in_hand():
    from tiny_transformer import TinyTransformer  # noqa: E402 - the example directory is on sys.path under pytest

    model = TinyTransformer(layers=1).eval()
    args, kwargs = TinyTransformer.example_inputs()
    program = assert_exportable(model, args, kwargs)
    assert program.graph_signature.input_specs[0].target == "embed.weight"
    torch.testing.assert_close(program.module()(*args, **kwargs), model(*args, **kwargs))
