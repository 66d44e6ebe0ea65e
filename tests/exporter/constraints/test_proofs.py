"""Guards proven true over the declared ranges, which torch's solver leaves unproven."""

import sympy
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from exporter.constraints.proofs import holds_on_ranges

s = sympy.Symbol("s0", integer=True, positive=True)
t = sympy.Symbol("s1", integer=True, positive=True)


def test_the_min_guard_of_reshaping_an_expanded_cache_holds_for_every_length():
    guard = sympy.Eq(sympy.Min(8 * s + 8, 16 * s + 16), 8 * s + 8)
    assert holds_on_ranges(guard, {s: ValueRanges(2, 60)})
    assert holds_on_ranges(guard, {s: ValueRanges(2, int_oo)})


def test_polynomial_inequalities_over_two_sizes():
    ranges = {s: ValueRanges(2, 60), t: ValueRanges(2, 60)}
    assert holds_on_ranges(sympy.Ge(s * t, s), ranges)
    assert not holds_on_ranges(sympy.Gt(s * t, 3 * s), ranges)  # false at t = 2


def test_upper_bounds_prove_guards_from_the_other_side():
    assert holds_on_ranges(sympy.Le(s, 60), {s: ValueRanges(2, 60)})
    assert not holds_on_ranges(sympy.Lt(s, 50), {s: ValueRanges(2, 60)})


def test_guards_that_need_more_than_the_range_are_not_proven():
    assert not holds_on_ranges(sympy.Eq(s % 2, 0), {s: ValueRanges(2, 60)})
    assert not holds_on_ranges(sympy.Eq(sympy.Max(s, t), s), {s: ValueRanges(2, 60), t: ValueRanges(2, 60)})
    assert not holds_on_ranges(sympy.Ge(s, 2), {})  # no range known for s


def test_torch_s_own_size_min_and_max_are_ordered_too():
    from torch.utils._sympy.functions import Max, Min

    # from functionalizing a write into a flattened cat (fuzz finding 003)
    guard = sympy.Eq(2 * s * Min(25, 50 * s), 50 * s)
    assert holds_on_ranges(guard, {s: ValueRanges(2, int_oo)})
    assert holds_on_ranges(sympy.Eq(Max(3, 4 * s), 4 * s), {s: ValueRanges(1, 10)})
    assert not holds_on_ranges(sympy.Eq(Min(25, 5 * s), 5 * s), {s: ValueRanges(2, int_oo)})
