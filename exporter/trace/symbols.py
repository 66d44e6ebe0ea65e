"""The fake tensor world a trace runs in: one FakeTensorMode with a ShapeEnv, fake state,
and fake user inputs whose declared-dynamic dimensions are fresh symbols.

Symbols are named as torch.export names them (from the input's source, ``L['x'].size()[1]``)
and carry the declared range; the equalities the spec declares (shared and derived Dims)
are handed to the ShapeEnv when guards are produced.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import operator
from collections.abc import Callable
from typing import Any

import attrs
import sympy
import torch
import torch.utils._pytree as pytree

from .._dims import DimKind, DimRequest, DynamicPlan
from .._state import TrackedInput
from .._torch_internals import (
    DimDynamic,
    EqualityConstraint,
    FakeTensorMode,
    GuardOnDataDependentSymNode,
    GuardSource,
    RelaxedUnspecConstraint,
    ShapeEnv,
    Source,
    StatelessSymbolicContext,
    StrictMinMaxConstraint,
    SymIntSymbolicContext,
    ValueRanges,
    constant_source,
    size_source,
    uninteresting_files,
)
from ..inputs.bind import BoundInputs
from .explain import is_library_frame

__all__ = ["FakeInputs", "InputSource", "fake_inputs", "new_fake_mode", "source_name"]


@dataclasses.dataclass(frozen=True)
class InputSource(Source):
    """Where a fake input comes from, named the way torch.export names it (``L['x'][0]``):
    the ShapeEnv derives symbol names from these, so ours match the oracle's."""

    text: str

    @property
    def _name_template(self) -> str:
        return self.text

    @functools.cached_property
    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL


def source_name(path: pytree.KeyPath) -> str:
    """torch.export's source name for an input at forward()-rooted ``path``: ``L['x']``,
    ``L['x'][0]``, ``L['x']['a']``, ``L['x'].field``.  The program's input guards are
    written in these names and matched to placeholders by the same spelling."""
    return "L" + pytree.keystr(path)


class _ShapeEnv(ShapeEnv):
    """A ShapeEnv that attributes guards to the user's own source line, and hands the
    data-dependent booleans it cannot evaluate to ``decider`` when one is set.

    The stock one blames the innermost frame outside a few shape-handling files, which is
    often a torch decomposition or meta kernel; constraint errors should point at the
    model's line that needed the guard.
    """

    decider: Any = None
    """Branch capture's ``Decider``: called as ``decider(shape_env, expr, error)`` where
    evaluating ``expr`` needs a data-dependent value; returns the bool to take, or raises."""

    def evaluate_expr(self, orig_expr, *args, **kwargs):
        try:
            return super().evaluate_expr(orig_expr, *args, **kwargs)
        except GuardOnDataDependentSymNode as error:
            if self.decider is None:
                raise
            return sympy.true if self.decider(self, orig_expr, error) else sympy.false

    def _get_user_frame(self):
        frame = inspect.currentframe()
        while frame is not None and is_library_frame(frame.f_code.co_filename):
            frame = frame.f_back
        if frame is not None:
            return frame
        # A model that lives in a library (transformers) or in no file (a REPL, exec) has
        # no frame of its own; the stock choice then still names a line, and torch's
        # assert-statement check relies on getting some frame.  The stock choice, made
        # with a list of files that does not import Dynamo and torch.export to be made:
        frame = inspect.currentframe()
        while frame is not None and frame.f_code.co_filename in uninteresting_files():
            frame = frame.f_back
        return frame


def new_fake_mode(root: torch.nn.Module, *, prefer_deferred_runtime_asserts_over_guards: bool = False, dynamic: bool = False) -> FakeTensorMode:
    """A FakeTensorMode for exporting ``root``, with a ShapeEnv that records guards.

    ``prefer_deferred_runtime_asserts_over_guards``: conditions on sizes that need not decide control flow become
    runtime asserts in the program instead of guards (torch.export's
    ``prefer_deferred_runtime_asserts_over_guards``).

    ``dynamic``: some input sizes will be symbolic; the mode then runs every op's fake
    kernel instead of going through the fake-tensor cache.  Results with symbolic sizes are
    cached per ShapeEnv, so each export starts with an empty cache, and making an entry
    rebuilds the result from symbolic expressions to check it: on transformers models
    with batch and sequence dynamic that costs more than it saves (the export benchmark's
    dynamic rows measure it).  Static exports share the process-wide cache, which pays."""
    code = getattr(type(root).forward, "__code__", None)
    co_fields = (
        {"co_name": code.co_name, "co_filename": code.co_filename, "co_firstlineno": code.co_firstlineno}
        if code is not None
        else {}
    )
    shape_env = _ShapeEnv(
        tracked_fakes=[],
        co_fields=co_fields,
        trace_asserts=True,
        prefer_deferred_runtime_asserts_over_guards=prefer_deferred_runtime_asserts_over_guards,
    )
    mode = FakeTensorMode(shape_env=shape_env, allow_non_fake_inputs=True, export=True)
    if dynamic:
        mode.cache_enabled = False
    return mode


