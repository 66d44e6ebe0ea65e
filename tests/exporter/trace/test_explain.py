"""Failures inside forward explained: the category, the user's line, the next step; the eager check."""

import operator
import os

import pytest
import torch

import exporter
from exporter import Category, TraceError
from exporter._torch_internals import DynamicOutputShapeException, GuardOnDataDependentSymNode
from exporter.trace.explain import eager_failure, explain, user_location
from exporter.trace.values import HashedSize, LeavesGraph

HERE = os.path.abspath(__file__)


def _raised_here(error: Exception) -> Exception:
    try:
        raise error  # the user's line, as far as explain can tell
    except Exception as e:  # noqa: BLE001
        return e


@pytest.mark.parametrize(
    "error, category, words",
    [
        (GuardOnDataDependentSymNode(None, "Could not guard on data-dependent expression u0 > 0"),
         Category.DATA_DEPENDENT_CONTROL_FLOW, "needs the value of a tensor"),
        (DynamicOutputShapeException(torch.ops.aten.nonzero.default), Category.DATA_DEPENDENT_OUTPUT_SHAPE,
         "output shape that depends on tensor data"),
        (NotImplementedError("no fake impl registered for mylib::op"), Category.UNSUPPORTED_OPERATOR,
         "cannot run on fake tensors"),
        (ValueError("bad config"), Category.MODEL_ERROR, "raised ValueError while running on fake tensors"),
        (HashedSize("u0 + 64"), Category.DATA_DEPENDENT_CONTROL_FLOW, "hashes a size computed from tensor values"),
        (LeavesGraph((4,), torch.int64), Category.DATA_LEAVES_GRAPH, "out of the graph with .numpy()"),
    ],
)
def test_explain_names_the_category_line_and_next_step(error, category, words):
    explained = explain(_raised_here(error))
    assert isinstance(explained, TraceError) and explained.category is category
    assert words in explained.message and explained.hint
    assert explained.location.startswith(f"{HERE}:")


class IndexFromData(torch.nn.Module):
    def forward(self, x):
        return x[: operator.index(x.max().long())]  # a plain number, no branch


