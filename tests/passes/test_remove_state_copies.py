import torch
from torch.export.graph_signature import OutputKind

from exporter.passes import remove_state_copies
from tests.support import call_targets, traced_state


class Copies(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("same", torch.zeros(3))
        self.register_buffer("wider", torch.zeros(2, 3))
        self.register_buffer("ints", torch.zeros(3, dtype=torch.int64))

    def forward(self, x):
        self.same.copy_(x * 2)  # same shape and dtype: the copy repeats its source
        self.wider.copy_(x)  # broadcasts: the copy computes the stored value
        self.ints.copy_(x)  # casts: likewise
        return self.same + 1


def _update(state, target):
    spec = next(s for s in state.output_specs if s.kind == OutputKind.BUFFER_MUTATION and s.target == target)
    return next(n for n in state.gm.graph.nodes if n.name == spec.arg.name)


def test_a_plain_copy_is_replaced_by_its_source_and_the_others_stay():
    model = Copies()
    state = traced_state(model, (torch.randn(3),), until=remove_state_copies)
    assert call_targets(state.gm).count(torch.ops.aten.copy.default) == 3

    assert remove_state_copies(state) is True

    assert _update(state, "same").target is torch.ops.aten.mul.Tensor
    assert _update(state, "wider").target is torch.ops.aten.copy.default
    assert _update(state, "ints").target is torch.ops.aten.copy.default
    # the user output reads the new value directly, as torch.export's IR does
    add = next(n for n in state.gm.graph.nodes if n.target is torch.ops.aten.add.Tensor)
    assert add.args[0].target is torch.ops.aten.mul.Tensor


def test_a_model_without_state_updates_is_left_alone():
    state = traced_state(torch.nn.Linear(2, 2), (torch.randn(1, 2),), until=remove_state_copies)
    assert remove_state_copies(state) is False
