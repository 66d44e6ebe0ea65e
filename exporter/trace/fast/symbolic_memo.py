"""Fake results on symbolic sizes, served again within one trace (and, when asked, in later
traces): a fast path.

With symbolic sizes the fake-tensor cache is off, so every op of a dynamic trace runs its fake
kernel, though a model repeats the same calls on the same sizes layer after layer.
``SymbolicMemo`` serves such a repeat fresh fake results laid out as the first call's, only
where nothing the kernel reads can differ; ``memory_formats_remembered`` does the same for
make_fx's ``tensor_meta``.  The rules are on the design page ("The fast paths")."""

from __future__ import annotations

import functools
import itertools
import logging
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.utils._pytree as pytree

from ..._torch_internals import (
    is_view,
    schema_of,
    FakeTensor,
    FakeTensorMode,
    OpOverload,
    free_unbacked_symbols,
    has_effects,
    is_builtin_op,
    raw_expr,
)
from ..._torch_internals.fast import (
    storage_key,
    fake_empty,
    fake_flat_restrided,
    fake_empty_strided,
    fake_view_of,
    fresh_symint,
    lazily_known,
    shape_env_facts,
    shape_env_version,
    symint_of,
    tensor_metadata_with,
)

__all__ = [
    "SymbolicMemo", "checked", "forget_shared", "layouts_of", "memo_key", "memoizable", "memory_formats_remembered",
    "remade", "share_across_traces", "unchecked_layouts",
]

log = logging.getLogger(__name__)

_NOT_SERVED = frozenset({torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape, torch.Tag.inplace_view})
_UNSEEN = object()


def memoizable(func: OpOverload) -> bool:
    """Ops whose fake results a memo may serve: built-in, writing nothing, with no side
    effect, returning one or more plain tensors (a view: one), of no data-dependent size."""
    schema = schema_of(func)
    if schema.is_mutable or not schema.returns or any(str(r.type) != "Tensor" for r in schema.returns):
        return False
    if func.is_view and len(schema.returns) != 1:
        return False
    return not (_NOT_SERVED & set(func.tags)) and is_builtin_op(func) and not has_effects(func)


class _NoKey(Exception):
    pass


def _size_key(value, sizes: list | None = None):
    """A size as the key holds it; a symbolic one is also appended to ``sizes``."""
    if type(value) is int:
        return value
    if isinstance(value, torch.SymInt):
        expr = value.node.expr
        if not _data_dependent(expr):
            if sizes is not None:
                sizes.append(value)
            return ("s", expr)
    raise _NoKey


@functools.lru_cache(maxsize=4096)
def _data_dependent(expr) -> bool:
    """Whether a size expression has a data-dependent symbol (a model's sizes repeat the same
    few expressions; each answer is a walk over the expression)."""
    return bool(free_unbacked_symbols(expr))


def _arg_key(value, sizes: list):
    if isinstance(value, torch.Tensor):
        if (
            type(value) is not FakeTensor  # a real tensor: its values may decide the result
            or value.layout is not torch.strided
            or value.is_conj()
            or value.is_neg()
            or value.is_quantized
            or value.constant is not None
        ):
            raise _NoKey
        return (
            "t",
            type(value),
            tuple(_size_key(n, sizes) for n in value.shape),
            tuple(_size_key(n, sizes) for n in value.stride()),
            _size_key(value.storage_offset(), sizes),
            # a kernel may return the tensor's own (cached) element count as a size
            _size_key(value.numel(), sizes),
            _size_key(value.untyped_storage().nbytes()),  # what a bounds check reads
            value.dtype,
            value.device,
            value.requires_grad,
            value.is_inference(),
        )
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_arg_key(v, sizes) for v in value))
    if isinstance(value, torch.SymInt):
        return ("sym", _size_key(value, sizes))
    if isinstance(value, (torch.SymFloat, torch.SymBool)):
        if free_unbacked_symbols(value):
            raise _NoKey
        return ("sym", type(value).__name__, value.node.expr)
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return (type(value).__name__, value)
    raise _NoKey


