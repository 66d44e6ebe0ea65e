"""Dispatcher patches active while tracing, so our IR has the op set torch.export's has.

Keep functional CompositeImplicitAutograd ops (aten.linear, aten.scaled_dot_product_attention, ...) whole.

Below autograd, ATen expands composite ops into their parts (``linear`` becomes ``t`` +
``addmm``, ``scaled_dot_product_attention`` a backend-specific fused kernel).  torch.export
keeps the functional ones whole in its ATen IR, because backends pattern-match on them, and
so do we.  While the context below is active, each such op:

* passes autograd without being expanded (it is redispatched below autograd);
* reports "no decomposition" at the composite key, so the functionalizing and proxy
  modes record it as a single node;
* still computes real and fake results with its original composite kernel, so eager
  execution and shape propagation are unchanged.

Only ops whose schema says they neither mutate nor alias are kept: functionalization must
know statically what an op writes and aliases.  Ops tagged ``maybe_aliasing_or_mutating``
(``reshape``, ``contiguous``, ...) are always expanded.

``assert_conversion_metadata`` records, for every ``Tensor.to``-style conversion, the
``aten._assert_tensor_metadata`` check torch.export's IR carries for it.

The patches edit process-wide dispatcher tables, so exports in one process are serialized
by ``EXPORT_LOCK``; everything is restored on exit, also after an error.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator

import torch
from torch._C import DispatchKey
from torch._decomp import _should_decompose_because_unsafe_op
from torch._ops import OpOverload
from torch._subclasses import fake_impls
from torch._subclasses.functional_tensor import FunctionalTensor

__all__ = ["EXPORT_LOCK", "assert_conversion_metadata", "functional_composite_ops", "keep_composites_whole"]

EXPORT_LOCK = threading.RLock()

_COMPOSITE = DispatchKey.CompositeImplicitAutograd
_MISSING = object()
# Autograd keys a composite op would otherwise expand at, and backend keys whose kernels
# must keep running the original composite (constant folding, real execution).
_AUTOGRAD_KEYS = tuple(
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


def _is_functional_composite(op: OpOverload) -> bool:
    if _should_decompose_because_unsafe_op(op) or op in FunctionalTensor.metadata_fns:
        return False
    schema = op._schema
    if schema.is_mutable or any(arg.alias_info is not None for arg in schema.arguments):
        return False
    has_composite = torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), _COMPOSITE)
    return has_composite or _COMPOSITE in op.py_kernels


@functools.cache
def _functional_composites_of(registrations: tuple[str, ...]) -> tuple[OpOverload, ...]:
    ops = []
    for qualname in registrations:
        namespace, _, name = qualname.partition("::")
        if namespace in ("prim", "prims") or not hasattr(torch.ops, namespace):
            continue
        packet = getattr(getattr(torch.ops, namespace), name.partition(".")[0], None)
        op = getattr(packet, name.partition(".")[2] or "default", None) if packet is not None else None
        if isinstance(op, OpOverload) and _is_functional_composite(op):
            ops.append(op)
    return tuple(ops)


def functional_composite_ops() -> tuple[OpOverload, ...]:
    """Every functional composite op to keep whole, ATen's and custom namespaces'.

    Recomputed only when the set of registered composite kernels changes (libraries
    register custom ops after import).
    """
    registrations = torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")
    return _functional_composites_of(tuple(registrations))


def _not_expanded(*args, **kwargs):
    return NotImplemented


def _original_composite(op: OpOverload):
    kernel = op.py_kernels.get(_COMPOSITE)
    if kernel is not None and not isinstance(kernel, DispatchKey):
        return kernel
    return functools.partial(op._op_dk, _COMPOSITE)


def _below_autograd(op: OpOverload):
    # The exported graph is inference-only, so no autograd node is attached: this keeps
    # the trace free of the detach chains an error-on-backward node would add.
    def kernel(*args, **kwargs):
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args, **kwargs)

    return kernel


def _fake_rule(original):
    def rule(fake_mode, func, *args, **kwargs):
        with fake_mode:
            return original(*args, **kwargs)

    return rule


# op -> (the py_kernels dict the patch was built from, a copy of it, the patched dict,
# the fake rule).  Swapping in a prepared dict costs one attribute store per op; editing
# hundreds of kernel tables key by key on every export was a noticeable share of the time.
_PATCHED: dict[OpOverload, tuple[dict, dict, dict, object]] = {}
_OUR_KEYS = frozenset((*_AUTOGRAD_KEYS, *_BACKEND_KEYS, _COMPOSITE))


def _patched_kernels(op: OpOverload) -> tuple[dict, object]:
    """The kernel table to swap in for ``op``, and its fake rule; built from the op's own table."""
    current = op.py_kernels
    cached = _PATCHED.get(op)
    if cached is None or cached[0] is not current or cached[1] != current:
        original = _original_composite(op)
        passthrough = _below_autograd(op)
        patched = dict.fromkeys(_AUTOGRAD_KEYS, passthrough)
        patched.update(dict.fromkeys(_BACKEND_KEYS, original))
        patched.update(current)
        patched[_COMPOSITE] = _not_expanded
        cached = _PATCHED[op] = (current, dict(current), patched, _fake_rule(original))
    return cached[2], cached[3]


