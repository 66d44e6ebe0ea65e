"""The unfunctionalized first try: writes to fresh intermediates are recorded out of place,
with the program functionalization would give; any other write sends the model to a
functionalized trace."""

import pytest
import torch

import exporter


class _FreshWrite(torch.nn.Module):
    def forward(self, x):
        buckets = (x > 0).to(torch.long) * 4
        buckets += torch.where(x > 1, 1, 2)  # a fresh intermediate nothing views: no functionalization
        scores = x * 2
        scores.masked_fill_(x < 0, 0.0)
        return buckets, scores


class _ViewedWrite(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        row = y[0]
        y += 1  # `row` sees this write
        return row


class _WriteThenView(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        y += 1
        return y.view(-1) * 3  # functionalization replays this view from the written base


class _CastingWrite(torch.nn.Module):
    def forward(self, x):
        y = x.to(torch.int32)
        y += torch.ones(x.shape, dtype=torch.int64)  # int64 result, cast back to int32
        return y


class _NormActivations(torch.nn.Module):
    """A vision block: eval batch norm (one result of several) written by an in-place
    activation, as torchvision and timm write them."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.acts = torch.nn.Sequential(torch.nn.ReLU(inplace=True), torch.nn.SiLU(inplace=True), torch.nn.Hardswish(inplace=True))

    def forward(self, x):
        y = self.acts(self.bn(self.conv(x)))
        return torch.nn.functional.hardtanh(y * 2, -1.0, 1.0, inplace=True).clamp_(min=-0.5)


class _ComparedInPlace(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        y.lt_(0)  # out of place, lt gives a bool tensor: functionalization casts it back
        return y


class _IntegerClamp(torch.nn.Module):
    def forward(self, x):
        y = (x * 10).to(torch.int64)
        y.clamp_(0, 5)  # the floating-point rule does not speak for integers
        return y


class _ReadsADetachedAlias(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        before = y.detach()  # shares y's memory: sees the write below
        y.relu_()
        return before + 1


class _KeepsADetach(torch.nn.Module):
    """Autograd detaches relu's result to save it, in both traces alike: the detach the
    model keeps is named the same in both."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        y.relu_()
        return y, (y * 2).detach()


def _traces(model, x, monkeypatch):
    from exporter.inputs import bind_inputs
    from exporter.trace import trace, tracer

    tries = []
    trace_once = tracer._trace_once

    def counted(request, kind, **kwargs):
        tries.append(kind)
        return trace_once(request, kind, **kwargs)

    bound = bind_inputs(model, (x,), None)
    monkeypatch.setattr(tracer, "_trace_once", counted)
    fast = trace(model, bound)
    retraced = tries == ["plain", "functional"]
    functional = trace(model, bound, always_functionalize=True)
    return fast, functional, retraced


@pytest.mark.parametrize(
    "model, x, retraced",
    [
        (_FreshWrite(), torch.randn(3, 4), False),
        (_ViewedWrite(), torch.randn(3, 4), True),
        (_WriteThenView(), torch.randn(3, 4), True),
        (_CastingWrite(), torch.randn(3, 4), True),
        (_NormActivations().eval(), torch.randn(2, 3, 8, 8), False),
        (_ComparedInPlace(), torch.randn(3, 4), True),
        (_IntegerClamp(), torch.randn(3, 4), True),
        (_ReadsADetachedAlias(), torch.randn(3, 4), True),
        (_KeepsADetach(), torch.randn(3, 4), False),
    ],
    ids=["fresh", "viewed", "view-after-write", "casting", "vision-activations", "comparison", "integer-clamp", "detached-alias", "kept-detach"],
)
def test_writes_to_fresh_intermediates_need_no_functionalization(model, x, retraced, monkeypatch):
    fast, functional, was_retraced = _traces(model, x, monkeypatch)
    assert was_retraced is retraced
    assert fast.gm.code == functional.gm.code
    ops = [n.target for n in fast.gm.graph.nodes if isinstance(n.target, torch._ops.OpOverload)]
    assert not any(op.overloadpacket.__name__.endswith("_") for op in ops)
    torch.testing.assert_close(exporter.export(model, (x,)).module()(x), model(x))


def test_the_write_watch_classifies_each_target_once_per_trace(monkeypatch):
    """Whether an op writes (its schema, its effects) is worked out once per target and
    trace, not on every node."""
    from exporter.inputs import bind_inputs
    from exporter.trace import tracer, write_watch

    asked = []
    writes = write_watch.writes

    def counted(target):
        asked.append(target)
        return writes(target)

    monkeypatch.setattr(write_watch, "writes", counted)
    model = torch.nn.Sequential(*(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()) for _ in range(3)))
    state = tracer.trace(model, bind_inputs(model, (torch.randn(2, 4),), None))
    targets = [n.target for n in state.gm.graph.nodes if n.op == "call_function"]
    assert len(targets) > len(set(targets)), "the model repeats ops"
    assert sorted(map(str, asked)) == sorted(map(str, set(asked))), "each target asked once"
    assert set(asked) >= set(targets)
