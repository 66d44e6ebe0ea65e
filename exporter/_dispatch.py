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
def _aten_functional_composites() -> tuple[OpOverload, ...]:
    ops = []
    for qualname in torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd"):
        namespace, _, name = qualname.partition("::")
        if namespace != "aten":
            continue
        packet_name, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, packet_name), overload or "default")
        if _is_functional_composite(op):
            ops.append(op)
    return tuple(ops)


def functional_composite_ops() -> tuple[OpOverload, ...]:
    """All functional composite ops to keep whole: ATen's (cached) plus custom namespaces'.

    Custom ops are looked up every time because libraries register them after import.
    """
    extra = []
    for qualname in torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd"):
        namespace, _, name = qualname.partition("::")
        if namespace in ("aten", "prim", "prims") or not hasattr(torch.ops, namespace):
            continue
        packet_name, _, overload = name.partition(".")
        packet = getattr(getattr(torch.ops, namespace), packet_name, None)
        op = getattr(packet, overload or "default", None) if packet is not None else None
        if isinstance(op, OpOverload) and _is_functional_composite(op):
            extra.append(op)
    return _aten_functional_composites() + tuple(extra)


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


@contextlib.contextmanager
def keep_composites_whole(ops: tuple[OpOverload, ...] | None = None) -> Iterator[None]:
    """Within the block, record functional composite ops as single nodes (see module doc)."""
    ops = functional_composite_ops() if ops is None else ops
    saved = {}
    fake_rules = []
    try:
        for op in ops:
            kernels = op.py_kernels
            saved[op] = dict(kernels)
            original = _original_composite(op)
            passthrough = _below_autograd(op)
            for key in _AUTOGRAD_KEYS:
                kernels.setdefault(key, passthrough)
            kernels[_COMPOSITE] = _not_expanded
            for key in _BACKEND_KEYS:
                kernels.setdefault(key, original)
            if op not in fake_impls.op_implementations_dict:
                fake_impls.op_implementations_dict[op] = _fake_rule(original)
                fake_rules.append(op)
            op._dispatch_cache.clear()
        yield
    finally:
        for op, kernels in saved.items():
            op.py_kernels.clear()
            op.py_kernels.update(kernels)
            op._dispatch_cache.clear()
        for op in fake_rules:
            fake_impls.op_implementations_dict.pop(op, None)


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
