"""Replacement kernels that make a trace record the op set torch.export's IR has: functional
composite ops kept whole (``aten.linear``, attention, ``einsum``) instead of expanded below
autograd, and each dtype or device conversion the model makes checked with
``aten._assert_tensor_metadata``.  The design page ("Composite ops kept whole") says how."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.utils._pytree as pytree

from .._torch_internals import (
    schema_of,
    COMPOSITE_KEY,
    DispatchKey,
    FunctionalTensor,
    GuardOnDataDependentSymNode,
    OpOverload,
    autograd_visible,
    below_autograd,
    call_at_key,
    composite_registrations,
    fake_impls,
    is_view,
    free_unbacked_symbols,
    has_composite_kernel,
    runtime_check,
    should_decompose_because_unsafe,
)

__all__ = [
    "AUTOGRAD_KEYS",
    "CONVERSIONS",
    "KERNEL_KEYS",
    "checked_conversion",
    "composite_kernels",
    "forget_composite_kernels",
    "functional_composite_ops",
    "kept_whole",
    "kept_whole_rule_installed",
]

# Autograd keys a composite op would otherwise expand at, and backend keys whose kernels
# must keep running the original composite (constant folding, real execution).
AUTOGRAD_KEYS = tuple(
    getattr(DispatchKey, name)
    for name in (
        "AutogradCPU", "AutogradCUDA", "AutogradMeta", "AutogradXLA", "AutogradLazy",
        "AutogradIPU", "AutogradXPU", "AutogradMPS", "AutogradHPU",
        "AutogradPrivateUse1", "AutogradPrivateUse2", "AutogradPrivateUse3",
    )
)
_BACKEND_KEYS = tuple(
    getattr(DispatchKey, name)
    for name in ("CPU", "CUDA", "Meta", "XLA", "Lazy", "IPU", "XPU", "MPS", "HPU")
)
KERNEL_KEYS = frozenset((*AUTOGRAD_KEYS, *_BACKEND_KEYS, COMPOSITE_KEY))
"""Every key ``composite_kernels`` sets in a table."""


def _is_functional_composite(op: OpOverload) -> bool:
    if should_decompose_because_unsafe(op) or op in FunctionalTensor.metadata_fns:
        return False
    schema = schema_of(op)
    if schema.is_mutable or any(arg.alias_info is not None for arg in schema.arguments):
        return False
    return has_composite_kernel(op) or COMPOSITE_KEY in op.py_kernels


_FUNCTIONAL: dict[OpOverload, bool] = {}
"""op -> whether it is functional, as ``_is_functional_composite`` found (its schema and
torch's lists of ops never change for an op once made)."""


def kept_whole(op: OpOverload) -> bool:
    """Whether a trace keeps ``op`` whole: an op with a ``CompositeImplicitAutograd`` kernel,
    ATen's or a custom namespace's (prims never), that writes to and aliases nothing."""
    if not has_composite_kernel(op):  # (asked each time: a library may register one later)
        return False
    known = _FUNCTIONAL.get(op)
    if known is None:
        known = _FUNCTIONAL[op] = op.namespace not in ("prim", "prims") and _is_functional_composite(op)
    return known


def functional_composite_ops() -> tuple[OpOverload, ...]:
    """Every op registered now that a trace would keep whole (``kept_whole``).

    Making every op's Python object costs a first export more than the trace itself, so a
    trace never lists them: it installs each op's table as the dispatcher first meets the
    op (``patches._composites_kept_whole``).  This list is for looking, and for tests.
    """
    ops = []
    for qualname in composite_registrations():
        namespace, _, name = qualname.partition("::")
        if not hasattr(torch.ops, namespace):
            continue
        packet = getattr(getattr(torch.ops, namespace), name.partition(".")[0], None)
        op = getattr(packet, name.partition(".")[2] or "default", None) if packet is not None else None
        if isinstance(op, OpOverload) and kept_whole(op):
            ops.append(op)
    return tuple(ops)


Active = Callable[[], bool]
"""Whether the kernels should act now (they act only in the thread that traces)."""


def _original_composite(op: OpOverload):
    kernel = op.py_kernels.get(COMPOSITE_KEY)
    if kernel is not None and not isinstance(kernel, DispatchKey):
        return kernel
    return call_at_key(op, COMPOSITE_KEY)


def _not_expanded(original, active: Active):
    def kernel(*args, **kwargs):
        if active():
            return NotImplemented
        return original(*args, **kwargs)

    return kernel


class _KeptWhole(torch.autograd.Function):
    """A kept-whole composite run below autograd whose results still carry autograd history.

    In eager mode and in torch.export's trace, ``h = linear(x)`` with a weight that requires
    grad gives an ``h`` that requires grad, is no leaf and has a ``grad_fn``; a model may
    branch on that, or register a hook on ``h`` or write to it in place.  Its one job is to
    make the results look so: the backward refuses, because an exported program holds no
    backward graph (the training IR, ``ir="training"``, is the one to differentiate)."""

    @staticmethod
    def forward(ctx, op, spec, *flat):
        args, kwargs = pytree.tree_unflatten(list(flat), spec)
        with below_autograd():
            out = op(*args, **kwargs)
        return tuple(out) if isinstance(out, list) else out

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(
            "exporter traced this value for an inference program and kept no backward for it; "
            "export with ir='training' to differentiate through the model"
        )


def _redispatched_below_autograd(op: OpOverload, original, active: Active):
    # Below autograd, so the trace records the composite as one node and none of the
    # detach chains autograd's own expansion would add.  When grad mode is on and an input
    # requires grad, the results are given autograd history anyway (``_KeptWhole``), so the
    # model sees ``requires_grad``/``grad_fn``/``is_leaf`` as in eager mode and in
    # torch.export's trace.  Elsewhere the op expands at the autograd key, as it does
    # without this kernel.
    returns_list = any(isinstance(r.type, torch.ListType) for r in schema_of(op).returns)

    def kernel(*args, **kwargs):
        if not active():
            return original(*args, **kwargs)
        if torch.is_grad_enabled():
            flat, spec = pytree.tree_flatten((args, kwargs))
            if any(isinstance(t, torch.Tensor) and t.requires_grad for t in flat):
                out = _KeptWhole.apply(op, spec, *flat)
                return list(out) if returns_list else out
        with below_autograd():
            return op(*args, **kwargs)

    return kernel


def _attention_mask_fits(query, key, value=None, attn_mask=None, *args, **kwargs) -> bool:
    """Assume, as a runtime check, that a mask whose trailing sizes are data-dependent
    matches the (query, key) lengths it is broadcast against.

    The fused CPU kernel's choice of backend compares those sizes before any arithmetic
    runs, and cannot compare unbacked ones.  torch.export's trace reaches the same
    comparison through the math kernel's broadcasting ``add``, which records exactly these
    equalities as runtime assertions; recording them first gives the program the same
    checks.  As in torch's broadcasting, a data-dependent size is taken to be the full
    length, never a broadcast 1.
    """
    if not isinstance(attn_mask, torch.Tensor) or attn_mask.dim() < 2:
        return False
    checked = False
    for mask_size, size in ((attn_mask.shape[-2], query.shape[-2]), (attn_mask.shape[-1], key.shape[-2])):
        if isinstance(mask_size, torch.SymInt) and not mask_size.node.has_hint():
            runtime_check(mask_size == size)
            checked = True
    return checked


_UNBACKED_PRECHECKS = {torch.ops.aten.scaled_dot_product_attention.default: _attention_mask_fits}
"""Kept-whole composites whose kernel compares sizes before computing, and how to state
those comparisons as runtime checks when a size is data-dependent."""


_EXPANDING: list[OpOverload] = []
"""The kept-whole composites whose expansion is running (in the one tracing thread)."""


def _without_history(t: torch.Tensor) -> torch.Tensor:
    return t.detach() if t.requires_grad and not t.is_leaf else t


def _fake_rule(op: OpOverload, original, active: Active):
    precheck = _UNBACKED_PRECHECKS.get(op)

    def expand(*args, **kwargs):
        # Autograd-visible, as the composite expands when torch.export traces it: its parts
        # then see the weights requiring grad.  matmul's decomposition reads strides only
        # when they do not (``should_fold``), which on a dynamic size records a guard the
        # user never asked for (tests/fuzz/findings/002).  Values computed in forward are
        # seen without their history, as torch.export's values are when it lowers the
        # program (under no_grad): the kernel a composite picks can depend on it
        # (scaled_dot_product_attention's math kernel, and its layout, when its inputs
        # require grad).  The results are detached: below autograd a value carries no
        # autograd history.
        if not _EXPANDING:  # (a composite inside another's expansion sees its parts as they are)
            args, kwargs = pytree.tree_map_only(torch.Tensor, _without_history, (args, kwargs))
        _EXPANDING.append(op)
        try:
            with autograd_visible():
                out = original(*args, **kwargs)
        finally:
            _EXPANDING.pop()
        return pytree.tree_map_only(torch.Tensor, lambda t: t.detach() if t.requires_grad else t, out)

    def compute(*args, **kwargs):
        try:
            return expand(*args, **kwargs)
        except GuardOnDataDependentSymNode:
            if precheck is None or not precheck(*args, **kwargs):
                raise
            return expand(*args, **kwargs)

    def rule(fake_mode, func, *args, **kwargs):
        if not active():
            with fake_mode:
                return original(*args, **kwargs)
        shape_env = fake_mode.shape_env
        pending = len(shape_env.pending_fresh_unbacked_symbols) if shape_env is not None else 0
        with fake_mode:
            out = compute(*args, **kwargs)
        if shape_env is not None and len(shape_env.pending_fresh_unbacked_symbols) > pending:
            _forget_internal_symbols(shape_env, pending, out)
        # A functional composite's one result aliases nothing the caller holds, though its
        # expansion may end in a view of its own intermediate (einsum's permute): given
        # as that view, the result could not carry the autograd history ``_KeptWhole``
        # gives it and still be written in place (T5's ``scores += bias`` on an einsum).
        # (Several results may be views of one another, as nonzero_numpy's are: kept.)
        return _not_a_view(fake_mode, out) if isinstance(out, torch.Tensor) else out

    return rule


def _not_a_view(fake_mode, t: torch.Tensor) -> torch.Tensor:
    if not is_view(t):
        return t
    with fake_mode:
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device, requires_grad=t.requires_grad)


