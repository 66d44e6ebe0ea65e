import os

import pytest
import torch

from exporter import Category, TraceError
from exporter.passes import functionalize_constant_writes
from tests.support import call_targets, traced_state


class WritesDerived(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.ones(4)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        plus_two = self.table + 2
        plus_two.sub_(self.table)  # an in-place op on a tensor no input reaches
        # A write to a buffer: the model is traced functionalized, which leaves the write
        # above in place (the first, unfunctionalized try records it out of place itself).
        self.calls.add_(1)
        return plus_two * x


class WritesConstant(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.ones(4)

    def forward(self, x):
        self.table.add_(1)  # the write
        return x + self.table


def test_a_write_to_a_value_computed_from_constants_becomes_functional():
    state = traced_state(WritesDerived(), (torch.randn(4),), until=functionalize_constant_writes)
    assert torch.ops.aten.sub_.Tensor in call_targets(state.gm)

    assert functionalize_constant_writes(state) is True

    targets = call_targets(state.gm)
    assert torch.ops.aten.sub_.Tensor not in targets and torch.ops.aten.sub.Tensor in targets
    mul = next(n for n in state.gm.graph.nodes if n.target is torch.ops.aten.mul.Tensor)
    assert mul.args[0].target is torch.ops.aten.sub.Tensor  # later reads see the new value


def test_a_write_to_the_constant_itself_is_the_users_error():
    state = traced_state(WritesConstant(), (torch.randn(4),), until=functionalize_constant_writes)
    with pytest.raises(TraceError, match=r"changes the tensor attribute self.table in place") as info:
        functionalize_constant_writes(state)
    assert info.value.category is Category.UNSUPPORTED_MUTATION and "register the tensor as a buffer" in info.value.hint
    line = WritesConstant.forward.__code__.co_firstlineno + 1
    assert info.value.location == f"{os.path.abspath(__file__)}:{line}"


def test_a_functional_graph_is_left_alone():
    state = traced_state(torch.nn.Linear(2, 2), (torch.randn(1, 2),), until=functionalize_constant_writes)
    assert functionalize_constant_writes(state) is False