def _settings_key() -> tuple:
    """The global settings a kernel or decomposition may read: the attention backends
    enabled (``sdpa_kernel``), deterministic algorithms, the default dtype, inference mode."""
    cuda = torch.backends.cuda
    return (
        cuda.flash_sdp_enabled(),
        cuda.math_sdp_enabled(),
        cuda.mem_efficient_sdp_enabled(),
        cuda.cudnn_sdp_enabled(),
        torch.are_deterministic_algorithms_enabled(),
        torch.get_default_dtype(),
        torch.is_inference_mode_enabled(),
    )


def memo_key(op: OpOverload, args: tuple, kwargs: dict) -> tuple[tuple, list[torch.SymInt]] | None:
    """What a call's fake result depends on, and the symbolic sizes its arguments carry in
    the key's order (keyword arguments by name); None when the result may depend on more.

    The key also says which of those sizes are one object: make_fx gives each size object
    the graph value of the first tensor it met it in, and a kernel returns one of its
    arguments' size objects, so a call whose arguments share size objects differently may
    make a graph that reads its sizes from elsewhere."""
    sizes: list[torch.SymInt] = []
    try:
        key = (op, _settings_key(), _arg_key(args, sizes), tuple((k, _arg_key(v, sizes)) for k, v in sorted(kwargs.items())))
    except _NoKey:
        return None
    first: dict[int, int] = {}
    return (*key, tuple(first.setdefault(id(n.node), i) for i, n in enumerate(sizes))), sizes


def _layouts(out, sizes: list, args: tuple, kwargs: dict, view_of: int | None, flat: bool) -> tuple | None:
    """How to make ``out`` (a tensor or a tuple of them) again: per output its sizes,
    strides, dtype, device, and either its storage offset (``view_of``: the one output of a
    view, over argument ``view_of``'s storage) or, with ``flat``, its number of elements
    (fresh storage of that many elements, as ``empty`` makes it).  None unless every output
    is a plain tensor of no data-dependent size, fresh ones with storage of their own at
    offset 0.  A symbolic size is kept as the position of the argument size it is (the same
    object: make_fx tracks each size object once) or as a size to copy."""
    outputs = out if isinstance(out, tuple) else (out,)
    inputs = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    storages = {storage_key(t) for t in inputs}
    positions = {}
    for i, size in enumerate(sizes):
        positions.setdefault(id(size.node), i)

    def recipe(n):
        if isinstance(n, torch.SymInt):
            position = positions.get(id(n.node))
            return ("argument", position) if position is not None else ("copy", n)
        return n

    layouts = []
    for t in outputs:
        # (no data-dependent size: ``layouts_of`` described every output first)
        if not isinstance(t, torch.Tensor) or is_view(t) or t.requires_grad or t.layout is not torch.strided:
            return None
        if view_of is None:
            if storage_key(t) in storages or _size_key(t.storage_offset()) != 0:
                return None
            where = ("flat", recipe(t.numel())) if flat else ("strided", None)
        else:
            where = ("view", recipe(t.storage_offset()))
        layouts.append((tuple(map(recipe, t.shape)), tuple(map(recipe, t.stride())), t.dtype, t.device, where, False))
    return (isinstance(out, tuple), tuple(layouts), view_of)


