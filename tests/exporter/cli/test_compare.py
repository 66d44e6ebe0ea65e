"""Program vs eager: per-output errors, structure checks, state put back, mismatch raised."""

import pytest
import torch

import exporter
from exporter import Category
from exporter.cli.compare import VerificationMismatch, compare_with_eager, require_match


class Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count.add_(1)
        return {"sum": x.sum() + self.count, "double": x * 2}


class CountsInAPlainTensor(torch.nn.Module):
    """Counts calls in a tensor attribute that is not a buffer: the training IR keeps the
    write, on a constant that is the model's own tensor."""

    def __init__(self):
        super().__init__()
        self.count = torch.zeros(())

    def forward(self, x):
        self.count.add_(1)
        return x + self.count


def test_a_constant_the_program_shares_with_the_model_is_put_back_between_runs():
    model = CountsInAPlainTensor()
    program = exporter.export(model, (torch.ones(3),), ir="training")
    assert program.constants["count"] is model.count
    runs = [("example", (torch.ones(3),), {}), ("fresh", (torch.randn(3),), {})]
    assert [c.ok for c in compare_with_eager(model, program, runs)] == [True, True]
    assert model.count.item() == 0


class Noisy(torch.nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x) * 1e-3


def test_runs_are_compared_per_output_from_the_same_state():
    model = Counting()
    program = exporter.export(model, (torch.ones(3),))
    runs = [("example", (torch.ones(3),), {}), ("fresh", (torch.randn(3),), {})]
    results = compare_with_eager(model, program, runs)
    assert [(c.label, c.ok) for c in results] == [("example", True), ("fresh", True)]
    assert [o.path for o in results[0].outputs] == ["sum", "double"]
    assert model.count.item() == 0  # the buffer both runs updated is put back


def test_a_mismatch_is_reported_per_output_and_raised_as_verification_error():
    model = Noisy()
    program = exporter.export(model, (torch.zeros(4),))
    results = compare_with_eager(model, program, [("example", (torch.zeros(4),), {})], atol=1e-7, rtol=0)
    diff = results[0].outputs[0]
    assert not diff.ok and 0 < diff.max_abs < 2e-3 and results[0].failures()[0].startswith("example output: max abs error")
    with pytest.raises(VerificationMismatch, match=r"program and eager differ \(rtol 0, atol 1e-07\): example output") as info:
        require_match(results, atol=1e-7, rtol=0)
    assert info.value.category is Category.VERIFICATION and info.value.rule == "matches-eager"
    assert info.value.comparisons == results
    require_match(compare_with_eager(model, program, [("example", (torch.zeros(4),), {})], atol=1e-2), atol=1e-2, rtol=0)


class FailsOnOdd(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] % 2:
            raise ValueError("odd batch")
        return x * 2


def test_a_run_that_raises_or_changes_structure_is_a_failed_comparison():
    program = exporter.export(FailsOnOdd(), (torch.randn(2, 3),))
    bad_input = compare_with_eager(FailsOnOdd(), program, [("wrong", (torch.randn(2, 5),), {})])
    assert not bad_input[0].ok and "Guard failed" in bad_input[0].error and bad_input[0].eager_error is None

    class TwoOutputs(torch.nn.Module):
        def forward(self, x):
            return x, x

    other = compare_with_eager(TwoOutputs(), exporter.export(torch.nn.ReLU(), (torch.randn(2),)), [("x", (torch.randn(2),), {})])
    assert other[0].error.startswith("output structure differs")


def test_inputs_eager_fails_on_are_reported_apart_not_as_a_mismatch():
    """Inputs the model itself cannot run (a size inside a declared range it does not support):
    the program is not at fault."""
    model = FailsOnOdd()
    program = exporter.export(model, (torch.randn(2, 3),))
    runs = compare_with_eager(model, program, [("odd", (torch.randn(3, 3),), {})])
    assert runs[0].eager_error == "ValueError: odd batch" and runs[0].ok and runs[0].outputs == ()
    assert runs[0].to_json()["eager_error"] == "ValueError: odd batch"
    require_match(runs, rtol=1e-4, atol=1e-5)  # does not raise


