"""Model constraints that break the declared dynamic_shapes: each explained, with where and the fix to paste."""

import re

import pytest
import torch
from torch.export import Dim

import exporter
from exporter import ConstraintError

HERE = __file__


def _line(marker: str) -> str:
    with open(HERE) as f:
        for i, line in enumerate(f, 1):
            if f"# marker: {marker}" in line:
                return f"{HERE}:{i}"
    raise AssertionError(marker)


class PosEmbed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(128, 8))

    def forward(self, x, y):
        t = x.shape[1]
        return x + self.pos[:t], y * 2  # marker: slice


class View16(torch.nn.Module):
    def forward(self, x):
        return x.view(-1, 16) * 2  # marker: view16


class Pairs(torch.nn.Module):
    def forward(self, x):
        b, t = x.shape
        return x.view(b, t // 2, 2).sum(-1)  # marker: pairs


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y  # marker: add


class CatAdd(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, x], 0) + y  # marker: cat


class MidColumn(torch.nn.Module):
    def forward(self, x):
        t = x.shape[1]
        return x[:, t // 2]  # marker: index


class CausalTable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("causal", torch.ones(16, 16, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x, mask):
        t = x.shape[1]
        return x.masked_fill(self.causal[:t, :t] & mask[:, None, :].bool(), 0.0)  # marker: causal


class MinSize(torch.nn.Module):
    def forward(self, x):
        torch._check(x.shape[0] >= 8)  # marker: check
        return x * 2


# (model, example args, dynamic_shapes, marker of the line that forces it, message, exact fix)
CONSTRAINT_CASES = [
    (
        PosEmbed(), (torch.randn(2, 16, 8), torch.randn(2)), {"x": {1: Dim("seq", max=200)}, "y": None}, "slice",
        r"the model needs x.shape\[1\] <= 128, but the spec allows \[2, 200\]",
        'seq = Dim("seq", max=128)',
    ),
    (
        View16(), (torch.randn(4, 16),), {"x": {1: Dim("features")}}, "view16",
        r"x.shape\[1\] is declared dynamic \(dynamic_shapes\['x'\]\[1\] = features\) but the model only works when it is 16",
        '"x": {1: None}  (static), or change the model so it does not fix this size',
    ),
    (
        View16(), (torch.randn(4, 16),), {"x": {1: Dim.DYNAMIC}}, "view16",
        r"x.shape\[1\] is declared dynamic \(dynamic_shapes\['x'\]\[1\] = Dim.DYNAMIC\) but the model only works when it is 16",
        '"x": {1: None}  (static), or change the model so it does not fix this size',
    ),
    (
        Pairs(), (torch.randn(4, 16),), {"x": {0: Dim("b"), 1: Dim("t")}}, "pairs",
        r"the model needs x.shape\[1\] to be a multiple of 2",
        't_2 = Dim("t_2"); "x": {1: 2 * t_2}  (a multiple of 2)',
    ),
    (
        Add(), (torch.randn(6), torch.randn(6)), {"x": {0: Dim("a")}, "y": {0: Dim("b")}}, "add",
        r"the model needs x.shape\[0\] == y.shape\[0\] \(b\), which the spec does not declare",
        '"x": {0: b}  (the same Dim as y.shape[0])',
    ),
    (
        CatAdd(), (torch.randn(3, 4), torch.randn(6, 4)), {"x": {0: Dim("a")}, "y": {0: Dim("c")}}, "cat",
        r"the model needs y.shape\[0\] == 2 \* a, which the spec does not declare",
        '"y": {0: 2 * a}  (derived from x.shape[0])',
    ),
    (
        MidColumn(), (torch.randn(3, 8),), {"x": {1: Dim("t")}}, "index",
        r"the model needs t // 2 < t, which export can prove for every size only if x.shape\[1\] is a multiple of 2",
        't_2 = Dim("t_2"); "x": {1: 2 * t_2}  (a multiple of 2)',
    ),
    (
        CausalTable(), (torch.randn(2, 6, 6), torch.ones(2, 6)), {"x": {1: (s := Dim("s", max=16)), 2: s}, "mask": {1: s}},
        "causal", r"the model needs s != 16, which fails for s = 16 inside the declared range \[2, 16\]", 's = Dim("s", max=15)',
    ),
    (
        MinSize(), (torch.randn(10),), {"x": {0: Dim("n")}}, "check",
        r"the model needs x.shape\[0\] >= 8, but the spec allows \[2, inf\]",
        'n = Dim("n", min=8)',
    ),
]


@pytest.mark.parametrize("model, args, spec, marker, message, fix", CONSTRAINT_CASES, ids=lambda v: v if isinstance(v, str) and " " not in v else None)
def test_constraint_errors_say_what_where_and_the_fix(model, args, spec, marker, message, fix):
    with pytest.raises(ConstraintError) as info:
        exporter.export(model, args, dynamic_shapes=spec)
    error = info.value
    assert error.category.value == "dynamic shape constraint"
    assert re.search(message, str(error)), str(error)
    assert [v.fix for v in error.violations] == [fix]
    assert error.location == _line(marker)
    assert f"forced at {_line(marker)}" in str(error)


def test_the_suggested_fixes_export():
    a = Dim("a")
    t_2 = Dim("t_2")
    for model, args, spec in [
        (PosEmbed(), (torch.randn(2, 16, 8), torch.randn(2)), {"x": {1: Dim("seq", max=128)}, "y": None}),
        (View16(), (torch.randn(4, 16),), {"x": {1: None}}),
        (Pairs(), (torch.randn(4, 16),), {"x": {0: Dim("b"), 1: 2 * t_2}}),
        (Add(), (torch.randn(6), torch.randn(6)), {"x": {0: a}, "y": {0: a}}),
        (CatAdd(), (torch.randn(3, 4), torch.randn(6, 4)), {"x": {0: a}, "y": {0: 2 * a}}),
        (MidColumn(), (torch.randn(3, 8),), {"x": {1: 2 * t_2}}),
        (CausalTable(), (torch.randn(2, 6, 6), torch.ones(2, 6)), {"x": {1: (s := Dim("s", max=15)), 2: s}, "mask": {1: s}}),
        (MinSize(), (torch.randn(10),), {"x": {0: Dim("n", min=8)}}),
    ]:
        exporter.export(model, args, dynamic_shapes=spec)
