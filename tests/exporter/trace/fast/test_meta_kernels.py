"""The meta-kernel rules give exactly the fake results torch's decompositions give, and a
rule that disagrees on a kind of call is never used for it."""

from __future__ import annotations

import copy

import pytest
import torch

import exporter
from exporter._torch_internals import FakeTensorMode, ShapeEnv, fake_dispatch_through
from exporter._torch_internals.fast import BATCH_NORMS
from exporter.trace.fast import meta_kernels
from exporter.trace.fast.meta_kernels import MetaKernels, _results
from tests.support import graph_fingerprint

_NO_TRAINING = next(op for op, training_at in BATCH_NORMS.items() if training_at is None)


@pytest.fixture(autouse=True)
def fresh_verdicts():
    meta_kernels.forget_meta_verdicts()
    yield
    meta_kernels.forget_meta_verdicts()


def _batch_norm_args(mode, channels, size, channels_last=False):
    x = torch.randn(2, channels, size, size)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    stats = [torch.randn(channels) for _ in range(4)]
    return (mode.from_tensor(x), *(mode.from_tensor(t) for t in stats), 0.1, 1e-5)


def _computed(mode, op, args, through_rules):
    mode.cache_enabled = False
    if not through_rules:
        with mode:
            return op(*args)
    with fake_dispatch_through(mode, MetaKernels(mode)), mode:
        return op(*args)


@pytest.mark.parametrize("channels_last", [False, True])
def test_batch_norm_by_its_rule_equals_the_decomposition(channels_last):
    mode = FakeTensorMode()
    for channels, size in [(8, 4), (16, 8), (3, 5), (16, 1)]:
        args = _batch_norm_args(mode, channels, size, channels_last)
        expected = _results(_computed(mode, _NO_TRAINING, args, False), args, {})
        first = _results(_computed(mode, _NO_TRAINING, args, True), args, {})  # checks the kind
        served = _results(_computed(mode, _NO_TRAINING, args, True), args, {})  # by the rule
        assert first == expected and served == expected
    assert any(kind[0] is _NO_TRAINING and verdict for kind, verdict in meta_kernels._VERDICTS.items())
    # eval-mode batch norm on CPU: empty saved statistics, as torch's decomposition and CPU's kernel give
    out = _computed(mode, _NO_TRAINING, _batch_norm_args(mode, 8, 4, channels_last), True)
    assert out[1].shape == (0,) and out[2].shape == (0,)


def test_a_rule_that_disagrees_is_never_used_for_its_kind(monkeypatch):
    def wrong(mode, func, dispatch, types, args, kwargs):
        out = dispatch(func, types, args, kwargs)
        return (out[0].new_empty((1,)), out[1], out[2])

    monkeypatch.setitem(meta_kernels._RULES, _NO_TRAINING, wrong)
    mode = FakeTensorMode()
    args = _batch_norm_args(mode, 8, 4)
    expected = _results(_computed(mode, _NO_TRAINING, args, False), args, {})
    for _ in range(3):
        assert _results(_computed(mode, _NO_TRAINING, args, True), args, {}) == expected
    assert [v for k, v in meta_kernels._VERDICTS.items() if k[0] is _NO_TRAINING] == [False]


def test_a_symbolic_call_takes_the_decomposition(monkeypatch):
    used = []
    monkeypatch.setitem(meta_kernels._RULES, _NO_TRAINING, lambda *a: used.append(a))
    mode = FakeTensorMode(shape_env=ShapeEnv())
    x = mode.from_tensor(torch.randn(2, 8, 4, 4))
    sym = mode.shape_env.create_unbacked_symint()
    with fake_dispatch_through(mode, MetaKernels(mode)), mode:
        y = x.new_empty((sym, 8, 4, 4))
        _NO_TRAINING(y, *(mode.from_tensor(torch.randn(8)) for _ in range(4)), 0.1, 1e-5)
    assert used == [] and meta_kernels._VERDICTS == {}


class Stages(torch.nn.Module):
    """Batch norms at several sizes and memory formats: each size a new call of the same kinds."""

    def __init__(self):
        super().__init__()
        chans = [3, 8, 16, 32]
        self.convs = torch.nn.ModuleList(torch.nn.Conv2d(a, b, 3, stride=2, padding=1) for a, b in zip(chans, chans[1:]))
        self.norms = torch.nn.ModuleList(torch.nn.BatchNorm2d(b) for b in chans[1:])

    def forward(self, x):
        for conv, norm in zip(self.convs, self.norms):
            x = torch.relu(norm(conv(x)))
        return x.mean((2, 3))


@pytest.mark.parametrize("training", [False, True])
def test_programs_are_the_same_with_and_without_the_rules(training):
    model = Stages().train(training)
    x = torch.randn(2, 3, 32, 32)
    for inputs in [(x,), (x.to(memory_format=torch.channels_last),)]:
        before = {k: v.clone() for k, v in model.state_dict().items()}
        eager = copy.deepcopy(model)
        plain = exporter.export(model, inputs, fast_paths=False)
        fast = exporter.export(model, inputs, fast_paths=True)
        assert graph_fingerprint(fast.graph_module) == graph_fingerprint(plain.graph_module)
        assert fast.graph_signature == plain.graph_signature
        for k, v in model.state_dict().items():
            torch.testing.assert_close(v, before[k])
        fresh = torch.randn(2, 3, 32, 32)
        torch.testing.assert_close(fast.module()(fresh), eager(fresh))
