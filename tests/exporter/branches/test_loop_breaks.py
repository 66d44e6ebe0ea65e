"""A ``break`` on a value inside a loop over a data-sized tensor: the step's branch is a cond
in the while_loop's body, the side that breaks sets a flag the loop's condition reads, and
forward after the loop reads what the breaking step left.  Each program is held to eager on
inputs that go round no times, break at the first step, at a later one, at the last, and
never."""

from __future__ import annotations

import pytest
import torch

import exporter
from tests.exporter.branches.programs import calls_of, marked_line, matches_eager

nn = torch.nn
HERE = __file__


def _whiles(program: torch.export.ExportedProgram) -> int:
    return calls_of(program, torch.ops.higher_order.while_loop)


class StopsAtTheFirstLarge(nn.Module):
    """The running sum stops where a value passes 0.5; the step that breaks has added it."""

    def forward(self, x):
        total = x.new_zeros(())
        for value in x[x > 0]:
            total = total + value
            if value > 0.5:  # line-marker: breaks here
                break
            total = total * 0.5
        return total * 3


class CountsAndFlags(nn.Module):
    """Python numbers the steps rebind (a count) and the break sets (a flag), read after it."""

    def forward(self, x):
        total, count, found = x.new_zeros(()), 0, False
        for value in x[x > 0]:
            count += 1
            if value > 0.5:
                found = True
                break
            total = total + value
        if found:
            return total * count
        return total - count


class KeepsTheBreakingValue(nn.Module):
    """The break binds a tensor from before the loop that the other steps leave alone."""

    def forward(self, x):
        total, first = x.new_zeros(()), x.new_full((), -1.0)
        for value in x[x > 0]:
            if value > 0.5:
                first = value * 2
                break
            total = total + value
        return first + total


class BreaksOnTheElseSide(nn.Module):
    """The side that goes on is the ``if``; the ``else`` computes, then breaks."""

    def forward(self, x):
        total = x.new_zeros(())
        for value in x[x > 0]:
            if value < 0.5:
                total = total + value
            else:
                total = total * 10
                break
        return total


class MarksUntilConfident(nn.Module):
    """Each step writes a mask in place, then stops at the first confident score."""

    def forward(self, scores):
        keep = torch.zeros_like(scores, dtype=torch.bool)
        for index in torch.argsort(scores, descending=True)[: (scores > 0).sum()]:
            keep[index] = True
            if scores[index] < 0.5:
                break
        return keep


class BreaksThenLoopsAgain(nn.Module):
    """A second loop after the one that breaks, over another selection."""

    def forward(self, x):
        total = x.new_zeros(())
        for value in x[x > 0]:
            if value > 0.5:
                break
            total = total + value
        for value in x[x < 0]:
            total = total * 0.5 + value
        return total


def _values(*rows: list[float]) -> list[tuple[torch.Tensor]]:
    return [(torch.tensor(row),) for row in rows]


# no steps; a break at the first step, the third, the last (the fourth); never (four steps)
_BREAKS = _values(
    [-1.0, -2.0, -0.5, -3.0], [0.9, 0.2, -1.0, 0.3], [0.1, 0.2, 0.8, 0.3], [0.1, 0.2, 0.3, 0.7],
    [0.1, 0.2, 0.3, 0.4], [0.2, -1.0, 0.3, 0.6], [0.6, 0.7, 0.8, 0.9],
)

