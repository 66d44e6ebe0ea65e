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