class BranchOnData(torch.nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x  # a bool


def test_a_number_the_data_decides_is_hinted_to_stay_a_tensor_a_bool_to_become_a_cond():
    with pytest.raises(TraceError, match="needs the value of a tensor") as number:
        exporter.export(IndexFromData(), (torch.tensor([1.0, 2.0]),))
    assert "keep the value a tensor" in number.value.hint and "torch.cond" not in number.value.hint
    with pytest.raises(TraceError, match="needs the value of a tensor") as bool_:
        exporter.export(BranchOnData(), (torch.tensor([1.0, 2.0]),), branches="refuse")
    assert "torch.cond" in bool_.value.hint


def test_user_location_is_the_innermost_user_frame():
    error = _raised_here(RuntimeError("x"))
    assert user_location(error) == f"{HERE}:{_raised_here.__code__.co_firstlineno + 2}"


class CountsCalls(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if x.shape[0] > 8:
            raise ValueError("too many rows")
        return self.bn(x)


def test_eager_failure_runs_the_model_and_puts_everything_back():
    model = CountsCalls().train()
    stats = model.bn.running_mean.clone()
    assert eager_failure(model, (torch.randn(3, 4),), {}) == (True, None)
    ran, failure = eager_failure(model, (torch.randn(9, 4),), {})
    assert ran and isinstance(failure, ValueError)
    torch.testing.assert_close(model.bn.running_mean, stats)
    assert model.calls == 0


class CountedLoop(torch.nn.Module):
    def forward(self, x, n):
        for i in range(n):  # a tensor: range needs its value as a plain int
            x = x + i
        return x


def test_a_loop_over_a_data_dependent_count_is_told_to_loop_a_fixed_number_of_times():
    with pytest.raises(TraceError, match=r"needs the value of a tensor .*`for i in range\(n\):") as info:
        exporter.export(CountedLoop(), (torch.randn(2), torch.tensor(3)))
    assert info.value.category is Category.DATA_DEPENDENT_CONTROL_FLOW
    assert "range(num_experts)" in info.value.hint and "torch.cond" not in info.value.hint


class OneHot(torch.nn.Module):
    def forward(self, x, labels):
        return torch.nn.functional.one_hot(labels) * x  # line-marker: one_hot


class SplitByCount(torch.nn.Module):
    def forward(self, x, n):
        return x.split(n.item())  # line-marker: split


class LoopOverHits(torch.nn.Module):
    def forward(self, x, n):
        for row in x.nonzero():  # line-marker: loop
            x = x + row.sum()
        return x


def _marked(marker: str) -> str:
    with open(HERE) as f:
        return next(f"{HERE}:{i}" for i, line in enumerate(f, 1) if line.rstrip().endswith(f"line-marker: {marker}"))


@pytest.mark.parametrize(
    "model, marker, category, words",
    [
        # an operator's own implementation reads its size from the data: no branch can supply it
        (OneHot(), "one_hot", Category.DATA_DEPENDENT_OUTPUT_SHAPE, "aten.one_hot.default reads its output size"),
        (SplitByCount(), "split", Category.DATA_DEPENDENT_OUTPUT_SHAPE, "aten.split.Tensor reads its output size"),
        # unbind (Tensor.__iter__) guards a bool on the row count: the user's loop is the problem
        (LoopOverHits(), "loop", Category.DATA_DEPENDENT_CONTROL_FLOW, "needs the value of a tensor"),
    ],
)
def test_a_size_read_inside_an_operator_is_a_data_dependent_output_shape(model, marker, category, words):
    with pytest.raises(TraceError, match=words) as info:  # (a loop over the data is captured unless refused)
        exporter.export(model, (torch.ones(4, 3, dtype=torch.long), torch.tensor(2)), branches="refuse")
    assert info.value.category is category and info.value.location == _marked(marker)
    if category is Category.DATA_DEPENDENT_OUTPUT_SHAPE:
        assert "num_classes" in info.value.hint and "torch.cond" not in info.value.hint


def test_an_integer_taken_in_the_users_own_code_is_control_flow():
    import sympy

    error = GuardOnDataDependentSymNode(sympy.Symbol("u0", integer=True), "Could not extract specialized integer")
    assert explain(_raised_here(error)).category is Category.DATA_DEPENDENT_CONTROL_FLOW


class HoldsTwoTensor(torch.nn.Module):
    def __init__(self):
        from torch.testing._internal.two_tensor import TwoTensor

        super().__init__()
        self.pair = torch.nn.Parameter(TwoTensor(torch.ones(2), torch.ones(2)))

    def forward(self, x):
        return (x + self.pair).a  # a program returns plain tensors


def test_eager_failure_runs_a_model_with_tensor_subclass_state():
    """A wrapper subclass has no storage of its own: putting its state back compares its
    inner tensors' memory (it used to ask the wrapper for a data pointer and fail)."""
    model = HoldsTwoTensor()
    inner = model.pair.a.data_ptr()
    assert eager_failure(model, (torch.randn(2),), {}) == (True, None)
    assert model.pair.a.data_ptr() == inner and torch.equal(model.pair.a, torch.ones(2))


def test_the_training_ir_refuses_subclass_state_naming_it_and_the_ir_that_takes_it():
    with pytest.raises(TraceError, match=r"ir='training' .*'pair' \(TwoTensor\)") as info:
        exporter.export(HoldsTwoTensor(), (torch.randn(2),), ir="training")
    assert info.value.category is Category.UNSUPPORTED_TENSOR_SUBCLASS
    assert "ir='inference'" in info.value.hint
    model, x = HoldsTwoTensor(), torch.randn(2)
    program = exporter.export(model, (x,))  # the default IR takes it
    torch.testing.assert_close(program.module()(x), model(x))
    assert [s.target for s in program.graph_signature.input_specs][:2] == [
        "parametrizations.pair.original0",
        "parametrizations.pair.original1",
    ]


class ClassesAsAList(torch.nn.Module):
    def forward(self, x, labels):
        total = x.new_zeros(())
        for c in torch.unique(labels).tolist():  # line-marker: tolist
            total = total + x[labels == c].sum()
        return total


def test_a_data_sized_tensor_made_a_list_is_named_and_told_to_stay_a_tensor():
    with pytest.raises(TraceError, match=r"turns a tensor whose length only the data decides into a Python list") as info:
        exporter.export(ClassesAsAList(), (torch.randn(6), torch.tensor([0, 1, 1, 2, 0, 2])))
    assert info.value.location == _marked("tolist")
    assert info.value.category is Category.DATA_DEPENDENT_OUTPUT_SHAPE
    assert "for v in t:" in info.value.hint
