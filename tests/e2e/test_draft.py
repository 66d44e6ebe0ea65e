"""Draft mode side by side with torch.export.draft_export.

Each model stops a normal export (exporter's and torch.export's; exporter stops at a branch
on a tensor's value with ``branches="refuse"``, since by default it captures the branch as
``torch.cond``).  With ``draft=True`` the program comes back with one assumption per place
the example inputs decided, which must say what torch.export.draft_export's report says
(kind, the user's line, the value), run like eager on the example inputs, and refuse, at run
time, inputs that break an assumption.
"""

import pytest
import torch
from torch.export import Dim

import exporter
from exporter import AssumptionKind, TraceError

HERE = __file__

# torch.export.draft_export's failure types, as exporter names them
_KINDS = {
    "DATA_DEPENDENT_ERROR": AssumptionKind.DATA_DEPENDENT,
    "MISSING_FAKE_KERNEL": AssumptionKind.MISSING_FAKE_KERNEL,
    "GUARD_ADDED": AssumptionKind.DYNAMIC_SHAPE,
}


def _line(marker):
    with open(HERE) as f:
        return next(i for i, text in enumerate(f, 1) if text.rstrip().endswith(marker))


class Gate(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # gate
            return x * 2
        return x - 1


class Steps(torch.nn.Module):
    def forward(self, x, steps):
        for _ in range(steps):  # steps
            x = torch.sin(x)
        return x


@torch.library.custom_op("exporter_e2e_draft::keep_positive", mutates_args=())
def keep_positive(x: torch.Tensor) -> torch.Tensor:
    return x[x > 0].clone()


class NoFakeKernel(torch.nn.Module):
    def forward(self, x):
        return keep_positive(x).sum() + x.mean()  # custom


class TopExperts(torch.nn.Module):
    """A mixture-of-experts block that runs only the experts some token picked."""

    def __init__(self):
        super().__init__()
        self.router = torch.nn.Linear(8, 4)
        self.experts = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(4))

    def forward(self, x):
        choice = self.router(x).argmax(-1)
        out = torch.zeros_like(x)
        for expert in choice.unique().tolist():  # experts
            picked = choice == expert
            out = out + self.experts[expert](x) * picked[:, None]
        return out


def _torch_rows(program):
    rows = []
    for failure in program._report.failures:
        data = failure.data
        line = data["user_stack"][-1]["line"] if data.get("user_stack") else None
        rows.append((_KINDS[failure.failure_type.name], line, data.get("result")))
    return sorted(rows, key=str)


def _same_report(ours, theirs):
    """Same kinds and values; the same lines where torch's report has one (it gives none for
    an operator without a fake kernel, exporter the line that calls it)."""
    mine, torchs = _our_rows(ours), _torch_rows(theirs)
    assert [(k, v) for k, _, v in mine] == [(k, v) for k, _, v in torchs]
    assert all(t is None or m == t for (_, m, _), (_, t, _) in zip(mine, torchs))


def _our_rows(program):
    rows = []
    for a in program.draft_report.assumptions:
        line = int(a.location.rsplit(":", 1)[1]) if a.location else None
        value = a.assumed.rsplit(" ", 1)[1] if a.kind is AssumptionKind.DATA_DEPENDENT else None
        rows.append((a.kind, line, value))
    return sorted(rows, key=str)


CASES = [
    pytest.param(Gate(), (torch.ones(3),), (-torch.ones(3),), "gate", {"branches": "refuse"}, id="branch_on_a_sum"),
    pytest.param(Steps(), (torch.ones(3), torch.tensor(3)), (torch.ones(3), torch.tensor(4)), "steps", {}, id="loop_count"),
    pytest.param(NoFakeKernel(), (torch.randn(8),), None, "custom", {}, id="op_without_fake_kernel"),
]


@pytest.mark.parametrize("model, args, breaking, marker, stopping", CASES)
def test_draft_matches_torch_draft_export_and_checks_its_assumptions(model, args, breaking, marker, stopping):
    with pytest.raises(TraceError):
        exporter.export(model, args, **stopping)
    with pytest.raises(Exception):
        torch.export.export(model, args, strict=False)

    ours = exporter.export(model, args, draft=True)
    theirs = torch.export.draft_export(model, args)
    _same_report(ours, theirs)
    assert _our_rows(ours)[0][1] == _line(f"# {marker}")
    assert all(a.checked for a in ours.draft_report.assumptions)

    torch.testing.assert_close(ours.module()(*args), model(*args))
    if breaking is not None:
        with pytest.raises(RuntimeError, match="Runtime assertion failed"):
            ours.module()(*breaking)


def test_a_data_dependent_size_from_an_op_without_fake_kernel_works_for_other_sizes():
    model, x = NoFakeKernel(), torch.randn(8)
    program = exporter.export(model, (x,), draft=True)
    other = torch.randn(8)
    torch.testing.assert_close(program.module()(other), model(other))


