"""Objects that hold tensors in their attributes (KV caches) as program inputs and outputs.

``register_container(cls)`` makes such a class a pytree container by its attributes: the ones
holding tensors are children (their tensors become program inputs or outputs, named by
path), every other attribute is part of the spec the program accepts.  transformers' cache
classes are registered when met (``register_containers_in``); the KV-caches guide has the
rules."""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from typing import Any

import torch
import torch.utils._pytree as pytree

from .._torch_internals import register_flatten_spec

__all__ = [
    "describe_class",
    "holds_tensors",
    "is_known_container",
    "leaves_with_paths",
    "register_container",
    "register_containers_in",
    "register_known_containers",
]

_PLAIN = (int, float, bool, str, bytes, type(None), torch.dtype, torch.device, torch.Size)

# Classes registered here (not by the user or by another library): their spec format is ours.
_OURS: set[type] = set()

# The base classes of transformers' caches and cache layers, looked up by name so that
# importing exporter never imports transformers.
_TRANSFORMERS_CACHE_BASES = ("Cache", "CacheLayerMixin", "LinearAttentionCacheLayerMixin", "DummyLayer")


def describe_class(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def is_known_container(cls: type) -> bool:
    """A class exporter registers by itself when it meets one: transformers' caches."""
    if not cls.__module__.startswith("transformers."):
        return False
    cache_utils = sys.modules.get("transformers.cache_utils")
    bases = tuple(b for n in _TRANSFORMERS_CACHE_BASES if isinstance(b := getattr(cache_utils, n, None), type))
    return (bool(bases) and issubclass(cls, bases)) or cls.__name__.endswith("Cache")


@dataclasses.dataclass(frozen=True)
class _Spec:
    """The context of one container object: which attributes are children, and the values
    of all the others (compared when a program checks its inputs)."""

    cls: type
    children: tuple[str, ...]
    plain: tuple[tuple[str, Any], ...]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Spec) or (self.cls, self.children) != (other.cls, other.children):
            return False
        if len(self.plain) != len(other.plain):
            return False
        return all(a[0] == b[0] and _same(a[1], b[1]) for a, b in zip(self.plain, other.plain))

    def __hash__(self) -> int:
        return hash((self.cls, self.children))


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values that cannot compare are different
        return a is b


def holds_tensors(value: Any) -> bool:
    """Whether ``value`` holds a tensor or a container object, anywhere inside it."""
    return _holds(value, set())


def _holds(value: Any, seen: set[int]) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, _PLAIN) or isinstance(value, type) or id(value) in seen:
        return False
    seen.add(id(value))
    cls = type(value)
    if cls in _OURS or is_known_container(cls):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_holds(v, seen) for v in value)
    if isinstance(value, dict):
        return any(_holds(v, seen) for v in value.values())
    if cls in pytree.SUPPORTED_NODES:
        return any(_holds(v, seen) for v in pytree.SUPPORTED_NODES[cls].flatten_fn(value)[0])
    return False


def _split(obj: Any) -> tuple[list[Any], _Spec]:
    attributes = vars(obj)
    children = tuple(sorted(name for name, value in attributes.items() if holds_tensors(value)))
    plain = tuple(sorted((name, value) for name, value in attributes.items() if name not in children))
    return [attributes[name] for name in children], _Spec(type(obj), children, plain)


def _flatten(obj: Any) -> tuple[list[Any], _Spec]:
    return _split(obj)


def _flatten_with_keys(obj: Any) -> tuple[list[tuple[pytree.KeyEntry, Any]], _Spec]:
    values, spec = _split(obj)
    return [(pytree.GetAttrKey(name), value) for name, value in zip(spec.children, values)], spec


