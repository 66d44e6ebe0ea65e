"""Parity with torch.export on cases ported from its own test suite (see harness.py).

Every case is exported by both tools; where torch.export succeeds, exporter must too, with
a program that matches eager on every input and the oracle's signature and ranges.  The
few cases where exporter deliberately or knowingly differs are listed below with the reason;
they must keep differing (a case that starts to match fails here until it is removed).
"""

import pytest

from exporter._torch_internals import RELEASE
from tests.parity import harness
from tests.parity.run import load

CASES = load()

def _before(release: tuple[int, int], reason: str) -> str | None:
    """A difference torch.export fixed on its side in ``release``: known before it only."""
    return reason if RELEASE < release else None


_PAD_SEQUENCE_GUARD = (
    "the padded length of sequences with independent dynamic lengths: torch.export 2.13's "
    "run_decompositions re-traces pad_sequence with Python's max over the lengths, which guards "
    "on the example's order (y.size(0) <= x.size(0)), so its output is x's length and its "
    "program refuses a longer y that eager and its own training IR take; exporter keeps the "
    "size Max(s17, s68, s77), as torch.export's training IR does, and takes every input "
    "(the case's last input has the longest sequence elsewhere)"
)

KNOWN_DIFFERENCES = {
    "test_pad_sequence[multi]": _before((2, 14), _PAD_SEQUENCE_GUARD),
    "test_pad_sequence[multi_batch_first]": _before((2, 14), _PAD_SEQUENCE_GUARD),
    "test_non_arg_name_dynamic_shapes_api_with_kwarg": _before((2, 14), (
        "keyword inputs given out of signature order with a tuple spec: torch.export before 2.14 "
        "applies the spec in signature order when tracing but in call order when computing "
        "range_constraints, so it reports kw1's declared Dim with the range of an undeclared size; "
        "exporter applies signature order to both (its program accepts the same inputs)"
    )),
}
KNOWN_DIFFERENCES = {name: reason for name, reason in KNOWN_DIFFERENCES.items() if reason is not None}


_SUBCLASS_STATE = (
    "torch.export's training IR keeps a tensor-subclass parameter or buffer as one input of that "
    "subclass; exporter refuses it there with an ExportError that says to use ir='inference' "
    "(which matches torch.export on this case) or torch.export"
)

KNOWN_TRAINING_DIFFERENCES = {
    **{
        name: _SUBCLASS_STATE
        for name in (
            "test_subclasses_parameterization",
            "test_subclasses_parameterization_nested",
            "test_subclass_nested_attr_access",
            "test_subclass_nested_attr_access_submodule",
            "test_subclass_nested_attr_access_const_metadata",
            "test_subclass_nested_attr_access_const_metadata_not_top_level",
            "test_subclass_nested_attr_access_complicated_metadata",
            "test_export_aten_to_unflatten_subclass_pre_dispatch",
            "test_capture_subclass_constructor",
        )
    },
    "test_module_input_subclasses_parameterization_nested": (
        "a tensor-subclass user input: torch.export's training IR keeps it as a subclass input "
        "(its default IR refuses it); exporter refuses it in both IRs with an ExportError"
    ),
    **{name: KNOWN_DIFFERENCES[name] for name in ("test_non_arg_name_dynamic_shapes_api_with_kwarg",) if name in KNOWN_DIFFERENCES},
}
"""The training IR (``ir="training"`` against ``torch.export.export`` itself), same rules."""


@pytest.mark.parametrize("parity_case", CASES, ids=[c.name for c in CASES])
def test_parity_with_torch_export(parity_case):
    result = harness.evaluate(parity_case)
    known = KNOWN_DIFFERENCES.get(parity_case.name)
    if known is not None:
        assert result.verdict == "differ", f"{parity_case.name} now matches torch.export: remove it from KNOWN_DIFFERENCES"
        pytest.xfail(known)
    assert result.verdict != "differ", "\n".join(result.problems)


@pytest.mark.parametrize("parity_case", CASES, ids=[c.name for c in CASES])
def test_training_ir_parity_with_torch_export(parity_case):
    result = harness.evaluate(parity_case, ir="training")
    known = KNOWN_TRAINING_DIFFERENCES.get(parity_case.name)
    if known is not None:
        assert result.verdict == "differ", f"{parity_case.name} now matches torch.export: remove it from KNOWN_TRAINING_DIFFERENCES"
        pytest.xfail(known)
    assert result.verdict != "differ", "\n".join(result.problems)


def test_the_suite_is_large_and_the_known_differences_are_real_cases():
    names = [c.name for c in CASES]
    assert len(names) >= 300 and len(set(names)) == len(names)
    assert set(KNOWN_DIFFERENCES) <= set(names)
    assert set(KNOWN_TRAINING_DIFFERENCES) <= set(names)
