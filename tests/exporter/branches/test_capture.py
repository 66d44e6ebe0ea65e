"""Branch capture end to end: each kind of branch on a tensor's value becomes torch.cond, the
program matches eager on inputs that take every side, and what cannot be one program is
refused naming the line."""

from __future__ import annotations

import importlib
import linecache

import io

import pytest
import torch
from torch.export import Dim

import exporter
from exporter import Category
from exporter._torch_internals.release import at_least
from tests.exporter.branches.programs import calls_of, marked_line, matches_eager

nn = torch.nn
HERE = __file__


def _line(marker: str) -> str:
    return marked_line(HERE, marker)


def _conds(program: torch.export.ExportedProgram) -> int:
    return calls_of(program, torch.ops.higher_order.cond)


def _matches_eager(program, model, inputs: list[tuple]) -> None:
    matches_eager(program, model, inputs, rtol=0, atol=0)


class Sign(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # line-marker: sign
            return x.relu()
        return -x


class ItemThreshold(nn.Module):
    def forward(self, x):
        if x.max().item() > 0.5:
            return x * 2
        return x - 1


class MaskDroppedWhenEmpty(nn.Module):
    """fsmt's padding mask: None when nothing is padded."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x, padded):
        h = self.lin(x)
        mask = padded
        if not mask.any():
            mask = None
        if mask is not None:
            h = h.masked_fill(mask[:, None], 0.0)
        return h.sum(-1)


class Nested(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            if x.mean() > 0.5:  # line-marker: inner
                y = x * 3
            else:
                y = x * 2
        else:
            y = -x
        return y + 1


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, h, x):
        h = self.lin(h) + x  # a skip from the input: its mean decides every layer's side
        if h.mean() > 0:  # line-marker: each layer
            return h.relu()
        return h.tanh()


class BranchInEachLayer(nn.Module):
    def __init__(self, layers: int = 4):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList([Layer() for _ in range(layers)])

    def forward(self, x):
        h = x
        for layer in self.layers:
            h = layer(h, x)
        return h


def _layer_inputs(count: int = 8) -> list[tuple[torch.Tensor]]:
    """Inputs of either sign, small and large: the large ones take each layer's side by
    their sign, the small ones whichever the layers' weights decide."""
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(4, 8, generator=g) * scale + shift,) for scale, shift in ((1, 0), (0.1, 5), (0.1, -5))
            for _ in range(count // 4 + 1)][:count]


class FlagLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, h, flag):
        h = self.lin(h)
        if flag:
            h = h * 2
        return h


class FlagSharedByAllLayers(nn.Module):
    """longformer's is_global_attn: computed once, tested in every layer."""

    def __init__(self, layers: int = 4):
        super().__init__()
        self.layers = nn.ModuleList([FlagLayer() for _ in range(layers)])

    def forward(self, h, marks):
        flag = marks.any()  # line-marker: flag
        for layer in self.layers:
            h = layer(h, flag)
        return h


