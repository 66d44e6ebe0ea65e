"""Python-level operations rewritten as torch calls that keep symbolic sizes symbolic:
``max``/``min``, ``math.pow``, indexing a tensor with a size, and ``torch.tensor`` of sizes,
where plain Python would read a size's example value and add a guard.  Each replacement is
made from the function it replaces and falls back to it for anything else; ``patches``
installs them in the tracing thread."""

from __future__ import annotations

import builtins
import functools
import io
import tokenize
from typing import Any

import torch

from .._torch_internals import free_unbacked_symbols, symbolic_tensor, traced_fake

__all__ = [
    "SymbolicInt",
    "SymbolicRange",
    "builtin_len",
    "builtin_max",
    "builtin_min",
    "int_shadows_safely",
    "list_cat",
    "list_stack",
    "power",
    "tensor_factory",
    "tensor_getitem",
    "tensor_setitem",
    "tensor_iter",
]

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _min_max(*args, real, tensor_op, sym_op, clamp_key, **kwargs):
    if len(args) == 1 and not kwargs and not isinstance(args[0], torch.Tensor):
        items = list(args[0])
        if not items:
            return real(*args, **kwargs)
        return functools.reduce(
            lambda a, b: _min_max(a, b, real=real, tensor_op=tensor_op, sym_op=sym_op, clamp_key=clamp_key), items
        )
    if len(args) != 2 or kwargs:
        return real(*args, **kwargs)
    a, b = args
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return tensor_op(a, b)
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        tensor, other = (a, b) if isinstance(a, torch.Tensor) else (b, a)
        if isinstance(other, (int, float)):
            return torch.clamp(tensor, **{clamp_key: other})
        return real(a, b)
    if isinstance(a, _SYMBOLIC) or isinstance(b, _SYMBOLIC):
        return sym_op(a, b)
    return real(a, b)


def _is_data_valued_index(item: Any) -> bool:
    """A 0-d integer tensor whose value only the data decides (an item of ``nonzero``'s
    result): Python indexing would read its value as an int."""
    if not isinstance(item, torch.Tensor) or item.dim() != 0 or item.dtype.is_floating_point or item.dtype.is_complex:
        return False
    fake = traced_fake(item)
    return fake is not None and item.dtype != torch.bool and fake.constant is None


