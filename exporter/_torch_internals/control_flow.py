"""What branch capture needs of torch: the module stack make_fx is in, facts the ShapeEnv may
assume without guarding them, the value an unbacked symbol is bound to, and a retrace of a
graph that calls ``torch.cond`` with its node metadata kept."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import sympy
import torch
from torch.fx.experimental import proxy_tensor
from torch.fx.experimental.symbolic_shapes import ShapeEnv

__all__ = ["PYTHON_BRANCH_DIRS", "QUERY_FILES", "assume", "assumed", "assumptions_undone", "asserts_kept_inside", "bound_value", "check_at_run_time", "check_value", "current_module_stack", "evaluate_expression", "forget_pending_symbols", "held_checks", "retrace_graph"]


def _files() -> tuple[str, ...]:
    from torch._subclasses import functional_tensor
    from torch.fx.experimental import recording, sym_node, symbolic_shapes

    modules = (torch, torch._tensor, torch._ops, functional_tensor, proxy_tensor, sym_node, symbolic_shapes, recording)
    return tuple(os.path.abspath(m.__file__) for m in modules)


QUERY_FILES = _files()
"""The files between the model's own ``bool(...)`` and the ShapeEnv's evaluation of it (the
operator call of ``Tensor.__bool__``'s ``is_nonzero``, and the functional tensor's ``__bool__``
and the pre-dispatch tracer's torch-function mode that hand it on, included): a data-dependent boolean
asked with only these between is the model's own control flow, one asked from anywhere else
in torch (an operator's implementation, ``torch.cond``'s output checks) is not."""


PYTHON_BRANCH_DIRS = (os.path.dirname(os.path.abspath(torch.distributions.__file__)) + os.sep,)
"""torch's Python that tests values the way a model's own code does, not an operator's
implementation: a distribution's argument check (``if not valid.all(): raise ValueError``).
A data-dependent boolean asked there is a branch of the model's, on the user's line that
called it."""


def current_module_stack() -> list[str]:
    """The module-call keys (``""``, ``"layers.0"``, ``"layers.0.attn@1"``) the active make_fx
    trace is inside, outermost first; empty outside a trace that records them."""
    mode = proxy_tensor.get_proxy_mode()
    stack = getattr(getattr(mode, "tracer", None), "module_stack", None)
    return list(stack) if stack else []


def _implications(shape_env: ShapeEnv, fact: sympy.Basic) -> dict[sympy.Basic, sympy.Basic]:
    """What the ShapeEnv may infer from ``fact``: its implications where it is a comparison
    (a negated comparison is the opposite comparison), nothing for other booleans."""
    if isinstance(fact, sympy.Not) and isinstance(fact.args[0], sympy.core.relational.Relational):
        fact = fact.args[0].negated
    fact = shape_env.simplify(fact)
    if not isinstance(fact, (sympy.Eq, sympy.Ne, sympy.Lt, sympy.Le, sympy.Gt, sympy.Ge)):
        return {}
    return dict(shape_env.get_implications(fact))


def assume(shape_env: ShapeEnv, fact: sympy.Basic) -> None:
    """Let ``shape_env`` take ``fact`` (a boolean expression over unbacked symbols) as known
    when it evaluates later expressions, as it takes a guard, without recording it as a guard
    or a runtime assert: the program checks it by branching on it instead."""
    shape_env.axioms.update(_implications(shape_env, fact))
    shape_env._version_counter += 1  # its caches of evaluated expressions predate the fact


def _forget_answers(shape_env: ShapeEnv) -> None:
    """Drop what ``shape_env`` answered from facts it no longer holds: its caches that watch
    the version counter, and ``_inner_evaluate_expr``'s, which does not (a plain lru_cache,
    shared by every ShapeEnv, keyed on the expression alone where no fx node is given)."""
    shape_env._version_counter += 1
    inner = getattr(type(shape_env), "_inner_evaluate_expr", None)
    if hasattr(inner, "cache_clear"):
        inner.cache_clear()


@contextlib.contextmanager
def assumed(shape_env: ShapeEnv, fact: sympy.Basic) -> Iterator[None]:
    """``assume(shape_env, fact)`` inside the block only (tracing one side of a branch)."""
    added = {k: v for k, v in _implications(shape_env, fact).items() if k not in shape_env.axioms}
    shape_env.axioms.update(added)
    shape_env._version_counter += 1
    try:
        yield
    finally:
        for key in added:
            shape_env.axioms.pop(key, None)
        _forget_answers(shape_env)


@contextlib.contextmanager
def assumptions_undone(shape_env: ShapeEnv) -> Iterator[None]:
    """Within the block ``assume`` as it likes; afterwards ``shape_env`` knows only what it knew
    before.  Runs of forward that share one ShapeEnv take opposite sides of a decision, and
    a size memoized on an input (``x.nonzero()``'s) is the same symbol in each of them."""
    before = dict(shape_env.axioms)
    try:
        yield
    finally:
        shape_env.axioms.clear()
        shape_env.axioms.update(before)
        _forget_answers(shape_env)


@contextlib.contextmanager
def asserts_kept_inside(shape_env: ShapeEnv | None) -> Iterator[None]:
    """Within the block (tracing one branch of a cond, or a loop's body) the ShapeEnv records
    runtime asserts as it likes; afterwards it forgets those about symbols made before the
    block, and what they taught it of those symbols' ranges.  torch's kernels check sizes
    with such asserts (``topk(x, 1)`` asserts ``x.numel() >= 1``), and the ShapeEnv would
    place one about an outside size outside the branch, where it holds only on the branch's
    side.  Asserts about the block's own sizes stay, and go inside it."""
    if shape_env is None:
        yield
        return
    known = set(shape_env.var_to_range)
    ranges = dict(shape_env.var_to_range)
    axioms = dict(shape_env.axioms)
    replacements = dict(shape_env.replacements)
    before = {k: list(v) for k, v in shape_env.deferred_runtime_asserts.items()}
    try:
        yield
    finally:
        dropped = 0
        for key, asserts in list(shape_env.deferred_runtime_asserts.items()):
            old = before.get(key, [])
            new = [ra for ra in asserts[len(old):] if not ra.expr.free_symbols <= known]
            dropped += len(asserts) - len(old) - len(new)
            shape_env.deferred_runtime_asserts[key] = old + new
        if dropped:
            shape_env.num_deferred_runtime_asserts -= dropped
            for symbol in known:
                shape_env.var_to_range[symbol] = ranges[symbol]
            for symbol in list(shape_env.replacements):
                if symbol in known and symbol not in replacements:
                    del shape_env.replacements[symbol]
            shape_env.axioms.clear()
            shape_env.axioms.update(axioms)
            _forget_answers(shape_env)


_HELD = "_exporter_held_checks"


def check_at_run_time(shape_env: ShapeEnv, fact: sympy.Basic, message: str) -> None:
    """Take ``fact`` as known and have the program check it when it runs (a runtime assert,
    as ``torch._check`` adds): where the other way forward goes cannot be traced.  The
    program's assert says ``message`` (``held_checks``)."""
    shape_env.guard_or_defer_runtime_assert(fact, message)
    _remember(shape_env, fact, message)


def check_value(fact: Any, message: str, *, own_node: bool = False) -> None:
    """``torch._check(fact)``: where ``fact`` is a SymBool, the program asserts it when it runs,
    saying ``message``.  A fact about a float the data decides is asserted by a node of its
    own: torch's runtime-assert pass (2.13 to 2.15) takes a bound on one such float for a
    range it asserts elsewhere, and asserts nothing.  ``own_node``: so is any fact, for a
    symbol the graph may not bind (one an earlier trace took for the same input), about which
    a deferred assert would have no place to go."""
    if isinstance(fact, torch.SymBool):  # before the check: its expression reads True after it
        expression = fact.node.expr
        _remember(fact.node.shape_env, expression, message)
        if own_node or any(not symbol.is_integer for symbol in expression.free_symbols):
            torch.ops.aten._assert_scalar.default(fact, message)
    torch._check(fact, lambda: message)


def _remember(shape_env: ShapeEnv, fact: sympy.Basic, message: str) -> None:
    if not hasattr(shape_env, _HELD):
        setattr(shape_env, _HELD, [])
    getattr(shape_env, _HELD).append((fact, message))


def held_checks(shape_env: ShapeEnv) -> list[tuple[sympy.Basic, str]]:
    """Each fact checked at run time through ``check_at_run_time`` or ``check_value``, and what
    its assert should say: torch's runtime asserts name only the expression (``u1 >= 1``)."""
    return list(getattr(shape_env, _HELD, ()))


def forget_pending_symbols(shape_env: ShapeEnv) -> None:
    """Drop the data-dependent symbols an abandoned trace made and never bound to an output,
    so the next trace in the same ShapeEnv is not asked to bind them."""
    shape_env.pending_fresh_unbacked_symbols.clear()


def bound_value(value: Any, keypath: Sequence[Any]) -> Any:
    """What ``keypath`` (an ``unbacked_bindings`` entry of the node that made ``value``) reaches
    in ``value``: the SymInt, SymFloat or SymBool the symbol is bound to.  Every key torch
    writes there (pytree keys, ``CallMethodKey``, ``ConvertIntKey``, ...) has ``get``."""
    for key in keypath:
        value = key.get(value)
    return value


def retrace_graph(fn: Callable[..., Any], inputs: Sequence[Any], *, pre_dispatch: bool = False) -> torch.fx.GraphModule:
    """``make_fx`` of ``fn`` (which runs fx graphs through an interpreter) on ``inputs``, the
    current fake mode's tensors, each node keeping the stack trace and module stack of the
    node it was run for (``torch.fx.traceback.preserve_node_meta``)."""
    with torch.fx.traceback.preserve_node_meta():
        return proxy_tensor.make_fx(fn, pre_dispatch=pre_dispatch, _disable_torch_fn_metadata_mode=True)(*inputs)


def evaluate_expression(expr: sympy.Basic, values: dict[sympy.Symbol, Any]) -> Any:
    """``expr`` computed from ``values`` (SymInts, SymFloats, SymBools or Python numbers) with
    Python's operators, as torch's runtime asserts compute theirs: traced, it records the
    ``operator`` and ``torch.sym_*`` calls that make the value."""
    from torch.utils._sympy.interp import sympy_interp

    return sympy_interp(_python_analysis(), values, expr)


@functools.cache
def _python_analysis() -> type:
    """torch's Python reference analysis, with ``int()``'s truncation of a float (its own
    builds a sympy ``TruncToInt`` of the value, which hashes it and so reads it)."""
    from torch.utils._sympy.reference import PythonReferenceAnalysis

    class Analysis(PythonReferenceAnalysis):
        @staticmethod
        def trunc_to_int(x: Any, dtype: Any) -> Any:
            return torch.sym_int(x)

    return Analysis
