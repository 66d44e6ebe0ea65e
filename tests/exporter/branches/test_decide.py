"""Decisions: a run's data-dependent booleans answered from a schedule, each recorded once with
its site, and the questions a decider does not answer (numbers, torch's own, past the limit)."""

import operator
import unittest

import pytest
import sympy
import torch

import exporter
from exporter import Category, TraceError
from exporter._torch_internals import EXPORT_ROOT, GuardOnDataDependentSymNode
from exporter.branches.decide import (
    ITEM_OPS,
    Decider,
    Site,
    TooManyDecisions,
    limit_error,
    refusal,
)
from exporter.inputs import bind_inputs
from exporter.trace import tracer
from exporter.trace.symbols import new_fake_mode

HERE = __file__
ROOT = EXPORT_ROOT


def _line(marker: str) -> str:
    with open(HERE) as f:
        for i, line in enumerate(f, 1):
            if f"line-marker: {marker}" in line:
                return f"{HERE}:{i}"
    raise AssertionError(marker)


class _Calls(torch.nn.Module):
    """Runs ``fn`` as its forward, so that the trace is inside a module call."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _decide(model, *inputs, schedule=None, limit=32):
    """One run of forward of ``model`` traced as branch capture traces it, its data-dependent
    booleans going to a ``Decider``; the decider and the run's graph."""
    request = tracer.prepare(model, bind_inputs(model, inputs, None), None, shared_world=True)
    decider = Decider(schedule, limit=limit)
    return decider, tracer.run(request, decider).gm


def _refused(model, *inputs, limit=32) -> BaseException:
    """The error one run of ``model`` fails with."""
    with pytest.raises(Exception) as raised:
        _decide(model, *inputs, limit=limit)
    return raised.value


def _targets(gm: torch.fx.GraphModule) -> list:
    return [n.target for n in gm.graph.nodes if n.op == "call_function" and n.target not in ITEM_OPS]


def sign(x):
    if x.sum() > 0:  # line-marker: sign
        return x + 1
    return x - 1


def test_a_decision_takes_true_unless_the_schedule_says_otherwise():
    decider, gm = _decide(_Calls(sign), torch.randn(3))
    (decision,) = decider.decisions
    assert decision.value is True and torch.ops.aten.add.Tensor in _targets(gm)
    site = decision.site
    decider, gm = _decide(_Calls(sign), torch.randn(3), schedule={site: False})
    (decision,) = decider.decisions
    assert decision.site == site and decision.value is False
    assert torch.ops.aten.sub.Tensor in _targets(gm) and torch.ops.aten.add.Tensor not in _targets(gm)


def test_a_decision_records_its_site_expression_code_stack_and_binding():
    decider, gm = _decide(_Calls(sign), torch.randn(3))
    (decision,) = decider.decisions
    assert decision.site == Site(ROOT, _line("sign"), 0)
    assert decision.code == "if x.sum() > 0:  # line-marker: sign"
    (module, call) = decision.stack  # the root's call, then sign's inside it
    assert module == ROOT and isinstance(call, int)
    (symbol,) = decision.expression.free_symbols
    assert decision.expression == sympy.Eq(symbol, 1)  # bool(t) of the bool tensor x.sum() > 0
    binding = decision.bindings[symbol]
    assert binding.graph is gm.graph and binding.target in ITEM_OPS
    assert binding.meta["unbacked_bindings"].keys() == {symbol}
    assert len(decision.uses) == len(decision.anchors) == 1


class _Inner(torch.nn.Module):
    def forward(self, x):
        if x.mean() > 0:  # line-marker: inner
            return x * 2
        return x


class _Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = _Inner()

    def forward(self, x):
        return self.block(self.block(x))


def test_a_site_names_the_innermost_module_call_it_was_asked_in():
    decider, _ = _decide(_Outer(), torch.randn(3))
    assert [d.site for d in decider.decisions] == [
        Site(f"{ROOT}.block", _line("inner"), 0), Site(f"{ROOT}.block@1", _line("inner"), 0),
    ]
    assert decider.decisions[1].stack == (ROOT, f"{ROOT}.block@1")


