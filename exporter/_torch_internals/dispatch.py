"""The dispatcher: dispatch keys, kernel tables, op schemas, and calls made below or around
autograd and the Python modes."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch._C import DispatchKey, _AutoDispatchBelowAutograd
from torch._decomp import _should_decompose_because_unsafe_op
from torch._dispatch.python import enable_python_dispatcher
from torch._higher_order_ops.effects import has_effects
from torch._library.utils import has_fake_kernel, is_builtin as is_builtin_op
from torch._ops import HigherOrderOperator, OpOverload, OpOverloadPacket
from torch._prims_common import compare_tensor_meta
from torch._subclasses import fake_impls
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass

__all__ = [
    "assert_async",
    "overload_name",
    "plain_alias",
    "schema_of",
    "is_view",
    "AUTOCAST_DEVICES",
    "autocast_keys_excluded",
    "autograd_visible",
    "below_autograd",
    "call_at_key",
    "clear_dispatch_cache",
    "ops_with_cached_kernels",
    "on_dispatch_miss",
    "compare_tensor_meta",
    "COMPOSITE_KEY",
    "composite_registrations",
    "DispatchKey",
    "enable_python_dispatcher",
    "has_composite_kernel",
    "has_effects",
    "has_fake_kernel",
    "table_decomposition",
    "higher_order_name",
    "HigherOrderOperator",
    "is_builtin_op",
    "is_traceable_wrapper_subclass",
    "op_implementation_dirs",
    "OpOverload",
    "OpOverloadPacket",
    "outside_pre_dispatch",
    "PRE_DISPATCH",
    "real_clone",
    "real_copy_into",
    "runtime_check",
    "should_decompose_because_unsafe",
    "sym_sqrt",
    "symbolic_tensor",
    "tensors_written",
    "TorchDispatchMode",
]


runtime_check = torch._check
"""``torch._check``: a condition on sizes the program checks when it runs (no guard)."""

assert_async = torch._assert_async
"""``torch._assert_async(bool_tensor, message)``: a condition on a tensor's values the program
checks when it runs (``aten._assert_async.msg``)."""

COMPOSITE_KEY = DispatchKey.CompositeImplicitAutograd

should_decompose_because_unsafe = _should_decompose_because_unsafe_op
sym_sqrt = torch._sym_sqrt
below_autograd = _AutoDispatchBelowAutograd




def composite_registrations() -> tuple[str, ...]:
    """Qualified names of every op with a CompositeImplicitAutograd kernel."""
    return tuple(torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd"))


def has_composite_kernel(op: OpOverload) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), COMPOSITE_KEY)


def table_decomposition(op: Any) -> Any:
    """The Python decomposition torch registers for ``op``, or None (every table a lowering
    builds, ``run_decompositions``' default one included, takes its entries from these)."""
    import torch._decomp

    return torch._decomp.decomposition_table.get(op)


def _autocast_keys() -> tuple[tuple[Any, str], ...]:
    keys = []
    for name in dir(torch._C.DispatchKey):
        if name.startswith("Autocast"):
            device = name.removeprefix("Autocast").lower()
            device = torch._C._get_privateuse1_backend_name() if device == "privateuse1" else device
            try:
                torch.is_autocast_enabled(device)
            except RuntimeError:  # a device type autocast does not know
                continue
            keys.append((getattr(torch._C.DispatchKey, name), device))
    return tuple(keys)


_AUTOCAST_KEYS = _autocast_keys()


def autocast_keys_excluded() -> list[str]:
    """The device types whose autocast dispatch key is excluded just now.  That is the case
    while a device's autocast is off, and, while it is on, inside its kernels (for the
    casts of an op's inputs and the op they call): ``torch.is_autocast_enabled`` reads
    False in both, so telling them apart takes knowing whether the model turned it on."""
    excluded = torch._C._dispatch_tls_local_exclude_set()
    return [device for key, device in _AUTOCAST_KEYS if excluded.has(key)]


AUTOCAST_DEVICES = tuple(device for _, device in _AUTOCAST_KEYS)


@contextlib.contextmanager
def autograd_visible() -> Any:
    """Within the block, ops run through autograd again (grad mode on), as they do above it,
    though the block sits below autograd (inside a kernel or a fake-tensor rule)."""
    C = torch._C
    included = C._dispatch_tls_local_include_set()
    excluded = C._dispatch_tls_local_exclude_set()
    excluded = excluded - C.DispatchKeySet(C.DispatchKey.AutogradFunctionality) - C.DispatchKeySet(C.DispatchKey.ADInplaceOrView)
    with C._ForceDispatchKeyGuard(included, excluded), torch.enable_grad():
        yield


def outside_pre_dispatch() -> Any:
    """Within the block, calls skip the pre-dispatch key.  A mode below autograd that runs a
    kernel for autograd itself (the ``detach`` autograd.Function's ``apply`` asks for, outside
    any op the pre-dispatch trace is handling) would otherwise send the call back to the top,
    where the trace records it as if forward had called it."""
    return torch._C._ExcludeDispatchKeyGuard(_PRE_DISPATCH_SET)


_PRE_DISPATCH_SET = torch._C.DispatchKeySet(DispatchKey.PreDispatch)


def tensors_written(op: OpOverload, args: tuple, kwargs: dict) -> list[Any]:
    """The tensors among ``op``'s arguments that its schema says it writes to (``self`` of an
    in-place op, ``out=``), in argument order."""
    written = []
    for i, argument in enumerate(op._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = args[i] if i < len(args) and not argument.kwarg_only else kwargs.get(argument.name)
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, torch.Tensor):
                written.append(item)
    return written


def real_clone(t: torch.Tensor) -> torch.Tensor:
    """A copy of the real tensor ``t``, made with torch's own kernels whatever modes are on."""
    with torch._C._DisableTorchDispatch(), torch.no_grad():
        return t.detach().clone()


def plain_alias(t: torch.Tensor) -> torch.Tensor:
    """A plain ``torch.Tensor`` on ``t``'s data (the tensor an ``nn.Parameter`` holds), not
    recorded by autograd, made with torch's own kernels whatever modes are on."""
    with torch._C._DisableTorchDispatch():
        return t.detach()


def real_copy_into(t: torch.Tensor, source: torch.Tensor) -> None:
    """Write ``source``'s values into the real tensor ``t`` with torch's own kernels, not
    recorded by autograd, whatever modes are on."""
    with torch._C._DisableTorchDispatch(), torch.no_grad():
        t.copy_(source)


def call_at_key(op: OpOverload, key: DispatchKey):
    """``op``'s kernel at ``key`` as a plain function."""
    return lambda *args, **kwargs: op._op_dk(key, *args, **kwargs)


def clear_dispatch_cache(op: OpOverload) -> None:
    """Forget ``op``'s cached kernel choices after its ``py_kernels`` table changed."""
    op._dispatch_cache.clear()


def ops_with_cached_kernels() -> list[OpOverload]:
    """Every op whose kernel choice for some dispatch key the Python dispatcher has cached
    (torch registers each op it caches one for, and ``on_dispatch_miss`` never sees them)."""
    return [op for op in torch._ops.get_cached_ops() if op._dispatch_cache]


@contextlib.contextmanager
def on_dispatch_miss(hook: Callable[[OpOverload], None]) -> Iterator[None]:
    """Within the block, ``hook(op)`` runs whenever the Python dispatcher is about to choose
    ``op``'s kernel for a dispatch key it has no cached choice for, so the hook may still
    change the op's ``py_kernels`` table (and clear its cache) before the choice is made.

    The dispatcher asks ``OpOverload._get_dispatch`` on each such miss, and caches the
    answer until the op's table changes."""
    original = OpOverload._get_dispatch

    def _get_dispatch(op, key):
        hook(op)
        return original(op, key)

    OpOverload._get_dispatch = _get_dispatch
    try:
        yield
    finally:
        OpOverload._get_dispatch = original


def op_implementation_dirs() -> tuple[str, ...]:
    """Path prefixes of the Python code implementing ATen ops for fake tensors:
    decompositions, references, prims, meta registrations and fake-tensor rules."""
    import torch._decomp
    import torch._meta_registrations
    import torch._prims
    import torch._prims_common
    import torch._refs

    def directory(module: Any) -> str:
        return os.path.dirname(os.path.abspath(module.__file__)) + os.sep

    files = (torch._meta_registrations, fake_impls)
    packages = (torch._decomp, torch._prims, torch._prims_common, torch._refs)
    return (*(directory(m) for m in packages), *(os.path.abspath(m.__file__) for m in files))


def symbolic_tensor(data: Any, **kwargs: Any) -> torch.Tensor:
    """``torch.tensor(data)`` for data holding symbolic ints, recording the sizes instead of
    reading their example values (the Python reference implementation of ``torch.tensor``)."""
    return torch._refs.tensor(data, **kwargs)


PRE_DISPATCH = DispatchKey.PreDispatch
"""The dispatch key above autograd where a pre-dispatch (training IR) trace records ops."""


def is_view(t: torch.Tensor) -> bool:
    """Whether ``t`` is a view of another tensor's storage (``Tensor._is_view``)."""
    return t._is_view()


def schema_of(op: OpOverload) -> torch.FunctionSchema:
    """``op``'s schema: its arguments, returns and their alias and write annotations."""
    return op._schema


def overload_name(op: OpOverload) -> str:
    """``op``'s overload name: ``Tensor`` for ``aten.add.Tensor``, ``default`` for a plain one."""
    return op._overloadname


def higher_order_name(op: HigherOrderOperator) -> str:
    """The name ``op`` is registered under in ``torch.ops.higher_order`` (``cond``, ``map_impl``)."""
    return op.name()
