"""Parity with torch.export on cases ported from its own test suite (see harness.py).

Every case is exported by both tools; where torch.export succeeds, exporter must too, with
a program that matches eager on every input and the oracle's signature and ranges.  The
few cases where exporter deliberately or knowingly differs are listed below, each with the
differences it gives (the field, exporter's value and torch.export's) and the reason: such
a case must give exactly those, no other and no fewer (a case that starts to match fails
here until it is removed).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from exporter import Category, TraceError
from exporter._torch_internals import RELEASE
from tests.parity import harness
from tests.parity.harness import SUCCEEDED, Difference, Raised
from tests.parity.run import load

CASES = load()


@dataclasses.dataclass(frozen=True)
class Raises:
    """The exception a known difference expects exporter to raise: this very class, with this
    category, and a message (with its hint) that contains each of ``contains``."""

    error: type[BaseException]
    category: Category
    contains: tuple[str, ...]

    def matches(self, value: Any) -> bool:
        return (
            isinstance(value, Raised)
            and value.error is self.error
            and value.category is self.category
            and all(text in value.message for text in self.contains)
        )

    def __str__(self) -> str:
        return f"raises {self.error.__name__} ({self.category.value}) with {' and '.join(map(repr, self.contains))}"


@dataclasses.dataclass(frozen=True)
class KnownDifference:
    """One difference a listed case gives: the harness's field, exporter's value (a ``Raises``
    where exporter refuses), torch.export's value, and why exporter differs.

    Symbols are written as the harness names them, for the input size they are
    (``args[0].shape[0]``), so an entry holds whatever numbering a torch release gives."""

    field: str
    exporter: Any
    oracle: Any
    reason: str

    def matches(self, problem: Difference) -> bool:
        if problem.field != self.field or problem.oracle != self.oracle:
            return False
        if isinstance(self.exporter, Raises):
            return self.exporter.matches(problem.exporter)
        return problem.exporter == self.exporter

    def __str__(self) -> str:
        return str(Difference(self.field, self.exporter, self.oracle))


def assert_only_known(name: str, problems: list[Difference], known: tuple[KnownDifference, ...], table: str) -> None:
    """Fail unless ``problems`` are exactly the ``known`` differences, listing those it shows
    besides them and those it no longer shows."""
    if not problems:
        raise AssertionError(f"{name} now matches torch.export: remove it from {table}")
    unexplained = [p for p in problems if not any(k.matches(p) for k in known)]
    gone = [k for k in known if not any(k.matches(p) for p in problems)]
    if unexplained or gone:
        raise AssertionError(
            f"{name} differs from torch.export otherwise than {table} records:\n"
            + "".join(f"  not recorded: {p}\n" for p in unexplained)
            + "".join(f"  recorded, not seen: {k}\n" for k in gone)
        )


def _before(release: tuple[int, int], *differences: KnownDifference) -> tuple[KnownDifference, ...]:
    """Differences torch.export fixed on its side in ``release``: known before it only."""
    return differences if RELEASE < release else ()


_PAD_SEQUENCE_GUARD = (
    "the padded length of sequences with independent dynamic lengths: torch.export 2.13's "
    "run_decompositions re-traces pad_sequence with Python's max over the lengths, which guards "
    "on the example's order (y.size(0) <= x.size(0)), so its output is x's length and its "
    "program refuses a longer y that eager and its own training IR take; exporter keeps the "
    "size Max(x.size(0), y.size(0), z.size(0)), as torch.export's training IR does, and takes "
    "every input (the case's last input has the longest sequence elsewhere)"
)
_PADDED = "Max(args[0].shape[0], args[1].shape[0], args[2].shape[0])"

KNOWN_DIFFERENCES: dict[str, tuple[KnownDifference, ...]] = {
    "test_pad_sequence[multi]": _before(
        (2, 14),
        KnownDifference("output 0 (USER_OUTPUT) shape", [_PADDED, "3", "2"], ["args[0].shape[0]", "3", "2"],
                        _PAD_SEQUENCE_GUARD),
    ),
    "test_pad_sequence[multi_batch_first]": _before(
        (2, 14),
        KnownDifference("output 0 (USER_OUTPUT) shape", ["3", _PADDED, "2"], ["3", "args[0].shape[0]", "2"],
                        _PAD_SEQUENCE_GUARD),
        KnownDifference("output 0 (USER_OUTPUT) stride",
                        ["2*Max(1, args[0].shape[0], args[1].shape[0], args[2].shape[0])", "2", "1"],
                        ["2*args[0].shape[0]", "2", "1"], "the stride over the padded length above"),
    ),
    "test_non_arg_name_dynamic_shapes_api_with_kwarg": _before(
        (2, 14),
        KnownDifference("range of kwargs['kw1'].shape[0]", (0, None), (2, None), (
            "keyword inputs given out of signature order with a tuple spec: torch.export before 2.14 "
            "applies the spec in signature order when tracing but in call order when computing "
            "range_constraints, so it reports kw1's declared Dim with the range of an undeclared size; "
            "exporter applies signature order to both (its program accepts the same inputs)"
        )),
    ),
}
KNOWN_DIFFERENCES = {name: known for name, known in KNOWN_DIFFERENCES.items() if known}


_SUBCLASS_STATE = (
    "torch.export's training IR keeps a tensor-subclass parameter or buffer as one input of that "
    "subclass; exporter refuses it there with an ExportError that says to use ir='inference' "
    "(which matches torch.export on this case) or torch.export"
)


def _refuses_subclass_state(state: str) -> tuple[KnownDifference, ...]:
    """Exporter's training IR refuses the tensor-subclass parameters and buffers ``state``
    (as its message lists them) where torch.export exports."""
    return (KnownDifference("export", Raises(TraceError, Category.UNSUPPORTED_TENSOR_SUBCLASS, (
        "ir='training' keeps tensor-subclass parameters and buffers as subclass inputs, which exporter "
        f"does not trace: {state}\n",
        "hint: export with ir='inference'",
    )), SUCCEEDED, _SUBCLASS_STATE),)


KNOWN_TRAINING_DIFFERENCES: dict[str, tuple[KnownDifference, ...]] = {
    "test_subclasses_parameterization": _refuses_subclass_state("'wrapped' (CustomTensorPlainOut)"),
    "test_subclasses_parameterization_nested": _refuses_subclass_state("'wrapped' (CustomTensorPlainOut)"),
    "test_subclass_nested_attr_access": _refuses_subclass_state("'wrapped' (TwoTensor), 'wrapped_buf' (TwoTensor)"),
    "test_subclass_nested_attr_access_submodule": _refuses_subclass_state(
        "'child.wrapped' (TwoTensor), 'child.wrapped_buf' (TwoTensor)"
    ),
    "test_subclass_nested_attr_access_const_metadata": _refuses_subclass_state("'wrapped' (ConstantExtraMetadataTensor)"),
    "test_subclass_nested_attr_access_const_metadata_not_top_level": _refuses_subclass_state("'wrapped' (TwoTensor)"),
    "test_subclass_nested_attr_access_complicated_metadata": _refuses_subclass_state(
        "'wrapped' (ConstantExtraMetadataTensor)"
    ),
    "test_export_aten_to_unflatten_subclass_pre_dispatch": _refuses_subclass_state("'param' (TwoTensor)"),
    "test_capture_subclass_constructor": _refuses_subclass_state("'buffer' (TwoTensor)"),
    "test_module_input_subclasses_parameterization_nested": (
        KnownDifference("export", Raises(TraceError, Category.UNSUPPORTED_TENSOR_SUBCLASS, (
            "args[1]['w_nested'] is a tensor subclass CustomTensorPlainOut with its own __torch_dispatch__, "
            "which exporter cannot trace as an input",
        )), SUCCEEDED, (
            "a tensor-subclass user input: torch.export's training IR keeps it as a subclass input "
            "(its default IR refuses it); exporter refuses it in both IRs with an ExportError"
        )),
    ),
    **{name: KNOWN_DIFFERENCES[name] for name in ("test_non_arg_name_dynamic_shapes_api_with_kwarg",) if name in KNOWN_DIFFERENCES},
}
"""The training IR (``ir="training"`` against ``torch.export.export`` itself), same rules."""


def _check(parity_case, ir: str, table: dict[str, tuple[KnownDifference, ...]], table_name: str) -> None:
    result = harness.evaluate(parity_case, ir=ir)
    known = table.get(parity_case.name)
    if known is None:
        assert result.verdict != "differ", "\n".join(map(str, result.problems))
        return
    assert_only_known(parity_case.name, result.problems, known, table_name)
    pytest.xfail("; ".join(dict.fromkeys(k.reason for k in known)))


@pytest.mark.parametrize("parity_case", CASES, ids=[c.name for c in CASES])
def test_parity_with_torch_export(parity_case):
    _check(parity_case, "inference", KNOWN_DIFFERENCES, "KNOWN_DIFFERENCES")


@pytest.mark.parametrize("parity_case", CASES, ids=[c.name for c in CASES])
def test_training_ir_parity_with_torch_export(parity_case):
    _check(parity_case, "training", KNOWN_TRAINING_DIFFERENCES, "KNOWN_TRAINING_DIFFERENCES")


def test_the_suite_is_large_and_the_known_differences_are_real_cases():
    names = [c.name for c in CASES]
    assert len(names) >= 300 and len(set(names)) == len(names)
    assert set(KNOWN_DIFFERENCES) <= set(names)
    assert set(KNOWN_TRAINING_DIFFERENCES) <= set(names)
    assert all(known for table in (KNOWN_DIFFERENCES, KNOWN_TRAINING_DIFFERENCES) for known in table.values())


# -- the check of a listed case against its record -------------------------------------------

_RANGE = KnownDifference("range of args[0].shape[0]", (2, None), (0, None), "a recorded difference")
_REFUSAL = KnownDifference(
    "export", Raises(TraceError, Category.UNSUPPORTED_TENSOR_SUBCLASS, ("keeps", "hint: export with")), SUCCEEDED,
    "a refusal",
)


class _AnotherTraceError(TraceError):
    """A subclass of the class a record names: a record names the very class."""


_REFUSED = Raised(TraceError, Category.UNSUPPORTED_TENSOR_SUBCLASS, "exporter keeps it\n  hint: export with ir='inference'")


@pytest.mark.parametrize("problems, known", [
    ([Difference("range of args[0].shape[0]", (2, None), (0, None))], (_RANGE,)),
    ([Difference("export", _REFUSED, SUCCEEDED)], (_REFUSAL,)),
    ([Difference("export", _REFUSED, SUCCEEDED), Difference("range of args[0].shape[0]", (2, None), (0, None))],
     (_RANGE, _REFUSAL)),
], ids=["a range", "a refusal", "both"])
def test_a_listed_case_passes_with_exactly_its_recorded_differences(problems, known):
    assert_only_known("case", problems, known, "KNOWN_DIFFERENCES")


_NOT_RECORDED = r"differs from torch.export otherwise than KNOWN_DIFFERENCES records:\n  not recorded: "


@pytest.mark.parametrize("problem, match", [
    (Difference("range of args[1].shape[0]", (2, None), (0, None)), r"not recorded: range of args\[1\]"),
    (Difference("range of args[0].shape[0]", (3, None), (0, None)), r"not recorded: .* exporter \(3, None\)"),
    (Difference("range of args[0].shape[0]", (2, None), (0, 8)), r"not recorded: .* torch.export \(0, 8\)"),
    (Difference("output 0 (USER_OUTPUT) shape", ["s#"], ["3"]), r"not recorded: output 0 \(USER_OUTPUT\) shape"),
], ids=["another field", "another exporter value", "another oracle value", "another kind of field"])
def test_a_listed_case_that_differs_otherwise_fails(problem, match):
    with pytest.raises(AssertionError, match=_NOT_RECORDED) as failure:
        assert_only_known("case", [problem], (_RANGE,), "KNOWN_DIFFERENCES")
    assert failure.match(match)
    assert failure.match(r"recorded, not seen: range of args\[0\]\.shape\[0\]: exporter \(2, None\), "
                         r"torch.export \(0, None\)")


@pytest.mark.parametrize("raised", [
    Raised(RuntimeError, None, _REFUSED.message),
    Raised(_AnotherTraceError, Category.UNSUPPORTED_TENSOR_SUBCLASS, _REFUSED.message),
    Raised(TraceError, Category.TRACE, _REFUSED.message),
    Raised(TraceError, Category.UNSUPPORTED_TENSOR_SUBCLASS, "exporter keeps it"),
    SUCCEEDED,
], ids=["another class", "a subclass", "another category", "a message without the hint", "no error"])
def test_a_listed_refusal_fails_when_exporter_refuses_otherwise(raised):
    with pytest.raises(AssertionError, match=_NOT_RECORDED):
        assert_only_known("case", [Difference("export", raised, SUCCEEDED)], (_REFUSAL,), "KNOWN_DIFFERENCES")


def test_a_listed_case_fails_with_a_problem_beside_its_recorded_one():
    extra = Difference("example output against eager", "output: values differ (max abs diff 1)", None)
    with pytest.raises(AssertionError, match=_NOT_RECORDED + "example output against eager") as failure:
        assert_only_known("case", [Difference("range of args[0].shape[0]", (2, None), (0, None)), extra], (_RANGE,),
                          "KNOWN_DIFFERENCES")
    assert "recorded, not seen" not in str(failure.value)


def test_a_listed_case_fails_when_one_of_its_recorded_differences_is_gone():
    with pytest.raises(AssertionError, match=r"recorded, not seen: export: exporter raises TraceError"):
        assert_only_known("case", [Difference("range of args[0].shape[0]", (2, None), (0, None))], (_RANGE, _REFUSAL),
                          "KNOWN_DIFFERENCES")


def test_a_listed_case_that_matches_fails_with_remove_it():
    with pytest.raises(AssertionError, match=r"case now matches torch.export: remove it from KNOWN_DIFFERENCES"):
        assert_only_known("case", [], (_RANGE,), "KNOWN_DIFFERENCES")


def test_a_refused_case_fails_against_a_record_of_another_refusal():
    # a real listed case through the harness: its refusal is not the one of another case
    parity_case = next(c for c in CASES if c.name == "test_subclass_nested_attr_access")
    problems = harness.evaluate(parity_case, ir="training").problems
    assert_only_known(parity_case.name, problems, KNOWN_TRAINING_DIFFERENCES[parity_case.name], "KNOWN_TRAINING_DIFFERENCES")
    with pytest.raises(AssertionError, match=r"not recorded: export: exporter raised TraceError .*'wrapped_buf'"):
        assert_only_known(parity_case.name, problems, _refuses_subclass_state("'param' (TwoTensor)"),
                          "KNOWN_TRAINING_DIFFERENCES")
