import pytest
import torch
from torch.export.graph_signature import InputKind

from exporter import PassError
from exporter.passes import restore_fqns
from tests.support import traced_state


class TiedAndShared(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight
        self.block = torch.nn.Linear(4, 4)
        self.alias = self.block
        self.register_buffer("stats", torch.zeros(4), persistent=False)
        self.register_buffer("kept", torch.ones(4))

    def forward(self, ids):
        h = self.alias(self.block(self.emb(ids))) + self.stats + self.kept
        return self.head(h)


def test_targets_are_the_users_fqns_for_every_alias():
    model = TiedAndShared()
    state = traced_state(model, (torch.tensor([[1, 2]]),), until=restore_fqns)
    restore_fqns(state)
    params = [s.target for s in state.input_specs if s.kind == InputKind.PARAMETER]
    assert params == [n for n, _ in model.named_parameters(remove_duplicate=False)]
    assert {"emb.weight", "head.weight", "block.bias", "alias.bias"} <= set(params)


def test_non_persistent_buffers_are_flagged_and_kept_in_constants():
    model = TiedAndShared()
    state = traced_state(model, (torch.tensor([[1, 2]]),), until=restore_fqns)
    assert restore_fqns(state) is True
    buffers = {s.target: s for s in state.input_specs if s.kind == InputKind.BUFFER}
    assert buffers["stats"].persistent is False
    assert buffers["kept"].persistent is True
    assert state.constants["stats"] is model.stats
    assert "kept" not in state.constants


def test_a_target_that_is_not_the_traced_tensor_is_rejected():
    model = TiedAndShared()
    state = traced_state(model, (torch.tensor([[1, 2]]),), until=restore_fqns)
    spec = next(s for s in state.input_specs if s.kind == InputKind.PARAMETER)
    spec.target = "block.missing"
    with pytest.raises(PassError, match="'block.missing', which is not a parameter"):
        restore_fqns(state)
