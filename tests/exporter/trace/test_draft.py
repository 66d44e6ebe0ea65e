"""Draft tracing: data-dependent guards decided by the example's values, tensor values handed to
NumPy and operators without fake kernels, read back as assumptions with the user's line."""

import pytest
import torch

from exporter import TraceError
from exporter._assumptions import AssumptionKind
from exporter._pipeline import run_passes
from exporter.inputs import bind_inputs
from exporter.trace import trace
from exporter.trace.draft import (
    data_dependent_assumptions,
    mark_checked,
    missing_fake_kernel_assumptions,
    values_check_message,
    values_taken_assumptions,
)

HERE = __file__


def _line(text):
    with open(HERE) as f:
        return f"{HERE}:{next(i for i, line in enumerate(f, 1) if line.rstrip().endswith(text))}"


class Branch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # the branch
            return x * 2
        return x - 1


class Repeat(torch.nn.Module):
    def forward(self, x, n):
        for _ in range(n.item()):  # the loop
            x = x + 1
        return x


@torch.library.custom_op("exporter_test_draft::positive", mutates_args=())
def positive(x: torch.Tensor) -> torch.Tensor:
    return x[x > 0].clone()


class Counts(torch.nn.Module):
    def forward(self, x, groups):
        counts = groups.bincount().numpy()  # the counts
        return x * int(counts.max())


class Custom(torch.nn.Module):
    def forward(self, x):
        return positive(x).sum() + x.sum()  # the custom op


def _draft_state(model, *args):
    return trace(model, bind_inputs(model, args, None), draft=True)


def test_a_branch_on_a_value_is_taken_as_the_example_took_it_with_its_line():
    (branch,) = _draft_state(Branch(), torch.ones(3)).assumptions
    assert branch.kind is AssumptionKind.DATA_DEPENDENT
    assert branch.assumed == "Eq(u0, 1) is True"
    assert branch.location == _line("# the branch") and branch.code == "if x.sum() > 0:  # the branch"
    assert branch.detail == f"u0 = aten.item at {_line('# the branch')}"


def test_a_loop_count_read_from_a_tensor_is_the_example_count():
    (loop,) = _draft_state(Repeat(), torch.ones(2), torch.tensor(3)).assumptions
    assert loop.assumed == "u0 == 3" and loop.location == _line("# the loop")


def test_an_operator_without_a_fake_kernel_has_its_output_metadata_asserted():
    state = _draft_state(Custom(), torch.randn(8))
    (kernel,) = state.assumptions
    assert kernel.kind is AssumptionKind.MISSING_FAKE_KERNEL and kernel.checked
    assert kernel.location == _line("# the custom op")
    assert "exporter_test_draft.positive.default has no fake kernel" in kernel.detail
    checks = [n for n in state.gm.graph.nodes if n.target is torch.ops.aten._assert_tensor_metadata.default]
    assert len(checks) == 1 and checks[0].kwargs["dtype"] is torch.float32


def test_outside_draft_mode_nothing_is_assumed():
    with pytest.raises(TraceError, match="needs the value of a tensor"):
        trace(Branch(), bind_inputs(Branch(), (torch.ones(3),), None))
    model = torch.nn.Linear(2, 2)
    state = trace(model, bind_inputs(model, (torch.ones(1, 2),), None))
    assert state.assumptions == [] and data_dependent_assumptions(state) == []


def test_mark_checked_looks_for_an_assert_on_the_assumption_symbols():
    state = _draft_state(Branch(), torch.ones(3))
    unchecked = list(state.assumptions)
    assert mark_checked(unchecked, state.gm)[0].checked is False  # the asserts are inserted by a pass
    run_passes(state)
    assert mark_checked(unchecked, state.gm)[0].checked is True


@pytest.mark.parametrize("model", [Branch(), Repeat()])
def test_missing_fake_kernel_finds_nothing_in_builtin_ops(model):
    args = (torch.ones(3),) if isinstance(model, Branch) else (torch.ones(3), torch.tensor(2))
    assert missing_fake_kernel_assumptions(_draft_state(model, *args)) == []


def test_values_handed_to_numpy_are_read_back_with_their_line_and_check():
    state = _draft_state(Counts(), torch.ones(2), torch.tensor([0, 1, 1]))
    (taken,) = state.assumptions
    assert taken.kind is AssumptionKind.TENSOR_VALUES and taken.assumed == "values == [1, 2] (int64[2])"
    assert taken.location == _line("# the counts") and not taken.checked
    assert values_taken_assumptions(state) == [taken] and data_dependent_assumptions(state) == []
    (check,) = [n for n in state.gm.graph.nodes if n.target is torch.ops.aten._assert_async.msg]
    assert check.args[1] == values_check_message(taken.location)
    assert mark_checked([taken], state.gm)[0].checked is True
    state.gm.graph.erase_node(check)
    assert mark_checked([taken], state.gm)[0].checked is False
