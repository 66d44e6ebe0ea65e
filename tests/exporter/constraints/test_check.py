"""check_constraints: violations are raised all at once; torch's solver has the last word; ranges are set."""

import pytest
import torch
from torch.export import Dim

import exporter
import exporter.constraints.check
from exporter import ConstraintError
from tests.exporter.constraints.test_violations import MinSize, View16


def test_a_guard_torch_cannot_prove_is_reported_in_input_names(monkeypatch):
    # our own checks normally catch everything; when torch's solver still refuses, its
    # message is passed on with L['x'].size()[0] written as the user's x.shape[0]
    monkeypatch.setattr(exporter.constraints.check, "find_violations", lambda state: [])
    with pytest.raises(ConstraintError) as info:
        exporter.export(MinSize(), (torch.randn(10),), dynamic_shapes={"x": {0: Dim("n")}})
    text = str(info.value)
    assert "torch's shape solver cannot prove" in text
    assert "Not all values of n = x.shape[0] in the specified range satisfy the generated guard 8 <= x.shape[0] and x.shape[0] <= inf" in text, text
    assert "L['x']" not in text and "TORCH_LOGS" not in text
    assert info.value.hint.startswith("narrow the range")


def test_every_violation_is_listed_in_one_error():
    spec = {"x": {0: Dim("n", max=4), 1: Dim("features")}}
    with pytest.raises(ConstraintError) as info:
        exporter.export(View16(), (torch.randn(4, 16),), dynamic_shapes=spec)
    assert len(info.value.violations) == 1  # features must be 16; n is fine
    text = str(info.value)
    assert text.startswith("the model does not fit the declared dynamic shapes:")
    assert "fix: " in text and info.value.location


def test_a_fitting_spec_sets_the_range_constraints():
    ep = exporter.export(MinSize(), (torch.randn(10),), dynamic_shapes={"x": {0: Dim("n", min=8, max=64)}})
    assert [(int(vr.lower), int(vr.upper)) for vr in ep.range_constraints.values()] == [(8, 64)]


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def test_dim_dynamic_and_auto_take_the_relations_the_trace_infers():
    # torch.export unifies the two sizes into one symbol; so does exporter
    for hint in (Dim.DYNAMIC, Dim.AUTO):
        ep = exporter.export(Add(), (torch.randn(4, 3), torch.randn(4, 3)), dynamic_shapes={"x": {0: hint}, "y": {0: hint}})
        assert len(ep.range_constraints) == 1
        torch.testing.assert_close(ep.module()(torch.ones(6, 3), torch.ones(6, 3)), torch.full((6, 3), 2.0))
    # a named Dim must declare it, as in torch.export
    with pytest.raises(ConstraintError, match=r"the model needs y.shape\[0\] == x.shape\[0\]|the model needs x.shape\[0\] == y.shape\[0\]"):
        exporter.export(Add(), (torch.randn(4, 3), torch.randn(4, 3)), dynamic_shapes={"x": {0: Dim("a")}, "y": {0: Dim("b")}})


class AtMost32(torch.nn.Module):
    def forward(self, x):
        assert x.shape[0] <= 32
        return x + 2


def test_a_dim_dynamic_narrowed_to_one_size_is_a_violation():
    with pytest.raises(ConstraintError, match=r"declared dynamic .* but the model only works when it is 32"):
        exporter.export(AtMost32(), (torch.randn(32),), dynamic_shapes={"x": {0: Dim.DYNAMIC(min=32)}})


class FixesTheInt(torch.nn.Module):
    def forward(self, x, n):
        if n == 5:
            return x * 2
        return x


def test_an_int_declared_dynamic_that_the_model_fixes_is_a_violation():
    with pytest.raises(ConstraintError, match=r"n is declared dynamic \(dynamic_shapes\['n'\] = Dim.DYNAMIC\) but the model only works when it is 5"):
        exporter.export(FixesTheInt(), (torch.randn(3), 5), dynamic_shapes={"x": None, "n": Dim.DYNAMIC})
    # Dim.AUTO lets it become a constant
    exporter.export(FixesTheInt(), (torch.randn(3), 5), dynamic_shapes={"x": None, "n": Dim.AUTO})


def test_the_solver_is_skipped_when_it_cannot_force_a_specialization(monkeypatch):
    # DimConstraints.solve only reduces range inequalities here (suggested fixes that are
    # never read); with no equality, inconsistency or congruence it cannot refuse the spec
    from torch.fx.experimental.symbolic_shapes import DimConstraints

    calls = []
    original = DimConstraints.solve
    monkeypatch.setattr(DimConstraints, "solve", lambda self: calls.append(self) or original(self))
    ep = exporter.export(MinSize(), (torch.randn(10),), dynamic_shapes={"x": {0: Dim("n", min=8, max=64)}})
    assert calls == [] and len(ep.range_constraints) == 1