def remade(layouts: tuple, sizes: list, args: tuple, fake_mode: FakeTensorMode):
    """Fresh fake outputs of ``fake_mode`` laid out as ``layouts`` says (see
    ``layouts_of``), on this call's argument sizes (``sizes``, from ``memo_key``)."""
    is_tuple, parts, view_of = layouts
    copies: dict[int, torch.SymInt] = {}  # one per size object, as the first call had

    def size(n):
        if not isinstance(n, tuple):
            return n
        kind, value = n
        if kind == "argument":
            return sizes[value]
        which = id(value.node) if kind == "copy" else id(value)
        copy = copies.get(which)
        if copy is None:
            if kind == "copy":
                copy = fresh_symint(value)
            else:  # "new": an expression and its hint, from an earlier trace
                copy = symint_of(fake_mode.shape_env, *value)
            copies[which] = copy
        return copy

    made = []
    for shape, stride, dtype, device, (kind, value), counted in parts:
        shape, stride = tuple(map(size, shape)), tuple(map(size, stride))
        if kind == "view":
            made.append(fake_view_of(fake_mode, args[view_of], shape, stride, size(value), dtype, device, False))
        elif kind == "flat":
            made.append(fake_flat_restrided(fake_mode, size(value), shape, stride, dtype, device))
        elif kind == "contiguous":
            made.append(fake_empty(fake_mode, shape, dtype, device))
        else:
            made.append(fake_empty_strided(fake_mode, shape, stride, dtype, device, False))
        if counted:  # as the kernel's result did: worked out here, below make_fx, not traced
            made[-1].numel()
    return tuple(made) if is_tuple else made[0]


def _description(t: torch.Tensor, sizes: list) -> tuple:
    """Everything about a fake tensor a remade result must match, sizes as expressions, and
    which of its sizes and strides are one object, or one of the call's argument sizes
    (``sizes``): make_fx reads each size object once, from the first tensor it met it in."""
    positions: dict[int, int] = {}
    for i, n in enumerate(sizes):
        positions.setdefault(id(n.node), i)
    objects = [n for n in (*t.shape, *t.stride()) if isinstance(n, torch.SymInt)]
    first: dict[int, int] = {}
    sharing = tuple(
        ("argument", positions[id(n.node)]) if id(n.node) in positions else ("own", first.setdefault(id(n.node), i))
        for i, n in enumerate(objects)
    )
    return (
        sharing,
        tuple(_size_key(n) for n in t.shape),
        tuple(_size_key(n) for n in t.stride()),
        _size_key(t.storage_offset()),
        _size_key(t.untyped_storage().nbytes()),
        t.dtype, t.device, type(t), t.requires_grad, t.is_inference(), is_view(t),
        # which answers it already holds: one that does not makes make_fx record the
        # arithmetic when the model asks, and the program's node names move
        lazily_known(t),
    )


class _Unchecked(NamedTuple):
    """A layout not yet remade: ``layouts`` (results with storage of their own made as
    ``empty`` makes a flat tensor, restrided; should that not describe the kernel's results,
    as ``empty(shape)`` makes them, else as ``empty_strided`` does) and the description
    (``_description``) of what the kernel returned."""

    layouts: tuple
    described: list


def unchecked_layouts(out, sizes: list, args: tuple, kwargs: dict, fake_mode: FakeTensorMode) -> _Unchecked | None:
    """How ``remade`` may make ``out``, the fake result of a call on ``args`` and ``kwargs``,
    again on a later call's arguments, to be checked against what the kernel returned when
    first remade (``checked``); None when no layout can make it.

    One output over the storage of the call's one tensor argument is made over that
    argument's storage (what a view op returns, and an op whose kernel returns a view
    without saying so, such as ``_unsafe_view``); other outputs need storage of their own."""
    outputs = out if isinstance(out, tuple) else (out,)
    if any(type(o) is not FakeTensor or o.fake_mode is not fake_mode or o.constant is not None for o in outputs):
        return None
    try:
        described = [_description(o, sizes) for o in outputs]
    except _NoKey:  # a data-dependent size
        return None
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    view_of = None
    if (
        len(tensors) == 1
        and len(outputs) == 1
        and not any(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(kwargs))
        and storage_key(outputs[0]) == storage_key(args[tensors[0]])
    ):
        view_of = tensors[0]
    layouts = _layouts(out, sizes, args, kwargs, view_of, view_of is None)
    return None if layouts is None else _Unchecked(layouts, described)


