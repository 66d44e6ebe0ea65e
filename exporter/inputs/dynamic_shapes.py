"""Read a ``dynamic_shapes`` spec and check it against the example inputs.

The spec is written the way torch.export takes it: a dict keyed by forward()'s parameter
names (or a tuple in their order), nested like the inputs, each tensor given a dict
``{dim: spec}`` or a list with one spec per dimension, where a spec is a named
``Dim("batch", min=, max=)`` (shared names mean equal sizes), a derived ``2 * dim`` /
``dim + 1``, ``Dim.AUTO`` / ``Dim.DYNAMIC`` / ``Dim.STATIC``, an int (static, that size) or
None (static).  Everything is checked before tracing, against the example inputs, and every
mistake is reported at its path in the spec (``dynamic_shapes['x'][1]``).  The result is a
``DynamicPlan`` of typed ``DimRequest`` records; the tracer makes the symbols.
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any

import attrs
import sympy
import torch
import torch.utils._pytree as pytree
from torch.export import AdditionalInputs, ShapesCollection

from .._dims import DimKind, DimRequest, DynamicPlan, bound_text, dim_text, spec_path
from .._errors import InputSpecError
from .._torch_internals import DerivedDim, Dim, DimHint, DimHintType, int_oo
from .bind import BoundInputs, Fields, key_values

__all__ = ["plan_dynamic_shapes", "relaxed_dynamic_shapes"]

_HINT_KINDS = {DimHintType.AUTO: DimKind.AUTO, DimHintType.DYNAMIC: DimKind.DYNAMIC, DimHintType.STATIC: DimKind.STATIC}


def _signature(model: torch.nn.Module) -> inspect.Signature | None:
    try:
        return inspect.signature(model.forward)
    except (TypeError, ValueError):
        return None


def _parse_dim(value: Any, where: str, input_dim: str, keys: tuple = ()) -> DimRequest:
    if value is None:
        return DimRequest(DimKind.STATIC, where, input_dim, keys=keys)
    if isinstance(value, bool) or (isinstance(value, int) and value < 0):
        raise InputSpecError(
            f"{where} is {value!r}; a dimension spec is a Dim, Dim.AUTO/DYNAMIC/STATIC, a size, or None",
            hint=f'for a dynamic size write torch.export.Dim("name") at {where}',
        )
    if isinstance(value, int):
        return DimRequest(DimKind.STATIC, where, input_dim, keys=keys, value=value)
    if isinstance(value, DimHint):
        return DimRequest(_HINT_KINDS[value.type], where, input_dim, keys=keys, min=value.min, max=value.max)
    if isinstance(value, DerivedDim):
        return DimRequest(
            DimKind.DERIVED, where, input_dim, keys=keys, name=value.__name__, root=value.root.__name__,
            root_range=(value.root.min, value.root.max), fn=value.fn, min=value.min, max=value.max,
        )
    if isinstance(value, Dim):
        return DimRequest(DimKind.NAMED, where, input_dim, keys=keys, name=value.__name__, min=value.min, max=value.max)
    raise InputSpecError(
        f"{where} is a {type(value).__name__} ({value!r}); a dimension spec is a "
        "torch.export.Dim, a derived Dim (2 * dim, dim + 1), Dim.AUTO / Dim.DYNAMIC / Dim.STATIC, "
        "an int or None",
        hint=f'write {where} = Dim("{value}")' if isinstance(value, str) and value.isidentifier() else "see torch.export.Dim",
    )


def _tensor_requests(spec: Any, tensor: torch.Tensor, keys: list[Any], input_path: str) -> dict[int, DimRequest]:
    where = spec_path(keys)
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
    elif isinstance(spec, (Dim, DimHint)):
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
        if request.kind is DimKind.STATIC and request.value is not None and request.value != tensor.shape[index]:
            raise InputSpecError(
                f"{where}[{index}] = {request.value} but the example {input_path} has size {tensor.shape[index]} there",
                hint="make the example match, or use a Dim if the size varies",
            )
        out[index] = request
    return out


@attrs.define
class _Walk:
    """What walking the spec against the inputs collects."""

    leaf_of: dict[tuple[int, tuple[Any, ...]], int]
    requests: dict[int, dict[int, DimRequest]] = attrs.field(factory=dict)
    scalars: dict[int, DimRequest] = attrs.field(factory=dict)


def _walk(spec: Any, value: Any, keys: list[Any], found: _Walk, input_path: str) -> None:
    """Match ``spec`` against the input ``value``, filling ``found`` with a request per
    tensor dimension and per int input declared dynamic."""
    if isinstance(value, torch.Tensor):
        found.requests[found.leaf_of[id(value), tuple(keys)]] = _tensor_requests(spec, value, keys, input_path)
        return
    if spec is None:
        return
    where = spec_path(keys)
    if isinstance(value, int) and not isinstance(value, bool) and isinstance(spec, (Dim, DimHint)):
        request = _parse_dim(spec, where, input_path, tuple(keys))
        if request.kind in (DimKind.AUTO, DimKind.DYNAMIC):
            found.scalars[found.leaf_of[id(value), tuple(keys)]] = request
            return
        if request.kind is not DimKind.STATIC:
            raise InputSpecError(
                f"{where} is {dim_text(spec)}, but {input_path} is an int: an int input can be made "
                "dynamic with Dim.AUTO or Dim.DYNAMIC, not with a named Dim",
                hint=f"write {where} = Dim.DYNAMIC (or Dim.AUTO)",
            )
        return
    if isinstance(value, Fields) and isinstance(spec, (list, tuple)) and len(spec) == len(value):
        # a dataclass or namedtuple input: a list spec gives its fields in order
        spec = dict(zip(value, spec))
    if isinstance(value, (list, tuple)) and not _is_namedtuple(value):
        if not isinstance(spec, (list, tuple)) or len(spec) != len(value):
            raise InputSpecError(
                f"{where} should be a list of {len(value)} entries, like the input {input_path}, "
                f"got {type(spec).__name__}" + (f" of {len(spec)}" if isinstance(spec, (list, tuple)) else ""),
                hint="nest the spec exactly as the inputs are nested (None for parts that are static)",
            )
        for i, (s, v) in enumerate(zip(spec, value)):
            _walk(s, v, [*keys, i], found, f"{input_path}[{i}]")
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
                    hint=f"its keys are: {', '.join(map(repr, value))}" if value
                    else f"{input_path} is empty: nothing in it can be dynamic, so give it {{}} or None",
                )
        for key, v in value.items():
            _walk(spec.get(key), v, [*keys, key], found, f"{input_path}[{key!r}]")
        return
    if isinstance(value, (int, float, bool, str, type(None), torch.dtype, torch.device)):
        raise InputSpecError(
            f"{where} is given, but {input_path} is a {type(value).__name__} constant, which is "
            "specialized into the program",
            hint=f"set {where} = None; only tensor dimensions and int inputs (Dim.AUTO / Dim.DYNAMIC) can be dynamic",
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
    if isinstance(dynamic_shapes, (ShapesCollection, AdditionalInputs)):
        dynamic_shapes = _spec_from_collection(model, bound, dynamic_shapes)
    # The inputs as forward() binds them, to walk the spec against.
    combined = bound.by_name()
    found = _Walk({(id(leaf), key_values(path)): i for i, (path, leaf) in enumerate(zip(bound.paths, bound.flat))})
    if isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(combined):
            raise InputSpecError(
                f"dynamic_shapes has {len(dynamic_shapes)} entries but forward() was given {len(combined)} "
                f"inputs ({', '.join(combined)})",
                hint="give one entry per input in order, or a dict keyed by argument name",
            )
        # Entries follow forward()'s parameter order, whatever order keyword inputs were given in.
        order = list(signature.parameters) if signature else []
        in_order = sorted(combined, key=lambda name: order.index(name) if name in order else len(order))
        by_name = dict(zip(in_order, dynamic_shapes))
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
            elif signature is not None and key in signature.parameters:
                raise InputSpecError(
                    f"dynamic_shapes has a spec for {key!r}, but the example inputs give no value for that "
                    f"parameter of {type(model).__name__}.forward (it takes its default)",
                    hint=f"pass an example for {key!r}, or drop its entry from dynamic_shapes",
                )
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

    for name, value in combined.items():
        _walk(by_name.get(name), value, [name], found, name)
    requests = {leaf: dims for leaf, dims in found.requests.items() if dims}
    roots = _check_against_examples(requests, bound, dynamic_shapes)
    _check_scalar_examples(found.scalars, bound)
    return DynamicPlan(requests, roots, dynamic_shapes, found.scalars)


def _spec_from_collection(model: torch.nn.Module, bound: BoundInputs, collection: Any) -> Any:
    """The nested spec a ``ShapesCollection`` (specs keyed by input tensor) or an
    ``AdditionalInputs`` (dims that differ across examples) stands for, as torch.export reads them."""
    try:
        return collection.dynamic_shapes(model, bound.args, bound.kwargs)
    except (ValueError, AssertionError, TypeError, KeyError) as e:
        raise InputSpecError(
            f"dynamic_shapes is a {type(collection).__name__} that does not fit the example inputs: {e}",
            hint="give it the very tensors passed as inputs (ShapesCollection), or additional inputs "
            "with the same structure and types as the example (AdditionalInputs)",
        ) from e


def relaxed_dynamic_shapes(model: torch.nn.Module, bound: BoundInputs, dynamic_shapes: Any) -> Any:
    """``dynamic_shapes`` with every named, derived and ``Dim.DYNAMIC`` dimension made
    ``Dim.AUTO`` in its declared range: dynamic where the model allows it, whatever
    relations it needs (a draft export's answer to a spec the model does not fit, as
    torch.export.draft_export relaxes it)."""
    if isinstance(dynamic_shapes, ShapesCollection):
        dynamic_shapes = _spec_from_collection(model, bound, dynamic_shapes)

    def relax(spec: Any) -> Any:
        if isinstance(spec, Dim):
            low, high = spec.min, spec.max
            return Dim.AUTO(min=low, max=None if high in (None, int_oo) else high)
        if isinstance(spec, DimHint) and spec.type is DimHintType.DYNAMIC:
            return Dim.AUTO(min=spec.min, max=spec.max)
        return spec

    return pytree.tree_map(relax, dynamic_shapes, is_leaf=lambda x: isinstance(x, (Dim, DimHint)))


def _check_scalar_examples(scalars: dict[int, DimRequest], bound: BoundInputs) -> None:
    """An int input declared dynamic must lie in the range its hint declares."""
    for leaf, request in scalars.items():
        value = bound.flat[leaf]
        low = request.min if request.min is not None else -int_oo
        high = request.max if request.max is not None else int_oo
        if not low <= value <= high:
            raise InputSpecError(
                f"the example {request.input_dim} = {value} is outside the range "
                f"[{request.min}, {bound_text(high)}] declared at {request.where}",
                hint="change the example, or widen the range",
            )


def _check_against_examples(requests: dict[int, dict[int, DimRequest]], bound: BoundInputs, spec) -> dict[str, Dim]:
    """Examples must fit the spec: sizes of 2+ for dynamic dims, inside declared ranges,
    equal where a Dim is shared, consistent with derived dims.  Returns the named roots."""
    seen: dict[str, tuple[DimRequest, int]] = {}
    roots: dict[str, Dim] = {}
    for leaf, dims in requests.items():
        tensor = bound.flat[leaf]
        for i, request in dims.items():
            size = int(tensor.shape[i])
            if request.kind.must_stay_dynamic and size in (0, 1):
                raise InputSpecError(
                    f"{request.input_dim} is declared dynamic ({request.where} = "
                    f"{request.declared_as}) but its example size is {size}; export "
                    "specializes sizes 0 and 1, so this dimension would be fixed to "
                    f"{size} in the program",
                    hint=f"use an example where {request.input_dim} is 2 or more",
                )
            low = request.min if request.min is not None else 0
            high = request.max if request.max is not None else int_oo
            if not low <= size <= high:
                raise InputSpecError(
                    f"the example {request.input_dim} = {size} is outside the range "
                    f"[{low}, {bound_text(high)}] declared at {request.where}",
                    hint="change the example, or widen the range",
                )
            if request.kind is DimKind.NAMED:
                if request.name in seen:
                    first, first_size = seen[request.name]
                    if (first.min, first.max) != (request.min, request.max):
                        raise InputSpecError(
                            f"Dim {request.name!r} is used with two ranges: [{first.min}, {bound_text(first.max)}] "
                            f"at {first.where} and [{request.min}, {bound_text(request.max)}] at {request.where}",
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
            if request.kind is not DimKind.DERIVED:
                continue
            size = int(tensor.shape[i])
            root_value = request.root_value(size)
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
