"""The error family: each category owned by one class, ErrorInfo as the one plain-data form."""

import pytest

import exporter
from exporter import Category, ConstraintError, ErrorInfo, ExportError, InputSpecError, PassError, TraceError, VerificationError
from exporter._errors import point_at


def test_every_category_but_internal_belongs_to_exactly_one_class():
    owners = {category: category.owner for category in Category}
    assert owners[Category.INTERNAL] is None
    assert owners[Category.INPUT] is InputSpecError
    assert owners[Category.DYNAMIC_SHAPE_CONSTRAINT] is ConstraintError
    assert owners[Category.DATA_DEPENDENT_CONTROL_FLOW] is TraceError
    assert owners[Category.PASS] is PassError and owners[Category.VERIFICATION] is VerificationError
    assert all(owner is not None for category, owner in owners.items() if category is not Category.INTERNAL)


@pytest.mark.parametrize(
    "make, category",
    [
        (lambda: InputSpecError("m"), Category.INPUT),
        (lambda: TraceError("m"), Category.TRACE),
        (lambda: TraceError("m", category=Category.MODEL_ERROR), Category.MODEL_ERROR),
        (lambda: ConstraintError("m"), Category.DYNAMIC_SHAPE_CONSTRAINT),
        (lambda: PassError("m", pass_name="p"), Category.PASS),
        (lambda: VerificationError("m", rule="r"), Category.VERIFICATION),
    ],
)
def test_a_class_defaults_to_its_first_category(make, category):
    assert make().category is category


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: InputSpecError("m", category=Category.MODEL_ERROR), "InputSpecError cannot carry Category.MODEL_ERROR"),
        (lambda: ConstraintError("m", category=Category.TRACE), "ConstraintError cannot carry Category.TRACE"),
        (lambda: ExportError("m"), "ExportError owns no category"),
    ],
)
def test_a_category_another_class_owns_is_refused(make, match):
    with pytest.raises(TypeError, match=match):
        make()


def test_a_second_owner_for_a_category_is_refused():
    with pytest.raises(TypeError, match="already belongs to InputSpecError"):

        class AlsoInput(ExportError):
            categories = (Category.INPUT,)


def test_text_says_what_where_and_what_to_do():
    error = TraceError("it broke", location="model.py:3", hint="do this", category=Category.MODEL_ERROR)
    assert str(error) == "it broke\n  at model.py:3\n  hint: do this"
    assert str(InputSpecError("only a message")) == "only a message"


def test_a_verification_error_without_a_hint_says_to_report_it():
    assert "bug in exporter" in VerificationError("node add_ mutates", rule="functional-ops").hint
    assert VerificationError("m", rule="r", hint="loosen --rtol").hint == "loosen --rtol"


def test_error_info_from_an_export_error_keeps_its_fields():
    try:
        raise TraceError("line one\nline two", location="m.py:9", hint="h", category=Category.UNSUPPORTED_OPERATOR)
    except TraceError as e:
        error, info = e, ErrorInfo.from_exception(e)
    assert (info.type, info.category, info.message, info.location, info.hint) == (
        "TraceError", Category.UNSUPPORTED_OPERATOR, "line one\nline two", "m.py:9", "h"
    )
    assert info.headline == "line one" and "raise TraceError" in info.traceback
    assert info.to_json() == {
        "type": "TraceError",
        "category": "unsupported operator",
        "message": "line one\nline two",
        "location": "m.py:9",
        "hint": "h",
    }
    assert info.to_text() == str(error)
    assert not info.is_input_error and ErrorInfo.from_exception(InputSpecError("x")).is_input_error


def test_any_other_exception_is_internal():
    info = ErrorInfo.from_exception(KeyError("k"))
    assert (info.type, info.category, info.location, info.hint) == ("KeyError", Category.INTERNAL, None, None)
    assert info.message == "'k'"
    assert ErrorInfo.from_exception(RuntimeError()).message == "RuntimeError"


def test_point_at_puts_a_caret_under_the_column():
    assert point_at("f32[8,16", 8) == "  f32[8,16\n          ^"
    assert point_at("x", -3) == "  x\n  ^"


def test_the_public_api_exports_the_family():
    assert {"export", "ExportError", "InputSpecError", "TraceError", "ConstraintError", "PassError",
            "VerificationError", "ErrorInfo", "Category"} <= set(exporter.__all__)
