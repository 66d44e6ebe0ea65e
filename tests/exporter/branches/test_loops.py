"""Loops over a tensor whose length only the data decides become torch.while_loop: the
program matches eager on inputs that go round them no times, once and many times, alone and
inside a captured branch, and what cannot be one loop is refused naming the line."""

from __future__ import annotations

import copy
import io

import pytest
import torch
from torch.export import Dim

import exporter
from exporter import Category
from exporter.testing import sides_taken
from tests.exporter.branches.programs import calls_of, marked_line, matches_eager

nn = torch.nn
HERE = __file__


def _line(marker: str) -> str:
    return marked_line(HERE, marker)


def _whiles(program: torch.export.ExportedProgram) -> int:
    return calls_of(program, torch.ops.higher_order.while_loop)


def _matches_eager(program, model, inputs: list[tuple], empty_loops: bool = True) -> None:
    """``empty_loops=False`` for a loop over ``torch.unique(labels)`` of labels that are never
    empty: no input can make it go round no times."""
    matches_eager(program, model, inputs, rtol=1e-5, atol=1e-6, empty_loops=empty_loops)


class SumOfEachClassesBest(nn.Module):
    """A running sum over the classes present: the sum is handed from step to step."""

    def forward(self, scores, labels):
        keep = scores > 0.5
        kept, classes = scores[keep], labels[keep]
        total = scores.new_zeros(())
        for c in torch.unique(classes):  # line-marker: classes
            total = total + kept[classes == c].max()
        return total


class BestOfEachClass(nn.Module):
    """torchvision's batched NMS, one box kept per class: a mask written in place each step,
    read after the loop."""

    def forward(self, scores, labels):
        keep_mask = torch.zeros_like(scores, dtype=torch.bool)
        for c in torch.unique(labels):
            members = torch.where(labels == c)[0]
            best = scores[members].argmax()
            keep_mask[members[best.reshape(1)]] = True
        return torch.where(keep_mask)[0]


class RowsOfNonzero(nn.Module):
    def forward(self, x):
        for row in x.nonzero():
            x = x + row.sum()
        return x


class ExpertsHit(nn.Module):
    """A mixture of experts that runs only the experts its tokens chose (``for expert_idx in
    expert_hit``, with the expert's 0-d index used to pick its weights and its tokens)."""

    def __init__(self, experts: int = 4, width: int = 8) -> None:
        super().__init__()
        self.router = nn.Linear(width, experts)
        self.weights = nn.Parameter(torch.randn(experts, width, width) / width**0.5)
        self.experts = experts

    def forward(self, x):
        choice = self.router(x).argmax(-1)
        mask = nn.functional.one_hot(choice, self.experts).T
        out = torch.zeros_like(x)
        for expert in torch.greater(mask.sum(-1), 0).nonzero():
            expert = expert[0]
            tokens = torch.where(mask[expert])[0]
            out.index_add_(0, tokens, x[tokens] @ self.weights[expert])
        return out


class ShareOfThePeak(nn.Module):
    """Each step reads a float read once before the loop with ``.item()``: it crosses the
    while_loop (which takes tensors and ints) as a 0-d tensor."""

    def forward(self, scores, labels):
        peak = scores.max().item()
        out = torch.zeros_like(scores)
        for c in torch.unique(labels):
            out = out + (labels == c) * scores / peak * c
        return out


def _scores(n: int, high: float):
    g = torch.Generator().manual_seed(n + int(high * 10))
    return torch.rand(n, generator=g) * high, torch.randint(0, 5, (n,), generator=g)


