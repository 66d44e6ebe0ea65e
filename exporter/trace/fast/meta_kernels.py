"""The ``meta_kernels`` fast path: a static call that fake tensors would compute by running a
Python decomposition is computed by a cheap rule instead, the op's C++ meta kernel, once the
rule was seen to give the decomposition's results for the same kind of call.

Fake tensors run an op's decomposition from ``torch._decomp`` wherever the op has no Python
meta registration, even where it has a C++ meta kernel.  The decomposition is a dozen ops
under fake tensors per call.  For batch norm that is 3 to 7 ms against well under one for
the meta kernel, and a CNN pays it at each of its distinct sizes: a third of a first
EfficientNet export.

A call of a kind not seen before runs both ways and keeps the decomposition's results.  The
kind is served by the rule afterwards only if the two gave the same results: the same
structure, and each tensor the same shape, strides, storage offset, dtype, device,
``requires_grad`` and aliasing.  A kind is the op and, per argument: a tensor's dtype,
device, ``requires_grad``, which sizes are 1, its stride order and whether it is dense at
offset 0; a float's type (no float changes a layout); any other value as it is.  A call with
a symbolic size, a constant or a tensor of another mode always takes the decomposition, as
do draft traces (their fake tensors carry real ones).  The verdicts hold for the process, as
the recorder's memo does.

The rule is the meta kernel itself, except where the decomposition is known to answer
otherwise on a device: eval-mode batch norm on CPU gives empty saved statistics, as CPU's
kernel does, where the meta kernel gives one per channel.  A rule that stops agreeing (a
torch release changing a decomposition) only loses its speed: the check refuses it.

A composite op a trace keeps whole (``aten.linear``, ``matmul``, ``layer_norm``) is computed
by fake tensors by expanding it: its dozen parts each dispatched through Python, 2 to 5 ms a
call, paid at every distinct size in a first export.  Its rule runs the op's own C++ kernels
on meta tensors of the arguments' layouts (``composite_on_meta``), checked against the
expansion per kind of call in the same way.

The check is the expensive half of a first export: the expansion it runs is 2 to 8 ms per new
kind (a layer norm, a projection), paid in every fresh process.  For the composites every
transformer calls most (``TRUSTED``: ``linear``, ``matmul``, ``layer_norm``) the check is
made by the test suite instead, on every supported torch release and kind by kind over
ranks, size-1 dimensions, strides, offsets, dtypes and optional arguments; the fast paths run
only on releases they are proven on, so on those a new kind of these three is served by its
rule from its first call.  ``scaled_dot_product_attention`` keeps the run-time check: with
some non-contiguous queries its expansion keeps the query's layout where its kernels on meta
tensors give a contiguous result.  A call the rule cannot compute (an op inside with no meta
kernel, a mistake in the model) takes the expansion, which raises torch's own error where
there is one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

from ..._torch_internals import FakeTensor, OpOverload
from ..._torch_internals.fast import (
    BATCH_NORMS,
    composite_on_meta,
    fake_empty,
    has_symbolic_layout,
    meta_kernel_for,
    storage_key,
    takes_python_decomposition,
)

from ..kernels import kept_whole_rule_installed

__all__ = ["TRUSTED", "MetaKernels", "forget_meta_verdicts"]

_TAKES_DECOMPOSITION: dict[OpOverload, bool] = {}
"""op -> whether fake tensors compute its static calls by a Python decomposition."""

_VERDICTS: dict[tuple, bool] = {}
"""kind of call -> whether the rule gave the decomposition's results for it."""

TRUSTED: frozenset[OpOverload] = frozenset(
    {
        torch.ops.aten.linear.default,
        torch.ops.aten.matmul.default,
        torch.ops.aten.layer_norm.default,
    }
)
"""Kept-whole composites whose rule the test suite checks kind by kind on every supported
release: served by it from a kind's first call (see the module doc)."""

_PLAIN = (bool, int, str, type(None), torch.dtype, torch.device, torch.memory_format, torch.layout)

Rule = Callable[[Any, OpOverload, Callable, Any, tuple, dict], Any]


class _NoKind(Exception):
    """The call is not one a rule may take: it takes the decomposition."""


def forget_meta_verdicts() -> None:
    """Forget every verdict (for after registering a kernel or decomposition for a built-in op)."""
    _VERDICTS.clear()
    _TAKES_DECOMPOSITION.clear()


def _by_meta_kernel(mode, func, dispatch, types, args, kwargs):
    with meta_kernel_for(mode, func):
        return dispatch(func, types, args, kwargs)


def _batch_norm(training_at: int | None) -> Rule:
    def rule(mode, func, dispatch, types, args, kwargs):
        out = _by_meta_kernel(mode, func, dispatch, types, args, kwargs)
        x = args[0]
        training = training_at is not None and len(args) > training_at and args[training_at]
        if training or x.device.type != "cpu":
            return out
        return (out[0], fake_empty(mode, (0,), x.dtype, x.device), fake_empty(mode, (0,), x.dtype, x.device))

    return rule


