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


def test_a_snapshot_restores_nested_containers_as_often_as_asked():
    from exporter.trace.preserve import ModuleSnapshot

    model = torch.nn.Linear(2, 2)
    inner, table = {"a": [1]}, [{"k": 1}]
    model.registry = {"inner": inner}
    model.table = table
    snapshot = ModuleSnapshot(model)
    for _ in range(2):
        inner["b"] = 2
        inner["a"].append(3)
        table[0]["k"] = torch.zeros(1)
        table.append("new")
        model.added = 1
        snapshot.restore()
        assert model.registry == {"inner": {"a": [1]}} and model.registry["inner"] is inner
        assert table == [{"k": 1}] and model.table is table and not hasattr(model, "added")


class FillsACacheAndWritesABuffer(torch.nn.Module):
    """An attention block's bias cache filled on first use in eval mode, beside a buffer
    write that sends the trace from one way of tracing to the next."""

    def __init__(self):
        super().__init__()
        self.biases = torch.nn.Parameter(torch.randn(4, 4))
        self.register_buffer("history", torch.zeros(4, 4))
        self.cache = {}

    def forward(self, x):
        key = str(x.device)
        if key not in self.cache:
            self.cache[key] = self.biases * 2
        self.history[0].add_(1)
        return x + self.cache[key]


@pytest.mark.parametrize("fast_paths", [None, False], ids=["default", "make_fx only"])
def test_every_way_of_tracing_starts_from_the_model_as_given_not_as_the_last_try_left_it(fast_paths):
    model = FillsACacheAndWritesABuffer().eval()
    x = torch.randn(4, 4)
    ep = exporter.export(model, (x,), fast_paths=fast_paths)
    assert model.cache == {}
    torch.testing.assert_close(ep.module()(x), model(x))


def test_a_cache_filled_by_an_eager_call_before_the_export_becomes_a_lifted_constant():
    model = FillsACacheAndWritesABuffer().eval()
    x = torch.randn(4, 4)
    model(x)
    (cached,) = model.cache.values()
    ours = exporter.export(model, (x,))
    theirs = torch.export.export(model, (x,), strict=False).run_decompositions({})
    kinds = [spec.kind for spec in ours.graph_signature.input_specs]
    assert kinds == [spec.kind for spec in theirs.graph_signature.input_specs]
    (constant,) = ours.constants.values()
    torch.testing.assert_close(constant, cached)
    assert model.cache == {"cpu": cached}
    torch.testing.assert_close(ours.module()(x), model(x))