def loop(x):
    for i in range(3):
        x = x + 1 if x[i] > 0 else x - 1  # line-marker: loop
    return x


def test_occurrence_counts_the_decisions_made_on_one_line_in_one_call():
    decider, _ = _decide(_Calls(loop), torch.randn(3))
    assert [d.site for d in decider.decisions] == [Site(ROOT, _line("loop"), k) for k in range(3)]
    decider, gm = _decide(_Calls(loop), torch.randn(3), schedule={Site(ROOT, _line("loop"), 1): False})
    assert [d.value for d in decider.decisions] == [True, False, True]
    assert [t for t in _targets(gm) if t in (torch.ops.aten.add.Tensor, torch.ops.aten.sub.Tensor)] == [
        torch.ops.aten.add.Tensor, torch.ops.aten.sub.Tensor, torch.ops.aten.add.Tensor,
    ]


def asks_twice(x, flag):
    if x.sum() > 0:
        x = x + 1
    if x.sum() > 0:  # computed from a new x: another value
        x = x + 1
    if flag:
        x = x * 2
    if flag:  # the same tensor read again: the same value
        x = x * 3
    return x


def test_the_same_value_asked_again_is_one_decision_with_another_use():
    decider, _ = _decide(_Calls(asks_twice), torch.randn(3), torch.tensor(True))
    assert [len(d.uses) for d in decider.decisions] == [1, 1, 2]
    flag = decider.decisions[2]
    decider, gm = _decide(_Calls(asks_twice), torch.randn(3), torch.tensor(True), schedule={flag.site: False})
    assert decider.decisions[2].value is False and len(decider.decisions[2].uses) == 2
    assert torch.ops.aten.mul.Tensor not in _targets(gm)  # the schedule's value holds for both uses


def test_a_value_computed_again_from_the_same_inputs_is_the_same_decision():
    def same_input(x):
        y = x
        if x.sum() > 0:
            y = y + 1
        if x.sum() > 0:
            y = y * 2
        return y

    decider, _ = _decide(_Calls(same_input), torch.randn(3))
    (decision,) = decider.decisions
    assert len(decision.uses) == 2


def test_two_random_draws_are_two_decisions():
    def draws(x):
        if torch.rand(()) > 0.5:
            x = x + 1
        if torch.rand(()) > 0.5:
            x = x + 1
        return x

    decider, _ = _decide(_Calls(draws), torch.randn(3))
    assert len(decider.decisions) == 2 and all(len(d.uses) == 1 for d in decider.decisions)


def test_an_answer_holds_for_the_rest_of_the_run():
    mode = new_fake_mode(torch.nn.Module())
    decider = Decider({})
    mode.shape_env.decider = decider
    x = mode.from_tensor(torch.randn(3))
    with mode:
        value = x.sum().item()
        assert bool(value > 0)
        assert bool(value > 0) and not bool(value <= 0)  # known now: not asked again
    (decision,) = decider.decisions
    assert len(decision.uses) == 1 and decision.bindings == {} and decision.anchors == [None]


def _data_dependent(error: BaseException) -> bool:
    """Whether the run failed on the ShapeEnv's own data-dependent error, as without a decider."""
    return isinstance(error, TraceError) and error.category is Category.DATA_DEPENDENT_CONTROL_FLOW and isinstance(
        error.__cause__, GuardOnDataDependentSymNode
    )


def test_a_number_the_data_decides_is_not_a_decision():
    def size_from_data(x):
        return x * operator.index((x > 0).sum())

    error = _refused(_Calls(size_from_data), torch.randn(3))
    assert _data_dependent(error) and "specialized integer" in str(error.__cause__)


def test_a_question_torch_asks_for_itself_is_not_the_models_decision():
    def loss(x):
        return torch.nn.functional.gaussian_nll_loss(x, x, x.abs())  # checks torch.any(var < 0)

    def checked(x):
        unittest.TestCase().assertTrue(x.sum() > 0)  # the standard library asks
        return x

    for fn in (loss, checked):
        assert _data_dependent(_refused(_Calls(fn), torch.randn(3)))


