"""Read a ``dynamic_shapes`` spec, check it against the example inputs, and make symbolic fakes.

The spec is written the way torch.export takes it: a dict keyed by forward()'s parameter
names (or a tuple in their order), nested like the inputs, each tensor given a dict
``{dim: spec}`` or a list with one spec per dimension, where a spec is a named
``Dim("batch", min=, max=)`` (shared names mean equal sizes), a derived ``2 * dim`` /
``dim + 1``, ``Dim.AUTO`` / ``Dim.DYNAMIC`` / ``Dim.STATIC``, an int (static, that size) or
None (static).  Everything is checked before tracing, against the example inputs, and every
mistake is reported at its path in the spec (``dynamic_shapes['x'][1]``).

Fake user inputs get one fresh symbol per dynamic dimension, named as torch.export names it
(from the input's source, ``L['x'].size()[1]``), with the declared range attached.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
from collections.abc import Callable
from typing import Any

import attrs
import sympy
import torch
import torch.utils._pytree as pytree
from torch._dynamo.source import ConstantSource  # a Source data class, not the Dynamo tracer
from torch._guards import GuardSource, Source
from torch.export.dynamic_shapes import Dim, _DerivedDim, _DimHint, _DimHintType
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    EqualityConstraint,
    RelaxedUnspecConstraint,
    StatelessSymbolicContext,
    StrictMinMaxConstraint,
)
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from ._errors import InputSpecError
from ._inputs import BoundInputs

__all__ = ["DimRequest", "DynamicPlan", "InputSource", "inputs_by_name", "plan_dynamic_shapes"]


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


@attrs.frozen
class DimRequest:
    """What the user asked for one dimension of one tensor input."""

    kind: str
    """``named``, ``derived``, ``auto``, ``dynamic`` (the two hints) or ``static``."""
    where: str
    """Path of this entry in the spec, for errors: ``dynamic_shapes['x'][1]``."""
    input_dim: str
    """The dimension it describes, for errors: ``x.shape[1]``."""
    keys: tuple = ()
    """The spec keys leading to this entry: ``('x', 1)``."""
    name: str | None = None
    """Dim name (for derived dims, the expression, like ``2*batch``)."""
    root: str | None = None
    """For derived dims: the root Dim's name."""
    root_range: tuple[Any, Any] | None = None
    """For derived dims: the root Dim's (min, max)."""
    fn: Callable | None = None
    min: int | None = None
    max: Any = None
    value: int | None = None
    """Required static size (an int in the spec)."""

    @property
    def is_dynamic(self) -> bool:
        return self.kind != "static"