class NotAtZero(torch.nn.Module):
    """A guard the program keeps (``2*b != b``, two sizes of one Dim) where eager runs on an
    empty batch: the program refuses a size inside a range that starts at 0."""

    def forward(self, x, y):
        if 2 * x.shape[0] != y.shape[0]:
            return x * 2 + y
        return x + 1


def test_a_program_that_refuses_sizes_eager_runs_on_says_to_narrow_the_range():
    model = NotAtZero()
    batch = torch.export.Dim("b")
    program = exporter.export(model, (torch.randn(3, 2), torch.randn(3, 2)), dynamic_shapes=({0: batch}, {0: batch}))
    assert {r.lower for r in program.range_constraints.values()} == {0}
    runs = [("example", (torch.randn(3, 2), torch.randn(3, 2)), {}), ("min b=0", (torch.randn(0, 2), torch.randn(0, 2)), {})]
    results = compare_with_eager(model, program, runs)
    assert [c.ok for c in results] == [True, False] and results[1].eager_error is None
    with pytest.raises(VerificationMismatch) as info:
        require_match(results, rtol=1e-4, atol=1e-5)
    assert "refuses sizes eager runs on (min b=0)" in info.value.hint and "batch:1.." in info.value.hint

    # a value mismatch alongside keeps the tolerance hint: not every failure is a refusal
    noisy = compare_with_eager(Noisy(), exporter.export(Noisy(), (torch.zeros(4),)), [("example", (torch.zeros(4),), {})], atol=1e-7, rtol=0)
    with pytest.raises(VerificationMismatch) as info:
        require_match([*results, *noisy], rtol=0, atol=1e-7)
    assert "beyond tolerance" in info.value.hint


class ExportsAnotherWay(torch.nn.Module):
    """Takes another path while exported, as libraries do under torch.compiler's queries."""

    def __init__(self, query):
        super().__init__()
        self.query = query

    def forward(self, x):
        if self.query():
            return x.relu()
        return x.abs()


@pytest.mark.parametrize(
    "query, named",
    [
        (torch.compiler.is_exporting, "torch.compiler.is_exporting()"),
        (torch.compiler.is_compiling, "torch.compiler.is_compiling()"),
        (lambda: torch.compiler.is_compiling() and torch.compiler.is_exporting(),
         "torch.compiler.is_compiling() and is_exporting()"),
    ],
    ids=["is_exporting", "is_compiling", "both"],
)
def test_a_mismatch_eager_shows_under_the_export_flag_names_the_model_and_the_flag(query, named):
    model, x = ExportsAnotherWay(query), -torch.ones(3)
    program = exporter.export(model, (x,))
    results = compare_with_eager(model, program, [("example", (x,), {})])
    assert not results[0].ok and (results[0].flag, results[0].model) == (named, "ExportsAnotherWay")
    assert results[0].outputs[0].note == f"eager with {named} True gives this value"
    assert results[0].to_json()["flag"] == named
    with pytest.raises(VerificationMismatch, match=f"eager with {named.replace('(', '.').replace(')', '.')} True") as info:
        require_match(results, rtol=1e-4, atol=1e-5)
    assert info.value.hint.startswith(f"ExportsAnotherWay takes a different path under {named}")
    assert (torch.compiler.is_compiling(), torch.compiler.is_exporting()) == (False, False)


def test_a_mismatch_the_flags_do_not_explain_keeps_the_plain_hint():
    model = Noisy()
    program = exporter.export(model, (torch.zeros(4),))
    results = compare_with_eager(model, program, [("example", (torch.zeros(4),), {})], atol=1e-7, rtol=0)
    assert results[0].flag is None and results[0].outputs[0].note == ""
    with pytest.raises(VerificationMismatch) as info:
        require_match(results, rtol=0, atol=1e-7)
    assert "beyond tolerance" in info.value.hint