def _forget_internal_symbols(shape_env, pending: int, out) -> None:
    # Ops inside the composite may create data-dependent sizes its output does not have:
    # in a draft trace, an inner op whose fake kernel disagreed with the real one gets
    # fresh sizes inferred from the real output.  Only the composite is recorded, so
    # those sizes are bound by no node; the tracer would stop on them as unaccounted for.
    found = free_unbacked_symbols(out)
    symbols = shape_env.pending_fresh_unbacked_symbols
    shape_env.pending_fresh_unbacked_symbols = symbols[:pending] + [s for s in symbols[pending:] if s in found]


# op -> (the py_kernels dict the table was built from, a copy of it, the table, the fake
# rule, the predicate its kernels act under).  Swapping in a prepared dict costs one attribute store per op; editing hundreds
# of kernel tables key by key on every export was a noticeable share of the time.
_TABLES: dict[OpOverload, tuple[dict, dict, dict, object, Active]] = {}


def composite_kernels(op: OpOverload, active: Active) -> tuple[dict, object]:
    """The ``py_kernels`` table that keeps ``op`` whole while ``active()``, and its
    fake-tensor rule.

    Built from the op's current table (kernels others registered are kept) and cached
    until that table changes.  While ``active()`` is false the table's kernels expand the
    op as its original composite kernel does (the backend keys always run that kernel).
    """
    current = op.py_kernels
    cached = _TABLES.get(op)
    if cached is None or cached[0] is not current or cached[1] != current or cached[4] is not active:
        original = _original_composite(op)
        passthrough = _redispatched_below_autograd(op, original, active)
        table = dict.fromkeys(AUTOGRAD_KEYS, passthrough)
        table.update(dict.fromkeys(_BACKEND_KEYS, original))
        table.update(current)
        table[COMPOSITE_KEY] = _not_expanded(original, active)
        cached = _TABLES[op] = (current, dict(current), table, _fake_rule(op, original, active), active)
    return cached[2], cached[3]


