"""The ``meta_kernels`` fast path: a static call that fake tensors would compute by running a
Python decomposition (or by expanding a kept-whole composite) is computed by a cheap rule, the
op's C++ kernel on meta tensors, once the rule was seen to give the same results for the same
kind of call.  How kinds are keyed, checked and trusted is on the design page ("The fast
paths")."""

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