def test_a_question_the_model_asks_through_tensor_methods_is_its_decision():
    def contains(x):
        return x + 1 if 3.0 in x else x  # Tensor.__contains__ asks  # line-marker: contains

    decider, _ = _decide(_Calls(contains), torch.randn(3))
    assert [d.site.location for d in decider.decisions] == [_line("contains")]


def test_an_inactive_decider_answers_nothing():
    mode = new_fake_mode(torch.nn.Module())
    decider = Decider({})
    decider.active = False
    mode.shape_env.decider = decider
    x = mode.from_tensor(torch.randn(3))
    with mode, pytest.raises(GuardOnDataDependentSymNode):
        bool(x.sum() > 0)
    assert decider.decisions == []


def two_decisions(x):
    if x.sum() > 0:
        x = x + 1
    if x.mean() > 0:  # line-marker: second
        x = x * 2
    return x


def test_past_the_limit_a_decision_raises_too_many_decisions_at_its_line():
    decider, _ = _decide(_Calls(two_decisions), torch.randn(3), limit=2)
    assert len(decider.decisions) == 2
    mode = new_fake_mode(torch.nn.Module())
    decider = Decider({}, limit=1)
    mode.shape_env.decider = decider
    x = mode.from_tensor(torch.randn(3))
    with mode, pytest.raises(TooManyDecisions) as raised:
        two_decisions(x)
    assert raised.value.args == (_line("second"), None, False)  # None, False: not a loop on one line
    assert isinstance(raised.value.__cause__, GuardOnDataDependentSymNode)
    assert len(decider.decisions) == 1


def test_a_run_past_the_limit_is_refused_as_branch_capture_refuses_it():
    error = _refused(_Calls(two_decisions), torch.randn(3), limit=1)
    refused = refusal(error, 1)
    assert refused.category is Category.BRANCH_CAPTURE and refused.location == _line("second")


def test_reset_forgets_a_runs_decisions():
    mode = new_fake_mode(torch.nn.Module())
    decider = Decider({})
    mode.shape_env.decider = decider
    with mode:
        loop(mode.from_tensor(torch.randn(3)))
        assert len(decider.decisions) == 3
        decider.reset()
        assert decider.decisions == []
        loop(mode.from_tensor(torch.randn(3)))
    assert [d.site.occurrence for d in decider.decisions] == [0, 1, 2]  # counted afresh


def test_limit_error_is_a_branch_capture_error_at_the_line_naming_the_limit():
    error = limit_error("model.py:9", 5)
    assert isinstance(error, TraceError) and error.category is Category.BRANCH_CAPTURE
    assert error.location == "model.py:9"
    assert "more ways than 5 runs of forward" in error.message
    assert "max_branch_runs=N), now 5" in error.hint and "branches='draft'" in error.hint


def test_refusal_finds_too_many_decisions_anywhere_in_the_error_chain():
    direct = refusal(TooManyDecisions("model.py:9"), 31)
    assert direct.category is Category.BRANCH_CAPTURE and direct.location == "model.py:9"
    assert "more ways than 32 runs" in direct.message  # a run per decision, and one
    try:
        try:
            raise TooManyDecisions("model.py:3")
        except TooManyDecisions as cause:
            raise RuntimeError("wrapped") from cause
    except RuntimeError as wrapped:
        assert refusal(wrapped, 3).location == "model.py:3"
    assert refusal(TooManyDecisions(), 3).location is None


def test_refusal_is_none_for_other_failures():
    assert refusal(ValueError("bad"), 31) is None
    looped = ValueError("a")
    looped.__context__ = KeyError("b")
    looped.__context__.__context__ = looped
    assert refusal(looped, 31) is None


def test_an_export_past_the_limit_fails_at_the_line_of_the_decision_past_it():
    with pytest.raises(TraceError, match="more ways than 2 runs") as refused:
        exporter.export(_Calls(two_decisions), (torch.randn(3),), max_branch_runs=2)
    assert refused.value.category is Category.BRANCH_CAPTURE
    assert refused.value.location == _line("second")
