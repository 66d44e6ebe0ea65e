"""Symbolic sizes: the ShapeEnv and its sources, constraints and sympy functions,
``torch.export``'s Dim classes, and the files a guard is never blamed on."""

from __future__ import annotations

import functools
import glob
import os
from typing import Any

import sympy
import torch
from torch._guards import GuardSource, Source, TracingContext, tracing
from torch.export.dynamic_shapes import Dim, _DerivedDim as DerivedDim, _DimHint as DimHint, _DimHintType as DimHintType
from torch.fx.experimental.symbolic_shapes import (
    CallMethodKey,
    ConstraintViolationError,
    DimDynamic,
    EqualityConstraint,
    GuardOnDataDependentSymNode,
    RelaxedUnspecConstraint,
    ShapeEnv,
    StatelessSymbolicContext,
    StrictMinMaxConstraint,
    SymIntSymbolicContext,
    free_unbacked_symbols,
    guard_or_false,
)
from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts
from torch.utils._sympy.functions import Max as SizeMax, Min as SizeMin
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

__all__ = [
    "CallMethodKey",
    "constant_source",
    "ConstraintViolationError",
    "DerivedDim",
    "Dim",
    "DimDynamic",
    "DimHint",
    "DimHintType",
    "EqualityConstraint",
    "free_unbacked_symbols",
    "GuardOnDataDependentSymNode",
    "GuardSource",
    "guard_or_false",
    "insert_deferred_runtime_asserts",
    "int_oo",
    "is_condition",
    "is_number_bound",
    "raw_expr",
    "RelaxedUnspecConstraint",
    "ShapeEnv",
    "size_source",
    "SizeMax",
    "SizeMin",
    "solver_may_specialize",
    "Source",
    "StatelessSymbolicContext",
    "StrictMinMaxConstraint",
    "SymIntSymbolicContext",
    "tracing",
    "TracingContext",
    "uninteresting_files",
    "ValueRanges",
]


# Dynamo's Source data classes, imported when first asked for: importing torch._dynamo.source
# imports all of Dynamo, and a static export never needs them.  A dynamic
# export does, and so does the ShapeEnv itself (it imports the module when it gives a tensor
# symbolic sizes and when it produces guards), so asking here adds no import it would not make.


def size_source(base: Source, dim: int) -> Source:
    """The source ShapeEnv names ``base.size()[dim]`` by; equal to the one it makes itself, so
    the equalities handed to it match its own sizes."""
    from torch._dynamo.source import TensorProperty, TensorPropertySource

    return TensorPropertySource(base, TensorProperty.SIZE, dim)


def constant_source(name: str) -> Source:
    """A source for a symbol that belongs to no input (guards never name it as an input)."""
    from torch._dynamo.source import ConstantSource

    return ConstantSource(name)



# torch's ``symbolic_shapes.uninteresting_files()``, module by module (as of torch 2.13-2.15), as paths
# under the torch package.  torch's function imports each module to ask for its file, and
# among them are Dynamo, inductor and torch.export's tracer, a costly import for a list of
# names.  A frame can only come from a module that is loaded, so a path is enough.
_UNINTERESTING_MODULES = (
    "fx/experimental/symbolic_shapes.py",
    "export/_trace.py",
    "fx/experimental/recording.py",
    "fx/experimental/sym_node.py",
    "fx/interpreter.py",
    "fx/_symbolic_trace.py",
    "__init__.py",
    "_compile.py",
    "_dynamo/eval_frame.py",
    "_inductor/sizevars.py",
    "_library/custom_ops.py",
    "_library/fake_impl.py",
    "_subclasses/meta_utils.py",
    "_subclasses/fake_tensor.py",
    "_logging/_internal.py",
    "_logging/structured.py",
    # Dynamo's own (torch._dynamo.guards.uninteresting_files)
    "_dynamo/external_utils.py",
)
# Whole directories: every higher-order op, and Dynamo's polyfills (torch lists most of them).
_UNINTERESTING_DIRS = ("_higher_order_ops", "_dynamo/polyfills")


@functools.lru_cache(None)
def uninteresting_files() -> set[str]:
    """The files torch never attributes a guard to (``symbolic_shapes.uninteresting_files``),
    found without importing them."""
    root = os.path.dirname(torch.__file__)
    files = {os.path.join(root, *name.split("/")) for name in _UNINTERESTING_MODULES}
    for directory in _UNINTERESTING_DIRS:
        files.update(glob.glob(os.path.join(root, *directory.split("/"), "*.py")))
    return files | {"<string>"}


def raw_expr(size: torch.SymInt) -> Any:
    """The sympy expression a symbolic size was created with, before the ShapeEnv's
    replacements (``size.node.expr`` applies them)."""
    return size.node._expr




def solver_may_specialize(solver: Any) -> bool:
    """Whether ``solver.solve()`` (a ShapeEnv's ``DimConstraints``) can find a forced
    specialization or raise.

    ``solve`` fills ``forced_specializations()`` only while solving univariate equalities,
    and raises only on inconsistencies or a congruence it cannot solve; the rest of its
    work (reducing range inequalities with sympy, symbolic equivalences) writes suggested
    fixes exporter never reads.  Without any of those three, ``solve`` is skipped.
    """
    return bool(solver._symbols_with_equalities or solver._inconsistencies or any(solver._congruences.values()))


def is_number_bound(bound: Any) -> bool:
    """A value range's end is a number: not sympy's infinity, nor the ShapeEnv's integer
    infinity (which says it is finite and cannot be made an int)."""
    return bool(getattr(bound, "is_number", False) and bound.is_finite) and bound not in (int_oo, -int_oo)


def is_condition(expr: sympy.Basic) -> bool:
    """Whether ``expr``, a question the ShapeEnv asks, is a condition (a comparison, or a
    logical combination of them), not a number (a bare symbol is a size or a value: sympy
    counts it as Boolean too)."""
    if getattr(expr, "is_Relational", False):
        return True
    return isinstance(expr, (sympy.And, sympy.Or, sympy.Not, sympy.Xor)) and all(is_condition(a) for a in expr.args)
