"""Violations read in the user's names, with the spec entry to paste."""

import sympy
from torch.export import Dim

from exporter._dims import DimKind, DimRequest
from exporter._torch_internals import ValueRanges, int_oo
from exporter.constraints.declared import DeclaredDim, Violation
from exporter.constraints.fixes import (
    UserNames, constraint_report, edges_text, flag_path, range_fix, range_flag, relation_fix, relation_flag,
)

s0, s1, s2 = sympy.symbols("s0 s1 s2", integer=True, positive=True)
seq = DeclaredDim(0, 1, DimRequest(DimKind.NAMED, "dynamic_shapes['x'][1]", "x.shape[1]", ("x", 1), name="seq", max=128), s0, 8)
auto = DeclaredDim(1, 0, DimRequest(DimKind.AUTO, "dynamic_shapes['y'][0]", "y.shape[0]", ("y", 0)), s1, 4)
double = 2 * Dim("seq")
derived = DeclaredDim(
    2, 0, DimRequest(DimKind.DERIVED, "dynamic_shapes['z'][0]", "z.shape[0]", ("z", 0), name="2*seq", root="seq", fn=double.fn),
    s2, 16,
)


def test_expressions_are_written_with_the_users_names():
    names = UserNames([seq, auto, derived])
    assert names.text(sympy.Eq(sympy.Mod(s0, 2), 0)) == "seq % 2 == 0"
    assert names.text(s1 <= 64) == "y.shape[0] <= 64"
    assert names.describe(s0) == "x.shape[1] (seq)" and names.describe(s1) == "y.shape[0]"
    assert names.in_declared_terms(s2 - 2 * s0) == 0  # z is declared 2 * seq


def test_relation_fixes_use_the_same_dim_or_a_derived_one():
    names = UserNames([seq, auto, derived])
    assert relation_fix(auto, s0, names, [seq, auto]) == '"y": {0: seq}  (the same Dim as x.shape[1])'
    assert relation_fix(auto, 2 * s0 + 1, names, [seq, auto]) == '"y": {0: 2 * seq + 1}  (derived from x.shape[1])'
    assert relation_fix(seq, s1, names, [seq, auto]).startswith('x_y = Dim("x_y"); "x": {1: x_y} and "y": {0: x_y}')


def test_two_undeclared_sizes_share_a_dim_only_when_they_are_equal():
    names = UserNames([seq, auto, derived])
    assert relation_fix(seq, 2 * s1, names, [seq, auto]) == (
        "dynamic_shapes['x'][1]: declare it so that x.shape[1] == 2 * y.shape[0]"
    )
    assert relation_flag(seq, 2 * s1, [seq, auto]) is None


def test_fixes_as_dynamic_flags():
    assert flag_path(seq.request) == "x.1" and flag_path(auto.request) == "y.0"
    assert flag_path(DimRequest(DimKind.NAMED, "dynamic_shapes[0][1]", "args[0].shape[1]", (0, 1), name="n")) is None
    assert relation_flag(auto, s0, [seq, auto]) == "--dynamic y.0=seq"
    assert relation_flag(auto, 2 * s0 + 1, [seq, auto]) == "--dynamic y.0=2*seq+1"
    assert relation_flag(auto, 2 * s0 - 3, [seq, auto]) == "--dynamic y.0=2*seq-3"
    assert relation_flag(seq, s1, [seq, auto]) == "--dynamic x.1=x_y --dynamic y.0=x_y"
    assert range_flag(seq, ValueRanges(2, 64)) == "--dynamic x.1=seq:..64"
    assert range_flag(seq, ValueRanges(8, int_oo)) == "--dynamic x.1=seq:8.."
    assert range_flag(auto, ValueRanges(2, 16), keep_min=True) == "--dynamic y.0=auto:2..16"
    assert range_flag(derived, ValueRanges(2, 30)) is None  # its root's range says it
    flagged = Violation("the model needs seq <= 64", 'seq = Dim("seq", max=64)', None, flag="--dynamic x.1=seq:..64")
    assert constraint_report([flagged]).splitlines()[-1] == '    fix: seq = Dim("seq", max=64)'
    assert constraint_report([flagged], flags=True).splitlines()[-1] == "    fix: --dynamic x.1=seq:..64"


def test_range_fixes_name_the_bounds_that_matter():
    assert range_fix(seq, ValueRanges(2, 64)) == 'seq = Dim("seq", max=64)'
    assert range_fix(seq, ValueRanges(8, int_oo)) == 'seq = Dim("seq", min=8)'
    assert range_fix(auto, ValueRanges(2, 16)) == '"y": {0: Dim.AUTO(max=16)}'
    assert range_fix(derived, ValueRanges(2, 30)) == "narrow seq so that 2*seq stays within [2, 30]"


def test_edges_say_which_declared_sizes_fail():
    assert edges_text("seq", seq.request, 0, 127) == "seq = 128"
    assert edges_text("seq", seq.request, 4, 128) == "seq < 4"


def test_the_report_lists_each_violation_with_where_and_fix():
    text = constraint_report([Violation("the model needs seq <= 64", 'seq = Dim("seq", max=64)', "m.py:3", "x[:64]")])
    assert text.splitlines() == [
        "the model does not fit the declared dynamic shapes:",
        "  - the model needs seq <= 64",
        "    forced at m.py:3: `x[:64]`",
        '    fix: seq = Dim("seq", max=64)',
    ]
