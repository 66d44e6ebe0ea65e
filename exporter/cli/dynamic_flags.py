"""``--dynamic x.0=batch:1..64`` flags -> a ``dynamic_shapes`` spec for the example inputs.

    PATH=SPEC
    PATH  := INPUT ('.' KEY)* '.' DIM       x.0, inputs.mask.1, args.0.2
    SPEC  := NAME [':' RANGE]                a named Dim; flags sharing a name share the Dim
           | INT '*' NAME [('+'|'-') INT]    a derived Dim (2*batch, 2*batch+1)
           | NAME ('+'|'-') INT              (batch+1)
           | auto | dynamic | static [':' RANGE]
           | INT                              a static size
    RANGE := [MIN] '..' [MAX]                 1..64, ..128, 8..

INPUT is the forward() parameter (or keyword) name; KEYs walk into dicts (by key) and
lists/tuples (by index); DIM is the tensor dimension.  A name's range may be given once.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch.export import Dim

from .._errors import InputSpecError, point_at

__all__ = ["dynamic_shapes_from_flags"]

_FLAG = re.compile(r"^(?P<path>[^=]+)=(?P<spec>.+)$")
_RANGE = re.compile(r"^(?P<low>\d*)\.\.(?P<high>\d*)$")
_NAMED = re.compile(r"^(?P<name>[A-Za-z_]\w*)(?::(?P<range>.*))?$")
_DERIVED = re.compile(r"^(?:(?P<k>\d+)\s*\*\s*)?(?P<name>[A-Za-z_]\w*)\s*(?:(?P<sign>[+-])\s*(?P<b>\d+))?$")
_HINTS = {"auto": Dim.AUTO, "dynamic": Dim.DYNAMIC, "static": Dim.STATIC}


def _fail(flag: str, message: str, column: int, hint: str) -> InputSpecError:
    return InputSpecError(
        f"--dynamic {flag!r}: {message}\n{point_at(flag, column)}",
        hint=hint,
    )


def _parse_range(flag: str, text: str, column: int) -> tuple[int | None, int | None]:
    match = _RANGE.match(text)
    if not match:
        raise _fail(flag, f"expected a range MIN..MAX, found {text!r}", column, "write ranges like 1..64, ..128 or 8..")
    low = int(match["low"]) if match["low"] else None
    high = int(match["high"]) if match["high"] else None
    if low is not None and high is not None and high <= low:
        raise _fail(flag, f"the range {text} is empty", column, "MAX must be larger than MIN")
    return low, high


def _path_keys(flag: str, path: str) -> list[Any]:
    parts = path.split(".")
    if len(parts) < 2 or not parts[0].isidentifier():
        raise _fail(flag, "expected INPUT.DIM (like x.0) before '='", 0, "name the forward() input, then the dimension: x.0=batch")
    if not parts[-1].isdigit():
        column = len(path) - len(parts[-1])
        raise _fail(flag, f"the last part of the path must be a dimension index, found {parts[-1]!r}", column,
                    "end the path with the dimension: x.1=seq")
    return [parts[0], *(int(p) if p.isdigit() else p for p in parts[1:-1]), int(parts[-1])]


def _parse_spec(flag: str, spec: str, column: int, dims: dict[str, Dim], ranges: dict[str, tuple]) -> Any:
    text = spec.strip()
    head, _, tail = text.partition(":")
    if head.lower() in _HINTS:
        hint = _HINTS[head.lower()]
        if tail:
            if hint is Dim.STATIC:
                raise _fail(flag, "static takes no range", column + len(head), "drop the range")
            low, high = _parse_range(flag, tail, column + len(head) + 1)
            return hint(min=low, max=high)
        return hint
    if text.isdigit():
        return int(text)
    named = _NAMED.match(text)
    if named:
        name = named["name"]
        low = high = None
        if named["range"] is not None:
            low, high = _parse_range(flag, named["range"], column + len(name) + 1)
            if name in ranges and ranges[name] != (low, high):
                raise _fail(flag, f"{name} was given another range before ({_text(*ranges[name])})", column,
                            f"give {name}'s range once")
            ranges[name] = (low, high)
        return _named(name, dims, ranges)
    derived = _DERIVED.match(text)
    if derived and (derived["k"] or derived["sign"]):
        dim: Any = _named(derived["name"], dims, ranges)
        if derived["k"]:
            dim = int(derived["k"]) * dim
        if derived["sign"]:
            dim = dim + int(derived["b"]) if derived["sign"] == "+" else dim - int(derived["b"])
        return dim
    raise _fail(flag, f"cannot read {text!r} as a dimension spec", column,
                "use NAME, NAME:MIN..MAX, 2*NAME, NAME+1, auto, dynamic, static or a size")


def _text(low, high) -> str:
    return f"{low if low is not None else ''}..{high if high is not None else ''}"


def _named(name: str, dims: dict[str, Dim], ranges: dict[str, tuple]) -> Dim:
    if name not in dims:
        low, high = ranges.get(name, (None, None))
        dims[name] = Dim(name, min=low, max=high)
    return dims[name]


def _structure_like(value: Any, tree: Any) -> Any:
    """Shape the nested dict ``tree`` (built from flag paths) like the input ``value``:
    lists and tuples become lists, with None where no flag reached."""
    if isinstance(value, torch.Tensor):
        return tree
    if isinstance(value, (list, tuple)):
        return [_structure_like(v, tree.get(i)) if isinstance(tree, dict) else None for i, v in enumerate(value)]
    if isinstance(value, dict) and isinstance(tree, dict):
        return {k: _structure_like(value[k], v) if k in value else v for k, v in tree.items()}
    return tree


def dynamic_shapes_from_flags(flags: list[str], inputs: dict[str, Any]) -> dict[str, Any]:
    """The ``dynamic_shapes`` dict the flags describe; ``inputs`` maps forward() names to example values.

    The first range given for a name wins for all its uses, wherever it appears.
    """
    dims: dict[str, Dim] = {}
    ranges: dict[str, tuple] = {}
    # Ranges first, so a name used before its range is given still gets it.
    parsed = []
    for flag in flags:
        match = _FLAG.match(flag)
        if not match:
            raise _fail(flag, "expected PATH=SPEC", len(flag), "write --dynamic x.0=batch:1..64")
        named = _NAMED.match(match["spec"].strip())
        if named and named["range"] is not None and named["name"].lower() not in _HINTS:
            low, high = _parse_range(flag, named["range"], len(match["path"]) + 2 + len(named["name"]))
            if named["name"] in ranges and ranges[named["name"]] != (low, high):
                raise _fail(flag, f"{named['name']} was given another range before ({_text(*ranges[named['name']])})",
                            len(match["path"]) + 1, f"give {named['name']}'s range once")
            ranges[named["name"]] = (low, high)
        parsed.append((flag, match))
    tree: dict[str, Any] = {}
    for flag, match in parsed:
        keys = _path_keys(flag, match["path"])
        if keys[0] not in inputs:
            raise _fail(flag, f"forward() was given no input named {keys[0]!r}", 0,
                        f"the inputs are: {', '.join(inputs)}")
        value = _parse_spec(flag, match["spec"], len(match["path"]) + 1, dims, ranges)
        node = tree
        for key in keys[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise _fail(flag, "this path was already given a dimension spec", 0, "give each dimension once")
        if keys[-1] in node:
            raise _fail(flag, f"{match['path']} is given twice", 0, "give each dimension once")
        node[keys[-1]] = value
    return {name: _structure_like(inputs[name], spec) if name in inputs else spec for name, spec in tree.items()}
