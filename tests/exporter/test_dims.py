"""Dynamic-shape records and how spec entries are written in messages."""

import pytest
from torch.export import Dim

from exporter._dims import DimKind, DimRequest, bound_text, dim_text, spec_fragment, spec_path
from exporter._torch_internals import int_oo


def test_kinds_say_what_may_change():
    assert [k for k in DimKind if k.is_dynamic] == [DimKind.NAMED, DimKind.DERIVED, DimKind.AUTO, DimKind.DYNAMIC]
    assert [k for k in DimKind if k.is_dim] == [DimKind.NAMED, DimKind.DERIVED]
    assert [k for k in DimKind if k.must_stay_dynamic] == [DimKind.NAMED, DimKind.DERIVED, DimKind.DYNAMIC]


def test_a_derived_request_solves_for_its_root():
    b = Dim("b")
    derived = 2 * b + 1
    request = DimRequest(DimKind.DERIVED, "w", "x.shape[0]", name="2*b + 1", root="b", fn=derived.fn)
    assert request.root_value(9) == 4
    assert request.root_value(8) is None  # no integer b gives 8
    assert request.declared_as == "2*b + 1"
    assert DimRequest(DimKind.DYNAMIC, "w", "x.shape[0]").declared_as == "Dim.DYNAMIC"


@pytest.mark.parametrize(
    "dim, text",
    [
        (Dim("b", max=64), 'Dim("b", max=64)'),
        (Dim("b", min=2), 'Dim("b", min=2)'),
        (2 * Dim("b"), "2*b"),
        (Dim.AUTO, "Dim.AUTO"),
        (Dim.DYNAMIC(min=4), "Dim.DYNAMIC(min=4)"),
        (7, "7"),
    ],
)
def test_dims_are_written_as_the_user_would(dim, text):
    assert dim_text(dim) == text


def test_spec_paths_and_fragments():
    assert spec_path(("x", 1)) == "dynamic_shapes['x'][1]"
    assert spec_fragment(("x", 1), "batch") == '"x": {1: batch}'
    assert spec_fragment(("inputs", "a", 0), "batch") == "dynamic_shapes['inputs']['a'][0] = batch"
    assert [bound_text(v) for v in (int_oo, None, float("inf"), 64)] == ["inf", "inf", "inf", "64"]
