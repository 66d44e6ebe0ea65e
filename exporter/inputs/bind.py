"""Check the example inputs against forward() and describe every input leaf.

The flat input leaves (``pytree.tree_flatten((args, kwargs))``) are what the program's
placeholders stand for.  This module checks them before anything is traced, so a wrong
input is reported against the user's own names (``args[1]``, ``kwargs['mask']``) instead
of surfacing as an error deep inside the model.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import attrs
import torch
import torch.utils._pytree as pytree

from .._errors import Category, InputSpecError, TraceError
from .containers import describe_class, holds_tensors, register_containers_in
from .module_inputs import register_module_inputs

__all__ = ["BoundInputs", "Fields", "bind_inputs", "describe_path", "dispatches_like_a_tensor", "key_values"]

# Leaf types a program input may hold.  Tensors become placeholders with shapes; the others
# are specialized into the program and kept in the signature as constant arguments.
_CONSTANT_LEAF_TYPES = (int, float, bool, str, type(None), torch.dtype, torch.device)


@attrs.frozen
class BoundInputs:
    """Example inputs bound to forward()'s parameters."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    flat: list[Any]
    """Leaves of ``(args, kwargs)`` in pytree order: the program's user inputs."""

    in_spec: pytree.TreeSpec
    paths: list[pytree.KeyPath]
    """For each leaf, its key path rooted at the forward() parameter name it binds to:
    positional inputs by parameter name (``*args`` as ``args[i]``), keyword inputs by name,
    extra keywords (those ``**kwargs`` collects) by their own names."""

    forward_arg_names: list[str]
    labels: list[str]
    """For each leaf, how errors name it: ``args[0]``, ``kwargs['mask'][1]``."""

    named: dict[str, Any]
    """The inputs keyed by the forward() names ``paths`` are rooted at."""

    def by_name(self) -> dict[str, Any]:
        """The inputs keyed by their forward() names, nested as plain lists and dicts of their
        leaves (the shape a ``dynamic_shapes`` spec follows).  An input that holds no leaf
        (``{}``, ``[]``, ``{"a": []}``) is there as it was passed: it was given, so a spec
        may name it, as torch.export reads it."""
        entries = pytree.tree_flatten_with_path(self.named, is_leaf=_holds_no_leaves)[0]
        keyed = [(key_values(path), value) for path, value in entries]
        # containers whose children are reached by attribute (dataclasses, namedtuples)
        attribute_paths = {
            key_values(path[:i]) for path, _ in entries for i, k in enumerate(path) if isinstance(k, pytree.GetAttrKey)
        }
        return {
            name: _rebuild([(k[1:], v) for k, v in keyed if k[0] == name], {p[1:] for p in attribute_paths if p[:1] == (name,)})
            for name in dict.fromkeys(k[0] for k, _ in keyed)
        }


def key_values(path: pytree.KeyPath) -> tuple[Any, ...]:
    """A key path as plain keys: ``(MappingKey('x'), SequenceKey(0))`` -> ``('x', 0)``."""
    return tuple(_key_value(k) for k in path)


def _key_value(key: Any) -> Any:
    if isinstance(key, pytree.MappingKey):
        return key.key
    if isinstance(key, pytree.SequenceKey):
        return key.idx
    if isinstance(key, pytree.GetAttrKey):
        return key.name
    return key


class Fields(dict):
    """A container whose leaves are attributes (a dataclass or namedtuple), as a dict by field name."""


def _holds_no_leaves(value: Any) -> bool:
    """A pytree container with no leaf anywhere inside it (``{}``, ``()``, ``{"a": []}``)."""
    return not pytree.tree_is_leaf(value) and not pytree.tree_leaves(value)


class _Node(dict):
    """A container ``_rebuild`` made, as opposed to an empty one that was an input's value."""


def _rebuild(entries: list[tuple[tuple[Any, ...], Any]], attribute_paths: set[tuple[Any, ...]]) -> Any:
    """Nested lists (for runs of keys 0..n-1) and dicts holding the values at their key paths;
    containers reached through attribute keys (``attribute_paths``) are ``Fields``."""
    if len(entries) == 1 and not entries[0][0]:
        return entries[0][1]
    root = _Node()
    for path, value in entries:
        node = root
        for key in path[:-1]:
            node = node.setdefault(key, _Node())
        node[path[-1]] = value

    def to_containers(node: Any, path: tuple[Any, ...]) -> Any:
        if not isinstance(node, _Node):
            return node
        if path in attribute_paths:
            return Fields({k: to_containers(v, (*path, k)) for k, v in node.items()})
        if all(isinstance(k, int) for k in node) and sorted(node) == list(range(len(node))):
            return [to_containers(node[i], (*path, i)) for i in range(len(node))]
        return {k: to_containers(v, (*path, k)) for k, v in node.items()}

    return to_containers(root, ())


def describe_path(path: pytree.KeyPath) -> str:
    """``args[0]['a']``-style name of a leaf of ``(args, kwargs)``."""
    if not path:
        return "inputs"
    head, rest = path[0], path[1:]
    if isinstance(head, pytree.SequenceKey) and head.idx == 0:
        return "args" + pytree.keystr(rest)
    return "kwargs" + pytree.keystr(rest)


def _model_name(model: torch.nn.Module) -> str:
    return type(model).__name__


