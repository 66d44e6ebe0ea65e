"""prefer_deferred_runtime_asserts_over_guards, differentially against torch.export."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import exporter
from exporter import ConstraintError


class Rows(torch.nn.Module):
    """A reshape that needs the batch times 3 to be a multiple of 4: a guard on the
    dynamic dim, which is a constraint error, or with the flag a runtime assert."""

    def forward(self, x):
        return x.reshape(-1, 4) * 2


class Branch(torch.nn.Module):
    """A size deciding a branch: a guard either way."""

    def forward(self, x):
        if x.shape[0] > 4:
            return x * 2
        return x + 1


def _asserts(program):
    return sorted(n.args[1] for n in program.graph.nodes if n.target is torch.ops.aten._assert_scalar.default)


def _outcome(program, x):
    try:
        return program.module()(x)
    except Exception as error:  # noqa: BLE001 - the kind of failure is compared
        return type(error)


def test_a_reshape_condition_becomes_the_oracles_runtime_asserts():
    spec = {"x": {0: Dim("b", max=64)}}
    x = torch.randn(8, 3)
    with pytest.raises(ConstraintError):
        exporter.export(Rows(), (x,), dynamic_shapes=spec)
    program = exporter.export(Rows(), (x,), dynamic_shapes=spec, prefer_deferred_runtime_asserts_over_guards=True)
    oracle = torch.export.export(
        Rows(), (x,), dynamic_shapes=spec, strict=False, prefer_deferred_runtime_asserts_over_guards=True
    ).run_decompositions({})
    assert _asserts(program) and [a.split(" on node")[0] for a in _asserts(program)] == [
        a.split(" on node")[0] for a in _asserts(oracle)
    ]
    assert {str(k): (v.lower, v.upper) for k, v in program.range_constraints.items()} == {
        str(k): (v.lower, v.upper) for k, v in oracle.range_constraints.items()
    }
    for batch in (8, 4, 12, 32):
        sample = torch.randn(batch, 3)
        torch.testing.assert_close(program.module()(sample), Rows()(sample))
    for batch in (6, 5):  # not a multiple of 4: both programs refuse it
        sample = torch.randn(batch, 3)
        assert _outcome(program, sample) is _outcome(oracle, sample) is RuntimeError


def test_a_size_that_decides_a_branch_is_still_a_constraint_error():
    spec = {"x": {0: Dim("b", max=64)}}
    with pytest.raises(Exception):
        torch.export.export(Branch(), (torch.randn(6, 3),), dynamic_shapes=spec, strict=False,
                            prefer_deferred_runtime_asserts_over_guards=True)
    with pytest.raises(ConstraintError):
        exporter.export(Branch(), (torch.randn(6, 3),), dynamic_shapes=spec, prefer_deferred_runtime_asserts_over_guards=True)
