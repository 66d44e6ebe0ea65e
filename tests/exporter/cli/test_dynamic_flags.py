import pytest
import torch
from torch.export import Dim
from torch.export.dynamic_shapes import _DerivedDim, _DimHint

from exporter import InputSpecError
from exporter.cli.dynamic_flags import dynamic_shapes_from_flags

INPUTS = {"x": torch.ones(4, 8), "y": torch.ones(4), "pair": [torch.ones(2), torch.ones(3, 5)], "cfg": {"m": torch.ones(2, 2)}}


def test_named_dims_share_objects_and_ranges():
    spec = dynamic_shapes_from_flags(["x.0=batch", "y.0=batch:2..64", "x.1=seq:..128"], INPUTS)
    batch = spec["x"][0]
    assert isinstance(batch, Dim) and spec["y"][0] is batch
    assert (batch.__name__, batch.min, batch.max) == ("batch", 2, 64), "a range given anywhere applies to every use"
    assert spec["x"][1].max == 128


def test_derived_hints_sizes_and_nested_paths():
    spec = dynamic_shapes_from_flags(
        ["x.0=2*half+1", "y.0=auto:..16", "pair.1.0=dynamic", "pair.1.1=static", "cfg.m.1=2"], INPUTS
    )
    derived = spec["x"][0]
    assert isinstance(derived, _DerivedDim) and derived.root.__name__ == "half"
    assert int(derived.fn(3)) == 7
    assert isinstance(spec["y"][0], _DimHint) and spec["y"][0].max == 16
    assert spec["pair"][0] is None and set(spec["pair"][1]) == {0, 1}, "lists keep their shape"
    assert spec["cfg"] == {"m": {1: 2}}


@pytest.mark.parametrize(
    "flag, message",
    [
        ("x0=batch", r"expected INPUT.DIM \(like x.0\) before '='"),
        ("x.a=batch", r"the last part of the path must be a dimension index, found 'a'\n  x.a=batch\n    \^"),
        ("x.0", r"expected PATH=SPEC"),
        ("x.0=batch:64..2", r"the range 64..2 is empty"),
        ("x.0=batch:1-64", r"expected a range MIN..MAX, found '1-64'\n  x.0=batch:1-64\n            \^"),
        ("x.0=3*", r"cannot read '3\*' as a dimension spec"),
        ("z.0=batch", r"forward\(\) was given no input named 'z'"),
        ("x.0=static:1..4", r"static takes no range"),
    ],
)
def test_malformed_flags_say_where(flag, message):
    with pytest.raises(InputSpecError, match=message) as info:
        dynamic_shapes_from_flags([flag], INPUTS)
    assert info.value.hint and info.value.message.startswith(f"--dynamic {flag!r}")


def test_conflicting_ranges_and_repeats_are_errors():
    with pytest.raises(InputSpecError, match=r"batch was given another range before \(2..64\)"):
        dynamic_shapes_from_flags(["x.0=batch:2..64", "y.0=batch:2..32"], INPUTS)
    with pytest.raises(InputSpecError, match=r"x.0 is given twice"):
        dynamic_shapes_from_flags(["x.0=batch", "x.0=other"], INPUTS)
