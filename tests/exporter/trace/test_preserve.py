"""An export never changes the user's model: not on success, not on failure."""

import pytest
import torch

import exporter
from exporter.trace.preserve import find_leaked_tracing_values


class Meddler(torch.nn.Module):
    """forward() writes to self in every way a model can."""

    def __init__(self, fail: bool):
        super().__init__()
        self.fail = fail
        self.lin = torch.nn.Linear(3, 3)
        self.history = []
        self.cache = {}
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x):
        y = self.lin(x)
        self.last = y
        self.history.append(y)
        self.cache["y"] = y
        self.seen.add_(1)
        self.lin.weight.data = self.lin.weight.data * 0
        self.extra = torch.nn.ReLU()
        self.lin.register_forward_hook(lambda m, i, o: o)
        self.eval()
        torch.nn.Module.train(self.lin, False)
        if self.fail:
            raise RuntimeError("boom")
        return y


def _snapshot(model):
    return {
        "state": {k: v.clone() for k, v in model.state_dict().items()},
        "ids": {k: id(v) for k, v in [*model.named_parameters(), *model.named_buffers()]},
        "training": {n: m.training for n, m in model.named_modules()},
        "hooks": {n: (len(m._forward_hooks), len(m._forward_pre_hooks)) for n, m in model.named_modules()},
        "attrs": {n: sorted(vars(m)) for n, m in model.named_modules()},
        "lists": (len(model.history), dict(model.cache)),
    }


@pytest.mark.parametrize("fail", [False, True], ids=["export succeeds", "export fails"])
def test_model_is_unchanged(fail):
    model = Meddler(fail).train()
    before = _snapshot(model)
    if fail:
        with pytest.raises(exporter.ExportError, match="boom"):
            exporter.export(model, (torch.randn(2, 3),))
    else:
        exporter.export(model, (torch.randn(2, 3),))
    after = _snapshot(model)
    assert after["ids"] == before["ids"]
    assert after["training"] == before["training"]
    assert after["hooks"] == before["hooks"]
    assert after["attrs"] == before["attrs"]
    assert after["lists"] == before["lists"]
    for k, v in before["state"].items():
        torch.testing.assert_close(after["state"][k], v, msg=k)
    assert find_leaked_tracing_values(model) == []
    # and it still runs eagerly
    model(torch.randn(2, 3)) if not fail else None


def test_leak_finder_reports_paths():
    from torch._subclasses.fake_tensor import FakeTensorMode

    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    with FakeTensorMode() as mode:
        fake = torch.empty(2)
    model[0].stash = [1, {"t": fake}]
    assert find_leaked_tracing_values(model) == ["0.stash[1]['t']"]
    del mode
