"""The branch report: each decision a program makes at run time as plain data and as words,
and the report a program carries when forward branched on a tensor's value."""

import json

import attrs
import pytest
import torch

import exporter
from exporter._branch_report import BranchDecision, BranchReport, branch_report


def _decision(**changes) -> BranchDecision:
    fields = {
        "location": "model.py:12", "code": "if x.sum() > 0:", "predicate": "Eq(u0, 1)",
        "symbols": ("u0 = aten.item at model.py:12",), "module": "encoder.0", "uses": 2, "conds": 3,
    }
    fields.update(changes)
    return BranchDecision(**fields)


def test_a_decision_is_plain_json_data_with_lists_for_tuples():
    decision = _decision(within=("model.py:8",))
    data = decision.to_json()
    assert data == {
        "location": "model.py:12", "code": "if x.sum() > 0:", "predicate": "Eq(u0, 1)",
        "symbols": ["u0 = aten.item at model.py:12"], "module": "encoder.0", "uses": 2, "conds": 3,
        "within": ["model.py:8"],
    }
    assert json.loads(json.dumps(data)) == data


def test_a_report_round_trips_through_json_into_equal_decisions():
    report = BranchReport((_decision(), _decision(location="model.py:20", within=("model.py:12",))), runs=3)
    data = json.loads(json.dumps(report.to_json()))
    assert data["runs"] == 3 and [d["location"] for d in data["decisions"]] == ["model.py:12", "model.py:20"]
    rebuilt = BranchReport(
        tuple(BranchDecision(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}) for d in data["decisions"]),
        data["runs"],
    )
    assert rebuilt == report


def test_a_decision_says_its_line_code_predicate_symbols_and_counts():
    assert str(_decision()) == (
        "branch at model.py:12: `if x.sum() > 0:`\n"
        "    on Eq(u0, 1) (u0 = aten.item at model.py:12), 2 use(s), 3 cond(s)"
    )


def test_a_decision_without_a_line_or_symbols_says_so():
    text = str(_decision(location=None, code=None, symbols=()))
    assert text.startswith("branch\n    on Eq(u0, 1) (no symbols)")
    assert " at " not in text.splitlines()[0]


def test_a_nested_decision_names_the_innermost_branch_it_lies_in():
    text = str(_decision(within=("model.py:3", "model.py:8")))
    assert text.endswith(", inside the branch at model.py:8")
    assert "model.py:3" not in text
    assert "inside" not in str(_decision())


def test_a_report_without_decisions_says_there_is_no_branch():
    assert str(BranchReport()) == "no branch on tensor values"
    assert BranchReport().to_json() == {"runs": 1, "decisions": [], "checked": [], "loops": []}


def test_a_branch_checked_at_run_time_is_listed_after_the_decisions():
    report = BranchReport((), 1, ("model.py:4",))
    assert str(report) == "checked at run time (the other side raises): model.py:4"
    assert report.to_json()["checked"] == ["model.py:4"]


def test_a_report_numbers_its_decisions_under_a_summary():
    first, second = _decision(), _decision(location="model.py:20", within=("model.py:12",))
    lines = str(BranchReport((first, second), runs=3)).splitlines()
    assert lines[0] == "2 branch(es) on tensor values, captured as torch.cond from 3 runs"
    assert lines[1] == f"1. {str(first).splitlines()[0]}"
    assert lines[3] == f"2. {str(second).splitlines()[0]}"
    assert lines[4].endswith("inside the branch at model.py:12")


def test_decisions_and_reports_are_frozen_values():
    assert _decision() == _decision() and hash(_decision()) == hash(_decision())
    assert _decision() != _decision(uses=1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        _decision().uses = 5
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        BranchReport().runs = 2


class Sign(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x.relu()
        return -x


def test_branch_report_is_none_for_objects_and_programs_without_one():
    assert branch_report(object()) is None
    program = exporter.export(torch.nn.Linear(4, 4), (torch.randn(2, 4),))
    assert branch_report(program) is None


def test_branch_report_is_the_report_of_a_program_that_captured_a_branch():
    program = exporter.export(Sign(), (torch.rand(3, 4) + 0.1,))
    report = branch_report(program)
    assert isinstance(report, BranchReport) and report is program.branch_report
    (decision,) = report.decisions
    assert (report.runs, decision.conds, decision.code) == (2, 1, "if x.sum() > 0:")
    assert json.loads(json.dumps(report.to_json()))["decisions"][0]["predicate"] == decision.predicate
    assert str(report).startswith("1 branch(es) on tensor values, captured as torch.cond from 2 runs\n1. branch at ")
