"""The flat functions a trace records, run directly on real tensors: what each returns and
what it notes for the trace."""

import pytest
import torch
import torch.utils._pytree as pytree

import exporter

from exporter import TraceError
from exporter.inputs import bind_inputs
from exporter.trace.module_function import Holder, ModuleRun, Recorded, functional_fn, plain_fn
from exporter.trace.state_inputs import collect_state
from exporter.trace.write_watch import NeedsFunctionalization


class Counter(torch.nn.Module):
    def __init__(self, reassign: bool = False):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.register_buffer("seen", torch.zeros(3))
        self.reassign = reassign

    def forward(self, x):
        if self.reassign:
            self.seen = self.seen + x.sum(0)
        return {"y": self.lin(x), "n": 2}


def _run(model, x):
    state_inputs = collect_state(model)
    bound = bind_inputs(model, (x,), None)
    return ModuleRun(model, state_inputs, bound, Holder(model)), [*state_inputs.values, *bound.flat]


def test_the_plain_function_returns_the_flat_outputs_and_notes_their_structure():
    model, x = Counter(), torch.randn(2, 3)
    run, inputs = _run(model, x)
    recorded = Recorded()
    flat = plain_fn(run, recorded)(*inputs)
    assert pytree.tree_unflatten(list(flat), recorded.out_spec)["n"] == 2
    torch.testing.assert_close(flat[0], model(x)["y"])
    assert dict(model.named_buffers())["seen"] is model.seen  # swapped back


def test_a_reassigned_buffer_ends_the_plain_try():
    run, inputs = _run(Counter(reassign=True), torch.randn(2, 3))
    with pytest.raises(NeedsFunctionalization, match="a buffer was reassigned"):
        plain_fn(run, Recorded())(*inputs)


class Regrows(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(2))

    def forward(self, x):
        self.cache = torch.cat([self.cache, x])
        return x


def test_a_buffer_grown_from_itself_is_refused_with_the_fix():
    # The program cannot carry a state that grows between calls; a buffer replaced by a value
    # not made from itself is computed and noted instead (tests/exporter/trace/test_tracer.py).
    with pytest.raises(TraceError, match=r"replaced buffer 'cache' \(\(2,\) torch.float32\) with \(3,\) .* computed from the buffer itself") as caught:
        exporter.export(Regrows(), (torch.ones(1),))
    assert "largest shape" in caught.value.hint


class ReturnsSubclass(torch.nn.Module):
    def __init__(self):
        from torch.testing._internal.two_tensor import TwoTensor

        super().__init__()
        self.w = torch.nn.Parameter(TwoTensor(torch.randn(3, 3), torch.randn(3, 3)))

    def forward(self, x):
        return {"scores": x @ self.w}


class BuildsSubclass(torch.nn.Module):
    def forward(self, x):
        from torch.testing._internal.two_tensor import TwoTensor

        return {"scores": TwoTensor(x * 2, x * 3)}


@pytest.mark.parametrize("ir", ["inference", "training"])
@pytest.mark.parametrize("model", [ReturnsSubclass, BuildsSubclass], ids=["state", "built"])
def test_a_tensor_subclass_returned_is_refused_naming_the_output_and_its_tensors(model, ir):
    """Its inner tensors are traced, the wrapper is not: kept as an output leaf, the program
    returned a constant holding the trace's fake tensors."""
    import exporter

    if ir == "training" and model is ReturnsSubclass:  # subclass state is refused first there
        with pytest.raises(TraceError, match="keeps tensor-subclass parameters"):
            exporter.export(model(), (torch.randn(2, 3),), ir=ir)
        return
    with pytest.raises(TraceError, match=r"returns a tensor subclass TwoTensor at output\['scores'\]") as caught:
        exporter.export(model(), (torch.randn(2, 3),), ir=ir)
    assert caught.value.category.value == "unsupported tensor subclass"
    assert "(out.a, out.b)" in caught.value.hint
