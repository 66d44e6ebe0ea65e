"""Typed records of a ``dynamic_shapes`` spec, and how to write spec entries in messages.

``inputs.dynamic_shapes`` fills these in from the user's spec; the tracer makes symbols
from them; the constraint checks hold the traced guards against them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import attrs
import sympy
import torch

from ._ir import user_input_nodes
from ._torch_internals import DerivedDim, Dim, DimHint, int_oo

__all__ = ["DimKind", "DimRequest", "DynamicPlan", "bound_text", "dim_names", "dim_text", "spec_fragment", "spec_path"]


class DimKind(enum.Enum):
    """What the user asked of one dimension."""

    NAMED = "named"
    """``Dim("batch", min=, max=)``: dynamic within the range; dims sharing the Dim are equal."""
    DERIVED = "derived"
    """``2 * batch``, ``batch + 1``: an expression in a named root Dim."""
    AUTO = "auto"
    """``Dim.AUTO``: dynamic where the model allows, silently static elsewhere."""
    DYNAMIC = "dynamic"
    """``Dim.DYNAMIC``: dynamic, and an error if the model fixes it."""
    STATIC = "static"
    """``None``, an int or ``Dim.STATIC``."""

    @property
    def is_dynamic(self) -> bool:
        return self is not DimKind.STATIC

    @property
    def is_dim(self) -> bool:
        """A torch.export.Dim object (named or derived), which carries a declared range."""
        return self in (DimKind.NAMED, DimKind.DERIVED)

    @property
    def must_stay_dynamic(self) -> bool:
        """Specializing this dimension to a constant is an error, not a silent choice."""
        return self in (DimKind.NAMED, DimKind.DERIVED, DimKind.DYNAMIC)


@attrs.frozen
class DimRequest:
    """What the user asked for one dimension of one tensor input."""

    kind: DimKind
    where: str
    """Path of this entry in the spec, for errors: ``dynamic_shapes['x'][1]``."""
    input_dim: str
    """The dimension it describes, for errors: ``x.shape[1]``."""
    keys: tuple[Any, ...] = ()
    """The spec keys leading to this entry: ``('x', 1)``."""
    name: str | None = None
    """Dim name (for derived dims, the expression, like ``2*batch``)."""
    root: str | None = None
    """For derived dims: the root Dim's name."""
    root_range: tuple[Any, Any] | None = None
    """For derived dims: the root Dim's (min, max)."""
    fn: Callable[[Any], Any] | None = None
    """For derived dims: root -> this dimension's size."""
    min: int | None = None
    max: Any = None
    value: int | None = None
    """Required static size (an int in the spec)."""

    @property
    def is_dynamic(self) -> bool:
        return self.kind.is_dynamic

    def root_value(self, size: int) -> int | None:
        """For a derived dim: the root's value that makes this dimension ``size``, or None
        if no integer does."""
        root = sympy.Symbol(self.root, integer=True)
        solutions = sympy.solve(sympy.Eq(self.fn(root), size), root)
        if len(solutions) == 1 and solutions[0].is_integer:
            return int(solutions[0])
        return None

    @property
    def declared_as(self) -> str:
        """The spec entry as the user wrote it, for messages: ``batch``, ``2*batch``, ``Dim.DYNAMIC``."""
        return self.name or f"Dim.{self.kind.name}"


@attrs.define
class DynamicPlan:
    """The parsed spec: for each flat user-input leaf, for each dimension, a DimRequest."""

    requests: dict[int, dict[int, DimRequest]]
    roots: dict[str, Dim]
    """Named (non-derived) Dims by name, including roots only derived Dims mention."""
    spec: Any
    """The ``dynamic_shapes`` value as the user gave it."""
    scalars: dict[int, DimRequest] = attrs.field(factory=dict)
    """Int inputs declared ``Dim.AUTO`` or ``Dim.DYNAMIC``: traced as symbolic ints."""

    def dims(self) -> list[tuple[int, int, DimRequest]]:
        """(leaf, dimension, request) of every entry, in input order."""
        return [(leaf, i, request) for leaf, dims in self.requests.items() for i, request in dims.items()]


def spec_path(keys: tuple[Any, ...] | list[Any]) -> str:
    """Where an entry sits in the spec: ``dynamic_shapes['x'][1]``."""
    return "dynamic_shapes" + "".join(f"[{k!r}]" for k in keys)


def spec_fragment(keys: tuple[Any, ...], value: str) -> str:
    """How to write ``value`` at ``keys`` in the spec: ``"y": {0: batch}`` for a top-level
    tensor, ``dynamic_shapes['inputs']['a'][0] = batch`` deeper down."""
    if len(keys) == 2 and isinstance(keys[1], int):
        return f'"{keys[0]}": {{{keys[1]}: {value}}}'
    return f"{spec_path(list(keys))} = {value}"


def bound_text(value: Any) -> str:
    """A range bound as text; unbounded is ``inf``."""
    return "inf" if value is None or value == int_oo or value == float("inf") else str(int(value))


def dim_text(dim: Any) -> str:
    """A dimension spec as the user would write it: ``Dim("b", max=64)``, ``2*b``, ``Dim.AUTO``."""
    if isinstance(dim, DimHint):
        bounds = [f"{k}={v}" for k, v in (("min", dim.min), ("max", dim.max)) if v is not None]
        return f"Dim.{dim.type.name}" + (f"({', '.join(bounds)})" if bounds else "")
    if isinstance(dim, DerivedDim):
        return dim.__name__
    if isinstance(dim, Dim):
        bounds = [f"min={dim.min}"] if dim.min not in (0, None) else []
        bounds += [f"max={dim.max}"] if dim.max != int_oo else []
        return f'Dim("{dim.__name__}"' + "".join(f", {b}" for b in bounds) + ")"
    return repr(dim)


def dim_names(program: torch.export.ExportedProgram, plan: DynamicPlan | None) -> dict[sympy.Symbol, str]:
    """The user's Dim name of each size symbol the ``dynamic_shapes`` plan names: a named Dim's
    symbol is its name; a derived Dim's (``2*seq``) is its expression, or, when the program
    writes the size as an expression in its root's symbol, that symbol is the root's name."""
    names: dict[sympy.Symbol, str] = {}
    if plan is None:
        return names
    nodes = user_input_nodes(program)
    for leaf, dims in plan.requests.items():
        node = nodes[leaf] if leaf < len(nodes) else None
        val = node.meta.get("val") if node is not None else None
        if not isinstance(val, torch.Tensor):
            continue
        for index, request in dims.items():
            size = val.shape[index] if index < val.dim() else None
            if not isinstance(size, torch.SymInt) or request.name is None:
                continue
            expr = size.node.expr
            if isinstance(expr, sympy.Symbol):
                names.setdefault(expr, request.name)
            elif request.root is not None and len(expr.free_symbols) == 1:
                names.setdefault(next(iter(expr.free_symbols)), request.root)
    return names
