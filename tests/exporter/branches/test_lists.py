"""A list a loop over a data-sized tensor appends to, read after the loop with
``torch.stack``, ``torch.cat``, ``len()`` or a truth test: a buffer and a count the
while_loop carries.  Each program is held to eager on inputs that go round no times, once,
three times and more, and append on every step, on some, or on none."""

from __future__ import annotations

import pytest
import torch

import exporter
from tests.exporter.branches.programs import calls_of, marked_line, matches_eager

nn = torch.nn
HERE = __file__


def _whiles(program: torch.export.ExportedProgram) -> int:
    return calls_of(program, torch.ops.higher_order.while_loop)


class StacksEachStep(nn.Module):
    """One row a step, stacked; no rows is a case of its own."""

    def forward(self, x):
        rows = []
        for value in x[x > 0]:
            rows.append(torch.stack([value, value * 2]))
        if not rows:
            return x.new_zeros(0, 2)
        return torch.stack(rows) * 3


class KeepsTheLarge(nn.Module):
    """An append on one side of the step's branch, concatenated; its length read."""

    def forward(self, x):
        kept = [x.new_zeros(0)]
        kept = []
        for value in x[x > 0]:
            if value > 0.5:
                kept.append((value * 2).reshape(1))
        if len(kept) == 0:
            return x.new_zeros(1)
        return torch.cat(kept) + len(kept)


class CropsUntilConfident(nn.Module):
    """Each step appends a row, then stops at the first confident one."""

    def forward(self, x):
        crops = []
        for value in x[x > 0]:
            crops.append(value.expand(3) * torch.arange(3.0))
            if value > 0.9:
                break
        return torch.stack(crops, dim=1) if crops else x.new_zeros(3, 0)


class ConcatenatesAlongColumns(nn.Module):
    """Items of two dimensions concatenated along their second, and stacked along the last."""

    def forward(self, x):
        parts = []
        for value in x[x > 0]:
            parts.append(value * torch.ones(2, 2) + torch.eye(2))
        if parts:
            return torch.cat(parts, dim=1).sum(0), torch.stack(parts, dim=-1).sum((0, 1))
        return x.new_zeros(0), x.new_zeros(0)


def _values(*rows: list[float]) -> list[tuple[torch.Tensor]]:
    return [(torch.tensor(row),) for row in rows]


# no steps; one; three; four (with a value past 0.9 at the second and at the last)
_INPUTS = _values(
    [-1.0, -2.0, -0.5, -3.0], [0.7, -1.0, -1.0, -1.0], [0.2, 0.95, -1.0, 0.6], [0.1, 0.6, 0.3, 0.8],
    [0.3, 0.7, 0.4, 0.95], [0.1, 0.2, 0.3, 0.4],
)

