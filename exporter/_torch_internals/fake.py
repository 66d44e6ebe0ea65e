"""Fake tensors and functionalization: the modes a trace runs under, the rules behind
them, and draft traces' real-value propagation."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch._library.fake_impl import FakeImplCtx
from torch._subclasses import fake_impls, fake_utils
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
    UnsupportedOperatorException,
)
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.fx.experimental.symbolic_shapes import (
    ShapeEnv,
)
from torch.utils._python_dispatch import _disable_current_modes

TRACING_MACHINERY = (
    "torch._subclasses.", "torch.fx.experimental.", "torch.fx.graph", "torch.fx.node", "torch.utils._sympy.",
    "torch._guards", "torch._ops", "torch._library.",
)
"""Modules whose objects are a trace's machinery (a fake mode, a ShapeEnv, a graph, an op),
never a model's state (``str.startswith`` prefixes)."""

__all__ = [
    "FAKE_REAL_CHECK",
    "TRACING_MACHINERY",
    "DataDependentOutputException",
    "DynamicOutputShapeException",
    "effect_tokens",
    "FAKE_TENSOR_LOGGER",
    "fake_dispatch_through",
    "FakeImplCtx",
    "fake_impls",
    "fake_utils",
    "FakeTensor",
    "FakeTensorMode",
    "functional_mode",
    "functional_state",
    "FunctionalTensor",
    "functional_inner",
    "FunctionalTensorMode",
    "on_real_value_decision",
    "outside_modes",
    "real_tensor_propagation",
    "real_value",
    "traced_fake",
    "UnsupportedOperatorException",
    "unwrap_functional",
]


@contextlib.contextmanager
def fake_dispatch_through(mode: FakeTensorMode, wrapper: Any) -> Iterator[None]:
    """Within the block every op ``mode`` computes goes through ``wrapper(dispatch, func,
    types, args, kwargs)``, ``dispatch`` being the mode's own (what its
    ``__torch_dispatch__`` calls): an attribute of this one mode object, which no other mode
    sees.  Below every other mode, so the op has been recorded by any proxy mode above.
    Blocks nest: an inner block's wrapper sees each call first."""
    own = mode.dispatch
    previous = mode.__dict__.get("dispatch")  # an enclosing block's wrapper
    mode.dispatch = lambda func, types, args=(), kwargs=None: wrapper(own, func, types, args, kwargs)
    try:
        yield
    finally:
        if previous is None:
            del mode.dispatch
        else:
            mode.dispatch = previous




def functional_mode() -> FunctionalTensorMode:
    """The functionalizing mode torch.export traces with (effect tokens discovered, not required)."""
    return FunctionalTensorMode(pre_dispatch=False, export=True, _allow_token_discovery=True)


def effect_tokens(mode: FunctionalTensorMode) -> list[Any]:
    """The side-effectful ops ``mode`` met, which would need effect tokens."""
    return list(mode._tokens)


def functional_inner(value: torch.Tensor) -> torch.Tensor:
    """The tensor a functional tensor holds now, its pending view updates not applied (so no
    op is traced); any other tensor as it is."""
    if isinstance(value, FunctionalTensor):
        return torch._from_functional_tensor(value.elem)
    return value


def unwrap_functional(value: FunctionalTensor) -> torch.Tensor:
    """The value a functional tensor holds now, with its pending updates applied."""
    torch._sync(value)
    return torch._from_functional_tensor(value.elem)


def functional_state(value: FunctionalTensor) -> tuple[bool, bool, bool]:
    """(storage changed, metadata mutated, data mutated) of a functional tensor since wrapping.

    Pending updates are applied first."""
    torch._sync(value)
    elem = value.elem
    return (
        torch._functionalize_was_storage_changed(elem),
        torch._functionalize_has_metadata_mutation(elem),
        torch._functionalize_has_data_mutation(elem),
    )




def real_tensor_propagation() -> Any:
    """While active, a new FakeTensorMode carries real copies of its tensors and runs every
    op on them too: a guard on a data-dependent value is decided by the real value (and
    deferred as a runtime assert), an op without a fake kernel gets one inferred from its
    real outputs.  torch.export.draft_export sets the same two flags."""
    import torch._functorch.config as functorch_config

    return functorch_config.patch(
        fake_tensor_propagate_real_tensors=True, generate_fake_kernels_from_real_mismatches=True
    )


def on_real_value_decision(shape_env: ShapeEnv, callback: Any) -> None:
    """Call ``callback(expr, value)`` (instead of torch's logging) each time ``shape_env``
    decides a data-dependent guard by a real value; this instance only."""
    shape_env._log_real_tensor_propagation = callback


def traced_fake(value: Any) -> FakeTensor | None:
    """The fake tensor a traced tensor stands for (a functional tensor's, with its pending
    updates applied); None for any other value, a real tensor included."""
    if isinstance(value, FunctionalTensor):
        value = unwrap_functional(value)
    return value if isinstance(value, FakeTensor) else None


def real_value(fake: FakeTensor) -> torch.Tensor | None:
    """A plain copy of the real tensor a draft trace's fake tensor carries, made outside every
    mode; None when it carries none (real-value propagation was off, or no kernel ran for real)."""
    real = getattr(fake, "real_tensor", None)
    if real is None:
        return None
    with outside_modes(), torch.no_grad():
        return real.detach().clone()


def outside_modes() -> Any:
    """Within the block no dispatch mode is current: code that calls torch without
    dispatching (``Tensor.numpy()``'s own conversions) runs on real tensors as in eager."""
    return _disable_current_modes()


FAKE_REAL_CHECK = (fake_utils, "_check_fake_real_tensors")
"""Where a draft trace's fake tensors are compared with the real ones (owner, attribute name),
for the patches to replace; the function is called as
``check(real_out, fake_out, context, sizes, strides, storage_offset, requires_grad)``."""


FAKE_TENSOR_LOGGER: str = FakeTensor.__module__
"""The logger of torch's fake tensors, named after their module: it logs a failing meta
kernel's traceback at ERROR level, though the failure also reaches the caller as an exception."""