CASES = {
    "after a step's sum": (StopsAtTheFirstLarge, _BREAKS),
    "counting and setting a flag": (CountsAndFlags, _BREAKS),
    "binding a tensor from before": (KeepsTheBreakingValue, _BREAKS),
    "on the else side": (BreaksOnTheElseSide, _BREAKS),
    "then another loop": (BreaksThenLoopsAgain, _values(
        [-1.0, -2.0, -0.3, -0.4, -0.1, -0.2], [0.9, 0.2, -0.4, -0.1, 0.3, 0.1], [0.1, 0.2, 0.8, -0.4, -0.1, 0.3],
        [0.1, 0.2, 0.3, -0.4, -0.1, 0.4], [0.1, 0.2, 0.3, 0.4, 0.6, 0.2],
    )),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_break_on_a_value_inside_a_loop_is_one_while_loop_matching_eager(name):
    make, inputs = CASES[name]
    model = make()
    for example in (inputs[2], inputs[-1]):  # exported from a run that breaks, and one that does not
        program = exporter.export(model, example)
        assert calls_of(program, torch.ops.higher_order.cond) >= 1
        assert torch.ops.higher_order.cond not in [n.target for n in program.graph.nodes if n.op == "call_function"] or (
            name == "counting and setting a flag"  # its test of the flag after the loop
        )
        matches_eager(program, model, inputs, rtol=1e-5, atol=1e-6)


def test_a_break_after_writing_a_mask_in_place_matches_eager():
    model = MarksUntilConfident()
    inputs = [
        (torch.tensor(row),) for row in (
            # no steps; a break at the first step, the second, the third, the last; never
            [-0.1, -0.2, -0.3, -0.4, -0.5], [0.3, -1.0, -1.0, -1.0, -1.0], [0.4, 0.9, -1.0, -1.0, -1.0],
            [0.9, 0.3, -1.0, 0.8, -1.0], [0.9, 0.8, 0.7, 0.2, 0.6], [0.9, 0.8, 0.7, 0.6, 0.55],
        )
    ]
    program = exporter.export(model, inputs[3])
    assert _whiles(program) == 1
    matches_eager(program, model, inputs)


@pytest.mark.parametrize("name", ["after a step's sum", "counting and setting a flag", "binding a tensor from before"])
def test_a_break_inside_a_bounded_loop_matches_eager(name):
    make, inputs = CASES[name]
    model = make()
    program = exporter.export(model, inputs[2], max_iterations=4)
    assert _whiles(program) == 0
    for args in inputs:
        torch.testing.assert_close(program.module()(*args), model(*args), rtol=1e-5, atol=1e-6)


def test_the_loop_condition_reads_the_break_flag():
    program = exporter.export(StopsAtTheFirstLarge(), _BREAKS[2])
    (loop,) = [n for n in program.graph.nodes if n.target is torch.ops.higher_order.while_loop]
    condition = getattr(program.graph_module, loop.args[0].target)
    assert torch.ops.aten.logical_not.default in [n.target for n in condition.graph.nodes]
    # the flag goes round with the counter and the sum
    assert len(loop.args[2]) == 3


class ReturnsFromInsideTheLoop(nn.Module):
    def forward(self, x):
        total = x.new_zeros(())
        for value in x[x > 0]:  # line-marker: returns
            if value > 0.5:
                return total * 2
            total = total + value
        return total


class BreaksOnBothSides(nn.Module):
    def forward(self, x):
        total = x.new_zeros(())
        for value in x[x > 0]:  # line-marker: both break
            if value > 0.5:
                total = total + 1
                break
            else:
                break
        return total


class BreaksEveryStep(nn.Module):
    def forward(self, x):
        total = x.new_zeros(())
        for value in x[x > 0]:  # line-marker: every step
            total = total + value
            break
        return total


class BreaksWithTheSumBeforeTheLoop(nn.Module):
    """The break reads the sum as it was before the loop, by another name."""

    def forward(self, x):
        total, result = x.new_zeros(()), x.new_ones(())
        start = total
        for value in x[x > 0]:  # line-marker: before the loop
            total = total + value
            if value > 0.5:
                result = start * 2
                break
        return total + result


class BreaksWithTheStepBefore(nn.Module):
    """The break reads a value the step before made, which no step hands on."""

    def forward(self, x):
        total, previous = x.new_zeros(()), x.new_zeros(())
        for value in x[x > 0]:  # line-marker: step before
            if value > 0.5:
                total = total + previous
                break
            previous = value * 2
        return total


class BreaksOrElse(nn.Module):
    """``for ... else``: the else block runs only where no step breaks."""

    def forward(self, x):
        total, scale = x.new_zeros(()), 3.0
        for value in x[x > 0]:  # line-marker: else
            if value > 0.5:
                break
            total = total + value
        else:
            scale = 2.0
        if total > 0.25:
            return total
        return total * scale


@pytest.mark.parametrize(
    "model, marker, match",
    [
        (BreaksOrElse(), "else", "it has an `else:` block"),
        (BreaksWithTheSumBeforeTheLoop(), "before the loop", "reads a value from before the loop that the steps replace"),
        (BreaksWithTheStepBefore(), "step before", "reads a value of the step before that no step hands on"),
        (ReturnsFromInsideTheLoop(), "returns", "it is left before its end"),
        (BreaksOnBothSides(), "both break", "breaks out of the loop .* on both sides"),
        (BreaksEveryStep(), "every step", "left before its end"),
    ],
)
def test_what_leaves_a_loop_otherwise_is_refused_at_the_loop(model, marker, match):
    with pytest.raises(exporter.ExportError, match=match) as refused:
        exporter.export(model, _BREAKS[2])
    assert refused.value.location == marked_line(HERE, marker)


def test_the_report_names_the_branch_whose_side_breaks():
    report = exporter.export(StopsAtTheFirstLarge(), _BREAKS[2]).branch_report
    (loop,) = report.loops
    assert loop.breaks == marked_line(HERE, "breaks here")
    assert loop.to_json()["breaks"] == loop.breaks
    assert f"a step breaks out at {loop.breaks}" in str(loop)
    # a loop whose steps only go on says nothing of it
    plain = exporter.export(BreaksThenLoopsAgain(), CASES["then another loop"][1][2]).branch_report.loops
    assert [bool(loop.breaks) for loop in plain] == [True, False]


def test_a_break_in_a_loop_over_a_dynamic_input_matches_eager_on_other_lengths():
    model = CountsAndFlags()
    program = exporter.export(model, _BREAKS[2], dynamic_shapes={"x": {0: torch.export.Dim("n", min=2)}})
    inputs = [*_BREAKS, *_values([0.1, 0.2], [0.7, -1.0], [0.1] * 9 + [0.8], [0.1] * 12)]
    matches_eager(program, model, inputs, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_aotinductor_compiles_a_loop_that_breaks_and_runs_it_as_eager(tmp_path):
    model = CountsAndFlags()  # numbers carried, a flag the break sets, a branch on it after the loop
    program = exporter.export(model, _BREAKS[2])
    package = torch._inductor.aoti_compile_and_package(program, package_path=str(tmp_path / "breaks.pt2"))
    runner = torch._inductor.aoti_load_package(package)
    for args in _BREAKS:
        torch.testing.assert_close(runner(*args), model(*args), rtol=1e-5, atol=1e-6)


class BreaksThenAsks(nn.Module):
    """Only the break changes ``acc``; a question after the loop returns early on one side."""

    def forward(self, x, labels):
        acc = x.new_zeros(())
        for c in torch.unique(labels[labels >= 0]):  # line-marker: then asks
            if x[labels == c].sum() > 0.9:
                acc = acc + x[labels == c].sum() * 2
                break
        if x.abs().max().item() > 1.03:
            return x - acc
        return x + acc


def test_a_value_only_the_break_changes_held_at_a_later_question_is_refused():
    example = (torch.tensor([0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.5, -0.3]), torch.tensor([0, 1, 2, 0, 1, 2, -1, 0]))
    with pytest.raises(exporter.ExportError, match="changes on one side a value forward holds where it asks another") as refused:
        exporter.export(BreaksThenAsks(), example)
    assert refused.value.location == marked_line(HERE, "then asks")
