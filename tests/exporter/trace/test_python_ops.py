"""Python on sizes and tensors (max, min, math.pow, indexing, torch.tensor) means the same with
and without dynamic_shapes, and keeps symbolic sizes symbolic."""

import builtins
import math

import pytest
import torch
from torch.export import Dim

import exporter
from exporter import ConstraintError
from exporter.trace.python_ops import builtin_max, builtin_min, power
from tests.exporter.constraints.test_violations import View16


class PadTo(torch.nn.Module):
    def forward(self, x):
        n = max(x.shape[0], 4)  # plain Python max/min on a symbolic size
        m = min([x.shape[0], 6, 9])
        last = x[x.shape[0] - 1]  # indexing with a symbolic int
        return torch.zeros(n) + last, x * m * torch.tensor(x.shape[0])


def test_builtin_max_min_and_symbolic_indexing_stay_symbolic():
    spec = {"x": {0: Dim("n")}}
    ep = exporter.export(PadTo(), (torch.randn(6),), dynamic_shapes=spec)
    oracle = torch.export.export(PadTo(), (torch.randn(6),), dynamic_shapes=spec)
    assert {str(k): (v.lower, v.upper) for k, v in ep.range_constraints.items()} == {
        str(k): (v.lower, v.upper) for k, v in oracle.range_constraints.items()
    }
    for n in (2, 3, 5, 6, 7, 12):
        x = torch.randn(n)
        torch.testing.assert_close(ep.module()(x), PadTo()(x))
    assert max(3, 4) == 4 and min([5, 2]) == 2 and max.__module__ == "builtins"  # restored


def test_builtins_are_restored_when_an_export_fails():
    with pytest.raises(ConstraintError):
        exporter.export(View16(), (torch.randn(4, 16),), dynamic_shapes={"x": {1: Dim("features")}})
    assert builtins.max.__module__ == "builtins" and builtins.min.__module__ == "builtins"
    assert math.pow.__module__ == "math"
    assert not torch.overrides._get_current_function_mode_stack()


class TensorMinMax(torch.nn.Module):
    def forward(self, t, u, x):
        floor = max(t, 0.5)  # a one-element tensor and a number: clamp
        low = min(t, u)  # two one-element tensors: minimum
        n = max(x.shape[0], 3)  # sizes
        return floor * x + low, torch.full((n,), 2.0), math.pow(x.shape[0], 2) * x


@pytest.mark.parametrize("spec", [None, {"t": None, "u": None, "x": {0: Dim("n")}}], ids=["static", "dynamic"])
def test_max_min_and_pow_behave_the_same_with_and_without_dynamic_shapes(spec):
    args = (torch.tensor([0.25]), torch.tensor([0.75]), torch.randn(4))
    ep = exporter.export(TensorMinMax(), args, dynamic_shapes=spec)
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert {"aten.clamp.default", "aten.minimum.default"} <= targets
    for t, u in [(0.25, 0.75), (0.9, 0.1)]:
        inputs = (torch.tensor([t]), torch.tensor([u]), torch.randn(4))
        for got, want in zip(ep.module()(*inputs), TensorMinMax()(*inputs)):
            torch.testing.assert_close(got, want)
    # torch.export takes max(tensor, 0.5) as clamp too, with or without dynamic shapes
    oracle = torch.export.export(TensorMinMax(), args, dynamic_shapes=spec, strict=False)
    assert {"aten.clamp.default", "aten.minimum.default"} <= {str(n.target) for n in oracle.graph.nodes}


def test_the_replacements_fall_back_to_the_builtins_on_plain_values():
    real_max, real_min, real_pow = max, min, math.pow
    assert builtin_max(real_max)(3, 7, 5) == 7 and builtin_min(real_min)([4, 2, 9]) == 2
    assert builtin_max(real_max)(["b", "a"], key=len) == "b"
    assert power(real_pow)(2, 3) == 8.0 and isinstance(power(real_pow)(2, 3), float)
    with pytest.raises(ValueError):
        builtin_max(real_max)([])