def _select_at(x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """``x[..., index]`` for a 0-d integer tensor ``index`` at ``dim``, as eager computes it (a
    copy, a negative index counting from the end), without reading the index's value."""
    size = x.shape[dim]
    wrapped = torch.where(index < 0, index + size, index)
    return x.index_select(dim, wrapped.reshape(1)).squeeze(dim)


def _is_symbolic_index(item: Any) -> bool:
    if isinstance(item, torch.SymInt) or _is_data_valued_index(item):
        return True
    if isinstance(item, slice):
        return any(isinstance(v, torch.SymInt) or _is_data_valued_index(v) for v in (item.start, item.stop, item.step))
    return False


def _bound(value: Any) -> Any:
    """A slice bound: a 0-d integer tensor the data decides is read as a symbolic int, as
    Python's ``__index__`` reads it in eager."""
    return value.item() if _is_data_valued_index(value) else value


def _without_ellipsis(t: torch.Tensor, items: list[Any]) -> list[Any] | None:
    """``items`` with an ``...`` replaced by the whole slices it stands for in ``t`` (``None``
    items take no dim of ``t``); None where there are two."""
    if not any(i is Ellipsis for i in items):
        return items
    at = items.index(Ellipsis)
    if any(i is Ellipsis for i in items[at + 1 :]):
        return None
    fill = t.dim() - sum(1 for i in items if i is not None and i is not Ellipsis)
    return items[:at] + [slice(None)] * fill + items[at + 1 :]


def _index_steps(t: torch.Tensor, items: list[Any]):
    """select / slice / unsqueeze calls equivalent to ``t[items]``, or None if not plain."""
    items = _without_ellipsis(t, items)
    if items is None:
        return None
    steps, dim = [], 0
    for item in items:
        if item is None:
            steps.append((torch.unsqueeze, (dim,)))
            dim += 1
        elif isinstance(item, (int, torch.SymInt)) and not isinstance(item, bool):
            steps.append((torch.select, (dim, item)))
        elif _is_data_valued_index(item):
            steps.append((_select_at, (dim, item)))
        elif isinstance(item, slice):
            if item.start is None and item.stop is None and item.step in (None, 1):
                dim += 1
                continue
            steps.append((
                lambda x, d, a, b, c: torch.ops.aten.slice(x, d, a, b, c),
                (dim, _bound(item.start), _bound(item.stop), _bound(item.step) or 1),
            ))
            dim += 1
        else:
            return None
    return steps


def tensor_getitem(real):
    """``Tensor.__getitem__`` that indexes with sizes through ``select`` / ``slice`` /
    ``unsqueeze``; any other index goes to ``real``."""

    def getitem(self, index):
        items = list(index) if isinstance(index, tuple) else [index]
        if any(_is_symbolic_index(i) for i in items):
            steps = _index_steps(self, items)
            if steps is not None:
                out = self
                for op, op_args in steps:
                    out = op(out, *op_args)
                return out
        return real(self, index)

    return getitem


def _put_steps(t: torch.Tensor, items: list[Any]) -> tuple[tuple[Any, ...], list[Any], list[int], list[torch.Tensor]] | None:
    """For ``t[items] = value`` where some items are 0-d integer tensors the data decides:
    the basic index the other items give (each such tensor replaced by ``slice(None)``),
    the shape of the view it selects, the dims of that view the tensors index, and the
    tensors, each as a 1-element index; None for any other index."""
    items = _without_ellipsis(t, items)
    if items is None or len(items) > t.dim():
        return None
    basic, shape, dims, indices = [], [], [], []
    for size, item in zip(t.shape, items):
        if _is_data_valued_index(item):
            basic.append(slice(None))
            dims.append(len(shape))
            shape.append(size)
            indices.append(item.long().reshape(1))
        elif isinstance(item, (int, torch.SymInt)) and not isinstance(item, bool):
            basic.append(item)
        elif isinstance(item, slice):
            basic.append(item)
            if item.start is None and item.stop is None and item.step in (None, 1):
                shape.append(size)
            elif all(type(v) in (int, type(None)) for v in (size, item.start, item.stop, item.step)):
                shape.append(len(range(*item.indices(size))))
            else:
                return None
        else:
            return None
    shape.extend(t.shape[len(items) :])
    return tuple(basic), shape, dims, indices


def tensor_setitem(real):
    """``Tensor.__setitem__`` that writes at a 0-d integer tensor the data decides (``out[i] =
    v`` for ``i`` an item of ``nonzero`` or ``unique``) with ``index_put_``, where Python
    indexing would read the index's value; any other index goes to ``real``."""

    def setitem(self, index, value):
        items = list(index) if isinstance(index, tuple) else [index]
        found = _put_steps(self, items) if any(_is_data_valued_index(i) for i in items) else None
        if found is None:
            return real(self, index, value)
        basic, shape, dims, indices = found
        # what eager assigns into: the view without the indexed dims, to which value broadcasts
        kept = [size for d, size in enumerate(shape) if d not in dims]
        value = value if isinstance(value, torch.Tensor) else torch.scalar_tensor(value, dtype=self.dtype)
        while value.dim() > len(kept) and value.shape[0] == 1:  # as eager: leading ones dropped
            value = value.squeeze(0)
        value = torch.broadcast_to(value.to(self.dtype), kept)
        # indexed dims side by side become one dim of size 1 in their place, else in front
        adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
        value = value.unsqueeze(dims[0] if adjacent else 0)
        positions = dict(zip(dims, indices))
        # the view is made last, just before the write: once the tensor has been written
        # through a view, functionalization makes a new view only where it is written to,
        # so each step of a loop makes its ops in one order
        whole = all(isinstance(i, slice) and i == slice(None) for i in basic)
        target = self if whole else self[basic]
        torch.ops.aten.index_put_.default(target, [positions.get(d) for d in range(max(dims) + 1)], value)

    return setitem


def tensor_factory(real):
    """``torch.tensor`` that records symbolic values instead of reading their example values."""

    def tensor(data, *args, **kwargs):
        if any(isinstance(v, _SYMBOLIC) for v in _leaves(data)):
            return symbolic_tensor(data, *args, **kwargs)
        return real(data, *args, **kwargs)

    return tensor


def _leaves(value: Any):
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def _plain(value: Any) -> bool:
    return type(value) in (int, float, bool)


def _symbolic_min_max(real, tensor_op, sym_op, clamp_key):
    def min_max(*args, **kwargs):
        # Plain numbers are by far the most common case (torch's own shape code): skip the rest.
        if not kwargs and len(args) == 2 and _plain(args[0]) and _plain(args[1]):
            return real(*args)
        if not kwargs and len(args) == 1 and type(args[0]) in (list, tuple) and all(map(_plain, args[0])):
            return real(*args)
        return _min_max(*args, real=real, tensor_op=tensor_op, sym_op=sym_op, clamp_key=clamp_key, **kwargs)

    return min_max


def builtin_max(real):
    """``max`` that keeps tensors and sizes symbolic, falling back to ``real`` otherwise."""
    return _symbolic_min_max(real, torch.maximum, torch.sym_max, "min")


def builtin_min(real):
    """``min`` that keeps tensors and sizes symbolic, falling back to ``real`` otherwise."""
    return _symbolic_min_max(real, torch.minimum, torch.sym_min, "max")


def builtin_len(real):
    """``len`` that gives a tensor's first size as it is where only the data decides it
    (``len(boxes)`` after ``nonzero``, a count of selected tokens): a symbolic size, which
    the rest of forward computes with as with ``boxes.shape[0]``, where Python's ``len``
    must return a plain int and would need the size's value.  Anything else is ``real``'s.

    Python's ``len`` is called throughout torch's own code, so this one is installed only
    for the traces of a forward that needed it (``tracer.run``)."""

    def length(obj, /):
        sized = getattr(type(obj), "__data_sized_len__", None)  # a list a captured loop built
        if sized is not None:
            return sized(obj)
        if isinstance(obj, torch.Tensor) and obj.dim() > 0:
            size = obj.shape[0]
            if isinstance(size, torch.SymInt) and free_unbacked_symbols(size):
                return size
        return real(obj)

    return length


def list_stack(real):
    """``torch.stack`` that hands a list a captured loop built (``branches/lists.py``) to the
    list, which stacks its buffer's filled part; anything else is ``real``'s."""

    def stack(*args, **kwargs):
        tensors = args[0] if args else kwargs.get("tensors")
        own = getattr(type(tensors), "__torch_stack__", None)
        if own is not None:
            return own(tensors, *args[1:], **{k: v for k, v in kwargs.items() if k != "tensors"})
        return real(*args, **kwargs)

    return stack


def list_cat(real):
    """``torch.cat`` (and ``concat``, ``concatenate``) as ``list_stack`` is ``torch.stack``."""

    def cat(*args, **kwargs):
        tensors = args[0] if args else kwargs.get("tensors")
        own = getattr(type(tensors), "__torch_cat__", None)
        if own is not None:
            rest = {("dim" if k == "axis" else k): v for k, v in kwargs.items() if k != "tensors"}
            return own(tensors, *args[1:], **rest)
        return real(*args, **kwargs)

    return cat


def tensor_iter(real):
    """``Tensor.__iter__`` that hands a loop over a tensor whose length only the data decides
    (``for class_id in torch.unique(idxs):``) to the trace's branch capture, which goes round
    it as a ``torch.while_loop`` does (``branches/loops.py``); anything else is ``real``'s."""

    def iterate(self):
        if self.dim() > 0:
            size = self.shape[0]
            if isinstance(size, torch.SymInt) and free_unbacked_symbols(size):
                decider = getattr(size.node.shape_env, "decider", None)
                loop = decider.loop(self) if decider is not None else None
                if loop is not None:
                    return loop
        return real(self)

    return iterate


def power(real):
    """``math.pow`` that computes with symbolic numbers instead of reading their values;
    on plain numbers it is ``real``, so the result is the same float eager Python gives."""

    def pow_(x, y):
        if isinstance(x, _SYMBOLIC) or isinstance(y, _SYMBOLIC):
            return torch.sym_float(x) ** y
        return real(x, y)

    return pow_


class _RangeKind(type):
    """``isinstance`` and ``issubclass`` against ``SymbolicRange`` answer as against ``range``."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, builtins.range)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, builtins.range)


class SymbolicRange(metaclass=_RangeKind):
    """``range`` in a module of the model whose ``for`` statements go over a number of steps
    only the data decides (``for i in range(len(boxes)):``): ``range(stop)`` or ``range(start,
    stop)`` of such a number is a loop the trace's branch capture goes round as a
    ``torch.while_loop`` does, each step's number an item of ``torch.arange`` of that length,
    symbolic; any other range is Python's."""

    def __new__(cls, *args: Any) -> Any:
        if len(args) in (1, 2) and any(isinstance(a, torch.SymInt) and free_unbacked_symbols(a) for a in args):
            start, stop = (0, args[0]) if len(args) == 1 else args
            if all(isinstance(a, (builtins.int, torch.SymInt)) for a in (start, stop)):
                return _DataRange(start, stop)
        return builtins.range(*args)


class _DataRange:
    """``range(start, stop)`` of a number only the data decides (``SymbolicRange``)."""

    def __init__(self, start: Any, stop: Any) -> None:
        self.start, self.stop = start, stop

    def __iter__(self) -> Any:
        length = torch.sym_max(self.stop - self.start, 0)
        shape_env = next(a.node.shape_env for a in (self.start, self.stop) if isinstance(a, torch.SymInt))
        decider = getattr(shape_env, "decider", None)
        # the positions of a mask of that many ones: 0, 1, ... as arange gives them, of a length
        # that is a size of its own (a loop's carried buffers are sized by it, and a cond in
        # its steps hands them on with such sizes, not with ``Max(0, stop - start)``)
        steps = torch.ones(length, dtype=torch.bool).nonzero()[:, 0]
        start = self.start
        loop = decider.loop(steps, convert=lambda item: start + item.item()) if decider is not None else None
        if loop is None:
            return iter(builtins.range(self.start, self.stop))  # needs the values: fails as Python's would
        return loop


class _IntKind(type):
    """``isinstance`` and ``issubclass`` against ``SymbolicInt`` answer as against ``int``."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, builtins.int)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, builtins.int)


class SymbolicInt(builtins.int, metaclass=_IntKind):
    """The name ``int`` in a module whose forward takes ``int()`` of a value only the data
    decides (``max_length = int(torch.max(lengths).item())``): that value stays symbolic, as
    ``.item()`` gave it, where Python's ``int`` must return a plain number and would need its
    value.  A one-element tensor is read with ``.item()`` first, a symbolic float truncated as
    ``int`` truncates; anything else is Python's ``int``, so calls outside a trace and on
    plain values give what they always give.

    Installed in that module's globals only (``int_shadows_safely`` says which may take it),
    for the traces of an export that needed it (``tracer.run``)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs:
            value = args[0]
            if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
                value = value.item()
            if isinstance(value, torch.SymInt) and free_unbacked_symbols(value):
                return value
            if isinstance(value, torch.SymFloat) and free_unbacked_symbols(value):
                return torch.sym_int(value)
            return builtins.int(value)
        return builtins.int(*args, **kwargs)


def int_shadows_safely(source: str) -> bool:
    """Whether a module's ``source`` uses the name ``int`` only in ways ``SymbolicInt`` keeps:
    calls (``int(x)``), ``isinstance``/``issubclass`` tests and annotations.  Where it
    compares the type itself (``type(x) is int``, ``dtype=int``, ``type(x) in (int, float)``),
    another class under that name would change what the module does."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
                  if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                                    tokenize.DEDENT, tokenize.STRING)]
    except (tokenize.TokenError, SyntaxError):
        return False
    opened: list[tuple[str, str]] = []  # (bracket, the name before it)
    for k, token in enumerate(tokens):
        before = tokens[k - 1] if k else None
        if token.type == tokenize.OP and token.string in "([{":
            opened.append((token.string, before.string if before is not None and before.type == tokenize.NAME else ""))
        elif token.type == tokenize.OP and token.string in ")]}":
            if opened:
                opened.pop()
        elif token.type == tokenize.NAME and token.string == "int":
            after = tokens[k + 1] if k + 1 < len(tokens) else None
            if before is not None and before.type == tokenize.OP and before.string == ".":
                continue  # an attribute named int (np.int, self.int)
            if after is not None and after.string == "(":
                continue  # a call
            inner = opened[-1] if opened else None
            tested = next((name for bracket, name in reversed(opened) if bracket != "(" or name), "")  # past tuples
            if inner is not None and (inner[0] == "[" or tested in ("isinstance", "issubclass")):
                continue  # a subscript (List[int]) or a type test
            if before is not None and before.string in (":", "->") and (inner is None or inner[0] == "("):
                continue  # an annotation
            return False
    return True