def _fresh(value: Any) -> Any:
    """A new copy of the mutable builtins in a plain attribute (a model may update a
    flag dict in place); everything else is shared."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    if isinstance(value, set):
        return set(value)
    return value


def _unflatten(values: Any, spec: _Spec) -> Any:
    obj = spec.cls.__new__(spec.cls)
    state = {name: _fresh(value) for name, value in spec.plain}
    state.update(zip(spec.children, values))
    obj.__dict__.update(state)
    return obj


def _flatten_spec(obj: Any, treespec: pytree.TreeSpec) -> list[Any]:
    values, spec = _split(obj)
    if spec != treespec.context:
        raise ValueError(
            f"this {spec.cls.__qualname__} does not match the one the program was exported with: "
            f"{_difference(treespec.context, spec)}"
        )
    return values


def _difference(expected: _Spec, got: _Spec) -> str:
    if expected.children != got.children:
        return f"tensor attributes {list(got.children)}, expected {list(expected.children)}"
    want, have = dict(expected.plain), dict(got.plain)
    for name in sorted(set(want) | set(have)):
        if name not in have or name not in want or not _same(want[name], have[name]):
            return f"{name} is {have.get(name, '(missing)')!r}, the program was exported with {want.get(name, '(missing)')!r}"
    return "different attributes"


# --- a spec as JSON, for torch.export.save / load -------------------------------------------


def _encode(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, type):
        return {"class": f"{value.__module__}:{value.__qualname__}"}
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [_encode(v, where) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[_encode(k, where), _encode(v, where)] for k, v in value.items()]}
    raise TypeError(
        f"cannot save {where} ({type(value).__qualname__}) in a program file; "
        "only numbers, strings, dtypes, devices, classes and lists or dicts of them can be saved"
    )


def _decode(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    (kind, data), = value.items()
    if kind == "dtype":
        return getattr(torch, data)
    if kind == "device":
        return torch.device(data)
    if kind == "class":
        module, qualname = data.split(":")
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj
    if kind == "list":
        return [_decode(v) for v in data]
    if kind == "tuple":
        return tuple(_decode(v) for v in data)
    return {_decode(k): _decode(v) for k, v in data}


def _to_json(spec: _Spec) -> str:
    name = spec.cls.__qualname__
    plain = [[k, _encode(v, f"{name}.{k}")] for k, v in spec.plain]
    return json.dumps({"class": f"{spec.cls.__module__}:{spec.cls.__qualname__}", "children": list(spec.children), "plain": plain})


def _from_json(text: str) -> _Spec:
    data = json.loads(text)
    cls = _decode({"class": data["class"]})
    return _Spec(cls, tuple(data["children"]), tuple((k, _decode(v)) for k, v in data["plain"]))


# --- registration -----------------------------------------------------------------------------


def register_container(cls: type) -> type:
    """Make ``cls`` a pytree container whose tensor-holding attributes are its children.

    Call it once per class, before exporting a model that takes or returns such objects
    (and before ``torch.export.load`` of a program that does). A class already registered (by
    exporter, by its library, or by the user) is left as it is.

    Args:
        cls: a plain class whose instances keep their state in attributes (``__dict__``).

    Returns:
        ``cls`` itself, so it also works as a class decorator.

    Raises:
        TypeError: ``cls`` is not a class, or cannot be flattened by its attributes (a
            dataclass: use ``torch.export.register_dataclass``; a tuple, list or dict
            subclass, or a class without ``__dict__``: use pytree's
            ``register_pytree_node``).

    Examples:
        >>> import torch, exporter
        >>> @exporter.register_container
        ... class Boxes:
        ...     def __init__(self, xyxy, scores):
        ...         self.xyxy, self.scores = xyxy, scores
        >>> class Head(torch.nn.Module):
        ...     def forward(self, x):
        ...         return Boxes(x[:, :4], x[:, 4].sigmoid())
        >>> ep = exporter.export(Head(), (torch.randn(3, 5),))
        >>> out = ep.module()(torch.randn(3, 5))
        >>> type(out).__name__, out.xyxy.shape
        ('Boxes', torch.Size([3, 4]))
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_container takes a class, got {type(cls).__name__}")
    if cls in pytree.SUPPORTED_NODES:
        return cls
    if dataclasses.is_dataclass(cls) or issubclass(cls, (tuple, list, dict)) or not cls.__dictoffset__:
        raise TypeError(
            f"{describe_class(cls)} cannot be registered by its attributes; "
            "for a dataclass use torch.export.register_dataclass, for other containers "
            "torch.utils._pytree.register_pytree_node"
        )
    pytree.register_pytree_node(
        cls,
        _flatten,
        _unflatten,
        serialized_type_name=describe_class(cls),
        flatten_with_keys_fn=_flatten_with_keys,
        to_dumpable_context=_to_json,
        from_dumpable_context=_from_json,
    )
    register_flatten_spec(cls, _flatten_spec)
    # torch.export.save pickles the example inputs; let torch.export.load read them back
    # with weights_only=True instead of falling back (noisily) to full unpickling
    torch.serialization.add_safe_globals([cls])
    _OURS.add(cls)
    return cls


def register_known_containers() -> list[type]:
    """Register every container class exporter knows, ahead of use: transformers' cache
    classes, and (by importing the module that defines them) its model output classes.

    A process that loads a saved program taking or returning caches calls this before
    ``torch.export.load``.  Returns the classes registered now (none without transformers).
    """
    try:
        cache_utils = importlib.import_module("transformers.cache_utils")
        importlib.import_module("transformers.modeling_outputs")
    except ImportError:
        return []
    found = [
        cls for cls in vars(cache_utils).values()
        if isinstance(cls, type) and cls.__module__ == cache_utils.__name__ and is_known_container(cls)
        and cls not in pytree.SUPPORTED_NODES and cls.__dictoffset__
    ]
    for cls in found:
        register_container(cls)
    return found


def register_containers_in(tree: Any) -> None:
    """Register the class of every known container object (transformers' caches) in ``tree``,
    however deep, so that ``pytree`` flattens them into their tensors."""
    stack, seen = [tree], set()
    while stack:
        value = stack.pop()
        if isinstance(value, (torch.Tensor, *_PLAIN)) or isinstance(value, type) or id(value) in seen:
            continue
        seen.add(id(value))
        cls = type(value)
        if cls not in pytree.SUPPORTED_NODES and is_known_container(cls) and cls.__dictoffset__:
            register_container(cls)
        if cls in _OURS:
            stack.extend(vars(value).values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif cls in pytree.SUPPORTED_NODES:
            stack.extend(pytree.SUPPORTED_NODES[cls].flatten_fn(value)[0])


def leaves_with_paths(tree: Any) -> tuple[list[tuple[pytree.KeyPath, Any]], pytree.TreeSpec]:
    """``pytree.tree_flatten_with_path(tree)``; where a container was registered without key
    functions (diffusers' output classes), its leaves are numbered instead, as
    ``pytree.tree_flatten`` orders them (``[0]``, ``[1]``, ...)."""
    try:
        return pytree.tree_flatten_with_path(tree)
    except ValueError:
        leaves, spec = pytree.tree_flatten(tree)
        return [((pytree.SequenceKey(i),), leaf) for i, leaf in enumerate(leaves)], spec