CASES = {
    "stacked each step": StacksEachStep,
    "kept on one side": KeepsTheLarge,
    "until a break": CropsUntilConfident,
    "concatenated along another dimension": ConcatenatesAlongColumns,
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_list_a_loop_appends_to_is_a_buffer_the_loop_carries_matching_eager(name):
    model = CASES[name]()
    for example in (_INPUTS[2], _INPUTS[-1]):
        program = exporter.export(model, example)
        assert _whiles(program) == 1
        matches_eager(program, model, _INPUTS, rtol=1e-5, atol=1e-6)


def test_a_list_over_a_dynamic_input_matches_eager_on_other_lengths():
    model = KeepsTheLarge()
    program = exporter.export(model, _INPUTS[3], dynamic_shapes={"x": {0: torch.export.Dim("n", min=2)}})
    inputs = [*_INPUTS, *_values([0.7, 0.2], [0.6] * 9, [0.1] * 12)]
    matches_eager(program, model, inputs, rtol=1e-5, atol=1e-6)


class AppendsTwice(nn.Module):
    def forward(self, x):
        rows = []
        for value in x[x > 0]:  # line-marker: twice
            rows.append(value)
            rows.append(value * 2)
        return torch.stack(rows) if rows else x


class IndexesTheList(nn.Module):
    def forward(self, x):
        rows = []
        for value in x[x > 0]:  # line-marker: indexed
            rows.append(value * 2)
        return rows[0] if rows else x.sum()


class IteratesTheList(nn.Module):
    def forward(self, x):
        rows = []
        for value in x[x > 0]:  # line-marker: iterated
            rows.append(value * 2)
        total = x.new_zeros(())
        for row in rows:
            total = total + row
        return total


class ReadsTheLengthInside(nn.Module):
    def forward(self, x):
        rows = []
        for value in x[x > 0]:  # line-marker: inside
            rows.append(value * len(rows))
        return torch.stack(rows) if rows else x


class AppendsTwoSizes(nn.Module):
    def forward(self, x):
        rows = []
        for value in x[x > 0]:  # line-marker: sizes
            rows.append(value.reshape(1) if value > 0.5 else value.expand(2))
        return torch.cat(rows) if rows else x


class StartsWithAnItem(nn.Module):
    def forward(self, x):
        rows = [x.sum()]
        for value in x[x > 0]:  # line-marker: not empty
            rows.append(value * 2)
        return torch.stack(rows)


class AppendsThroughAnAlias(nn.Module):
    def forward(self, x):
        rows = []
        alias = rows
        for value in x[x > 0]:  # line-marker: alias
            rows.append(value * 2)
        return x.sum() * len(alias)


@pytest.mark.parametrize(
    "model, marker, match",
    [
        (AppendsThroughAnAlias(), "alias", "append to a list that `rows` and `alias` both hold"),
        (AppendsTwice(), "twice", r"its steps change it \(a list of 0 before the loop, a list of 2 then a list of 4"),
        (IndexesTheList(), "indexed", r"uses `rows`, the list its steps append to, after the loop \(__getitem__\)"),
        (IteratesTheList(), "iterated", r"uses `rows`, the list its steps append to, after the loop \(__iter__\)"),
        (ReadsTheLengthInside(), "inside", "takes the length of `rows`, the list its steps append to, inside the loop"),
        (AppendsTwoSizes(), "sizes", "appends a tensor of sizes"),
        (StartsWithAnItem(), "not empty", "forward reads `rows` after it"),
    ],
)
def test_what_a_buffer_cannot_stand_for_is_refused_at_the_loop(model, marker, match):
    with pytest.raises(exporter.ExportError, match=match) as refused:
        exporter.export(model, _INPUTS[3])
    assert refused.value.location == marked_line(HERE, marker)


def test_the_report_names_the_lists_a_loop_builds():
    (loop,) = exporter.export(StacksEachStep(), _INPUTS[3]).branch_report.loops
    assert loop.lists == ("rows",)
    assert "builds `rows` as a buffer and a count" in str(loop)
    assert loop.to_json()["lists"] == ("rows",)


# -- zip over data-sized tensors: one loop, as long as the shortest ------------------------


class CropsTheKept(nn.Module):
    """Boxes and their scores side by side, the kept ones collected."""

    def forward(self, boxes, scores):
        keep = scores > 0.5
        out, total = [], scores.new_zeros(())
        for box, score in zip(boxes[keep], scores[keep]):
            out.append(box * score)
            total = total + score
        if not out:
            return boxes.new_zeros(0, 4), total
        return torch.stack(out), total


class ZipsTwoSelections(nn.Module):
    """Two selections of different lengths: zip stops at the shorter."""

    def forward(self, x):
        total = x.new_zeros(())
        for a, b, c in zip(x[x > 0], x[x > 0.5], torch.nonzero(x > 0.2)[:, 0]):
            if a > b:
                break
            total = total + a * b + c
        return total


def test_zip_over_data_sized_tensors_is_one_loop_matching_eager():
    model = CropsTheKept()
    boxes = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    program = exporter.export(model, (boxes, torch.tensor([0.9, 0.1, 0.7, 0.2, 0.8, 0.3])))
    assert _whiles(program) == 1
    inputs = [(boxes, torch.tensor(s)) for s in ([0.1] * 6, [0.9] + [0.1] * 5, [0.6] * 6, [0.9, 0.1, 0.7, 0.2, 0.8, 0.3])]
    matches_eager(program, model, inputs, rtol=1e-5, atol=1e-6)


def test_zip_of_selections_of_other_lengths_stops_at_the_shortest_as_eager():
    model = ZipsTwoSelections()
    program = exporter.export(model, (torch.tensor([0.9, 0.1, 0.7, 0.2, 0.8, 0.3]),))
    inputs = _values(
        [-1.0] * 6, [0.9, 0.1, 0.7, 0.2, 0.8, 0.3], [0.3, 0.4, 0.45, 0.6, 0.1, 0.2], [0.6, 0.7, 0.8, 0.9, 1.0, 1.1],
        [0.4, 0.9, 0.3, 0.6, 0.1, 0.8],
    )
    matches_eager(program, model, inputs, rtol=1e-5, atol=1e-6)


class ValuesTimesCounts(nn.Module):
    """``unique``'s values and counts side by side: one length."""

    def forward(self, x):
        values, counts = torch.unique(x, return_counts=True)
        total = x.new_zeros(())
        for v, c in zip(values, counts):
            total = total + v * c
        return total


def test_zip_of_uniques_values_and_counts_matches_eager():
    model = ValuesTimesCounts()
    program = exporter.export(model, (torch.tensor([1.0, 2.0, 2.0, 3.0]),))
    assert _whiles(program) == 1
    matches_eager(program, model, _values([1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 2.0, 3.0], [4.0, 3.0, 2.0, 1.0]),
                  empty_loops=False)


class ZipsAList(nn.Module):
    def forward(self, x):
        total = x.new_zeros(())
        for a, b in zip(x[x > 0], [1.0, 2.0, 3.0]):  # line-marker: zips a list
            total = total + a * b
        return total


class ZipsInAComprehension(nn.Module):
    def forward(self, x):
        return sum(a * b for a, b in zip(x[x > 0], x[x > 0.5]))  # line-marker: comprehension


@pytest.mark.parametrize(
    "model, marker, match",
    [
        (ZipsAList(), "zips a list", "side by side .*with something other than tensors whose length only the data"),
        (ZipsInAComprehension(), "comprehension", r"other than in a `for` statement over the zip itself"),
    ],
)
def test_zip_with_anything_else_is_refused_at_the_line(model, marker, match):
    with pytest.raises(exporter.ExportError, match=match) as refused:
        exporter.export(model, (torch.tensor([0.9, 0.1, 0.7, 0.2, 0.8, 0.3]),))
    assert refused.value.location == marked_line(HERE, marker)


@pytest.mark.slow
def test_aotinductor_compiles_a_loop_that_builds_a_list_and_runs_it_as_eager(tmp_path):
    model = StacksEachStep()
    program = exporter.export(model, _INPUTS[2])
    package = torch._inductor.aoti_compile_and_package(program, package_path=str(tmp_path / "rows.pt2"))
    runner = torch._inductor.aoti_load_package(package)
    for args in _INPUTS:  # no steps; one; three; four
        torch.testing.assert_close(runner(*args), model(*args), rtol=1e-5, atol=1e-6)