def _symbolic_context(requests: list[dict[int, DimRequest]], tensor: torch.Tensor) -> StatelessSymbolicContext:
    """Dynamic dims get fresh symbols with their declared ranges; all else is static.

    ``requests`` holds the spec's entries for every input leaf that is this very tensor: it
    is one fake, so a dimension is dynamic if any entry says so, within every declared
    range (torch.export fakes a tensor passed twice once too)."""
    dynamic_sizes, constraints = [], []
    for i in range(tensor.dim()):
        dynamic = [r[i] for r in requests if i in r and r[i].is_dynamic]
        if not dynamic:
            dynamic_sizes.append(DimDynamic.STATIC)
            constraints.append(None)
            continue
        dynamic_sizes.append(DimDynamic.DYNAMIC)
        declared = [ValueRanges(lower=r.min, upper=r.max) for r in dynamic if r.kind.is_dim]
        if declared:
            constraints.append(StrictMinMaxConstraint(vr=functools.reduce(operator.and_, declared), warn_only=False))
        elif any(r.kind is DimKind.DYNAMIC for r in dynamic):
            constraints.append(RelaxedUnspecConstraint(warn_only=False))
        else:
            constraints.append(None)
    return StatelessSymbolicContext(dynamic_sizes=dynamic_sizes, constraint_sizes=constraints)


def _declared_equalities(
    plan: DynamicPlan,
    shape_env: ShapeEnv,
    size_sources: dict[tuple[int, int], Source],
    example_sizes,
    aliases: list[tuple[Source, Source]],
) -> EqualityConstraint:
    """The equalities the spec declares: dims sharing a Dim, derived dims to their roots, and
    the dynamic sizes of a tensor passed as several inputs (``aliases``), which are one size."""
    by_name: dict[str, list[Source]] = {}
    derived: list[tuple[int, int, DimRequest]] = []
    relaxed = set()
    for leaf, i, request in plan.dims():
        source = size_sources[(leaf, i)]
        if request.kind is DimKind.NAMED:
            by_name.setdefault(request.name, []).append(source)
        elif request.kind is DimKind.DERIVED:
            derived.append((leaf, i, request))
        elif request.kind in (DimKind.AUTO, DimKind.DYNAMIC):
            relaxed.add(source)
    pairs = [(sources[0], other) for sources in by_name.values() for other in sources[1:]] + aliases
    phantoms: dict[str, Any] = {}
    derived_equalities = []
    for leaf, i, request in derived:
        if request.root in by_name:
            root: Any = by_name[request.root][0]
        else:
            if request.root not in phantoms:
                dim = plan.roots[request.root]
                phantoms[request.root] = shape_env.create_symbol(
                    val=request.root_value(example_sizes[(leaf, i)]),
                    # A constant source: the root is no input, so no input guard may name it.
                    source=constant_source(request.root),
                    dynamic_dim=DimDynamic.DYNAMIC,
                    constraint_dim=StrictMinMaxConstraint(vr=ValueRanges(lower=dim.min, upper=dim.max), warn_only=False),
                )
            root = phantoms[request.root]
        derived_equalities.append((size_sources[(leaf, i)], root, request.fn))
    return EqualityConstraint(
        source_pairs=pairs,
        derived_equalities=derived_equalities,
        phantom_symbols=list(phantoms.values()),
        relaxed_sources=relaxed,
        warn_only=False,
    )


def _symbolic_int(shape_env: ShapeEnv, value: int, source: Source, request: DimRequest):
    """A symbolic int for an int input declared ``Dim.AUTO`` / ``Dim.DYNAMIC``, and its context
    (``Dim.DYNAMIC`` may not become a constant; ``Dim.AUTO`` may)."""
    symint = shape_env.create_unspecified_symint_and_symbol(value, source, DimDynamic.DYNAMIC)
    if request.kind is DimKind.DYNAMIC:
        return symint, SymIntSymbolicContext(constraint=RelaxedUnspecConstraint(warn_only=False))
    return symint, None


