import textwrap

import pytest
import torch

from exporter import InputSpecError
from exporter.cli.loading import load_model, redraw_like, resolve_example_inputs


def _write(tmp_path, body):
    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_class_attribute_wins_over_the_module_function(tmp_path):
    path = _write(tmp_path, """
        import torch
        class M(torch.nn.Module):
            example_inputs = (torch.ones(2),)
            def forward(self, x):
                return x
        def example_inputs():
            return (torch.zeros(5),)
    """)
    loaded = load_model(f"{path}:M")
    found = resolve_example_inputs(None, loaded)
    assert found.source == "M.example_inputs" and found.args[0].shape == (2,)


def test_function_inputs_are_reproducible_and_fresh_draws_differ(tmp_path):
    path = _write(tmp_path, """
        import torch
        class M(torch.nn.Module):
            def forward(self, x, mask=None):
                return x
        def make(model):
            assert isinstance(model, M)
            return (torch.randn(3),), {"mask": torch.rand(3) > 0.5}
    """)
    loaded = load_model(f"{path}:M")
    found = resolve_example_inputs(":make", loaded)
    again = found.fresh(0)
    assert torch.equal(again[0][0], found.args[0]), "seed 0 reproduces the example"
    assert not torch.equal(found.fresh(1)[0][0], found.args[0])
    assert list(found.kwargs) == ["mask"]


def test_model_is_put_in_eval_mode_unless_train(tmp_path):
    path = _write(tmp_path, """
        import torch
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__(); self.bn = torch.nn.BatchNorm1d(2)
            def forward(self, x):
                return self.bn(x)
    """)
    assert not load_model(f"{path}:M").model.training
    assert load_model(f"{path}:M", train=True).model.training


def test_redraw_like_keeps_shape_dtype_and_range():
    ids = torch.tensor([[3, 7, 5]])
    x = torch.rand(100) * 4 + 1
    (new_ids, new_x), _ = redraw_like(((ids, x), {}), seed=1)
    assert new_ids.dtype == torch.long and new_ids.shape == ids.shape
    assert int(new_ids.min()) >= 3 and int(new_ids.max()) <= 7
    assert float(new_x.min()) >= float(x.min()) and float(new_x.max()) <= float(x.max())
    assert redraw_like(((ids,), {}), seed=0)[0][0] is ids


def test_reference_without_colon_is_explained():
    with pytest.raises(InputSpecError, match="is not a reference of the form path/to/file.py:Name"):
        load_model("model.py")