def checked(unchecked: _Unchecked, sizes: list, args: tuple, fake_mode: FakeTensorMode) -> tuple[tuple, Any] | None:
    """A layout for each output of ``unchecked`` whose result, remade on this call's
    arguments (a call of the same key), describes exactly what the kernel returned, down to
    the expression of the storage's size and whether its element count is held; with those
    results.  None if some output has none.

    Tried per output, in order: storage as recorded (a view's, or as ``empty`` makes a flat
    tensor, restrided), then as ``empty(shape)`` makes it, then as ``empty_strided`` does;
    each also with its element count worked out when made, as a kernel that read it (to
    size its storage, say) leaves it held."""
    is_tuple, parts, view_of = unchecked.layouts
    kinds = [None] if view_of is not None else [None, "contiguous", "strided"]
    chosen: list = [None] * len(parts)
    for kind, counted in itertools.product(kinds, (False, True)):
        if counted and not any(d[-1][0] == "" for d in unchecked.described):
            continue
        ways = tuple((*part[:4], part[4] if kind is None else (kind, None), counted) for part in parts)
        made = remade((is_tuple, ways, view_of), sizes, args, fake_mode)
        for i, (result, described) in enumerate(zip(made if is_tuple else (made,), unchecked.described)):
            if chosen[i] is None and _description(result, sizes) == described:
                chosen[i] = ways[i]
        if None not in chosen:
            break
    else:
        return None
    layouts = (is_tuple, tuple(chosen), view_of)
    if any(c is not w for c, w in zip(chosen, ways)):  # made different ways: once more, together
        made = remade(layouts, sizes, args, fake_mode)
        if [_description(r, sizes) for r in (made if is_tuple else (made,))] != unchecked.described:
            return None
    return layouts, made


def layouts_of(out, sizes: list, args: tuple, kwargs: dict, fake_mode: FakeTensorMode) -> tuple | None:
    """How ``remade`` makes ``out``, the fake result of a call on ``args`` and ``kwargs``,
    again on a later call's arguments, checked on this call's; None when it cannot make
    exactly the same (``unchecked_layouts`` then ``checked``)."""
    unchecked = unchecked_layouts(out, sizes, args, kwargs, fake_mode)
    found = checked(unchecked, sizes, args, fake_mode) if unchecked is not None else None
    return None if found is None else found[0]


_SHARED: dict[tuple, tuple] = {}
"""Layouts later traces may use: ``(facts, kernels, key)`` -> layouts, where ``facts`` numbers (in
``_FACTS``) everything the ShapeEnv knew when the kernel ran, and the kernel taught it
nothing new (with ``kernels``, the kernels the trace installed).  A call on the same expressions in a ShapeEnv that knows exactly the same
would make the same results by the same reasoning, and learn nothing either."""

_FACTS: dict[tuple, int] = {}
"""Each ShapeEnv state met (``shape_env_facts``) and its number.  Numbers are never given
twice, also after ``forget_shared``: a trace still running keeps the one it was given."""

_NUMBERS = itertools.count()

_SHARED_LIMIT = 20_000
"""Entries kept before the shared memo starts over: a few hundred bytes each."""

_FACTS_LIMIT = 5_000
"""ShapeEnv states kept before they and the shared memo start over (each holds the
ShapeEnv's guards and ranges as they were: an export meets a few dozen)."""


_SHARING = False
"""Whether traces share layouts (``share_across_traces``); off unless asked for."""


def share_across_traces(enabled: bool = True) -> None:
    """Let later dynamic traces in this process be served what earlier ones computed (see
    the module doc).  Off by default: a served result can hold fewer of the answers torch
    works out lazily (element count, contiguity) than the kernel's result held, directly
    or through a composite whose parts were served, and make_fx then records the model's
    own questions as graph nodes that are later removed.  The program computes the same,
    but its node names, output names in the signature included, would depend on what the
    process exported before: a re-export could read as drift.  For a process that
    re-exports the same architectures and compares programs by structure (not names)."""
    global _SHARING
    _SHARING = enabled
    if not enabled:
        forget_shared()