def _by_composite_on_meta(mode, func, dispatch, types, args, kwargs):
    return composite_on_meta(mode, func, args, kwargs)


_RULES: dict[OpOverload, Rule] = {op: _batch_norm(training_at) for op, training_at in BATCH_NORMS.items()}
"""Rules other than the meta kernel alone."""


class MetaKernels:
    """A wrapper of one fake mode's dispatch (``fake_dispatch_through``): see module doc."""

    def __init__(self, mode: Any) -> None:
        self.mode = mode
        self._rules: dict[Any, Rule | None] = {}

    def _rule(self, func: Any) -> Rule | None:
        """The rule that may stand in for fake tensors' own way with ``func``, if any."""
        takes = _TAKES_DECOMPOSITION.get(func)
        if takes is None:
            takes = _TAKES_DECOMPOSITION[func] = isinstance(func, OpOverload) and takes_python_decomposition(
                self.mode, func
            )
        if takes:
            return _RULES.get(func, _by_meta_kernel)
        # (asked once per trace: the kept-whole rules are installed by each trace of the default IR)
        return _by_composite_on_meta if isinstance(func, OpOverload) and kept_whole_rule_installed(func) else None

    def __call__(self, dispatch, func, types, args=(), kwargs=None):
        rule = self._rules.get(func, False)
        if rule is False:
            rule = self._rules[func] = self._rule(func)
        if rule is None or getattr(self.mode, "propagate_real_tensors", False):
            return dispatch(func, types, args, kwargs)
        kwargs = kwargs or {}
        try:
            kind = (func, tuple(map(self._kind, args)), tuple((k, self._kind(v)) for k, v in kwargs.items()))
        except _NoKind:
            return dispatch(func, types, args, kwargs)
        verdict = _VERDICTS.get(kind)
        if verdict:
            return rule(self.mode, func, dispatch, types, args, kwargs)
        if verdict is None and func in TRUSTED and rule is _by_composite_on_meta:
            try:
                out = rule(self.mode, func, dispatch, types, args, kwargs)
            except Exception:
                _VERDICTS[kind] = False
                return dispatch(func, types, args, kwargs)
            _VERDICTS[kind] = True
            return out
        out = dispatch(func, types, args, kwargs)
        if verdict is None:
            _VERDICTS[kind] = self._agrees(rule, dispatch, func, types, args, kwargs, out)
        return out

    def _kind(self, value: Any) -> Any:
        kind = type(value)
        if kind is FakeTensor:
            if (
                value.fake_mode is not self.mode
                or value.constant is not None
                or value.layout is not torch.strided
                or has_symbolic_layout(value)
            ):
                raise _NoKind
            shape, strides = value.shape, value.stride()
            order = tuple(sorted(range(len(shape)), key=strides.__getitem__, reverse=True))
            dense, expected = value.storage_offset() == 0, 1
            for i in reversed(order):
                if shape[i] != 1 and strides[i] != expected:
                    dense = False
                    break
                expected *= shape[i]
            return (value.dtype, value.device, value.requires_grad, tuple(s == 1 for s in shape), order, dense)
        if kind is float:
            return float
        if kind in _PLAIN:
            return (kind, value)
        if kind is list or kind is tuple:
            return (kind, tuple(map(self._kind, value)))
        raise _NoKind

    def _agrees(self, rule: Rule, dispatch, func, types, args, kwargs, out) -> bool:
        mode = self.mode
        cache = mode.cache_enabled
        mode.cache_enabled = False  # (else the fake-tensor cache could hand back ``out``'s twin)
        try:
            other = rule(mode, func, dispatch, types, args, kwargs)
        except Exception:
            return False
        finally:
            mode.cache_enabled = cache
        return _results(other, args, kwargs) == _results(out, args, kwargs)


def _results(out: Any, args: tuple, kwargs: dict) -> tuple:
    """What a caller can see of ``out``: its structure, each tensor's layout, and which
    storage each shares (an argument's, or an earlier result's)."""
    leaves, spec = pytree.tree_flatten(out)
    storages = [storage_key(t) for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    seen: list[int] = []
    described: list[tuple] = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            key = storage_key(leaf)
            if key in storages:
                shares: tuple | None = ("argument", storages.index(key))
            elif key in seen:
                shares = ("result", seen.index(key))
            else:
                shares = None
            seen.append(key)
            described.append(
                (type(leaf), tuple(leaf.shape), leaf.stride(), leaf.storage_offset(), leaf.dtype, leaf.device,
                 leaf.requires_grad, shares)
            )
        else:
            described.append((type(leaf), leaf))
    return (spec, tuple(described))