class BufferWrittenOnOneSide(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("positives", torch.zeros(()))

    def forward(self, x):
        if x.sum() > 0:
            self.positives += 1
        return x * self.positives


class BoolInput(nn.Module):
    def forward(self, x, flag):
        if flag:
            return x + 1
        return x - 1


class EarlyReturn(nn.Module):
    def forward(self, x):
        y = x * 2
        if (y > 0).all():
            return y
        y = y.abs()
        return y + 1


class EmptySelection(nn.Module):
    """torchvision's batched NMS: a size only the data decides, tested for zero."""

    def forward(self, x):
        picked = torch.nonzero(x > 0.5)
        if picked.numel() == 0:
            return x.sum() * 0
        return x[picked[:, 0], picked[:, 1]].sum()


class TopOfTheSelection(nn.Module):
    """One side calls a kernel that checks a size from before the branch (``topk(1)`` needs one
    entry): the check holds on that side only, and the program makes it there."""

    def forward(self, x):
        picked = x[x > 0]
        if picked.numel() == 0:
            return x.sum() * 0
        return picked.topk(1).values.sum()


class PaddedToTheLongest(nn.Module):
    """Sides that return a tensor padded to a length only the data decides, inside another
    dimension (``(batch, longest, width)``): contiguous, its first stride holds that length,
    which torch.cond cannot merge as written."""

    def forward(self, x, durations):
        longest = durations.sum(1).max()
        padded = torch.zeros((x.size(0), longest, x.size(2))) + x.mean(1, keepdim=True)
        if padded.sum() > 0:
            return padded * 2
        return padded - 1


class CountOfAnInputsEntries(nn.Module):
    """A size read from the input itself: every run of forward gets the same symbol for it
    (fake tensors remember an input's nonzero count), and each run decides it its own way."""

    def forward(self, x):
        if x.nonzero().shape[0] > 2:
            return x.cos()
        return x.sin()


class NormOfTheSelectedRows(nn.Module):
    """torch's C++ batch_norm asks whether its input is empty: an operator's own question,
    about rows only the data counts, traced both ways like a branch of the model's."""

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(8)

    def forward(self, x):
        return self.norm(x[x.sum(1) > 0]).sum(0)


class ScaledToItsPeak(nn.Module):
    """A float read with ``.item()``, used on both sides and handed on by one: it crosses the
    cond (which takes tensors and ints) as a 0-d tensor."""

    def forward(self, x):
        peak = x.abs().max().item()
        if peak > 1.0:
            return x / peak, peak * 2
        return x * peak, peak


class CopiedOnOneSide(nn.Module):
    """A tensor returned twice on one side, once as a copy: the cond hands on the copy."""

    def forward(self, x):
        y = x * 2
        if x.sum() > 0:
            return y, y.clone()
        return y, y + 1


class WholePartOfThePeak(nn.Module):
    """``int()`` of a float read with ``.item()``, tested: the predicate truncates it as the
    program runs."""

    def forward(self, x):
        whole = int(x.abs().max().item())
        if whole > 2:
            return x / whole
        return x


class ModeOfAnInput(nn.Module):
    """An input's ``.item()`` tested twice (``if``/``elif``): every run reads it afresh, so the
    run that takes the first test's other side asks the second too."""

    def forward(self, mode, x):
        m = mode.item()
        if m == 0:
            return x + 1
        elif m == 1:
            return x * 2
        return x - 3


def _x(*shape, sign=1.0):
    return sign * (torch.rand(*shape) + 0.1)


CASES = {
    "sign": (Sign, (_x(4, 8),), [(_x(4, 8, sign=-1),), (_x(4, 8),)], 1),
    "item threshold": (ItemThreshold, (_x(4, 8) + 1,), [(_x(4, 8) * 0.4,), (_x(4, 8) + 1,)], 1),
    "mask dropped when empty": (
        MaskDroppedWhenEmpty, (torch.randn(4, 8), torch.zeros(4, dtype=torch.bool)),
        [(torch.randn(4, 8), torch.tensor([True, False, True, False])), (torch.randn(4, 8), torch.zeros(4, dtype=torch.bool))], 1,
    ),
    "nested": (Nested, (_x(4, 8) + 1,), [(_x(4, 8) * 0.4,), (_x(4, 8, sign=-1),), (_x(4, 8) + 1,)], 2),
    "branch in each layer": (BranchInEachLayer, _layer_inputs()[0], _layer_inputs(), 4),
    "flag shared by all layers": (
        FlagSharedByAllLayers, (torch.randn(4, 8), torch.ones(3, dtype=torch.bool)),
        [(torch.randn(4, 8), torch.zeros(3, dtype=torch.bool)), (torch.randn(4, 8), torch.tensor([False, True, False]))], 4,
    ),
    "buffer written on one side": (
        BufferWrittenOnOneSide, (_x(4, 8),), [(_x(4, 8, sign=-1),), (_x(4, 8),), (_x(4, 8),), (_x(4, 8, sign=-1),)], 1,
    ),
    "bool tensor input": (BoolInput, (torch.randn(4, 8), torch.tensor(True)), [(torch.randn(4, 8), torch.tensor(False))], 1),
    "early return": (EarlyReturn, (_x(4, 8),), [(torch.randn(4, 8),), (_x(4, 8),)], 1),
    "empty selection": (EmptySelection, (torch.randn(4, 8),), [(torch.zeros(4, 8),), (torch.randn(4, 8),)], 1),
    "a kernel's check on one side": (TopOfTheSelection, (torch.randn(4, 8),), [(-torch.rand(4, 8),), (torch.randn(4, 8),)], 1),
    "a side's result padded to a data-sized length": (
        PaddedToTheLongest, (torch.rand(2, 5, 4), torch.tensor([[1, 2, 0, 1, 1], [2, 2, 2, 0, 0]])),
        [(-torch.rand(2, 5, 4), torch.tensor([[3, 0, 0, 0, 1], [1, 1, 1, 1, 1]])), (torch.rand(2, 5, 4), torch.zeros(2, 5, dtype=torch.long)),
         (-torch.rand(2, 5, 4), torch.zeros(2, 5, dtype=torch.long))], 1,
    ),
    "an operator's empty-input path": (
        NormOfTheSelectedRows, (torch.randn(4, 8),), [(_x(4, 8, sign=-1),), (torch.randn(4, 8),), (_x(4, 8),)], 1,
    ),
    "a float read with .item()": (
        ScaledToItsPeak, (_x(4, 8) + 1,), [(_x(4, 8) * 0.4,), (_x(4, 8, sign=-1) * 3,), (torch.zeros(4, 8),)], 1,
    ),
    "int() of a float read with .item()": (
        WholePartOfThePeak, (_x(4, 8) * 10,), [(_x(4, 8),), (_x(4, 8, sign=-1) * 3.5,), (_x(4, 8) * 2.9,)], 1,
    ),
    "a tensor returned twice on one side, once copied": (
        CopiedOnOneSide, (_x(4, 8),), [(_x(4, 8, sign=-1),), (torch.randn(4, 8),)], 1,
    ),
    "an input's .item() tested twice": (
        ModeOfAnInput, (torch.tensor([2]), torch.ones(3)), [(torch.tensor([v]), torch.randn(3)) for v in (0, 1, 2, 7, -1)], 2,
    ),
    "count of an input's entries": (
        CountOfAnInputsEntries, (torch.tensor([2.0, 3.0, 5.0]),), [(torch.tensor([2.0, 0.0, 5.0]),), (torch.tensor([1.0, 1.0, 1.0]),)], 1,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_kind_of_branch_becomes_cond_and_matches_eager_on_every_side(name):
    make, example, others, conds = CASES[name]
    model = make().eval()
    program = exporter.export(model, example)
    assert _conds(program) == conds
    report = program.branch_report
    assert report.runs == len(report.decisions) + 1
    _matches_eager(program, model, [example, *others])


def test_the_report_names_each_decisions_line_predicate_and_symbol():
    program = exporter.export(Sign(), (_x(4, 8),))
    (decision,) = program.branch_report.decisions
    assert decision.location == _line("sign")
    assert decision.code == "if x.sum() > 0:  # line-marker: sign"
    assert decision.predicate == "Eq(u0, 1)"
    assert decision.symbols and decision.symbols[0].startswith("u0 = aten.item")
    assert (decision.uses, decision.conds, decision.within, decision.module) == (1, 1, (), "")
    assert program.branch_report.to_json()["decisions"][0]["location"] == decision.location


def test_a_nested_decision_is_reported_within_its_outer_one():
    program = exporter.export(Nested(), (_x(4, 8) + 1,))
    outer, inner = program.branch_report.decisions
    assert inner.location == _line("inner") and inner.within == (outer.location,)


def test_one_value_tested_in_every_layer_is_one_decision_with_a_cond_per_layer():
    program = exporter.export(FlagSharedByAllLayers().eval(), (torch.randn(4, 8), torch.ones(3, dtype=torch.bool)))
    (decision,) = program.branch_report.decisions
    assert decision.uses == 4 and decision.conds == 4 and _conds(program) == 4
    assert program.branch_report.runs == 2


def _strongest(scores):
    """A helper function, not a module: its branch must still end where it returns."""
    kept = scores[scores > 0]
    if kept.numel() > 3:  # line-marker: helper
        return kept.sort(descending=True).values[:3]
    return kept * 2


class BranchInAHelperPerItem(nn.Module):
    """torchvision's batched_nms, called once per image of a list: each call decides on its own."""

    def forward(self, images: list[torch.Tensor]):
        return [_strongest(scores).sum() for scores in images]


def _scores(positives: int) -> torch.Tensor:
    return torch.cat([torch.rand(positives) + 0.1, -torch.rand(6 - positives)])


@pytest.mark.parametrize("items", [2, 4])
def test_a_branch_in_a_helper_function_ends_where_the_function_returns(items):
    model = BranchInAHelperPerItem()
    program = exporter.export(model, ([_scores(5) for _ in range(items)],))
    # one run and one cond per call, not a run for every combination of the calls' sides
    assert _conds(program) == items and program.branch_report.runs == items + 1
    assert {d.location for d in program.branch_report.decisions} == {_line("helper")}
    every_side = [([_scores(5 if (k >> i) & 1 else 2) for i in range(items)],) for k in range(2**items)]
    _matches_eager(program, model, every_side + [([_scores(0) for _ in range(items)],)])


def _ranked(scores, threshold):
    """torchvision's batched NMS in small: nothing above the threshold returns a new empty
    tensor (of size 0, where the other side's size only the data decides)."""
    keep = torch.nonzero(scores > threshold).squeeze(1)
    if keep.numel() == 0:  # line-marker: empty
        return torch.empty((0,), dtype=torch.int64)
    return keep[scores[keep].argsort(descending=True)]


class TwoStagesOfRanking(nn.Module):
    """A detector's two stages: rank each image's rows, then rank again what the first stage
    kept.  After an image's empty first stage its second stage has nothing to rank, which
    the run that took the empty side knows without asking."""

    def __init__(self, reshaped: bool = True):
        super().__init__()
        self.head = nn.Linear(4, 4)
        self.reshaped = reshaped

    def forward(self, images):
        firsts = [rows[_ranked(rows[:, 0], 0.5)[:3]] for rows in images]
        outs = []
        for rows in firsts:
            h = self.head(rows)
            if self.reshaped:  # a view where the size is known, a copy where it is not
                h = h.reshape(-1, 2, 2).flatten(1)
            keep = _ranked(h[:, 0], 0.0)
            outs.append(h[keep].sum(0) + keep.numel())
        return torch.stack(outs)


def _rows(first_stage: bool, second_stage: bool, seed: int) -> torch.Tensor:
    rows = torch.randn(6, 4, generator=torch.Generator().manual_seed(seed))
    if not first_stage:
        rows[:, 0] = -1.0
    elif not second_stage:
        rows = rows * 0  # kept by no threshold but the model's own: the head's bias decides
    return rows


@pytest.mark.parametrize("reshaped", [True, False], ids=["reshaped", "same-nodes"])
@pytest.mark.parametrize("images", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_a_side_that_returns_an_empty_tensor_rejoins_where_its_function_returns(images, reshaped):
    # same-nodes: after the first stage, both runs make the same nodes, but only one of them
    # asks the second stage's test (the other knows the size is 0); that decision is kept
    model = TwoStagesOfRanking(reshaped).eval()
    example = [torch.randn(6, 4, generator=torch.Generator().manual_seed(k)) + 1 for k in range(images)]
    program = exporter.export(model, (example,))
    # a decision, a cond and a run per call: the empty side's result, of size 0, is a special
    # case of the other side's, and forward after the call goes on with the general run's nodes
    report = program.branch_report
    assert len(report.decisions) == 2 * images and _conds(program) == 2 * images
    assert report.runs == 2 * images + 1
    assert {d.location for d in report.decisions} == {_line("empty")}
    # each image's two stages in every way at once, and the ways mixed across images (all of
    # them for two images, every third for three)
    full = 2**images - 1
    uniform = {(full if first else 0) | (full << images if second else 0) for first in (0, 1) for second in (0, 1)}
    ks = sorted(uniform | set(range(0, 4**images, 1 if images == 2 else 3)))
    every_side = [
        ([_rows(bool((k >> i) & 1), bool((k >> (i + images)) & 1), seed=k * images + i) for i in range(images)],)
        for k in ks
    ]
    _matches_eager(program, model, every_side)


@pytest.mark.parametrize("layers", [2, 4, 8])
def test_a_branch_in_each_layer_costs_one_run_and_one_cond_per_layer(layers):
    model = BranchInEachLayer(layers).eval()
    program = exporter.export(model, _layer_inputs()[0])
    assert _conds(program) == layers and program.branch_report.runs == layers + 1
    assert [d.module for d in program.branch_report.decisions] == [f"layers.{i}" for i in range(layers)]
    _matches_eager(program, model, _layer_inputs())


def test_a_buffer_written_on_one_side_is_written_back_on_that_side_only():
    model = BufferWrittenOnOneSide()
    program = exporter.export(model, (_x(4, 8),))
    assert model.positives.item() == 0
    assert [s.kind.name for s in program.graph_signature.output_specs] == ["BUFFER_MUTATION", "USER_OUTPUT"]
    ours = program.module()
    for sign, count in ((1, 1), (-1, 1), (1, 2)):
        ours(_x(4, 8, sign=sign))
        assert ours.positives.item() == count


def _expand(x, durations):
    if durations.sum() == 0:  # line-marker: no-durations
        durations = torch.ones_like(durations)
    length = durations.sum().item()
    return torch.repeat_interleave(x, durations, dim=0, output_size=length), length


class LengthRegulator(nn.Module):
    """fastspeech2's length regulator: a helper whose branch changes a number it returns."""

    def forward(self, x, durations):
        frames, length = _expand(x, durations)
        return frames.sum(0) * length


def test_a_number_a_side_computes_leaves_the_cond_inside_a_tensor_computed_from_it():
    # torch.cond hands on tensors only: the region ends where the number is used, not where
    # the helper returns it
    model = LengthRegulator()
    x = torch.randn(3, 4)
    program = exporter.export(model, (x, torch.tensor([1, 2, 0])))
    assert [d.location for d in program.branch_report.decisions] == [_line("no-durations")]
    assert _conds(program) == 1
    _matches_eager(program, model, [
        (x, torch.zeros(3, dtype=torch.long)), (torch.randn(3, 4), torch.tensor([0, 0, 5])), (x, torch.tensor([1, 0, 0])),
    ])


class TableGrownForLongInputs(nn.Module):
    """fastspeech2's relative positions: a buffer replaced with a longer table when the input,
    of a size only the data decides, outgrows it."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(8.0), persistent=False)

    def _extended(self, n):
        if self.table.size(0) >= n:  # line-marker: outgrown
            return self.table
        return torch.arange(n, dtype=torch.float32)

    def forward(self, x, counts):
        n = counts.sum().item()
        self.table = self._extended(n)
        return x.sum() + self.table[:n].sum()


def test_a_buffer_replaced_on_one_side_by_a_data_sized_tensor_is_not_another_decision():
    # whether the new table has the buffer's shape is not asked: it is replaced, not written back
    model = TableGrownForLongInputs()
    x, counts = torch.randn(3, 4), torch.tensor([1, 2, 0])
    program = exporter.export(model, (x, counts))
    assert [d.location for d in program.branch_report.decisions] == [_line("outgrown")]
    assert torch.equal(model.table, torch.arange(8.0))
    assert [s.kind.name for s in program.graph_signature.output_specs] == ["USER_OUTPUT"]
    ours = program.module()
    for args in [(x, counts), (x, torch.tensor([5, 5, 5])), (torch.randn(3, 4), torch.tensor([0, 0, 8])), (x, counts)]:
        torch.testing.assert_close(ours(*args), TableGrownForLongInputs()(*args), rtol=0, atol=0)


class TableGrownAfterABranch(TableGrownForLongInputs):
    def forward(self, x, counts):
        if x.sum() > 0:
            x = x * 2
        return super().forward(x, counts)


def test_runs_that_replace_the_same_buffer_give_one_note():
    model = TableGrownAfterABranch()
    x, counts = torch.randn(3, 4).abs(), torch.tensor([1, 2, 0])
    program = exporter.export(model, (x, counts))
    # the sides of `if x.sum() > 0:` meet after it: the later branch is traced once per side of its own
    assert program.branch_report.runs == 3
    assert [n.kind.name for n in program.notes] == ["BUFFER_NOT_WRITTEN_BACK"]
    # the size a trace named u9 or u15 is shown as what it is to the user
    assert "(8,) float32 with (?,) float32 (? is a size only the data decides)" in program.notes[0].message
    _matches_eager(
        program, TableGrownAfterABranch(), [(-x, counts), (x, counts), (x, torch.tensor([9, 0, 0])), (-x, torch.tensor([0, 9, 1]))]
    )


def _selected(x, kind):
    """A selection the data sizes, handed on only through a size made from its own."""
    if kind == "cut inside":  # the sides meet only as the helper returns, the cut made on each
        if x[0] > 0:
            return x[x > 0][:3]
        return (-x[x < 0])[:3]
    if x[0] > 0:  # line-marker: select
        chosen, more = x[x > 0], x[x > 1]
    else:
        chosen, more = -x[x < 0], -x[x < -1]
    if kind == "cut":
        return chosen[:3]  # Min(3, u)
    if kind == "two selections":
        return torch.cat([chosen, more])  # u + v
    return torch.cat([chosen, chosen])  # 2*u


class SelectedThenDecided(nn.Module):
    """A detector's proposals: a helper branches, selects boxes inside its branches and
    returns them cut or joined; forward then decides on how many there are."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        kept = _selected(x, self.kind)
        if kept.numel() > 2:  # line-marker: decided later
            return kept.sum() * 2
        return kept.sum() - 1


SELECTIONS = [
    torch.tensor([1.0, 2, -3, 4, 5]),  # first side, many kept
    torch.tensor([1.0, -2, -3, -4, -5]),  # first side, one kept
    torch.tensor([-1.0, -2, 3, -4, 4]),  # second side, many kept
    torch.tensor([-1.0, 2, 3, 4, 5]),  # second side, one kept
    torch.tensor([-3.0, 3, -2, 1, -1]),
    torch.tensor([2.0, -3, 0.5, -1, 1.5]),
]


@pytest.mark.parametrize("kind", ["cut", "two selections", "doubled"])
def test_a_decision_on_a_size_made_inside_an_earlier_branch_reads_it_from_a_tensor_handed_on(kind):
    """The later predicate is over symbols bound inside the first cond's branches; the cond
    hands on only a tensor whose size is an expression of them, which gives the value."""
    model = SelectedThenDecided(kind)
    program = exporter.export(model, (SELECTIONS[0],))
    report = program.branch_report
    assert [d.location for d in report.decisions] == [_line("select"), _line("decided later")]
    assert _conds(program) == 2
    assert {x[0].item() > 0 for x in SELECTIONS} == {True, False}
    assert {_selected(x, kind).numel() > 2 for x in SELECTIONS} == {True, False}
    _matches_eager(program, model, [(x,) for x in SELECTIONS])


def test_a_decision_on_a_size_no_handed_on_tensor_gives_is_refused_at_its_line(monkeypatch):
    from exporter.branches import join

    monkeypatch.setattr(join, "_sized_by", lambda g, symbol, expression: None)
    with pytest.raises(exporter.TraceError, match="made inside an earlier branch") as refused:
        exporter.export(SelectedThenDecided("cut inside"), (SELECTIONS[0],))
    assert refused.value.category is Category.BRANCH_CAPTURE
    assert refused.value.location == _line("decided later")


def test_a_dynamic_batch_is_kept_across_the_sides():
    program = exporter.export(Sign(), (_x(4, 8),), dynamic_shapes=({0: Dim("batch")},))
    _matches_eager(program, Sign(), [(_x(7, 8, sign=-1),), (_x(3, 8),), (_x(5, 8, sign=-1),)])
    (placeholder,) = [n for n in program.graph.nodes if n.op == "placeholder"]
    assert isinstance(placeholder.meta["val"].shape[0], torch.SymInt)


class SignWithCond(nn.Module):
    """``Sign`` as torch.export asks it to be written."""

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x.relu(), lambda x: -x, (x,))


class NestedWithCond(nn.Module):
    """``Nested`` as torch.export asks it to be written."""

    def forward(self, x):
        def positive(x):
            return torch.cond(x.mean() > 0.5, lambda x: x * 3, lambda x: x * 2, (x,))

        return torch.cond(x.sum() > 0, positive, lambda x: -x, (x,)) + 1


@pytest.mark.parametrize(
    "captured, written, inputs",
    [
        (Sign, SignWithCond, [(_x(4, 8),), (_x(4, 8, sign=-1),)]),
        (Nested, NestedWithCond, [(_x(4, 8) + 1,), (_x(4, 8) * 0.4,), (_x(4, 8, sign=-1),)]),
    ],
    ids=["one cond", "nested conds"],
)
def test_the_program_matches_torch_exports_own_cond_program(captured, written, inputs):
    """The captured program against torch.export's program of the model written with
    torch.cond: the same inputs and outputs in its signature (an output may be named for
    another node: a cond's region ends where forward does, so the ``+ 1`` after the nested
    branch is inside it), as many conds, and the same results on every side."""
    ours = exporter.export(captured(), inputs[0])
    theirs = torch.export.export(written(), inputs[0], strict=False).run_decompositions({})
    assert ours.graph_signature.input_specs == theirs.graph_signature.input_specs
    assert [(o.kind, o.target) for o in ours.graph_signature.output_specs] == [
        (o.kind, o.target) for o in theirs.graph_signature.output_specs
    ]
    assert _conds(ours) == _conds(theirs)
    _matches_eager(ours, captured(), inputs)
    for args in inputs:
        torch.testing.assert_close(ours.module()(*args), theirs.module()(*args), rtol=0, atol=0)


@pytest.mark.parametrize("name", [
    "nested", "empty selection", "buffer written on one side", "a side's result padded to a data-sized length", "a float read with .item()",
])
def test_the_program_saves_loads_and_decomposes(name):
    make, example, others, _ = CASES[name]
    model = make().eval()
    program = exporter.export(model, example)
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    for consumer in (torch.export.load(buffer), program.run_decompositions()):
        _matches_eager(consumer, model, [example, *others])


@pytest.mark.parametrize("name", ["sign", "nested", "empty selection"])
def test_the_training_ir_captures_branches_too(name):
    make, example, others, conds = CASES[name]
    model = make().eval()
    program = exporter.export(model, example, ir="training")
    assert _conds(program) == conds
    _matches_eager(program, model, [example, *others])


def test_refuse_and_draft_keep_their_old_meaning():
    with pytest.raises(exporter.TraceError, match="needs the value of a tensor") as refused:
        exporter.export(Sign(), (_x(4, 8),), branches="refuse")
    assert refused.value.category is Category.DATA_DEPENDENT_CONTROL_FLOW
    for program in (exporter.export(Sign(), (_x(4, 8),), branches="draft"), exporter.export(Sign(), (_x(4, 8),), draft=True)):
        assert _conds(program) == 0 and not hasattr(program, "branch_report")
        assert program.draft_report.assumptions
    with pytest.raises(exporter.InputSpecError, match="branches='maybe' is not"):
        exporter.export(Sign(), (_x(4, 8),), branches="maybe")


def test_a_model_without_value_branches_is_traced_once_and_gets_no_report():
    program = exporter.export(nn.Linear(8, 8), (torch.randn(2, 8),))
    assert not hasattr(program, "branch_report")


class DifferentStructures(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # line-marker: structures
            return x, x
        return x


class DifferentRanks(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # line-marker: ranks
            return x[0]
        return x


class DifferentDtypes(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # line-marker: dtypes
            return x.int()
        return x


class NoneOnOneSide(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # line-marker: none
            return x, None
        return x, x * 2


class Swapped(nn.Module):
    def forward(self, x):
        y, z = x * 2, x + 1
        if x.sum() > 0:  # line-marker: swapped
            return y, z
        return z, y


class OneTensorTwiceOnOneSide(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # line-marker: twice
            return x, x
        return x, x * 3


class DifferentSizes(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x[:2]
        return x


class DifferentLayouts(nn.Module):
    """One side returns a transposed slice, the other an expanded column: the same values
    would need the same layout for torch.cond, and each side's result is copied contiguous."""

    def forward(self, x):
        if (x > 0).sum() > 5:
            y = x.t()[:2]
        else:
            y = x[:, :1].expand(-1, 3)
        return y * 2


def test_sides_of_different_layouts_join_as_contiguous_copies():
    x = torch.randn(3, 3)
    for example in ((x.abs() + 0.1,), (-x.abs() - 0.1,)):
        program = exporter.export(DifferentLayouts(), example)
        assert _conds(program) == 1
        _matches_eager(program, DifferentLayouts(), [(x.abs() + 0.1,), (-x.abs() - 0.1,), (x,)])


@pytest.mark.parametrize(
    "model, marker, match",
    [
        (DifferentStructures, "structures", r"returns different structures .*: a tuple of 2 on one, one value on the other"),
        (DifferentRanks, "ranks", r"cannot be one program .*expected same dim but got 1 and 2"),
        (DifferentDtypes, "dtypes", r"cannot be one program .*torch.cond refuses them: When merging .*expected same dtype"),
        (Swapped, "swapped", r"outputs 0 and 1 are the same values in another order on each side"),
        (OneTensorTwiceOnOneSide, "twice", r"outputs 0 and 1 are one tensor on one side and two on the other"),
        (NoneOnOneSide, "none", r"returns different structures .*: output 1 is None on one side and a tensor on the other\n"),
    ],
)
def test_sides_torch_cond_cannot_join_are_refused_at_the_line(model, marker, match):
    with pytest.raises(exporter.TraceError, match=match) as refused:
        exporter.export(model(), (_x(4, 8),))
    assert refused.value.category is Category.BRANCH_CAPTURE
    assert refused.value.location == _line(marker)


def test_sides_of_different_sizes_join_with_a_data_dependent_size():
    program = exporter.export(DifferentSizes(), (_x(4, 8),))
    (out,) = program.graph.output_node().args[0]
    assert not isinstance(out.meta["val"].shape[0], int)
    for consumer in (program, program.run_decompositions()):  # the view branch returns a copy
        _matches_eager(consumer, DifferentSizes(), [(_x(4, 8, sign=-1),), (_x(4, 8),)])


class StopsWhenTheDataSays(nn.Module):
    def forward(self, x):
        for _ in range(10):
            x = x - 0.3
            if (x < 0).all():  # line-marker: break
                break
        return x


class WhileAValueSays(nn.Module):
    def forward(self, x):
        while x.abs().max() > 1:  # line-marker: while
            x = x / 2
        return x


@pytest.mark.parametrize(
    "model, marker, match",
    [
        (StopsWhenTheDataSays, "break", "loops as many times as the data says"),
        (WhileAValueSays, "while", "loops as many times as the data says"),
    ],
)
def test_a_loop_as_long_as_the_data_says_is_refused_at_the_line(model, marker, match):
    with pytest.raises(exporter.TraceError, match=match) as refused:
        exporter.export(model(), (_x(4, 8),))
    assert refused.value.category is Category.DATA_DEPENDENT_CONTROL_FLOW
    assert refused.value.location == _line(marker)


def test_past_the_limit_the_export_fails_naming_the_line():
    with pytest.raises(exporter.TraceError, match="more ways than 3 runs") as refused:
        exporter.export(BranchInEachLayer(4).eval(), (torch.randn(4, 8),), max_branch_runs=3)
    assert refused.value.category is Category.BRANCH_CAPTURE and refused.value.location


class CachesOnFirstCall(nn.Module):
    """Python state forward changes: each run starts from the model as given."""

    def __init__(self):
        super().__init__()
        self.calls = []
        self.seen = {}

    def forward(self, x):
        self.calls.append(len(self.calls))
        self.seen.setdefault("scale", x.abs().mean())
        if x.sum() > 0:
            return x * self.seen["scale"]
        return x - self.seen["scale"]


def test_every_run_starts_from_the_model_as_given_and_the_model_is_left_so():
    model = CachesOnFirstCall()
    program = exporter.export(model, (_x(4, 8),))
    assert model.calls == [] and model.seen == {}
    for x in (_x(4, 8), _x(4, 8, sign=-1)):
        torch.testing.assert_close(program.module()(x), CachesOnFirstCall()(x))


class InputCheck(nn.Module):
    def __init__(self, branch_after: bool) -> None:
        super().__init__()
        self.branch_after = branch_after

    def forward(self, x):
        if (x < 0).any():  # line-marker: input check
            raise ValueError("x must be non-negative")
        if self.branch_after and x.sum() > 4:
            return x.sqrt()
        return x * 2


@pytest.mark.parametrize("branch_after", [False, True], ids=["alone", "before a branch"])
def test_a_side_that_raises_is_checked_when_the_program_runs(branch_after):
    model = InputCheck(branch_after)
    program = exporter.export(model, (torch.rand(3),))
    report = program.branch_report
    assert report.checked == (_line("input check"),)
    assert len(report.decisions) == int(branch_after)
    _matches_eager(program, model, [(torch.rand(3),), (torch.rand(3) + 3,)])
    with pytest.raises(ValueError):
        model(-torch.ones(3))
    with pytest.raises(RuntimeError, match="forward\\(\\) raises for this input at ") as refused:
        program.module()(-torch.ones(3))
    assert _line("input check") in str(refused.value)  # the line, then its code
    assert "(`if (x < 0).any():  # line-marker: input check`)" in str(refused.value)


class FloatCheck(nn.Module):
    """An input check on a float read with ``.item()``, alone or on one side of a branch."""

    def __init__(self, inside: bool) -> None:
        super().__init__()
        self.inside = inside

    def forward(self, x):
        if self.inside and x.sum() <= 0:
            return -x
        if x.abs().max().item() > 0.82:  # line-marker: float check
            raise ValueError("too large")
        return x * 2


@pytest.mark.parametrize("inside", [False, True], ids=["alone", "on one side of a branch"])
def test_a_check_on_a_float_is_asserted_when_the_program_runs(inside):
    model = FloatCheck(inside)
    program = exporter.export(model, (torch.full((3,), 0.5),))
    assert program.branch_report.checked == (_line("float check"),)
    valid = [(torch.full((3,), 0.5),)] + ([(torch.full((3,), -2.0),)] if inside else [])
    _matches_eager(program, model, valid)
    with pytest.raises(ValueError):
        model(torch.full((3,), 2.0))
    with pytest.raises(RuntimeError, match="forward\\(\\) raises for this input at .*: ValueError: too large"):
        program.module()(torch.full((3,), 2.0))


def _checked_helper(x):
    if x.sum() > 0:  # line-marker: checked helper
        if (x > 5).any():
            raise ValueError("too large")
        return x * 2
    return x


class ResultsReadNothingChecked(nn.Module):
    """A helper whose side asserts, whose results forward does not use: no result of
    forward's would read the cond, which consumers drop as dead code."""

    def forward(self, x):
        _checked_helper(x)
        return torch.ones(3)


def test_a_check_no_result_depends_on_is_refused_not_dropped():
    with pytest.raises(exporter.TraceError, match="none of forward's results depends on") as refused:
        exporter.export(ResultsReadNothingChecked(), (torch.ones(3),))
    assert refused.value.location == _line("checked helper")


class ValidatedDistribution(nn.Module):
    """blt's entropy: ``torch.distributions`` checks its arguments' values in Python and raises
    on invalid ones, as a model's own input check does."""

    def forward(self, logits):
        # validate_args as its default, which torch.compile turns off for the whole process
        return torch.distributions.Categorical(logits=logits, validate_args=True).entropy()  # line-marker: distribution


def test_a_torch_distributions_argument_check_is_checked_when_the_program_runs():
    model = ValidatedDistribution()
    program = exporter.export(model, (torch.randn(2, 5),))
    if at_least(2, 15):
        # torch.distributions asserts at run time itself while exporting: nothing to decide
        assert not hasattr(program, "branch_report")
        assert torch.ops.aten._assert_async.msg in {n.target for n in program.graph.nodes}
    else:
        assert program.branch_report.checked == (_line("distribution"),)
    _matches_eager(program, model, [(torch.randn(2, 5) * 0.1,), (torch.randn(2, 5) * 10,)])
    invalid = torch.full((2, 5), float("nan"))
    with pytest.raises(ValueError):
        model(invalid)
    with pytest.raises(RuntimeError, match="forward\\(\\) raises for this input at .*distribution|distribution constraint"):
        program.module()(invalid)


class CheckInsideABranch(nn.Module):
    """An input check on one side of a branch (longformer asserts its global-attention
    sizes only where it has global attention): the program asserts it on that side only."""

    def forward(self, x):
        if x.sum() > 0:
            y = x * 2
            if (y > 100).any():  # line-marker: check inside a branch
                raise ValueError("too large")
            return y
        return -x


def test_a_side_that_raises_inside_a_branch_is_checked_on_that_side_only():
    model = CheckInsideABranch()
    program = exporter.export(model, (torch.rand(3),))
    assert program.branch_report.checked == (_line("check inside a branch"),)
    assert _conds(program) == 1
    big = torch.full((3,), -500.0)  # the other side: no check there, as in eager
    _matches_eager(program, model, [(torch.rand(3),), (-torch.rand(3),), (big,)])
    with pytest.raises(ValueError):
        model(-big)
    with pytest.raises(RuntimeError, match="forward\\(\\) raises for this input at ") as refused:
        program.module()(-big)
    assert _line("check inside a branch") in str(refused.value)


class StoredCheck(nn.Module):
    """The check is computed first and raised after a branch on another value: the side that
    raises is the first decision's, not the last one's."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def forward(self, x):
        bad = bool((x < 0).any())  # line-marker: stored check
        y = x * 2 if x.mean() > 0.5 else x * 3  # line-marker: later branch
        if self.how == "raised after" and bad:
            raise ValueError("negative input")
        if self.how == "raised on one later side" and bad and x.mean() > 0.5:
            raise ValueError("negative input with a large mean")
        return y


def _signs(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


@pytest.mark.parametrize(
    "how, checked, decided",
    [
        ("raised after", "stored check", ["later branch"]),
        # a negative entry raises only with a large mean: both sides of the check are programs
        ("raised on one later side", "later branch", ["stored check", "later branch"]),
    ],
)
def test_the_side_that_raises_is_found_whichever_decision_it_follows(how, checked, decided):
    model = StoredCheck(how)
    program = exporter.export(model, (torch.ones(4),))
    assert program.branch_report.checked == (_line(checked),)
    assert [d.location for d in program.branch_report.decisions] == [_line(m) for m in decided]
    valid = [(torch.ones(4),), (torch.full((4,), 0.1),), (_signs(2, 2, 2, 0),)]
    if how == "raised on one later side":
        valid.append((_signs(-1, 0.1, 0.1, 0.1),))  # negative, with a small mean: eager does not raise
    _matches_eager(program, model, valid)
    negative = _signs(-1, 3, 3, 3)
    with pytest.raises(ValueError, match="negative input"):
        model(negative)
    with pytest.raises(RuntimeError, match="forward\\(\\) raises for this input at ") as refused:
        program.module()(negative)
    assert f"(`{linecache.getline(__file__, int(_line(checked).rpartition(':')[2])).strip()}`): ValueError: negative input" in str(refused.value)


def _note_positive(x, seen: list):
    """A helper whose branch changes Python state its caller reads after it returns."""
    if x.sum() > 0:  # line-marker: noted
        seen.append("positive")
        return x * 2
    return x


class StateAfterABranch(nn.Module):
    """Python state a side changes (a list grown, a count) read after the branch's function
    returns: the runs differ after it, so the region goes on, and each side's program is
    the one eager runs."""

    def forward(self, x):
        seen: list = []
        count = 0
        y = _note_positive(x, seen)
        if seen:
            count += len(seen)
        return y * (count + 1) + len(seen)


def test_python_state_a_side_changes_and_forward_reads_after_it_is_each_sides_own():
    model = StateAfterABranch()
    program = exporter.export(model, (_x(4, 8),))
    assert [d.location for d in program.branch_report.decisions] == [_line("noted")]
    _matches_eager(program, model, [(_x(4, 8),), (_x(4, 8, sign=-1),), (torch.randn(4, 8),)])


class FlagReadOnALaterSide(nn.Module):
    """A flag decided first and read only on the side of a later decision that the example
    does not take: the runs that take the flag two ways agree node for node where the
    example goes, but not where the later decision's other side goes."""

    def forward(self, x, y):
        flag = bool(x.any())  # line-marker: flag read later
        if y.max() > 0:
            return y
        return y * (2 if flag else 3)


def test_a_decision_read_only_on_a_later_decisions_other_side_is_held_there():
    model = FlagReadOnALaterSide()
    program = exporter.export(model, (torch.ones(3), torch.ones(3)))
    assert _line("flag read later") in [d.location for d in program.branch_report.decisions]
    inputs = [(torch.ones(3), torch.ones(3)), (torch.zeros(3), torch.ones(3)), (torch.ones(3), -torch.ones(3)),
              (torch.zeros(3), -torch.ones(3))]
    _matches_eager(program, model, inputs)


def _scaled_then_picked(x, y):
    if x.sum() > 0:  # line-marker: scaled
        z = x * 2
    else:
        z = x * 3
    if y.max() > 0:  # line-marker: picked
        return z, y
    return z, y * 2


class TwoDecisionsInAHelper(nn.Module):
    """A helper's second decision, nested in its first one's region, changes a value (``y``)
    that the two runs of the first decision return alike: the first decision's cond must
    hand it on too."""

    def forward(self, x, y):
        z, y2 = _scaled_then_picked(x, y)
        return z + y2


def test_a_value_a_nested_decision_changes_leaves_the_outer_cond():
    model = TwoDecisionsInAHelper()
    program = exporter.export(model, (torch.ones(3), torch.ones(3)))
    assert [d.location for d in program.branch_report.decisions] == [_line("scaled"), _line("picked")]
    signs = [(torch.ones(3), torch.ones(3)), (-torch.ones(3), torch.ones(3)), (torch.ones(3), -torch.ones(3)),
             (-torch.ones(3), -torch.ones(3))]
    _matches_eager(program, model, signs)


class SliceOfAWiderTensor(nn.Module):
    """Both sides return the same strides, a slice of a wider tensor's rows (longformer's
    attention output, cut back from its padded length): not dense, which torch.cond cannot
    merge even where the strides agree."""

    def forward(self, x):
        if x.sum() > 0:
            return torch.cat([x, x, x], dim=-1)[:, 2:10]
        return torch.cat([x, -x, x], dim=-1)[:, 5:13]


def test_sides_with_equal_strides_that_are_not_dense_join_as_contiguous_copies():
    model = SliceOfAWiderTensor()
    program = exporter.export(model, (_x(4, 8),))
    assert _conds(program) == 1
    _matches_eager(program, model, [(_x(4, 8),), (_x(4, 8, sign=-1),)])


class NoGradBlockInABranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        if x.max() > 1:  # line-marker: no_grad
            with torch.no_grad():
                s = self.lin(x)
        else:
            s = x
        return self.lin(x) * s


class BranchInANoGradBlock(NoGradBlockInABranch):
    def forward(self, x):
        with torch.no_grad():
            if x.max() > 1:
                s = self.lin(x)
            else:
                s = x
        return self.lin(x) * s


def test_a_grad_mode_switch_inside_a_branch_is_refused_in_the_training_ir_and_captured_in_the_default():
    model = NoGradBlockInABranch()
    with pytest.raises(exporter.TraceError, match="switches grad mode or autocast on a side") as refused:
        exporter.export(model, (torch.full((2, 3), 2.0),), ir="training")
    assert refused.value.category is Category.BRANCH_CAPTURE
    assert refused.value.location == _line("no_grad")
    program = exporter.export(model, (torch.full((2, 3), 2.0),))
    _matches_eager(program, model, [(torch.full((2, 3), 2.0),), (torch.zeros(2, 3),)])


def test_a_branch_inside_a_grad_mode_block_ends_before_the_switch_back():
    """The sides meet at the end of the `if`, inside the block: neither side switches."""
    model = BranchInANoGradBlock()
    for ir in ("training", None):
        program = exporter.export(model, (torch.full((2, 3), 2.0),), **({"ir": ir} if ir else {}))
        assert _conds(program) == 1
        _matches_eager(program, model, [(torch.full((2, 3), 2.0),), (torch.zeros(2, 3),)])


class HalvedWhenPositive(nn.Module):
    """A size that differs by side, returned: it leaves the cond as a 0-d tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = x[::2] if (x > 0).all() else x
        return self.lin(h).mean(0), h.shape[0]


def test_a_size_that_differs_by_side_is_returned_as_a_number():
    model = HalvedWhenPositive()
    program = exporter.export(model, (torch.rand(6, 4) + 0.1,), dynamic_shapes=({0: Dim("batch", min=3, max=64)},))
    for x in (torch.rand(6, 4) + 0.1, torch.randn(5, 4), torch.rand(7, 4) + 0.1, -torch.rand(3, 4)):
        (ours, size), (theirs, expected) = program.module()(x), model(x)
        torch.testing.assert_close(ours, theirs)
        assert int(size) == expected


class TestedAgainAfterAnEarlyReturn(nn.Module):
    def forward(self, x, labels):
        h = x * 1.0
        if (labels == 1).any():  # line-marker: first test
            pass
        if x.sum() < 0.03:
            return h
        if (labels == 1).any():
            pass
        else:
            h = h * 1.08
        return h


def test_a_value_tested_again_where_its_other_side_was_never_traced_is_refused():
    """The runs that took the first test's other side returned early, so no run saw the
    second test go the other way: the program would keep one outcome for both."""
    x, labels = torch.tensor([0.9, -0.4, 1.3, 0.2]), torch.tensor([0, 1, 2, 0])
    with pytest.raises(exporter.TraceError, match="tests it again on one side of a later branch") as refused:
        exporter.export(TestedAgainAfterAnEarlyReturn(), (x, labels))
    assert refused.value.category is Category.BRANCH_CAPTURE
    assert refused.value.location == _line("first test")


@pytest.mark.slow
def test_runs_that_start_over_trace_at_most_four_times_the_run_limit(monkeypatch):
    from tests.exporter.branches import starts_over

    capture = importlib.import_module("exporter.branches.capture")  # the module, not its function

    traced = []
    run = capture.tracer.run
    monkeypatch.setattr(capture.tracer, "run", lambda *a, **k: traced.append(1) or run(*a, **k))
    with pytest.raises(exporter.TraceError, match="in more ways than 16 runs of forward can capture"):
        exporter.export(starts_over.make_model(), starts_over.EXAMPLE, max_branch_runs=16)
    # the runs of the joins, at most 4 x 16 over every start, and the few before the first join
    assert len(traced) <= 4 * 16 + 4


# -- a value a branch rebinds that only a later branch's untraced side reads ---------------


class ReadOnAnUntracedSide(nn.Module):
    """The run that takes every first side never reads ``acc`` after the first branch, nor
    does the run that takes its other side: only the second branch's other side reads it."""

    def forward(self, x, flag):
        acc = x.new_zeros(())
        if x.max() > 1:
            pass
        else:
            acc = acc + x.sum()
        if flag.any():
            return x
        return x + acc


class ReadOnAnUntracedSideNested(nn.Module):
    def forward(self, x, flag):
        acc = x.new_zeros(())
        if x.max() > 1:
            if x.sum() > 0:
                acc = acc + x.sum()
        if flag.any():
            return x
        return x + acc


@pytest.mark.parametrize("make", [ReadOnAnUntracedSide, ReadOnAnUntracedSideNested])
def test_a_value_only_a_later_branchs_other_side_reads_is_handed_on_by_the_earlier_branch(make):
    model = make()
    program = exporter.export(model, (torch.tensor([0.5, 2.0]), torch.tensor([True])))
    inputs = [
        (torch.tensor(x), torch.tensor(flag))
        for x in ([0.5, 2.0], [0.5, 0.25], [-3.0, 2.0]) for flag in ([True], [False])
    ]
    matches_eager(program, model, inputs)