@attrs.define
class DynamicPlan:
    """The parsed spec: per flat user-input leaf, per dimension, a DimRequest."""

    requests: dict[int, dict[int, DimRequest]]
    sources: dict[int, InputSource]
    roots: dict[str, Dim]
    """Named (non-derived) Dims by name."""
    spec: Any

    def symbolic_context(self, leaf: int, tensor: torch.Tensor) -> StatelessSymbolicContext:
        """Dynamic dims get fresh symbols with their declared ranges; all else is static."""
        requests = self.requests.get(leaf, {})
        dynamic_sizes, constraints = [], []
        for i in range(tensor.dim()):
            request = requests.get(i)
            if request is None or not request.is_dynamic:
                dynamic_sizes.append(DimDynamic.STATIC)
                constraints.append(None)
                continue
            dynamic_sizes.append(DimDynamic.DYNAMIC)
            if request.kind in ("named", "derived"):
                vr = ValueRanges(lower=request.min, upper=request.max)
                constraints.append(StrictMinMaxConstraint(vr=vr, warn_only=False))
            elif request.kind == "dynamic":
                constraints.append(RelaxedUnspecConstraint(warn_only=False))
            else:
                constraints.append(None)
        return StatelessSymbolicContext(dynamic_sizes=dynamic_sizes, constraint_sizes=constraints)

    def equalities(self, shape_env, size_sources: dict[tuple[int, int], Source], example_sizes) -> EqualityConstraint:
        """The equalities the spec declares: dims sharing a Dim, and derived dims to their roots."""
        by_name: dict[str, list[Source]] = {}
        derived: list[tuple[int, int, DimRequest]] = []
        relaxed = set()
        for leaf, dims in self.requests.items():
            for i, request in dims.items():
                source = size_sources[(leaf, i)]
                if request.kind == "named":
                    by_name.setdefault(request.name, []).append(source)
                elif request.kind == "derived":
                    derived.append((leaf, i, request))
                elif request.kind in ("auto", "dynamic"):
                    relaxed.add(source)
        pairs = [(sources[0], other) for sources in by_name.values() for other in sources[1:]]
        phantoms: dict[str, sympy.Symbol] = {}
        derived_equalities = []
        for leaf, i, request in derived:
            if request.root in by_name:
                root: Any = by_name[request.root][0]
            else:
                if request.root not in phantoms:
                    dim = self.roots[request.root]
                    phantoms[request.root] = shape_env.create_symbol(
                        val=_solve_root(request, example_sizes[(leaf, i)]),
                        # A constant source: the root is no input, so no input guard may name it.
                        source=ConstantSource(request.root),
                        dynamic_dim=DimDynamic.DYNAMIC,
                        constraint_dim=StrictMinMaxConstraint(
                            vr=ValueRanges(lower=dim.min, upper=dim.max), warn_only=False
                        ),
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


def _solve_root(request: DimRequest, size: int) -> int | None:
    """The root's value that makes ``request.fn(root) == size``, or None if not an integer."""
    root = sympy.Symbol(request.root, integer=True)
    solutions = sympy.solve(sympy.Eq(request.fn(root), size), root)
    if len(solutions) == 1 and solutions[0].is_integer:
        return int(solutions[0])
    return None


# -- reading the spec ------------------------------------------------------------------------


def _signature(model: torch.nn.Module) -> inspect.Signature | None:
    try:
        return inspect.signature(model.forward)
    except (TypeError, ValueError):
        return None


def _spec_path(keys: list[Any]) -> str:
    return "dynamic_shapes" + "".join(f"[{k!r}]" for k in keys)


def _key_value(key: Any) -> Any:
    if isinstance(key, pytree.MappingKey):
        return key.key
    if isinstance(key, pytree.SequenceKey):
        return key.idx
    if isinstance(key, pytree.GetAttrKey):
        return key.name
    return key


def _combined_paths(signature: inspect.Signature | None, bound: BoundInputs) -> list[tuple[Any, ...]]:
    """Each leaf's path rooted at forward()'s parameters, as torch.export binds them:
    positional inputs by parameter name (``*args`` as ``args[i]``), keyword inputs by name,
    extra keywords (those ``**kwargs`` collects) by their own names."""
    names = list(signature.parameters.values()) if signature else []
    positional = [p for p in names if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_positional = next((p.name for p in names if p.kind == p.VAR_POSITIONAL), None)
    paths = []
    for path, _ in pytree.tree_flatten_with_path((bound.args, bound.kwargs))[0]:
        top, key, rest = path[0], _key_value(path[1]), [_key_value(k) for k in path[2:]]
        if _key_value(top) == 0:
            if key < len(positional):
                paths.append((positional[key].name, *rest))
            elif var_positional is not None:
                paths.append((var_positional, key - len(positional), *rest))
            else:
                paths.append((f"args_{key}", *rest))
        else:
            # Extra keywords (landing in **kwargs) are named by their own key: that is the
            # name the program's module takes them by, and its input guards use.
            paths.append((key, *rest))
    return paths


def source_name(path: tuple[Any, ...]) -> str:
    """torch.export's source name for a combined path: ``L['x']``, ``L['x'][0]``, ``L['x']['a']``."""
    return f"L[{path[0]!r}]" + "".join(f"[{k!r}]" for k in path[1:])


def dim_text(dim: Any) -> str:
    """A dimension spec as the user would write it: ``Dim("b", max=64)``, ``2*b``, ``Dim.AUTO``."""
    if isinstance(dim, _DimHint):
        bounds = [f"{k}={v}" for k, v in (("min", dim.min), ("max", dim.max)) if v is not None]
        return f"Dim.{dim.type.name}" + (f"({', '.join(bounds)})" if bounds else "")
    if isinstance(dim, _DerivedDim):
        return dim.__name__
    if isinstance(dim, Dim):
        bounds = [f"min={dim.min}"] if dim.min not in (0, None) else []
        bounds += [f"max={dim.max}"] if dim.max != int_oo else []
        return f'Dim("{dim.__name__}"' + "".join(f", {b}" for b in bounds) + ")"
    return repr(dim)


def spec_fragment(keys: tuple, value: str) -> str:
    """How to write ``value`` at ``keys`` in the spec: ``"y": {0: batch}`` for a top-level
    tensor, ``dynamic_shapes['inputs']['a'][0] = batch`` deeper down."""
    if len(keys) == 2 and isinstance(keys[1], int):
        return f'"{keys[0]}": {{{keys[1]}: {value}}}'
    return f"{_spec_path(list(keys))} = {value}"


def _parse_dim(value: Any, where: str, input_dim: str, keys: tuple = ()) -> DimRequest:
    if value is None:
        return DimRequest("static", where, input_dim, keys=keys)
    if isinstance(value, bool) or (isinstance(value, int) and value < 0):
        raise InputSpecError(
            f"{where} is {value!r}; a dimension spec is a Dim, Dim.AUTO/DYNAMIC/STATIC, a size, or None",
            hint=f'for a dynamic size write torch.export.Dim("name") at {where}',
        )
    if isinstance(value, int):
        return DimRequest("static", where, input_dim, keys=keys, value=value)
    if isinstance(value, _DimHint):
        kind = {_DimHintType.AUTO: "auto", _DimHintType.DYNAMIC: "dynamic", _DimHintType.STATIC: "static"}[value.type]
        return DimRequest(kind, where, input_dim, keys=keys, min=value.min, max=value.max)
    if isinstance(value, _DerivedDim):
        return DimRequest(
            "derived", where, input_dim, keys=keys, name=value.__name__, root=value.root.__name__,
            root_range=(value.root.min, value.root.max), fn=value.fn, min=value.min, max=value.max,
        )
    if isinstance(value, Dim):
        return DimRequest("named", where, input_dim, keys=keys, name=value.__name__, min=value.min, max=value.max)
    raise InputSpecError(
        f"{where} is a {type(value).__name__} ({value!r}); a dimension spec is a "
        "torch.export.Dim, a derived Dim (2 * dim, dim + 1), Dim.AUTO / Dim.DYNAMIC / Dim.STATIC, "
        "an int or None",
        hint=f'write {where} = Dim("{value}")' if isinstance(value, str) and value.isidentifier() else "see torch.export.Dim",
    )


def _tensor_requests(spec: Any, tensor: torch.Tensor, keys: list[Any], input_path: str) -> dict[int, DimRequest]:
    where = _spec_path(keys)
    if spec is None:
        return {}
    ndim = tensor.dim()
    if isinstance(spec, dict):
        items = list(spec.items())
        for index, _ in items:
            if not isinstance(index, int) or isinstance(index, bool):
                raise InputSpecError(
                    f"{where} has key {index!r}; a tensor's spec is keyed by dimension index",
                    hint=f"write {where} = {{0: batch}} to make dimension 0 dynamic",
                )
    elif isinstance(spec, (list, tuple)):
        if len(spec) != ndim:
            raise InputSpecError(
                f"{where} has {len(spec)} entries but {input_path} has {ndim} dimensions "
                f"(shape {list(tensor.shape)})",
                hint="give one entry per dimension (None for static ones), or a dict {index: Dim}",
            )
        items = list(enumerate(spec))
    elif isinstance(spec, (Dim, _DimHint)):
        text = dim_text(spec)
        raise InputSpecError(
            f"{where} is {text} for the whole tensor {input_path}; a tensor's spec names its dimensions",
            hint=f"write {where} = {{0: {text}}} for dimension 0, or a list with one entry per dimension",
        )
    else:
        raise InputSpecError(
            f"{where} is a {type(spec).__name__}; {input_path} is a tensor, so its spec is a dict "
            "{dim: Dim} or a list with one entry per dimension",
            hint=f"write {where} = {{0: Dim('batch')}}",
        )
    out = {}
    for index, value in items:
        if not -ndim <= index < ndim:
            raise InputSpecError(
                f"{where}[{index}]: {input_path} has only {ndim} dimensions (shape {list(tensor.shape)})",
                hint=f"use dimension indices 0..{ndim - 1}",
            )
        index %= ndim
        request = _parse_dim(value, f"{where}[{index}]", f"{input_path}.shape[{index}]", (*keys, index))
        if request.kind == "static" and request.value is not None and request.value != tensor.shape[index]:
            raise InputSpecError(
                f"{where}[{index}] = {request.value} but the example {input_path} has size {tensor.shape[index]} there",
                hint="make the example match, or use a Dim if the size varies",
            )
        out[index] = request
    return out


def _walk(spec: Any, value: Any, keys: list[Any], leaf_of: dict, out: dict, input_path: str) -> None:
    """Match ``spec`` against the input ``value``, filling ``out[leaf] = {dim: request}``."""
    if isinstance(value, torch.Tensor):
        out[leaf_of[id(value), tuple(keys)]] = _tensor_requests(spec, value, keys, input_path)
        return
    if spec is None:
        return
    where = _spec_path(keys)
    if isinstance(value, (list, tuple)) and not _is_namedtuple(value):
        if not isinstance(spec, (list, tuple)) or len(spec) != len(value):
            raise InputSpecError(
                f"{where} should be a list of {len(value)} entries, like the input {input_path}, "
                f"got {type(spec).__name__}" + (f" of {len(spec)}" if isinstance(spec, (list, tuple)) else ""),
                hint="nest the spec exactly as the inputs are nested (None for parts that are static)",
            )
        for i, (s, v) in enumerate(zip(spec, value)):
            _walk(s, v, [*keys, i], leaf_of, out, f"{input_path}[{i}]")
        return
    if isinstance(value, dict):
        if not isinstance(spec, dict):
            raise InputSpecError(
                f"{where} should be a dict like the input {input_path}, got {type(spec).__name__}",
                hint="nest the spec exactly as the inputs are nested",
            )
        for key in spec:
            if key not in value:
                raise InputSpecError(
                    f"{where} has a spec for {key!r}, which {input_path} does not have",
                    hint=f"its keys are: {', '.join(map(repr, value))}",
                )
        for key, v in value.items():
            _walk(spec.get(key), v, [*keys, key], leaf_of, out, f"{input_path}[{key!r}]")
        return
    if isinstance(value, (int, float, bool, str, type(None), torch.dtype, torch.device)):
        raise InputSpecError(
            f"{where} is given, but {input_path} is a {type(value).__name__} constant, which is "
            "specialized into the program",
            hint=f"set {where} = None; only tensor dimensions can be dynamic",
        )
    raise InputSpecError(
        f"{where}: dynamic shapes inside a {type(value).__name__} input are not supported",
        hint="pass the tensors as plain args, tuples, lists or dicts to make their shapes dynamic",
    )


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(value, "_fields")


def plan_dynamic_shapes(model: torch.nn.Module, bound: BoundInputs, dynamic_shapes: Any) -> DynamicPlan:
    """Parse and check ``dynamic_shapes`` for these inputs (raises InputSpecError at the bad entry)."""
    signature = _signature(model)
    combined_paths = _combined_paths(signature, bound)
    sources = {i: InputSource(source_name(p)) for i, p in enumerate(combined_paths)}

    # The inputs as forward() binds them, to walk the spec against.
    combined = inputs_by_name(model, bound)
    leaf_of = {(id(leaf), tuple(path)): i for i, (path, leaf) in enumerate(zip(combined_paths, bound.flat))}

    if isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(combined):
            raise InputSpecError(
                f"dynamic_shapes has {len(dynamic_shapes)} entries but forward() was given {len(combined)} "
                f"inputs ({', '.join(combined)})",
                hint="give one entry per input in order, or a dict keyed by argument name",
            )
        by_name = dict(zip(combined, dynamic_shapes))
    elif isinstance(dynamic_shapes, dict):
        by_name = {}
        var_keyword = next(
            (p.name for p in (signature.parameters.values() if signature else []) if p.kind == p.VAR_KEYWORD), None
        )
        entries = list(dynamic_shapes.items())
        if var_keyword is not None and var_keyword not in combined and isinstance(dynamic_shapes.get(var_keyword), dict):
            # torch.export's nesting for **kwargs inputs: {"kwargs": {"token_type_ids": ...}}
            entries = [(k, v) for k, v in entries if k != var_keyword] + list(dynamic_shapes[var_keyword].items())
        for key, value in entries:
            if key in combined:
                by_name[key] = value
            else:
                params = [p for p in (signature.parameters if signature else combined)]
                close = difflib.get_close_matches(str(key), params, n=1)
                given = [p for p in params if p in combined]
                raise InputSpecError(
                    f"dynamic_shapes has a spec for {key!r}, which is not an input of "
                    f"{type(model).__name__}.forward({', '.join(params)})",
                    hint=(f"did you mean {close[0]!r}? " if close else "")
                    + f"the inputs given are: {', '.join(given)}",
                )
    else:
        raise InputSpecError(
            f"dynamic_shapes must be a dict keyed by forward() argument names or a tuple in their "
            f"order, got {type(dynamic_shapes).__name__}",
            hint='write dynamic_shapes={"x": {0: Dim("batch")}}',
        )

    requests: dict[int, dict[int, DimRequest]] = {}
    for name, value in combined.items():
        _walk(by_name.get(name), value, [name], leaf_of, requests, name)
    requests = {leaf: dims for leaf, dims in requests.items() if dims}
    roots = _check_against_examples(requests, bound, dynamic_shapes)
    return DynamicPlan(requests, sources, roots, dynamic_shapes)


def inputs_by_name(model: torch.nn.Module, bound: BoundInputs) -> dict[str, Any]:
    """The example inputs keyed by the forward() names a dynamic_shapes dict uses."""
    paths = _combined_paths(_signature(model), bound)
    return {name: _rebuild(name, paths, bound.flat) for name in dict.fromkeys(p[0] for p in paths)}


def _rebuild(name: str, combined_paths, flat: list[Any]) -> Any:
    """The input bound to parameter ``name``, rebuilt as nested lists/dicts of its leaves."""
    entries = [(p[1:], v) for p, v in zip(combined_paths, flat) if p[0] == name]
    if len(entries) == 1 and not entries[0][0]:
        return entries[0][1]
    root: dict = {}
    for path, value in entries:
        node = root
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    def to_containers(node):
        if not isinstance(node, dict):
            return node
        if all(isinstance(k, int) for k in node) and sorted(node) == list(range(len(node))):
            return [to_containers(node[i]) for i in range(len(node))]
        return {k: to_containers(v) for k, v in node.items()}

    return to_containers(root)


def _check_against_examples(requests: dict[int, dict[int, DimRequest]], bound: BoundInputs, spec) -> dict[str, Dim]:
    """Examples must fit the spec: sizes of 2+ for dynamic dims, inside declared ranges,
    equal where a Dim is shared, consistent with derived dims.  Returns the named roots."""
    seen: dict[str, tuple[DimRequest, int]] = {}
    roots: dict[str, Dim] = {}
    for leaf, dims in requests.items():
        tensor = bound.flat[leaf]
        for i, request in dims.items():
            size = int(tensor.shape[i])
            if request.kind in ("named", "derived", "dynamic") and size in (0, 1):
                raise InputSpecError(
                    f"{request.input_dim} is declared dynamic ({request.where} = "
                    f"{request.name or 'Dim.DYNAMIC'}) but its example size is {size}; export "
                    "specializes sizes 0 and 1, so this dimension would be fixed to "
                    f"{size} in the program",
                    hint=f"use an example where {request.input_dim} is 2 or more",
                )
            low = request.min if request.min is not None else 0
            high = request.max if request.max is not None else int_oo
            if request.is_dynamic and not low <= size <= high:
                raise InputSpecError(
                    f"the example {request.input_dim} = {size} is outside the range "
                    f"[{low}, {_bound(high)}] declared at {request.where}",
                    hint="change the example, or widen the range",
                )
            if request.kind == "named":
                if request.name in seen:
                    first, first_size = seen[request.name]
                    if (first.min, first.max) != (request.min, request.max):
                        raise InputSpecError(
                            f"Dim {request.name!r} is used with two ranges: [{first.min}, {_bound(first.max)}] "
                            f"at {first.where} and [{request.min}, {_bound(request.max)}] at {request.where}",
                            hint="create the Dim once and use the same object everywhere",
                        )
                    if first_size != size:
                        raise InputSpecError(
                            f"{first.input_dim} and {request.input_dim} share Dim {request.name!r} "
                            f"(so they are always equal) but the examples have sizes {first_size} and {size}",
                            hint="give examples of equal size, or use two Dims",
                        )
                else:
                    seen[request.name] = (request, size)
                    roots[request.name] = Dim(request.name, min=request.min, max=request.max)
    for leaf, dims in requests.items():
        tensor = bound.flat[leaf]
        for i, request in dims.items():
            if request.kind != "derived":
                continue
            size = int(tensor.shape[i])
            root_value = _solve_root(request, size)
            if root_value is None:
                raise InputSpecError(
                    f"{request.input_dim} is declared {request.name} but its example size {size} "
                    f"is not of that form for an integer {request.root}",
                    hint="change the example size, or the derived Dim",
                )
            if request.root in seen and seen[request.root][1] != root_value:
                first, first_size = seen[request.root]
                raise InputSpecError(
                    f"{request.input_dim} is declared {request.name}, so with {request.root} = {first_size} "
                    f"({first.input_dim}) it must be {int(request.fn(sympy.Integer(first_size)))}, "
                    f"but the example has {size}",
                    hint="make the examples consistent with the declared relation",
                )
            if request.root not in roots:
                low, high = request.root_range
                roots[request.root] = Dim(request.root, min=low, max=None if high == int_oo else high)
    return roots


def _bound(value) -> str:
    return "inf" if value is int_oo or value == int_oo else str(value)
