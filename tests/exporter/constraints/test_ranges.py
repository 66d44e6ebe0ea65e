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