CASES = {
    "a running sum": (SumOfEachClassesBest, _scores(20, 1.0), [_scores(20, 0.4), _scores(20, 0.6), _scores(20, 1.0)], True),
    "a mask written in place": (BestOfEachClass, _scores(20, 1.0), [_scores(20, 1.0), _scores(20, 3.0)], False),
    "a float read before the loop": (ShareOfThePeak, _scores(20, 1.0), [_scores(20, 0.4), _scores(20, 3.0)], False),
    "rows of nonzero": (
        RowsOfNonzero, (torch.eye(4) * 2,), [(torch.zeros(4, 4),), (torch.eye(4),), (torch.ones(4, 4),)], True,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_loop_over_a_data_sized_tensor_is_one_while_loop_matching_eager(name):
    make, example, others, may_be_empty = CASES[name]
    model = make().eval()
    program = exporter.export(model, example)
    assert _whiles(program) == 1
    (loop,) = program.branch_report.loops
    assert loop.carried >= 2  # the step count, and what the loop computes
    _matches_eager(program, model, [example, *others], empty_loops=may_be_empty)


def test_the_report_names_the_loops_line_and_what_it_carries():
    program = exporter.export(SumOfEachClassesBest(), _scores(20, 1.0))
    (loop,) = program.branch_report.loops
    assert loop.location == _line("classes")
    assert loop.code == "for c in torch.unique(classes):  # line-marker: classes"
    assert (loop.carried, loop.module) == (2, "")
    assert program.branch_report.to_json()["loops"][0]["location"] == loop.location
    assert "1 loop(s) over data-sized tensors, captured as torch.while_loop" in str(program.branch_report)


def test_the_experts_a_batch_hits_run_in_a_loop_matching_eager_on_other_routes():
    torch.manual_seed(0)
    model = ExpertsHit().eval()
    x = torch.randn(6, 8)
    program = exporter.export(model, (x,))
    assert _whiles(program) == 1
    routes = set()
    with torch.no_grad():
        for seed in range(8):
            other = torch.randn(6, 8, generator=torch.Generator().manual_seed(seed)) * (seed + 1)
            routes.add(tuple(model.router(other).argmax(-1).unique().tolist()))
            torch.testing.assert_close(program.module()(other), model(other), rtol=1e-5, atol=1e-5)
    assert len(routes) > 1  # the inputs hit other sets of experts


class EachClassOrAll(nn.Module):
    """torchvision's batched NMS: past a size, a loop over the classes present; below it, one
    pass over every box; and nothing at all when no box is left."""

    def forward(self, scores, labels):
        kept = scores > 0.5
        scores, labels = scores[kept], labels[kept]
        if scores.numel() > 6:  # line-marker: choice
            keep_mask = torch.zeros_like(scores, dtype=torch.bool)
            for c in torch.unique(labels):  # line-marker: loop in a branch
                members = torch.where(labels == c)[0]
                keep_mask[members[scores[members].argmax().reshape(1)]] = True
            return torch.where(keep_mask)[0]
        if scores.numel() == 0:
            return torch.empty((0,), dtype=torch.int64)
        offset = scores + labels * 10.0
        return offset.topk(1).indices


def test_a_loop_on_one_side_of_a_branch_matches_eager_on_every_side():
    model = EachClassOrAll()
    program = exporter.export(model, _scores(20, 1.0))
    report = program.branch_report
    assert [loop.location for loop in report.loops] == [_line("loop in a branch")]
    assert _line("choice") in [d.location for d in report.decisions]
    # many boxes (the loop), a few (one pass), none
    _matches_eager(program, model, [_scores(20, 1.0), _scores(20, 0.56), _scores(20, 0.4), _scores(20, 2.0)], empty_loops=False)


def test_a_loop_with_a_dynamic_batch_keeps_it_dynamic():
    model = SumOfEachClassesBest()
    program = exporter.export(model, _scores(20, 1.0), dynamic_shapes=({0: Dim("n")}, {0: Dim("n")}))
    assert _whiles(program) == 1
    _matches_eager(program, model, [_scores(7, 1.0), _scores(33, 1.0), _scores(12, 0.3)])


def test_the_program_saves_loads_and_decomposes():
    model = BestOfEachClass()
    program = exporter.export(model, _scores(20, 1.0))
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    decomposed = program.run_decompositions()
    for other in (_scores(20, 1.0), _scores(20, 5.0)):
        for p in (loaded, decomposed):
            torch.testing.assert_close(p.module()(*other), model(*other))


@pytest.mark.slow
def test_aotinductor_compiles_the_loop_and_runs_it_as_eager(tmp_path):
    model = SumOfEachClassesBest()
    program = exporter.export(model, _scores(20, 1.0))
    package = torch._inductor.aoti_compile_and_package(program, package_path=str(tmp_path / "loop.pt2"))
    runner = torch._inductor.aoti_load_package(package)
    for args in (_scores(20, 1.0), _scores(20, 0.4), _scores(20, 0.6)):  # many, no and few rounds
        torch.testing.assert_close(runner(*args), model(*args), rtol=1e-5, atol=1e-6)


class CollectsItems(nn.Module):
    def forward(self, x):
        rows = [row * 2 for row in x.nonzero()]  # line-marker: collects
        return torch.stack(rows).sum(0) if rows else x.new_zeros(2, dtype=torch.long)


class RebindsToATensorFromBefore(nn.Module):
    """After no steps ``total`` is the zeros, after any it is ``other``: the graph reads
    ``other`` either way, since no op of the steps makes it."""

    def forward(self, x):
        total, other = x.new_zeros(()), x.sum()
        for value in x[x > 0]:  # line-marker: rebinds
            total = other
        return total


class RebindsOnOneSide(nn.Module):
    def forward(self, x):
        total, other = x.new_zeros(()), x.sum()
        for value in x[x > 0]:  # line-marker: rebinds on one side
            if value > 0.5:
                total = other
        return total


class TwoBranchesInAStep(nn.Module):
    def forward(self, x):
        total = x.new_zeros(())
        for value in x[x > 0]:  # line-marker: two branches
            if value > 0.5:
                total = total + value
            if value > 0.8:
                total = total * 2
        return total


class PeakFromBeforeTheLoop(nn.Module):
    def forward(self, x):
        total, peak = x.new_zeros(()), x.max().item()
        for value in x[x > 0]:  # line-marker: from before
            if peak > 0.5:
                total = total + value
        return total


class CountsItsSteps(nn.Module):
    def forward(self, x):
        total = x.new_zeros(())
        for i, value in enumerate(x[x > 0]):  # line-marker: counts
            total = total + value * i
        return total


class LoopInsideALoop(nn.Module):
    def forward(self, x):
        total = x.new_zeros(())
        for row in x.nonzero():  # line-marker: outer
            for c in row.nonzero():
                total = total + c.sum()
        return total


@pytest.mark.parametrize(
    "model, marker, match",
    [
        (CollectsItems, "collects", "handed to something that iterates it"),
        (RebindsToATensorFromBefore, "rebinds", r"its steps bind `total` to a tensor made before the loop"),
        (RebindsOnOneSide, "rebinds on one side", r"its steps bind `total` to a tensor made before the loop"),
        (TwoBranchesInAStep, "two branches", r"a step branches more than once \(`if value > 0.5:`, then `if value > 0.8:"),
        (PeakFromBeforeTheLoop, "from before", r"a step branches on a value from before the loop \(`if peak > 0.5:`"),
        (CountsItsSteps, "counts", "counts the steps with `enumerate`"),
        (LoopInsideALoop, "outer", "another loop over a data-sized tensor starts"),
    ],
)
def test_what_cannot_be_one_loop_is_refused_at_the_line(model, marker, match):
    with pytest.raises(exporter.TraceError, match=match) as refused:
        exporter.export(model(), (torch.rand(3, 2) + 0.1,))
    assert refused.value.category is Category.BRANCH_CAPTURE
    assert refused.value.location == _line(marker)


def test_refuse_mode_fails_at_the_loop_as_torch_export_does():
    with pytest.raises(exporter.TraceError) as refused:
        exporter.export(SumOfEachClassesBest(), _scores(20, 1.0), branches="refuse")
    assert refused.value.category is Category.DATA_DEPENDENT_CONTROL_FLOW
    assert refused.value.location == _line("classes")


class WriteEachClass(nn.Module):
    """Each step writes at the step's item, as eager indexes with a 0-d tensor (``out[c] =
    ...``): a whole row, part of one, a column, and two positions side by side."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def forward(self, x, labels):
        out = torch.zeros(5, 3, 4)
        for c in torch.unique(labels):
            d = (c + 1) % 3
            if self.how == "row":
                out[c] = x[0]
            elif self.how == "part of a row":
                out[c, :2] = x[0, :2] * c
            elif self.how == "a column":
                out[:, 1, c % 4] = x[:, 0, 0]
            elif self.how == "side by side":
                out[c, d] += x[1, 0]
            elif self.how == "apart":
                out[c, :, d] = 2.5
        return out


@pytest.mark.parametrize("how", ["row", "part of a row", "a column", "side by side", "apart"])
def test_a_step_that_writes_at_its_item_is_one_while_loop_matching_eager(how):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, 4, generator=g)
    labels = [torch.tensor(v) for v in ([1, 3, 1], [0, 0, 0], [4, 3, 2], [2, 0, 4])]
    model = WriteEachClass(how)
    program = exporter.export(model, (x, labels[0]))
    assert _whiles(program) == 1
    _matches_eager(program, model, [(torch.randn(5, 3, 4, generator=g), v) for v in labels], empty_loops=False)


class CountsTheClasses(nn.Module):
    """Python state changed at each step and read after the loop: numbers of the loop's own
    function are carried through the while_loop, and so is a list the steps append to; an
    attribute, a value that changes kind cannot be."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how, self.steps = how, 0

    def forward(self, x, labels):
        total, count, seen, found, last, mean = x.new_zeros(()), 0, [], False, None, 0.0
        for c in torch.unique(labels[labels >= 0]):  # line-marker: counted
            total = total + x[labels == c].sum()
            if self.how == "a list's length":
                seen.append(c)
            elif self.how == "an attribute":
                self.steps += 1
            elif self.how in ("the last item", "the last item, unread"):
                last = c
            else:
                count += 1
                found = True
                mean = mean + x[labels == c].mean().item()
        if self.how == "a count":
            return total / (count + 1)
        if self.how == "a count tested":
            return total if count == 1 else -total
        if self.how == "a flag":
            return total if found else total - 100
        if self.how == "a float":
            return total * mean
        if self.how == "a list's length":
            return total * len(seen)  # line-marker: reads the list
        if self.how == "the last item":
            return total if last is None else total + last  # line-marker: reads the last item
        if self.how == "the last item, unread":
            return total
        return total * self.steps


def _classes(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Eight values with ``n`` classes among their labels (none: every label is -1, so the
    loop over the classes present among the labels >= 0 goes round no times)."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(8) % n if n else torch.full((8,), -1)
    return torch.randn(8, generator=g), labels


@pytest.mark.parametrize("how", ["a count", "a count tested", "a flag", "a float", "the last item, unread", "a list's length"])
def test_numbers_a_loop_rebinds_are_carried_and_right_for_every_count(how):
    model = CountsTheClasses(how)
    program = exporter.export(model, _classes(3))
    assert _whiles(program) == 1
    inputs = [_classes(n, seed) for seed, n in enumerate((0, 1, 2, 3, 5))]
    _matches_eager(program, model, [_classes(3), *inputs])


class CountOverLabelsPresent(nn.Module):
    """A loop that may go round no times: every label negative."""

    def forward(self, x, labels):
        total, count = x.new_zeros(()), 0
        for c in torch.unique(labels[labels >= 0]):
            total = total + x[labels == c].sum()
            count += 1
        return total * 10 if count == 3 else total + count


def test_a_count_read_after_a_loop_that_goes_round_no_times_is_eagers():
    model = CountOverLabelsPresent()
    program = exporter.export(model, _classes(2))
    negative = (torch.randn(8), torch.full((8,), -1))
    _matches_eager(program, model, [_classes(2), negative, _classes(3), _classes(1), _classes(7)])
    assert program.branch_report.loops[0].carried >= 3  # the step count, the sum, the count


@pytest.mark.parametrize(
    "how, match, where",
    [
        ("an attribute", r"its steps change `self.steps` at \S+ \(`self.steps \+= 1`\) \(0 before the loop, 1 then 2 "
         r"after its steps\)", None),
        ("the last item", r"forward reads `last` after it at \S+, and its steps change it \(None before the loop, a "
         r"tensor after its steps\)", "reads the last item"),
    ],
)
def test_python_state_a_loop_changes_that_cannot_be_carried_is_refused_naming_it(how, match, where):
    model = CountsTheClasses(how)
    with pytest.raises(exporter.TraceError, match=match) as refused:
        exporter.export(model, _classes(3))
    assert refused.value.category is Category.BRANCH_CAPTURE
    assert refused.value.location == _line("counted")
    if where is not None:
        assert f"after it at {_line(where)}," in refused.value.message
    assert model.steps == 0  # put back, as after any export


def _append_each(rows, out):
    for r in rows:  # line-marker: appends to its caller's list
        out.append(r * 2)


class AppendsInAHelper(nn.Module):
    def forward(self, x):
        out: list = []
        _append_each(x.nonzero()[:, 0], out)
        return torch.stack(out).sum() if out else x.sum()


def test_a_helper_whose_loop_changes_its_callers_list_is_refused():
    with pytest.raises(exporter.TraceError, match=r"its steps change `out` \(in forward\)") as refused:
        exporter.export(AppendsInAHelper(), (torch.tensor([0.0, 1.0, 2.0]),))
    assert refused.value.location == _line("appends to its caller's list")


class ChangesKind(nn.Module):
    def forward(self, x):
        scale = 1
        for v in x[x > 0]:  # line-marker: changes kind
            scale = scale * 0.5
            x = x + v * scale
        return x * scale


def test_a_number_that_changes_kind_in_the_loop_is_refused():
    with pytest.raises(exporter.TraceError, match=r"forward reads `scale` after it .*\(1 before the loop, 0.5 then 0.25") as refused:
        exporter.export(ChangesKind(), (torch.tensor([1.0, -1.0, 2.0]),))
    assert refused.value.location == _line("changes kind")
    assert "`scale = 1.0`" in refused.value.hint


class FirstThreeRows(nn.Module):
    """A loop cut short after a number of steps Python counts."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def forward(self, x):
        out = torch.zeros_like(x)
        rows = torch.nonzero(x > 0).flatten()
        if self.how == "enumerate and break":
            for i, r in enumerate(rows):  # line-marker: cut by enumerate
                if i >= 3:
                    break
                out = out + (torch.arange(8) == r) * x
        elif self.how == "zip with a range":
            for _, r in zip(range(3), rows):  # line-marker: cut by zip
                out = out + (torch.arange(8) == r) * x
        elif self.how == "islice":
            import itertools

            for r in itertools.islice(rows, 3):  # line-marker: cut by islice
                out = out + (torch.arange(8) == r) * x
        else:
            i = 0
            for r in rows:  # line-marker: cut by a counter
                if i >= 10:
                    break
                out = out + (torch.arange(8) == r) * x
                i += 1
        return out


@pytest.mark.parametrize(
    "how, marker, match",
    [
        ("enumerate and break", "enumerate", "counts the steps with `enumerate`"),
        ("zip with a range", "zip", r"side by side \(`zip`\) with something other than tensors whose length"),
        ("islice", "islice", r"takes a number of items Python counts \(`islice`\)"),
        ("a counter and break", "a counter", r"a step tests `i`, which the steps change \(`if i >= 10:`"),
    ],
)
def test_a_loop_cut_after_a_count_python_keeps_is_refused(how, marker, match):
    x = torch.tensor([1.0, -1, 2, 3, -1, 4, 5, -2])
    with pytest.raises(exporter.TraceError, match=match) as refused:
        exporter.export(FirstThreeRows(how), (x,))
    assert refused.value.category is Category.BRANCH_CAPTURE
    assert refused.value.location == _line(f"cut by {marker}")


class HistogramRow(nn.Module):
    """Each step adds into a view of a buffer: functionalization remakes the view after each
    write, which the next step reads and nothing reads after the last."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("hist", torch.zeros(2, 5))

    def forward(self, labels):
        row = self.hist[0]
        for v in torch.unique(labels):
            row.index_add_(0, v.reshape(1), (labels == v).sum().float().reshape(1))
        return self.hist.sum(1)


def test_steps_that_write_through_a_view_of_a_buffer_are_one_while_loop():
    example = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    program = exporter.export(HistogramRow(), (example,))
    assert _whiles(program) == 1
    for labels in (example, torch.tensor([3] * 8), torch.tensor([0, 1, 2, 3, 4, 0, 1, 2])):
        model, ours = HistogramRow(), copy.deepcopy(program).module()
        torch.testing.assert_close(ours(labels), model(labels))
        torch.testing.assert_close(ours.hist, model.hist)


class ExpertsSkippedWhenIdle(nn.Module):
    """A fixed loop over experts that skips an expert no token chose (older mixtures of
    experts): the sides of each step's test meet at the next step."""

    def __init__(self, experts: int) -> None:
        super().__init__()
        self.experts = experts
        self.gate = nn.Linear(8, experts, bias=False)

    def forward(self, x):
        choice = self.gate(x).argmax(-1)
        out = torch.zeros_like(x)
        for e in range(self.experts):
            tokens = torch.where(choice == e)[0]
            if tokens.numel() == 0:  # line-marker: idle
                continue
            out.index_add_(0, tokens, x[tokens] * (e + 1))
        return out


@pytest.mark.parametrize("experts", [2, 3, pytest.param(8, marks=pytest.mark.slow)])
def test_a_test_for_an_idle_expert_in_every_step_costs_a_run_per_expert(experts):
    model = ExpertsSkippedWhenIdle(experts)
    g = torch.Generator().manual_seed(experts)
    inputs = [(torch.randn(n, 8, generator=g),) for n in (6, 1, 2, 9, 3, 12, 5, 1, 2, 16, 1, 24)]
    program = exporter.export(model, inputs[0], dynamic_shapes=({0: Dim.AUTO},))
    report = program.branch_report
    assert len(report.decisions) == experts and report.runs == experts + 1
    assert {d.location for d in report.decisions} == {_line("idle")}
    _matches_eager(program, model, inputs)


def test_a_test_for_an_idle_expert_past_the_run_limit_is_refused_with_the_limit():
    with pytest.raises(exporter.TraceError, match="tests a value at each step of a loop") as refused:
        exporter.export(ExpertsSkippedWhenIdle(8), (torch.randn(6, 8),), max_branch_runs=6)
    assert refused.value.location == _line("idle")
    assert "max_branch_runs=N), now 6" in refused.value.hint


class ColumnWrittenThrough(nn.Module):
    """Each step adds into a column of the output, a view made before the loop: the view goes
    round the while_loop, which takes it as a contiguous copy."""

    def forward(self, x, labels):
        out = torch.zeros(5, 2)
        column = out[:, 1]
        for v in torch.unique(labels):
            column.index_add_(0, v.reshape(1), x[labels == v].sum().reshape(1))
        return out


def test_a_view_written_through_at_each_step_goes_round_as_a_copy():
    g = torch.Generator().manual_seed(0)
    example = (torch.randn(8, generator=g), torch.tensor([0, 1, 2, 0, 1, 2, 0, 1]))
    program = exporter.export(ColumnWrittenThrough(), example)
    assert _whiles(program) == 1
    others = [(torch.randn(8, generator=g), labels) for labels in (torch.tensor([4] * 8), torch.tensor([0, 1, 2, 3, 4, 0, 1, 2]))]
    _matches_eager(program, ColumnWrittenThrough(), [example, *others], empty_loops=False)


# -- max_iterations: each loop as a fixed number of cond steps -----------------------------

BOUNDED = {  # the cases above, each bounded by the most items any of its inputs has
    "a running sum": 5,
    "a mask written in place": 5,
    "a float read before the loop": 5,
    "rows of nonzero": 16,
}


@pytest.mark.parametrize("name", list(BOUNDED))
def test_max_iterations_writes_each_loop_as_that_many_conds_matching_eager(name):
    make, example, others, may_be_empty = CASES[name]
    model = make().eval()
    steps = BOUNDED[name]
    program = exporter.export(model, example, max_iterations=steps)
    assert _whiles(program) == 0
    assert calls_of(program, torch.ops.higher_order.cond) == steps
    (loop,) = program.branch_report.loops
    assert loop.bounded == steps
    assert f"as {steps} torch.cond step(s) (max_iterations)" in str(program.branch_report)
    # the inputs take each step both ways: some go round every step, some stop before each
    # (the step that only an empty tensor skips, where its tensor may be empty)
    inputs = [example, *others, *_fewer_classes(example)]
    sides = sides_taken(program, inputs)
    assert set(sides.conds) == {"cond"} | {f"cond_{k}" for k in range(1, steps)}
    assert {where for where, seen in sides.conds.items() if seen != {True, False}} <= (set() if may_be_empty else {"cond"})
    for args in inputs:
        torch.testing.assert_close(program.module()(*args), model(*args), rtol=1e-5, atol=1e-6)


def _fewer_classes(example: tuple) -> list[tuple]:
    """For a loop over the classes among ``example``'s labels: the same scores with one to
    four classes."""
    if len(example) != 2:
        return []
    scores, labels = example
    return [(scores, labels % n) for n in (1, 2, 3, 4)]


def test_an_input_that_needs_more_steps_fails_naming_the_loop_and_the_bound():
    model = SumOfEachClassesBest()
    program = exporter.export(model, _scores(20, 1.0), max_iterations=2)
    few = (torch.full((20,), 0.9), torch.arange(20) % 2)  # two classes kept: within the bound
    torch.testing.assert_close(program.module()(*few), model(*few))
    many = (torch.full((20,), 0.9), torch.arange(20) % 6)
    with pytest.raises(RuntimeError, match=rf"the loop at {_line('classes')} .* goes round more than max_iterations=2 "
                       "times for this input; export again with a larger max_iterations"):
        program.module()(*many)


def test_numbers_a_bounded_loop_carries_are_right_for_every_count():
    model = CountOverLabelsPresent()
    program = exporter.export(model, _classes(2), max_iterations=7)
    assert _whiles(program) == 0
    negative = (torch.randn(8), torch.full((8,), -1))
    inputs = [_classes(2), negative, _classes(3), _classes(1), _classes(7)]
    for args in inputs:
        torch.testing.assert_close(program.module()(*args), model(*args))


def test_a_bounded_loop_on_one_side_of_a_branch_matches_eager():
    model = EachClassOrAll()
    program = exporter.export(model, _scores(20, 1.0), max_iterations=5)
    assert _whiles(program) == 0
    for args in (_scores(20, 1.0), _scores(20, 0.56), _scores(20, 0.4), _scores(20, 2.0)):
        torch.testing.assert_close(program.module()(*args), model(*args))


@pytest.mark.slow
def test_a_bounded_loop_saves_loads_and_decomposes():
    model = BestOfEachClass()
    program = exporter.export(model, _scores(20, 1.0), max_iterations=5)
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    decomposed = program.run_decompositions()
    for other in (_scores(20, 1.0), _scores(20, 5.0), (torch.rand(20), torch.zeros(20, dtype=torch.long))):
        for p in (loaded, decomposed):
            torch.testing.assert_close(p.module()(*other), model(*other))


@pytest.mark.parametrize("steps", [0, -3, 2.5, True, "4"])
def test_max_iterations_that_is_no_number_of_steps_is_refused_naming_it(steps):
    with pytest.raises(exporter.InputSpecError, match=rf"max_iterations={steps!r} is not a number of loop steps"):
        exporter.export(SumOfEachClassesBest(), _scores(20, 1.0), max_iterations=steps)


def test_max_iterations_leaves_a_program_without_loops_as_it_is():
    model = nn.Linear(4, 2)
    program = exporter.export(model, (torch.randn(3, 4),), max_iterations=3)
    assert calls_of(program, torch.ops.higher_order.cond) == 0
    assert getattr(program, "branch_report", None) is None


# -- a branch inside each step: a cond in the while_loop's body ---------------------------


class BranchInsideTheLoop(nn.Module):
    """Both sides rebind the running sum."""

    def forward(self, x):
        total = x.new_zeros(())
        for value in x[x > 0]:  # line-marker: branch inside
            if value > 0.5:
                total = total + value
            else:
                total = total - value * 0.5
        return total


class SkipsSmallValues(nn.Module):
    """``continue`` on one side: that side leaves the sum alone."""

    def forward(self, x):
        total = x.new_zeros(())
        for value in x[x > 0]:
            if value < 0.5:
                continue
            total = total * 0.5 + value
        return total


class CountsOnOneSide(nn.Module):
    """A Python number only one side rebinds, read after the loop."""

    def forward(self, x):
        total, count = x.new_zeros(()), 0
        for value in x[x > 0]:
            if value > 0.5:
                count += 1
                total = total + value
        return total * 10 + count


class KeepsConfidentClasses(nn.Module):
    """torchvision's batched NMS with a score floor: one side writes the mask in place."""

    def forward(self, scores, labels):
        keep = torch.zeros_like(scores, dtype=torch.bool)
        for c in torch.unique(labels):
            members = torch.where(labels == c)[0]
            if scores[members].max() > 0.5:
                keep[members[scores[members].argmax().reshape(1)]] = True
        return torch.where(keep)[0]


class ExpertsWithPadding(nn.Module):
    """transformers' eager experts loop: the router may pick a padding expert past the last,
    which each step skips with ``continue``."""

    def __init__(self, experts: int = 4, width: int = 8) -> None:
        super().__init__()
        self.router = nn.Linear(width, experts + 1)
        self.weights = nn.Parameter(torch.randn(experts, width, width) / width**0.5)
        self.experts = experts

    def forward(self, x):
        choice = self.router(x).argmax(-1)
        mask = nn.functional.one_hot(choice, self.experts + 1).T
        out = torch.zeros_like(x)
        for expert in torch.greater(mask.sum(-1), 0).nonzero():
            expert = expert[0]
            if expert == self.experts:
                continue
            tokens = torch.where(mask[expert])[0]
            out.index_add_(0, tokens, x[tokens] @ self.weights[expert.clamp(max=self.experts - 1)])
        return out


class ComparesThePeakInEachStep(nn.Module):
    """Each step compares a tensor from before the loop: the comparison is the step's own."""

    def forward(self, x):
        total, peak = x.new_zeros(()), x.max()
        for value in x[x > 0]:
            if peak > 0.5:
                total = total + value
        return total


def _values(*rows: list[float]) -> list[tuple[torch.Tensor]]:
    return [(torch.tensor(row),) for row in rows]


# no steps, one of each side, three, a mix
_STEPS = _values([-1.0, -2.0, -0.5, -3.0], [0.2, -1.0, -1.0, -1.0], [0.9, -1.0, -1.0, -1.0], [0.2, 0.7, -1.0, 0.9],
                 [0.1, 0.2, 0.3, 0.4], [0.6, 0.7, 0.8, 0.9], [0.6, 0.1, 0.8, 0.2])

IN_STEP = {
    "both sides rebind": (BranchInsideTheLoop, _STEPS, True),
    "continue": (SkipsSmallValues, _STEPS, True),
    "a number on one side": (CountsOnOneSide, _STEPS, True),
    "a test of a value from before the loop, made in each step": (ComparesThePeakInEachStep, _STEPS, True),
    "a write on one side": (
        KeepsConfidentClasses,
        [(torch.rand(12, generator=torch.Generator().manual_seed(k)) * s, torch.arange(12) % n)
         for k, (s, n) in enumerate([(1.0, 3), (0.4, 1), (3.0, 1), (1.0, 6), (0.6, 4)])],
        False,
    ),
}


@pytest.mark.parametrize("name", list(IN_STEP))
def test_a_branch_inside_each_step_is_a_cond_in_the_loops_body_matching_eager(name):
    make, inputs, may_be_empty = IN_STEP[name]
    model = make()
    program = exporter.export(model, inputs[-1])
    assert _whiles(program) == 1 and calls_of(program, torch.ops.higher_order.cond) == 1
    top = [n.target for n in program.graph.nodes]
    assert torch.ops.higher_order.cond not in top  # inside the loop's body, not around it
    report = program.branch_report
    assert len(report.decisions) == 1 and len(report.loops) == 1
    # every side of the cond in some step, and the loop going round no times and several
    _matches_eager(program, model, inputs, empty_loops=may_be_empty)


def test_the_report_names_the_branch_inside_the_loop():
    program = exporter.export(BranchInsideTheLoop(), _STEPS[-1])
    (decision,) = program.branch_report.decisions
    assert decision.location == marked_line(HERE, "branch inside").rsplit(":", 1)[0] + f":{int(_line('branch inside').rsplit(':', 1)[1]) + 1}"
    assert decision.code == "if value > 0.5:"


def test_experts_that_skip_the_padding_expert_match_eager_on_other_routes():
    torch.manual_seed(0)
    model = ExpertsWithPadding().eval()
    program = exporter.export(model, (torch.randn(6, 8),))
    assert _whiles(program) == 1 and calls_of(program, torch.ops.higher_order.cond) == 1
    inputs = [(torch.randn(6, 8, generator=torch.Generator().manual_seed(seed)) * (seed + 1),) for seed in range(12)]
    sides = sides_taken(program, inputs)
    assert all(seen == {True, False} for seen in sides.conds.values())  # some inputs route a token to the padding
    with torch.no_grad():
        for args in inputs:
            torch.testing.assert_close(program.module()(*args), model(*args), rtol=1e-5, atol=1e-5)


def test_a_branch_inside_a_bounded_loop_matches_eager():
    model = SkipsSmallValues()
    program = exporter.export(model, _STEPS[-1], max_iterations=4)
    assert _whiles(program) == 0
    for args in _STEPS:
        torch.testing.assert_close(program.module()(*args), model(*args))




# -- range over a number only the data decides ---------------------------------------------


class WritesEachPosition(nn.Module):
    """``for i in range(len(selection)):``, each step writing at its position."""

    def forward(self, x):
        selected = x[x > 0]
        out = torch.zeros_like(selected)
        for i in range(len(selected)):
            out[i] = selected[i] * (i + 1)
        return out


class SumsFromTheSecond(nn.Module):
    """``range(1, n)`` of a count read with ``.item()``, a test of the step's number, a list."""

    def forward(self, x):
        n = int((x > 0).sum().item())
        total, rows = x.new_zeros(()), []
        for i in range(1, n):
            if i % 2 == 0:
                continue
            total = total + x[i] * i
            rows.append(x[i] * torch.ones(2) + i)
        return total, (torch.stack(rows) if rows else x.new_zeros(0, 2))


class ReadsTheLastNumber(nn.Module):
    """The last step's number, read after the loop (the number set before it where the loop
    goes round no times): carried, as a count is."""

    def forward(self, x):
        total, i = x.new_zeros(()), -1
        for i in range(len(x[x > 0])):
            total = total + i
        return total * i


@pytest.mark.parametrize("make", [WritesEachPosition, SumsFromTheSecond, ReadsTheLastNumber])
def test_range_of_a_data_decided_count_is_one_while_loop_matching_eager(make):
    model = make()
    program = exporter.export(model, (torch.tensor([0.5, -1.0, 2.0, 0.25, 1.0, -0.5]),))
    assert _whiles(program) == 1
    inputs = [(torch.tensor(row),) for row in (
        [-1.0] * 6, [0.5, -1.0, -1.0, -1.0, -1.0, -1.0], [0.5, 0.3, -1.0, -1.0, -1.0, -1.0],
        [0.5, -1.0, 2.0, 0.25, 1.0, -0.5], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
    )]
    _matches_eager(program, model, inputs)


class SumsTheLargeThenAsks(nn.Module):
    """The step that goes on leaves ``acc`` alone, the other side changes it; a question after
    the loop returns early on one side."""

    def forward(self, x, labels):
        acc = x.new_zeros(())
        for c in torch.unique(labels[labels >= 0]):  # line-marker: then asks
            if x[labels == c].sum() <= 0.9:
                continue
            acc = acc + x[labels == c].sum() * 2
        if x.abs().max().item() > 1.03:
            return x - acc
        return x + acc


def test_a_value_only_the_other_side_of_a_steps_branch_changes_held_at_a_later_question_is_refused():
    # the later question's other side would be traced from a run whose steps left acc alone
    example = (torch.tensor([0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.5, -0.3]), torch.tensor([0, 1, 2, 0, 1, 2, -1, 0]))
    with pytest.raises(exporter.ExportError, match="changes on one side a value forward holds where it asks another") as refused:
        exporter.export(SumsTheLargeThenAsks(), example)
    assert refused.value.location == _line("then asks")