@pytest.mark.parametrize("seed", [0, 1])
def test_experts_picked_by_the_router_are_assumed_and_checked(seed):
    torch.manual_seed(seed)
    model, x = TopExperts().eval(), torch.randn(6, 8)
    with pytest.raises(TraceError):
        exporter.export(model, (x,))
    program = exporter.export(model, (x,), draft=True)
    lines = {int(a.location.rsplit(":", 1)[1]) for a in program.draft_report.assumptions}
    assert _line("# experts") in lines
    # the router ran on the real parameters: the experts assumed are the ones eager picks.
    # (torch.export.draft_export's real copies of parameters are left uninitialized, since
    # its converter copies the data of plain tensors only; its program usually assumes other
    # experts and fails on its own example inputs, depending on what that memory held.)
    torch.testing.assert_close(program.module()(x), model(x))


class Rows(torch.nn.Module):
    def forward(self, x):
        return x.view(-1, 16)  # rows


def test_a_dynamic_shape_the_model_does_not_fit_is_relaxed_like_draft_export():
    x = torch.randn(4, 16)
    spec = {"x": {1: Dim("width", max=64)}}
    with pytest.raises(exporter.ConstraintError):
        exporter.export(Rows(), (x,), dynamic_shapes=spec)
    program = exporter.export(Rows(), (x,), dynamic_shapes=spec, draft=True)
    (shape,) = program.draft_report.assumptions
    assert shape.kind is AssumptionKind.DYNAMIC_SHAPE and shape.location.endswith(f":{_line('# rows')}")
    assert "width" in shape.assumed and shape.detail.startswith("fix: ")
    theirs = torch.export.draft_export(Rows(), (x,), dynamic_shapes=spec)
    assert {f.failure_type.name for f in theirs._report.failures} == {"GUARD_ADDED"}
    torch.testing.assert_close(program.module()(x), Rows()(x))
    with pytest.raises(Exception):
        program.module()(torch.randn(4, 8))  # the width the model needs is the example's


@pytest.mark.slow
def test_a_longformer_global_attention_switch_is_assumed_off_as_in_the_example():
    transformers = pytest.importorskip("transformers")
    config = transformers.LongformerConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
        attention_window=[4], max_position_embeddings=64,
    )
    model = transformers.LongformerModel(config).eval()
    ids, mask = torch.randint(0, 100, (2, 8)), torch.ones(2, 8, dtype=torch.long)
    with pytest.raises(TraceError, match="is_global_attn"):
        exporter.export(model, (ids,), {"attention_mask": mask}, branches="refuse")
    program = exporter.export(model, (ids,), {"attention_mask": mask}, draft=True)
    (switch,) = program.draft_report.assumptions
    assert switch.code == "if is_global_attn:" and switch.assumed.endswith("is False") and switch.checked
    _same_report(program, torch.export.draft_export(model, (ids,), {"attention_mask": mask}))
    with torch.no_grad():
        torch.testing.assert_close(program.module()(ids, attention_mask=mask).last_hidden_state,
                                   model(ids, attention_mask=mask).last_hidden_state)
    global_mask = mask.clone()
    global_mask[:, 0] = 2  # global attention on the first token: the other branch
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        program.module()(ids, attention_mask=global_mask)


class Coordinates(torch.nn.Module):
    """Row and column indices of the positive entries (``nonzero(as_tuple=True)`` of a
    matrix: the second column starts at a data-dependent storage offset)."""

    def forward(self, x):
        rows, cols = (x > 0).nonzero(as_tuple=True)
        return rows * 10 + cols, x[rows, cols]


def test_index_columns_of_a_data_dependent_count_keep_their_symbol():
    x = torch.arange(16.0).view(4, 4) - 7.5
    program = exporter.export(Coordinates(), (x,), draft=True)
    assert not program.draft_report.assumptions
    for sample in (x, torch.randn(4, 4), -torch.ones(4, 4), torch.ones(4, 4)):
        expected = Coordinates()(sample)
        for got, want in zip(program.module()(sample), expected):
            torch.testing.assert_close(got, want)


@pytest.mark.slow
def test_longformer_classification_with_global_attention_on_the_first_token():
    # The classification head turns global attention on for the first token, so the
    # global branch runs: its einsum over the data-dependent number of global tokens is
    # kept whole, and inner sizes the draft trace inferred from real outputs stay inside it.
    transformers = pytest.importorskip("transformers")
    config = transformers.LongformerConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
        attention_window=[4], max_position_embeddings=64, num_labels=3,
    )
    torch.manual_seed(0)
    model = transformers.LongformerForSequenceClassification(config).eval()
    ids, mask = torch.randint(0, 100, (2, 8)), torch.ones(2, 8, dtype=torch.long)
    draft = exporter.export(model, (ids,), {"attention_mask": mask}, draft=True)
    assert draft.draft_report.assumptions
    # without draft, the global branch is captured (its count of global tokens is a size
    # only the data decides, which len() gives symbolic)
    captured = exporter.export(model, (ids,), {"attention_mask": mask})
    assert captured.branch_report is not None and captured.branch_report.decisions
    other = torch.randint(0, 100, (2, 8))
    with torch.no_grad():
        for program in (draft, captured):
            for sample in (ids, other):
                torch.testing.assert_close(
                    program.module()(sample, attention_mask=mask).logits, model(sample, attention_mask=mask).logits
                )
