"""A model file shared by the command-line tests (as a subprocess and in process)."""

import sys
import textwrap

import pytest

MODELS = textwrap.dedent(
    """
    import torch

    class Net(torch.nn.Module):
        def __init__(self, hidden: int = 8):
            super().__init__()
            if hidden < 0:
                raise ValueError("hidden must be positive")
            self.lin = torch.nn.Linear(16, hidden)

        def forward(self, x):
            return self.lin(x)

    class Branchy(torch.nn.Module):
        def forward(self, x):
            for _ in range(x.gt(0).sum()):
                x = x * 0.5
            return x

    class Noisy(torch.nn.Module):
        def forward(self, x):
            return x + torch.rand_like(x)

    example_inputs = (torch.randn(3, 16),)

    def make_net():
        return Net(4)

    instance = Net(2)

    def not_a_model():
        return 3

    class Pipeline(torch.nn.Module):
        # fails to export only because of its Branchy gate
        def __init__(self):
            super().__init__()
            self.pre = torch.nn.Linear(16, 16)
            self.gate = Branchy()
            self.post = torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.post(self.gate(self.pre(x)))
    """
)


@pytest.fixture
def models(tmp_path, monkeypatch):
    """A model file in a fresh working directory; returns the directory.

    The file is imported under its own name, ``unit_models``, as the CLI imports a file."""
    (tmp_path / "unit_models.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("unit_models", None)
    yield tmp_path
    sys.modules.pop("unit_models", None)
