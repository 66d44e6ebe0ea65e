"""Calls of named submodules are recorded as graph nodes during a trace, not in eager runs."""

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from exporter import InputSpecError
from exporter.trace.call_signatures import recording_calls


class Inner(torch.nn.Module):
    def forward(self, x, scale=1.0):
        return x * scale, x.sum()


class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        a, _ = self.inner(x, scale=2.0)
        b, s = self.inner(a, scale=3.0)
        return b + s


def test_each_call_is_recorded_with_its_nodes_and_constants():
    model = Outer()
    with recording_calls(model, ["inner"]) as calls:
        gm = make_fx(model)(torch.randn(3))
    assert [call.fqn for _, call in calls] == ["inner", "inner@1"]
    assert all(graph is gm.graph for graph, _ in calls)
    first, second = (call for _, call in calls)
    assert first.inputs[0].op == "placeholder" and first.inputs[1] == 2.0
    assert second.inputs[0] is first.outputs[0]  # what came out of the first call went into the second
    assert [n.target for n in second.outputs] == [torch.ops.aten.mul.Tensor, torch.ops.aten.sum.default]


def test_an_eager_run_records_nothing_and_the_hooks_go_away():
    model = Outer()
    with recording_calls(model, ["inner"]) as calls:
        model(torch.randn(3))
        assert model.inner._forward_hooks
    assert calls == []
    assert not model.inner._forward_hooks and not model.inner._forward_pre_hooks


def test_a_missing_path_names_the_existing_ones():
    with pytest.raises(InputSpecError, match="'inner.x', which is not a submodule of Outer") as info:
        with recording_calls(Outer(), ["inner.x"]):
            pass
    assert "'inner'" in info.value.hint
