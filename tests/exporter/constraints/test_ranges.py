"""range_constraints: declared ranges for Dims, the solver's for hints, and data-dependent symbols."""

import torch
from torch.export import Dim

import exporter


class Table(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(32, 4))

    def forward(self, x, idx):
        return x + self.table[: x.shape[0]], idx.nonzero()


def _ranges(ep):
    return {str(k): (int(v.lower), None if v.upper > 10**9 else int(v.upper)) for k, v in ep.range_constraints.items()}


def test_ranges_match_the_oracle():
    args = (torch.randn(8, 4), torch.tensor([1, 0, 1]))
    for spec in ({"x": {0: Dim("n", min=3, max=32)}, "idx": None}, {"x": {0: Dim.AUTO}, "idx": None}):
        ours = exporter.export(Table(), args, dynamic_shapes=spec)
        oracle = torch.export.export(Table(), args, dynamic_shapes=spec, strict=False)
        assert _ranges(ours) == _ranges(oracle)
        assert any(k.startswith("u") for k in _ranges(ours))  # the nonzero count


def test_a_static_export_keeps_only_data_dependent_ranges():
    ep = exporter.export(Table(), (torch.randn(8, 4), torch.tensor([1, 0, 1])))
    assert all(k.startswith("u") for k in _ranges(ep))


class PinnedItems(torch.nn.Module):
    def forward(self, x, z):
        m = x.item()
        torch._check(m == z.shape[0])  # the data-dependent m is replaced by z's size
        return z * 2 + m


def test_a_replaced_data_dependent_symbol_has_no_range_of_its_own():
    spec = {"x": None, "z": (Dim("n", max=16),)}
    ep = exporter.export(PinnedItems(), (torch.tensor(5), torch.randn(5)), dynamic_shapes=spec)
    assert not any(k.startswith("u") for k in _ranges(ep))
    assert list(_ranges(ep).values()) == [(0, 16)]
