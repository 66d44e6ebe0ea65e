"""``sides_taken`` counts the sides of every cond (nested ones apart) and the steps of every
while_loop a program's inputs reach; ``assert_every_side`` fails naming what none reached."""

from __future__ import annotations

import pytest
import torch

import exporter
from exporter.testing import assert_every_side, sides_taken

nn = torch.nn


class Nested(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            if x.max() > 2:
                return x * 3
            return x * 2
        return -x


class PerClass(nn.Module):
    def forward(self, x, labels):
        total = x.new_zeros(())
        for c in torch.unique(labels[labels >= 0]):
            total = total + x[labels == c].sum()
        return total


def test_each_cond_counts_its_sides_and_a_nested_one_counts_apart():
    program = exporter.export(Nested(), (torch.ones(3),))
    taken = sides_taken(program, [(torch.ones(3),)])
    assert sorted(map(sorted, taken.conds.values())) == [[False], [True]]  # outer true, inner false
    assert len(taken.missing()) == 2
    taken = sides_taken(program, [(torch.ones(3),), (torch.full((3,), 3.0),), (-torch.ones(3),)])
    assert taken.missing() == []
    # the program's results are eager's as the sides run
    assert_every_side(program, [(torch.ones(3),), (torch.full((3,), 3.0),), (-torch.ones(3),)])


def test_a_missing_side_fails_naming_the_line_of_its_cond():
    program = exporter.export(Nested(), (torch.ones(3),))
    with pytest.raises(AssertionError, match=r"the cond at \S+test_sides.py:\d+ .* never took its false side"):
        assert_every_side(program, [(torch.ones(3),), (torch.full((3,), 3.0),)])  # never negative


def test_a_while_loop_counts_its_steps():
    program = exporter.export(PerClass(), (torch.randn(6), torch.tensor([0, 1, 2, 0, 1, 2])))
    taken = sides_taken(program, [(torch.randn(6), torch.tensor([0, 1, 2, 0, 1, 2])), (torch.randn(6), torch.full((6,), -1))])
    assert list(taken.loops.values()) == [{3, 0}]
    assert taken.missing() == []
    with pytest.raises(AssertionError, match="never went round no times"):
        assert_every_side(program, [(torch.randn(6), torch.tensor([0, 1, 1, 0, 1, 1]))])
    assert_every_side(program, [(torch.randn(6), torch.tensor([0, 1, 1, 0, 1, 1]))], loops=False)


def test_inputs_may_be_args_and_kwargs():
    program = exporter.export(Nested(), (torch.ones(3),))
    taken = sides_taken(program, [((-torch.ones(3),), {})])
    assert list(taken.conds.values()) == [{False}]