def kept_whole_rule_installed(op: OpOverload) -> bool:
    """Whether fake tensors compute ``op`` by its kept-whole rule now (a trace of the default
    IR installed it, as it does for each kept-whole op it meets)."""
    cached = _TABLES.get(op)
    return cached is not None and fake_impls.op_implementations_dict.get(op) is cached[3]


def forget_composite_kernels(op: OpOverload) -> None:
    """Drop the cached table of ``op`` (someone registered a kernel into it while installed)."""
    _TABLES.pop(op, None)


CONVERSIONS = (
    torch.ops.aten.to.dtype,
    torch.ops.aten.to.device,
    torch.ops.aten.to.dtype_layout,
    torch.ops.aten.to.other,
)
"""The ``aten.to`` overloads every conversion spelling reaches."""


_NUMBER_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


def checked_conversion(op: OpOverload, active: Active, autocast_casting: Active = lambda: False):
    """A kernel for conversion ``op`` that first records ``aten._assert_tensor_metadata``
    while ``active()``, and is the op's own composite kernel otherwise.

    torch.export guards every conversion with that check, whichever way it is spelled
    (``x.to(...)``, ``x.float()``, ``x.type(torch.float32)``): a no-op conversion leaves
    no other trace in the graph, and the check keeps the program honest about the input
    dtype it assumed.  Only the model's own conversions are checked: the casts an autocast
    region makes of an op's inputs (``autocast_casting()`` true) happen below torch.export's
    trace, unchecked.
    """

    def kernel(tensor, *args, **kwargs):
        if not active() or autocast_casting():
            return op.decompose(tensor, *args, **kwargs)
        if not isinstance(tensor, torch.Tensor):
            # A Python number reaches here where the dispatcher would wrap it (a batching
            # rule converting the 1 of ``a * b + 1``): it has no metadata to check.
            return op.decompose(torch.scalar_tensor(tensor, dtype=_NUMBER_DTYPES[type(tensor)]), *args, **kwargs)
        torch.ops.aten._assert_tensor_metadata.default(
            tensor, dtype=tensor.dtype, device=tensor.device, layout=tensor.layout
        )
        return op.decompose(tensor, *args, **kwargs)

    return kernel