@attrs.frozen
class FakeInputs:
    inputs: list[Any]
    """Fake state then fake user inputs, in the traced function's argument order."""
    tracked: list[TrackedInput]
    """The user tensors made with symbolic sizes (empty for a static export)."""
    equalities: EqualityConstraint | None = None


DirectFake = Callable[[FakeTensorMode, torch.Tensor], "torch.Tensor | None"]
"""``from_tensor(t, static_shapes=True)`` made directly for a plain tensor, else None (a fast path)."""


def _fake(fake_mode: FakeTensorMode, value: torch.Tensor, direct: DirectFake | None = None, **kwargs: Any) -> torch.Tensor:
    if direct is not None and kwargs.get("static_shapes"):
        fake = direct(fake_mode, value)  # most parameters, buffers and inputs
        if fake is not None:
            return fake
    fake = fake_mode.from_tensor(value, **kwargs)
    if fake_mode.propagate_real_tensors and value.device.type != "meta":
        # A draft trace runs every op on real copies too.  torch's converter copies only a
        # plain torch.Tensor's data (a Parameter's copy is left uninitialized), so the copy
        # is made here: of the value, never the value itself, which ops may write to.
        with torch.no_grad():
            fake.real_tensor = value.detach().clone()
    return fake


def fake_inputs(
    fake_mode: FakeTensorMode,
    state_values: list[Any],
    bound: BoundInputs,
    plan: DynamicPlan | None,
    *,
    direct: DirectFake | None = None,
) -> FakeInputs:
    """Fake parameters and buffers (static; a tensor reached twice, as tied weights are, gets
    one fake) and user inputs (symbolic where ``plan`` makes a dimension dynamic)."""
    memo: dict[int, Any] = {}
    fakes = []
    for value in state_values:
        if id(value) not in memo:
            memo[id(value)] = _fake(fake_mode, value, direct, static_shapes=True)
        fakes.append(memo[id(value)])
    if plan is None:
        fakes += [_fake(fake_mode, v, direct, static_shapes=True) if isinstance(v, torch.Tensor) else v for v in bound.flat]
        return FakeInputs(fakes, [])
    tracked = []
    size_sources: dict[tuple[int, int], Source] = {}
    example_sizes: dict[tuple[int, int], int] = {}
    holders: dict[int, list[int]] = {}
    for i, value in enumerate(bound.flat):
        if isinstance(value, torch.Tensor):
            holders.setdefault(id(value), []).append(i)
    shared: dict[int, tuple[torch.Tensor, StatelessSymbolicContext, Source]] = {}
    aliases: list[tuple[Source, Source]] = []
    for i, (path, value) in enumerate(zip(bound.paths, bound.flat)):
        source = InputSource(source_name(path))
        if i in plan.scalars:
            symint, context = _symbolic_int(fake_mode.shape_env, value, source, plan.scalars[i])
            fakes.append(symint)
            tracked.append(TrackedInput(i, symint, source, context))
            continue
        if not isinstance(value, torch.Tensor):
            fakes.append(value)
            continue
        if id(value) in shared:
            # The same tensor passed again: the same fake, whose sizes these sources name too.
            fake, context, first = shared[id(value)]
            aliases += [
                (size_source(first, d), size_source(source, d))
                for d, dynamic in enumerate(context.dynamic_sizes)
                if dynamic is DimDynamic.DYNAMIC
            ]
        else:
            context = _symbolic_context([plan.requests.get(leaf, {}) for leaf in holders[id(value)]], value)
            fake = _fake(fake_mode, value, source=source, symbolic_context=context)
            shared[id(value)] = (fake, context, source)
        fakes.append(fake)
        tracked.append(TrackedInput(i, fake, source, context))
        requests = plan.requests.get(i, {})
        for d, size in enumerate(value.shape):
            size_sources[(i, d)] = size_source(source, d)
            example_sizes[(i, d)] = int(size)
            if d in requests and requests[d].kind.is_dim:
                # torch's guard messages (and its solver's suggestions) call a size by its Dim's name
                fake_mode.shape_env.source_name_to_debug_name[size_sources[(i, d)].name] = requests[d].name
    equalities = _declared_equalities(plan, fake_mode.shape_env, size_sources, example_sizes, aliases)
    return FakeInputs(fakes, tracked, equalities)
