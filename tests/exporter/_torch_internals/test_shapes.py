"""Symbolic-size helpers: sources, symbols, the files a guard is never blamed on."""


import torch

from exporter import _torch_internals as internals


def test_symbolic_helpers():
    shape_env = internals.ShapeEnv()
    mode = internals.FakeTensorMode(shape_env=shape_env)
    context = internals.StatelessSymbolicContext(
        dynamic_sizes=[internals.DimDynamic.DYNAMIC], constraint_sizes=[None]
    )
    fake = mode.from_tensor(torch.randn(5), symbolic_context=context, source=internals.constant_source("x"))
    size = fake.shape[0]
    assert isinstance(size, torch.SymInt)
    assert internals.raw_expr(size).is_Symbol
    with mode:
        made = internals.symbolic_tensor([size])
    assert made.shape == (1,)
    assert internals.sym_sqrt(4.0) == 2.0


def test_uninteresting_files_are_torch_s_own():
    import os

    from torch.fx.experimental.symbolic_shapes import uninteresting_files as torch_s

    ours, theirs = internals.uninteresting_files(), torch_s()
    assert theirs <= ours
    # The extra files are Dynamo polyfills torch leaves off its list; no export runs them.
    polyfills = os.path.join(os.path.dirname(torch.__file__), "_dynamo", "polyfills") + os.sep
    assert all(path.startswith(polyfills) for path in ours - theirs)


def test_source_helpers_make_the_sources_shape_env_makes():
    from torch._dynamo.source import ConstantSource, TensorProperty, TensorPropertySource

    base = internals.constant_source("x")
    assert base == ConstantSource("x") and base.name == "x"
    size = internals.size_source(base, 1)
    assert size == TensorPropertySource(base, TensorProperty.SIZE, 1) and size.name == "x.size()[1]"


def test_a_condition_is_a_comparison_or_a_logical_combination_of_them_not_a_number():
    import sympy

    from exporter._torch_internals import is_condition

    u0, u1, zuf0 = sympy.symbols("u0 u1 zuf0")
    assert is_condition(sympy.Gt(u0, 2)) and is_condition(sympy.And(sympy.Eq(u0, 0), sympy.Lt(u1, 3)))
    assert is_condition(sympy.Not(sympy.Eq(u0, 1)))
    assert not is_condition(u0) and not is_condition(zuf0) and not is_condition(u0 + 2 * u1)
    assert not is_condition(sympy.And(u0, u1))  # of symbols sympy takes for Booleans: numbers here
