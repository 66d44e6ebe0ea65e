"""Draft-export records: what each assumption says, and the report as text and JSON."""

from exporter._assumptions import Assumption, AssumptionKind, DraftReport, draft_report

BRANCH = Assumption(
    AssumptionKind.DATA_DEPENDENT, "Eq(u0, 1) is True", "model.py:5", "if x.sum() > 0:",
    detail="u0 = aten.item at model.py:5", checked=True,
)
KERNEL = Assumption(AssumptionKind.MISSING_FAKE_KERNEL, "outputs as the real kernel returned them", "model.py:9")


def test_an_assumption_reads_as_kind_line_value_and_whether_it_is_checked():
    assert str(BRANCH) == (
        "data-dependent value at model.py:5: `if x.sum() > 0:`\n"
        "    assumed Eq(u0, 1) is True (u0 = aten.item at model.py:5); checked when the program runs"
    )
    assert str(KERNEL).endswith("NOT checked when the program runs")


def test_a_report_is_sound_only_without_assumptions():
    assert DraftReport().sound and "nothing assumed" in str(DraftReport())
    report = DraftReport((BRANCH, KERNEL))
    assert not report.sound
    assert str(report).splitlines()[0] == "draft export: 2 assumption(s) taken from the example inputs"
    assert str(report).splitlines()[1].startswith("1. data-dependent value at model.py:5")


def test_json_carries_every_field_with_the_kind_as_text():
    data = DraftReport((BRANCH,)).to_json()
    assert data == {
        "sound": False,
        "assumptions": [{
            "kind": "data-dependent value", "assumed": "Eq(u0, 1) is True", "location": "model.py:5",
            "code": "if x.sum() > 0:", "detail": "u0 = aten.item at model.py:5", "checked": True, "occurrences": 1,
        }],
    }


def test_draft_report_reads_the_attribute_a_draft_export_sets():
    class Program:
        pass

    program = Program()
    assert draft_report(program) is None
    program.draft_report = DraftReport()
    assert draft_report(program) is program.draft_report
