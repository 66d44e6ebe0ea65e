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


_COMPOSITE_CALLS = [
    ("linear 3-d", torch.ops.aten.linear.default, lambda: (torch.randn(2, 8, 16), torch.randn(12, 16), torch.randn(12))),
    ("linear 2-d, no bias", torch.ops.aten.linear.default, lambda: (torch.randn(5, 16), torch.randn(12, 16))),
    ("linear of a transposed input", torch.ops.aten.linear.default,
     lambda: (torch.randn(16, 2, 8).permute(1, 2, 0), torch.randn(12, 16), torch.randn(12))),
    ("linear of a sliced input", torch.ops.aten.linear.default, lambda: (torch.randn(2, 8, 20)[..., 2:18], torch.randn(12, 16))),
    ("matmul 4-d by 4-d", torch.ops.aten.matmul.default, lambda: (torch.randn(2, 3, 8, 4), torch.randn(2, 3, 4, 8))),
    ("matmul 3-d by 2-d", torch.ops.aten.matmul.default, lambda: (torch.randn(2, 8, 4), torch.randn(4, 6))),
    ("matmul of a transposed operand", torch.ops.aten.matmul.default,
     lambda: (torch.randn(2, 8, 4), torch.randn(2, 8, 4).transpose(1, 2))),
    ("layer_norm", torch.ops.aten.layer_norm.default, lambda: (torch.randn(2, 8, 16), [16], torch.randn(16), torch.randn(16))),
    ("einsum", torch.ops.aten.einsum.default, lambda: ("bij,bjk->bik", [torch.randn(2, 3, 4), torch.randn(2, 4, 5)])),
]


@pytest.mark.parametrize("name,op,make", _COMPOSITE_CALLS, ids=[c[0] for c in _COMPOSITE_CALLS])
def test_a_composite_on_meta_tensors_equals_its_expansion_on_fake_ones(name, op, make):
    from exporter._torch_internals.fast import composite_on_meta

    mode = FakeTensorMode()
    mode.cache_enabled = False
    args = torch.utils._pytree.tree_map_only(torch.Tensor, mode.from_tensor, make())
    with mode:
        expected = op(*args)
    assert _results(composite_on_meta(mode, op, args, {}), args, {}) == _results(expected, args, {})


class Widths(torch.nn.Module):
    """Linear layers, matmuls and layer norms at several widths, layouts and ranks: each width
    a new call of kinds seen before, the calls a kept-whole composite's rule takes."""

    def __init__(self, widths=(16, 24, 40, 8)):
        super().__init__()
        self.projections = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(widths, widths[1:]))
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(b) for b in widths[1:])

    def forward(self, x):
        for projection, norm in zip(self.projections, self.norms):
            x = norm(projection(x))
            x = x + (x @ x.transpose(1, 2)) @ x / 10
            x = projection.weight.new_ones(()) * torch.nn.functional.linear(x.transpose(0, 1), torch.eye(x.shape[-1])).transpose(0, 1)
        return x[:, 0], x.mean(1)


def test_kept_whole_composites_by_their_rule_give_the_plain_program():
    model = Widths().eval()
    x = torch.randn(2, 6, 16)
    plain = exporter.export(model, (x,), fast_paths=False)
    fast = exporter.export(model, (x,), fast_paths=True)
    served = [k for k, v in meta_kernels._VERDICTS.items() if v and k[0] is torch.ops.aten.linear.default]
    assert served, "no kind of linear call was found to agree (so none was taken by the rule)"
    assert graph_fingerprint(fast.graph_module) == graph_fingerprint(plain.graph_module)
    assert fast.graph_signature == plain.graph_signature
    again = exporter.export(model, (x,), fast_paths=True)  # every kind known: served by the rules
    assert graph_fingerprint(again.graph_module) == graph_fingerprint(plain.graph_module)
    fresh = torch.randn(2, 6, 16)
    for out, expected in zip(again.module()(fresh), model(fresh)):
        torch.testing.assert_close(out, expected)


def test_a_composite_rule_that_disagrees_is_never_used_for_its_kind(monkeypatch):
    from exporter._torch_internals.fast import composite_on_meta

    def wrong(mode, func, dispatch, types, args, kwargs):
        out = composite_on_meta(mode, func, args, kwargs)
        return out.new_empty(out.shape).transpose(0, -1) if isinstance(out, torch.Tensor) and out.dim() > 1 else out

    monkeypatch.setattr(meta_kernels, "_by_composite_on_meta", wrong)
    monkeypatch.setattr(meta_kernels, "TRUSTED", frozenset())  # each kind checked at run time
    model = Widths((12, 20, 36, 4)).eval()  # sizes no other test traced: the recorder's memo has none of them
    x = torch.randn(2, 5, 12)
    plain = exporter.export(model, (x,), fast_paths=False)
    for _ in range(2):
        fast = exporter.export(model, (x,), fast_paths=True)
        assert graph_fingerprint(fast.graph_module) == graph_fingerprint(plain.graph_module)
    linear = [v for k, v in meta_kernels._VERDICTS.items() if k[0] is torch.ops.aten.linear.default]
    assert linear and not any(linear)
