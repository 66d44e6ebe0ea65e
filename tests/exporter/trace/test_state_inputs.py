"""State inputs: parameters and buffers by name; tensor-subclass ones as their inner tensors."""

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

from exporter import Category, TraceError
from exporter.trace.state_inputs import collect_state


class Mixed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.plain = torch.nn.Parameter(torch.ones(2))
        self.child = torch.nn.Module()
        self.child.pair = torch.nn.Parameter(TwoTensor(torch.zeros(2), TwoTensor(torch.ones(2), torch.ones(2))))
        self.register_buffer("scratch", torch.zeros(2), persistent=False)
        self.register_buffer("pair_buf", TwoTensor(torch.zeros(2), torch.ones(2)), persistent=False)


def test_subclass_state_is_named_as_torch_export_names_it_and_rebuilds():
    model = Mixed()
    state = collect_state(model)
    assert list(state.parameters) == [
        "plain",
        "child.parametrizations.pair.original0",
        "child.parametrizations.pair.original1",
        "child.parametrizations.pair.original2",
    ]
    assert list(state.buffers) == ["scratch", "parametrizations.pair_buf.original0", "parametrizations.pair_buf.original1"]
    assert state.non_persistent == {"scratch", "pair_buf", "parametrizations.pair_buf.original0", "parametrizations.pair_buf.original1"}
    assert all(type(t) is torch.nn.Parameter for t in state.parameters.values())
    leaf = state.parameters["child.parametrizations.pair.original0"]
    assert leaf.data_ptr() == model.child.pair.a.data_ptr()  # the program holds the model's memory
    swapped = state.module_state({name: torch.full((2,), 7.0) for name in state.names})
    assert set(swapped) == {"plain", "scratch", "child.pair", "pair_buf"}
    assert isinstance(swapped["child.pair"], TwoTensor) and isinstance(swapped["child.pair"].b, TwoTensor)
    assert torch.equal(swapped["child.pair"].b.a, torch.full((2,), 7.0))


def test_a_subclass_that_does_not_say_what_it_holds_is_refused():
    class Opaque(torch.Tensor):
        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class HoldsOpaque(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", torch.Tensor._make_subclass(Opaque, torch.ones(2)))

    with pytest.raises(TraceError, match=r"buffer 'w' is a .*Opaque.*no __tensor_flatten__") as info:
        collect_state(HoldsOpaque())
    assert info.value.category is Category.UNSUPPORTED_TENSOR_SUBCLASS


# -- writes to real tensors during a trace --------------------------------------------------

GLOBAL_COUNTS = torch.zeros(2)


class BumpsItsTensors(torch.nn.Module):
    """Writes in place to a plain tensor attribute and to a global tensor: the fake mode runs
    ``add_`` of a real tensor and a number for real (constant propagation)."""

    def __init__(self):
        super().__init__()
        self.seen = torch.zeros(2)
        self.lin = torch.nn.Linear(2, 2)

    def forward(self, x):
        self.seen.add_(1)
        GLOBAL_COUNTS.mul_(2).add_(1)
        return self.lin(x) + self.seen + GLOBAL_COUNTS


@pytest.mark.parametrize("ir", ["inference", "training"])
def test_an_export_leaves_the_models_plain_tensors_and_globals_as_they_were(ir):
    import copy

    import exporter

    model, x = BumpsItsTensors(), torch.randn(3, 2)
    GLOBAL_COUNTS.zero_()
    if ir == "inference":  # a constant cannot carry a change from call to call: refused
        with pytest.raises(TraceError, match="changes the tensor attribute self.seen in place"):
            exporter.export(model, (x,), ir=ir)
    else:  # kept as written: the program changes its constant as eager changes the model
        program = exporter.export(model, (x,), ir=ir)
        eager = copy.deepcopy(model)
        runner = copy.deepcopy(program).module()
        GLOBAL_COUNTS.zero_()
        expected = [eager(x) for _ in range(2)]
        GLOBAL_COUNTS.zero_()
        torch.testing.assert_close([runner(x) for _ in range(2)], expected)
        GLOBAL_COUNTS.zero_()
    assert torch.equal(model.seen, torch.zeros(2)) and torch.equal(GLOBAL_COUNTS, torch.zeros(2))


def test_real_writes_undone_restores_every_real_tensor_written_and_nothing_else():
    from exporter._torch_internals import FakeTensorMode
    from exporter.trace.state_inputs import real_writes_undone

    written, read = torch.zeros(2), torch.ones(2)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with pytest.raises(RuntimeError, match="stop"):
        with real_writes_undone(mode):
            with mode:
                written.add_(3)  # runs for real: the fake mode has nothing fake to compute on
                fake = torch.empty(2)  # a fake (made in the mode)
                fake.add_(read)
            assert torch.equal(written, torch.full((2,), 3.0))  # the trace saw the write
            raise RuntimeError("stop")
    assert torch.equal(written, torch.zeros(2)) and torch.equal(read, torch.ones(2))