def forget_shared() -> None:
    """Empty what traces share (for after registering a new fake or meta kernel)."""
    _SHARED.clear()
    _FACTS.clear()


def _keep_shared(key: tuple, layouts: tuple | _Unchecked) -> None:
    """Keep ``layouts`` for later traces, sizes that are no argument's as their expression
    and hint (a SymInt would hold its ShapeEnv, and with it the trace, alive)."""
    if len(_SHARED) > _SHARED_LIMIT:
        forget_shared()
        return
    portable: dict[int, tuple] = {}

    def size(n):
        if isinstance(n, tuple) and n[0] == "copy":
            node = n[1].node
            made = portable.get(id(node))
            if made is None:
                made = portable[id(node)] = ("new", (raw_expr(n[1]), node.hint))
            return made
        return n

    is_tuple, parts, view_of = layouts.layouts if type(layouts) is _Unchecked else layouts
    parts = tuple(
        (tuple(map(size, shape)), tuple(map(size, stride)), dtype, device, (kind, size(value)), counted)
        for shape, stride, dtype, device, (kind, value), counted in parts
    )
    portable_layouts = (is_tuple, parts, view_of)
    _SHARED[key] = _Unchecked(portable_layouts, layouts.described) if type(layouts) is _Unchecked else portable_layouts


class SymbolicMemo:
    """The memo of one trace on symbolic sizes, in front of its fake mode's own dispatch
    (``fake_dispatch_through``): below every mode, so make_fx's proxy mode (above autograd
    in the training IR, below it in the default IR) has recorded each call it serves, and
    inside the fake mode, so the parts of a decomposition the fake mode runs are served
    call by call too.  Higher-order ops do not pass here (the fake mode has a rule for each).

    The memo's own work never decides an export: should it fail on some call, that call is
    computed as without the memo (and logged)."""

    def __init__(self, fake_mode: FakeTensorMode, kernels: Any = None) -> None:
        """``kernels``: which kernels the trace's patches install (they differ by IR: the
        default IR keeps composites whole with fake rules of its own), so that only traces
        running the same kernels share layouts."""
        self.fake_mode = fake_mode
        self.kernels = kernels
        self._memo: dict[tuple, tuple | None] = {}
        self._memoizable: dict[OpOverload, bool] = {}
        self._shared_as: dict[tuple, tuple] = {}  # key -> shared key, of layouts shared unchecked
        self._version: tuple | None = None  # the ShapeEnv's when ``_facts`` was worked out
        self._facts = 0

    def _facts_now(self) -> int:
        """The number the process gives the ShapeEnv's facts as they are now (``_FACTS``),
        worked out again only after the ShapeEnv learned something."""
        shape_env = self.fake_mode.shape_env
        version = shape_env_version(shape_env)
        if version != self._version:
            facts = shape_env_facts(shape_env)
            if len(_FACTS) > _FACTS_LIMIT:
                forget_shared()
            number = _FACTS.get(facts)
            if number is None:
                number = _FACTS[facts] = next(_NUMBERS)
            self._facts = number
            self._version = version
        return self._facts

    def __call__(self, dispatch: Callable[..., Any], func: OpOverload, types: Any, args: tuple, kwargs: Any) -> Any:
        able = self._memoizable.get(func)
        if able is None:
            able = self._memoizable[func] = isinstance(func, OpOverload) and memoizable(func)
        if not able or any(t is not FakeTensor for t in types):
            return dispatch(func, types, args, kwargs)
        kwargs = kwargs or {}
        shared = None
        try:
            keyed = memo_key(func, args, kwargs)
            key, sizes = keyed if keyed is not None else (None, None)
            layouts = self._memo.get(key, _UNSEEN) if key is not None else None
            if layouts is _UNSEEN and _SHARING:
                shared = (self._facts_now(), self.kernels, key)
                layouts = _SHARED.get(shared, _UNSEEN)
                if layouts is not _UNSEEN:
                    self._memo[key] = layouts
            if type(layouts) is _Unchecked:  # the first repeat: checked as it is served
                found = checked(layouts, sizes, args, self.fake_mode)
                layouts = self._memo[key] = None if found is None else found[0]
                shared = shared if shared is not None else self._shared_as.pop(key, None)
                if shared is not None:  # shared unchecked: now shared checked, or not at all
                    if found is None:
                        _SHARED.pop(shared, None)
                    else:
                        _keep_shared(shared, layouts)
                if found is not None:
                    return found[1]
            elif layouts is not None and layouts is not _UNSEEN:
                return remade(layouts, sizes, args, self.fake_mode)
        except Exception:  # noqa: BLE001 - a bug here must cost speed, not the export
            log.debug("symbolic memo: %s computed", func, exc_info=True)
            key, layouts = None, None
        shape_env = self.fake_mode.shape_env
        pending = len(shape_env.pending_fresh_unbacked_symbols)
        version = self._version
        out = dispatch(func, types, args, kwargs)
        if layouts is _UNSEEN:
            try:
                fresh = len(shape_env.pending_fresh_unbacked_symbols) > pending
                unchecked = None if fresh else unchecked_layouts(out, sizes, args, kwargs, self.fake_mode)
                self._memo[key] = unchecked
                # Kept for later traces only when the kernel taught the ShapeEnv nothing:
                # a later trace with the same facts would learn nothing from it either.
                if unchecked is not None and shared is not None and shape_env_version(shape_env) == version:
                    self._shared_as[key] = shared
                    _keep_shared(shared, unchecked)
            except Exception:  # noqa: BLE001
                log.debug("symbolic memo: %s not kept", func, exc_info=True)
                self._memo[key] = None
        return out