def bind_inputs(model: torch.nn.Module, args: Any, kwargs: Any) -> BoundInputs:
    """Validate ``args``/``kwargs`` for ``model.forward`` and compute each leaf's path and name."""
    if isinstance(model, type) and issubclass(model, torch.nn.Module):
        raise InputSpecError(
            f"model must be a torch.nn.Module instance, got the class {model.__name__} itself",
            hint=f"construct it first: export({model.__name__}(...), args)",
        )
    if not isinstance(model, torch.nn.Module):
        raise InputSpecError(
            f"model must be a torch.nn.Module instance, got {type(model).__name__}",
            hint="wrap a plain function in an nn.Module whose forward() calls it",
        )
    if isinstance(args, list):
        raise InputSpecError(
            "args must be a tuple of positional inputs, got a list",
            hint="pass tuple(args), or (args,) if the list is a single argument",
        )
    if isinstance(args, dict):
        raise InputSpecError(
            "args must be a tuple of positional inputs, got a dict",
            hint="pass inputs by name as kwargs=... (export(model, (), kwargs)), or positionally as args=(x, ...)",
        )
    if not isinstance(args, tuple):
        raise InputSpecError(
            f"args must be a tuple of positional inputs, got {type(args).__name__}",
            hint="for a single input x, pass args=(x,)",
        )
    # The positional inputs are the tuple's items, whatever tuple type holds them (a
    # namedtuple of arguments, say), as torch.export reads them.
    args = tuple(args)
    kwargs = {} if kwargs is None else kwargs
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise InputSpecError(
            f"kwargs must be a dict from argument name to input, got {type(kwargs).__name__}",
            hint="pass keyword inputs as kwargs={'mask': mask}",
        )

    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as e:
            params = ", ".join(signature.parameters)
            raise InputSpecError(
                f"the example inputs do not fit {_model_name(model)}.forward({params}): {e}",
                hint="give one example value per forward() argument, positional ones in args",
            ) from None

    register_module_inputs((args, kwargs))
    register_containers_in((args, kwargs))
    flat_with_paths, in_spec = pytree.tree_flatten_with_path((args, kwargs))
    flat = [leaf for _, leaf in flat_with_paths]
    for path, leaf in flat_with_paths:
        if isinstance(leaf, torch.Tensor):
            _check_tensor_leaf(path, leaf)
        elif not isinstance(leaf, _CONSTANT_LEAF_TYPES):
            raise InputSpecError(
                f"{describe_path(path)} is a {type(leaf).__module__}.{type(leaf).__qualname__}; "
                "example inputs may only hold tensors, numbers, bools, strings, None, "
                "or containers of them",
                hint=_registration_hint(leaf),
            )

    named = _named_inputs(signature, args, kwargs, len(flat))
    paths = [path for path, _ in pytree.tree_flatten_with_path(named)[0]]
    names = _forward_arg_names(signature, args, kwargs)
    labels = [describe_path(path) for path, _ in flat_with_paths]
    return BoundInputs(args, dict(kwargs), flat, in_spec, paths, names, labels, named)


def _registration_hint(leaf: Any) -> str:
    cls = type(leaf)
    name = describe_class(cls)
    if dataclasses.is_dataclass(leaf):
        return f"register the dataclass before exporting: torch.export.register_dataclass({name})"
    if hasattr(leaf, "__dict__") and holds_tensors(vars(leaf)):
        return f"register the class before exporting: exporter.register_container({name})"
    return "pass the tensors and values it holds as inputs of their own"


def _check_tensor_leaf(path: pytree.KeyPath, leaf: torch.Tensor) -> None:
    where = describe_path(path)
    if not dispatches_like_a_tensor(leaf):
        # A valid input (torch.export takes traceable subclasses), so not an input error:
        # exporter's tracer does not desugar subclasses into their inner tensors.
        raise TraceError(
            f"{where} is a tensor subclass {type(leaf).__qualname__} with its own __torch_dispatch__, "
            "which exporter cannot trace as an input",
            category=Category.UNSUPPORTED_TENSOR_SUBCLASS,
            hint=_subclass_hint(leaf),
        )
    if leaf.is_sparse or leaf.layout != torch.strided:
        raise InputSpecError(
            f"{where} has layout {leaf.layout}; only dense strided tensors can be exported",
            hint="pass tensor.to_dense()",
        )


def _subclass_hint(leaf: torch.Tensor) -> str:
    inner = ""
    if hasattr(leaf, "__tensor_flatten__"):
        names, _ = leaf.__tensor_flatten__()
        inner = f" (the tensors it holds, {', '.join(names)}, as inputs of their own)"
    return (
        f"pass a plain torch.Tensor{inner} and compute with plain tensors in forward(), or "
        "export with torch.export, which takes traceable tensor-subclass inputs"
    )


def dispatches_like_a_tensor(t: torch.Tensor) -> bool:
    """A plain tensor or parameter, or a subclass that only adds Python methods (no
    ``__torch_dispatch__`` of its own): the tracer sees its ops as a plain tensor's."""
    return type(t) in (torch.Tensor, torch.nn.Parameter) or type(t).__torch_dispatch__ is torch.Tensor.__torch_dispatch__


def _named_inputs(signature, args, kwargs, n_leaves: int) -> dict[str, Any]:
    """The inputs keyed by the forward() parameter names they bind to (``args_<i>`` for
    positional ones when forward() has no signature to bind to)."""
    if signature is not None:
        try:
            named = {**signature.bind_partial(*args).arguments, **kwargs}
        except TypeError:
            named = None
        if named is not None and len(pytree.tree_leaves(named)) == n_leaves:
            return named
    return {**{f"args_{i}": a for i, a in enumerate(args)}, **kwargs}


def _forward_arg_names(signature, args, kwargs) -> list[str]:
    names: list[str] = []
    if signature is not None:
        for name, value in signature.bind_partial(*args).arguments.items():
            if signature.parameters[name].kind == inspect.Parameter.VAR_POSITIONAL:
                names.extend(f"{name}_{i}" for i in range(len(value)))
            else:
                names.append(name)
    else:
        names.extend(f"args_{i}" for i in range(len(args)))
    names.extend(kwargs)
    return names