@contextlib.contextmanager
def keep_composites_whole(ops: tuple[OpOverload, ...] | None = None) -> Iterator[None]:
    """Within the block, record functional composite ops as single nodes (see module doc)."""
    ops = functional_composite_ops() if ops is None else ops
    undo: list[tuple[OpOverload, dict, dict, int]] = []
    fake_rules = fake_impls.op_implementations_dict
    added_rules = []
    try:
        for op in ops:
            saved = op.py_kernels
            patched, rule = _patched_kernels(op)
            undo.append((op, saved, patched, len(patched)))
            op.py_kernels = patched
            if op not in fake_rules:
                fake_rules[op] = rule
                added_rules.append(op)
            op._dispatch_cache.clear()
        yield
    finally:
        for op, saved, patched, size in undo:
            if len(patched) != size:
                # Something registered a kernel while we were patched: keep it.
                for key, kernel in list(patched.items()):
                    if key not in _OUR_KEYS and key not in saved:
                        saved[key] = kernel
                _PATCHED.pop(op, None)
            op.py_kernels = saved
            op._dispatch_cache.clear()
        for op in added_rules:
            fake_rules.pop(op, None)


_CONVERSIONS = (
    torch.ops.aten.to.dtype,
    torch.ops.aten.to.device,
    torch.ops.aten.to.dtype_layout,
    torch.ops.aten.to.other,
)


def _checked_conversion(op: OpOverload):
    def kernel(tensor, *args, **kwargs):
        torch.ops.aten._assert_tensor_metadata.default(
            tensor, dtype=tensor.dtype, device=tensor.device, layout=tensor.layout
        )
        return op.decompose(tensor, *args, **kwargs)

    return kernel


def _to_unchecked(self, *args, **kwargs):
    return torch.Tensor.to(self, *args, **kwargs)


@contextlib.contextmanager
def assert_conversion_metadata() -> Iterator[None]:
    """Within the block, each ``aten.to`` call first records ``aten._assert_tensor_metadata``.

    torch.export guards every conversion with that check, whichever way it is spelled
    (``x.to(...)``, ``x.float()``, ``x.type(torch.float32)``): a no-op conversion leaves
    no other trace in the graph, and the check keeps the program honest about the input
    dtype it assumed.  The functional tensor's own ``to`` emits the check only for some
    spellings, so it is switched off here and this kernel emits it for all, once each.
    """
    saved = {op: dict(op.py_kernels) for op in _CONVERSIONS}
    saved_to = FunctionalTensor.to
    try:
        for op in _CONVERSIONS:
            checked = _checked_conversion(op)
            for key in _AUTOGRAD_KEYS:
                op.py_kernels[key] = checked
            op._dispatch_cache.clear()
        FunctionalTensor.to = _to_unchecked
        yield
    finally:
        FunctionalTensor.to = saved_to
        for op, kernels in saved.items():
            op.py_kernels.clear()
            op.py_kernels.update(kernels)
            op._dispatch_cache.clear()