def memory_formats_remembered(extract: Callable[..., Any]) -> Callable[..., Any]:
    """make_fx's ``tensor_meta`` maker ``extract``, answering a fake tensor's memory format on
    symbolic sizes from an earlier tensor of the same layout.

    make_fx records ``tensor_meta`` on every node, and for it asks whether the value is
    contiguous in each memory format: on symbolic sizes some twenty sympy computations per
    format, a sixth of a dynamic trace.  The answer depends on the sizes and strides (as
    the ShapeEnv's current expressions) and on the facts the ShapeEnv holds, so it is kept
    per ShapeEnv under those expressions and the ShapeEnv's version, which changes with any
    fact that may change how an expression evaluates.  The metadata itself is made for each
    tensor, with its own sizes."""
    formats: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def remembered(result: Any, include_contiguity: bool = True) -> Any:
        if (
            not include_contiguity
            or type(result) is not FakeTensor
            or result.layout is not torch.strided
            or result.is_quantized
            or result.fake_mode.shape_env is None
        ):
            return extract(result, include_contiguity)
        shape, stride = result.shape, result.stride()
        if not any(isinstance(n, torch.SymInt) for n in (*shape, *stride)):
            return extract(result, include_contiguity)
        shape_env = result.fake_mode.shape_env
        try:
            key = (tuple(map(_size_key, shape)), tuple(map(_size_key, stride)), shape_env_version(shape_env))
        except _NoKey:  # a data-dependent size: the answer may come from the data
            return extract(result, include_contiguity)
        known = formats.get(shape_env)
        if known is None:
            known = formats[shape_env] = {}
        memory_format = known.get(key, _UNSEEN)
        if memory_format is _UNSEEN:
            meta = extract(result, include_contiguity)
            known[key] = meta.memory_format
            return meta
        return tensor_metadata_with(result, memory_format)

    return remembered
