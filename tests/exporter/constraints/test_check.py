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
    assert "Not all values of x.shape[0] in the specified range satisfy the generated guard 8 <= x.shape[0] and x.shape[0] <= inf" in text, text
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
