"""Make the program run whatever layout a kept-whole composite returns at run time."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind

from exporter._state import ExportState
from exporter._torch_internals import (
    FakeTensorMode,
    OpOverload,
    TorchDispatchMode,
    has_composite_kernel,
    is_number_bound,
    table_decomposition,
)

__all__ = ["layout_pin_nodes", "pin_variable_layouts", "possible_layouts"]

# How far past an op to follow other layouts of its output before giving up and pinning.
_FOLLOW_LIMIT = 64


def _dense_strides(shape: tuple[int, ...], order: list[int]) -> tuple[int, ...]:
    """Strides of a dense tensor of ``shape`` whose dims, outermost first, are ``order``."""
    strides = [0] * len(shape)
    step = 1
    for dim in reversed(order):
        strides[dim] = step
        step *= max(shape[dim], 1)
    return tuple(strides)


def _from_parameters(node: torch.fx.Node, parameters: set[torch.fx.Node]) -> bool:
    """Whether ``node``'s value is computed from a parameter (so it requires grad when the
    program runs in grad mode)."""
    seen, stack = set(), [node]
    while stack:
        current = stack.pop()
        if current in parameters:
            return True
        if current in seen:
            continue
        seen.add(current)
        stack.extend(current.all_input_nodes)
    return False


def _attention_layouts(node: torch.fx.Node, parameters: set[torch.fx.Node]) -> list[tuple[int, ...]]:
    # The fused CPU kernel returns (batch, heads, query, value) as a transpose of
    # (batch, query, heads, value); when the mask requires grad the math kernel runs
    # instead and returns it contiguous.  A mask computed from parameters (T5's learned
    # position bias) requires grad exactly when the program runs in grad mode.
    mask = node.args[3] if len(node.args) > 3 else node.kwargs.get("attn_mask")
    shape = tuple(_hint(s) for s in node.meta["val"].shape)
    if not isinstance(mask, torch.fx.Node) or not _from_parameters(mask, parameters) or len(shape) != 4:
        return []
    return [_dense_strides(shape, [0, 1, 2, 3]), _dense_strides(shape, [0, 2, 1, 3])]


_VARIABLE_LAYOUT_OPS: dict[Any, Callable[[torch.fx.Node, set[torch.fx.Node]], list[tuple[int, ...]]]] = {
    torch.ops.aten.scaled_dot_product_attention.default: _attention_layouts,
}
"""Kept-whole composites whose output layout depends on more than their inputs' layouts,
and the layouts each may return given where its inputs come from (the parameter
placeholders): which kernel scaled_dot_product_attention runs depends on whether its mask
requires grad, and the trace cannot know the grad mode the program will run in."""


def _lowered_layouts(node: torch.fx.Node) -> Iterator[tuple[int, ...]]:
    """Layouts a lowering may give the output of ``node``, a composite kept whole, other
    than the traced one: dense in dim order, as the ordinary ops of another decomposition
    return it, then the one torch's default decompositions give it.  A lowering that keeps
    the op in one pass and decomposes it in the next (ExecuTorch with a partitioner)
    decides its views on the first layout and runs them on the second.  The layouts come
    one at a time, the costly last: tracing the decomposition is only paid for when every
    layout before it runs."""
    val = node.meta.get("val")
    if node.op != "call_function" or not isinstance(node.target, OpOverload) or not isinstance(val, torch.Tensor):
        return
    if not has_composite_kernel(node.target):
        return
    try:
        shape = tuple(_hint(s) for s in val.shape)
        traced = tuple(_hint(s) for s in val.stride())
    except Exception:  # noqa: BLE001 - a size with no value to stand in: its layout is not followed
        return
    dense = _dense_strides(shape, list(range(len(shape))))
    if traced == dense:
        return  # the layout ordinary ops give: decompositions give it too
    yield dense
    if not _may_refuse_a_layout(node):
        return  # nothing after it reinterprets strides: no layout can make a later op fail
    mode = FakeTensorMode()
    args, kwargs = pytree.tree_map_only(torch.fx.Node, lambda n: _example_like(n.meta.get("val"), mode), (node.args, node.kwargs))
    decomposed = _decomposed_layout(node.target, args, kwargs, mode)
    if decomposed not in (None, traced, dense):
        yield decomposed


def _example_like(val: Any, mode: FakeTensorMode) -> Any:
    """A fake tensor of ``mode`` with ``val``'s metadata, its sizes at their example values."""
    if not isinstance(val, torch.Tensor):
        return _hint(val) if isinstance(val, torch.SymInt) else val
    shape = tuple(_hint(s) for s in val.shape)
    with mode:
        return torch.empty_strided(shape, tuple(_hint(s) for s in val.stride()), dtype=val.dtype, device=val.device)


class _Decomposing(TorchDispatchMode):
    """Runs each op that torch registers a decomposition for through that decomposition, and
    the ops it calls in turn, as a lowering's table does; the rest run their own kernels."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        decomposition = table_decomposition(func)
        if decomposition is not None:
            with self:
                out = decomposition(*args, **(kwargs or {}))
            if out is not NotImplemented:
                return out
        return func(*args, **(kwargs or {}))


def _decomposed_layout(op: OpOverload, args: Any, kwargs: Any, mode: FakeTensorMode) -> tuple[int, ...] | None:
    """The strides of ``op``'s output once torch's decompositions replace it: its composite
    kernel (or its own registered decomposition) run on fake tensors, every op it reaches
    that has a registered decomposition decomposed in turn.  No graph is traced and no table
    built: only the output's layout is wanted."""
    key = repr(
        (op, pytree.tree_map_only(torch.Tensor, lambda t: (t.shape, t.stride(), t.dtype, t.device), (args, kwargs)))
    )
    if key not in _DECOMPOSED_LAYOUTS:
        decomposition = table_decomposition(op)
        try:
            with mode, _Decomposing():
                out = decomposition(*args, **kwargs) if decomposition is not None else op.decompose(*args, **kwargs)
            out = out[0] if isinstance(out, (list, tuple)) else out
            _DECOMPOSED_LAYOUTS[key] = tuple(int(s) for s in out.stride()) if isinstance(out, torch.Tensor) else None
        except Exception:  # noqa: BLE001 - an op torch cannot decompose here keeps its traced layout
            _DECOMPOSED_LAYOUTS[key] = None
    return _DECOMPOSED_LAYOUTS[key]


_DECOMPOSED_LAYOUTS: dict[str, tuple[int, ...] | None] = {}
"""``_decomposed_layout`` by op and argument layouts: the layers of a model repeat them."""


def possible_layouts(node: torch.fx.Node, parameters: set[torch.fx.Node]) -> list[tuple[int, ...]]:
    """Strides ``node``'s output may have when the program runs (empty: only the traced ones)."""
    layouts = _VARIABLE_LAYOUT_OPS.get(node.target)
    if layouts is None or not isinstance(node.meta.get("val"), torch.Tensor):
        return []
    return layouts(node, parameters)


# A stand-in for a data-dependent size with no example value: in range, neither 0 nor 1
# (which would make layouts degenerate).
_UNBACKED_STAND_IN = 8


def _hint(size: Any) -> int:
    """An example value of ``size``; a data-dependent one gets its real value when the trace
    propagated real tensors (draft mode), else a stand-in inside its range."""
    if not isinstance(size, torch.SymInt):
        return int(size)
    if size.node.hint is not None:
        return int(size.node.hint)
    shape_env = size.node.shape_env
    expr = size.node.expr.xreplace(shape_env.backed_var_to_val).xreplace(shape_env.real_tensor_prop_unbacked_vals)
    values = {}
    for symbol in expr.free_symbols:
        bounds = shape_env.var_to_range.get(symbol)
        value = _UNBACKED_STAND_IN
        if bounds is not None:
            value = max(value, int(bounds.lower)) if is_number_bound(bounds.lower) else value
            value = min(value, int(bounds.upper)) if is_number_bound(bounds.upper) else value
        values[symbol] = value
    return int(expr.xreplace(values))


def _meta_like(val: Any, strides: tuple[int, ...] | None = None) -> Any:
    if not isinstance(val, torch.Tensor):
        return _hint(val) if isinstance(val, torch.SymInt) else val
    shape = tuple(_hint(s) for s in val.shape)
    stride = strides if strides is not None else tuple(_hint(s) for s in val.stride())
    return torch.empty_strided(shape, stride, dtype=val.dtype, device="meta")


_STRIDE_VIEWS = frozenset({
    torch.ops.aten.view.default,
    torch.ops.aten.view.dtype,
    torch.ops.aten._unsafe_view.default,
})
"""The ops that read their input's strides to make their output and refuse the ones they
cannot reinterpret; every other op runs on any layout (its output's layout may follow)."""


def _may_refuse_a_layout(node: torch.fx.Node) -> bool:
    """Whether an op after ``node``, within the ops ``_runs_with`` follows, is one that
    refuses layouts (``_STRIDE_VIEWS``); past that many ops, assume one may."""
    seen: set[torch.fx.Node] = set()
    queue = list(node.users)
    while queue:
        user = queue.pop()
        if user in seen or user.op != "call_function":
            continue
        if user.target in _STRIDE_VIEWS or len(seen) >= _FOLLOW_LIMIT:
            return True
        seen.add(user)
        queue.extend(user.users)
    return False


def _runs_with(node: torch.fx.Node, strides: tuple[int, ...]) -> bool:
    """Whether every op after ``node`` still runs if its output has ``strides``.

    The other layout is followed through the users on the meta device until it turns into
    the layout the trace saw (a copy, a matmul) or meets an op that refuses it (a view).
    """
    changed: dict[torch.fx.Node, Any] = {node: _meta_like(node.meta["val"], strides)}
    queue: list[torch.fx.Node] = list(node.users)
    seen = 0
    while queue:
        user = queue.pop(0)
        if user in changed or user.op != "call_function":
            continue
        seen += 1
        if seen > _FOLLOW_LIMIT:
            return False
        args, kwargs = pytree.tree_map_only(
            torch.fx.Node, lambda n: changed.get(n, _meta_like(n.meta.get("val"))), (user.args, user.kwargs)
        )
        try:
            out = user.target(*args, **kwargs)
        except Exception:  # noqa: BLE001 - an op that refuses the layout is the answer
            return False
        traced = user.meta.get("val")
        if (
            isinstance(out, torch.Tensor)
            and isinstance(traced, torch.Tensor)
            and out.stride() == tuple(_hint(s) for s in traced.stride())
        ):
            continue  # back to the traced layout: nothing further on can differ
        changed[user] = out
        queue.extend(user.users)
    return True


def _pin(state: ExportState, node: torch.fx.Node) -> None:
    """After ``node``, copy its output into the layout the trace saw: permute to the order
    of that layout's dims, make it contiguous, permute back (no sizes involved, so it
    holds for dynamic shapes too)."""
    val = node.meta["val"]
    strides = [_hint(s) for s in val.stride()]
    order = sorted(range(val.dim()), key=lambda d: -strides[d])
    inverse = [order.index(d) for d in range(val.dim())]
    graph = state.gm.graph
    users = list(node.users)
    with graph.inserting_after(node):
        forward = graph.call_function(torch.ops.aten.permute.default, (node, order))
    with graph.inserting_after(forward):
        dense = graph.call_function(torch.ops.aten.clone.default, (forward,), {"memory_format": torch.contiguous_format})
    with graph.inserting_after(dense):
        back = graph.call_function(torch.ops.aten.permute.default, (dense, inverse))
    with state.fake_mode:
        forward.meta["val"] = val.permute(order)
        dense.meta["val"] = forward.meta["val"].clone(memory_format=torch.contiguous_format)
        back.meta["val"] = dense.meta["val"].permute(inverse)
    for added in (forward, dense, back):
        added.meta["nn_module_stack"] = node.meta.get("nn_module_stack")
        added.meta["stack_trace"] = node.meta.get("stack_trace")
    for user in users:
        user.replace_input_with(node, back)
    for spec in state.output_specs:
        if getattr(spec.arg, "name", None) == node.name:
            spec.arg.name = back.name


def layout_pin_nodes(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """The nodes of the copies ``_pin`` inserts (``permute``, ``clone`` to contiguous, the
    inverse ``permute``), found by their shape, so also after ``run_decompositions()`` or
    a save and load: what a comparison with torch.export's program sets aside."""
    found: set[torch.fx.Node] = set()
    permute, clone = torch.ops.aten.permute.default, torch.ops.aten.clone.default
    for back in graph.nodes:
        if back.op != "call_function" or back.target != permute:
            continue
        dense = back.args[0]
        if not (isinstance(dense, torch.fx.Node) and dense.target == clone and len(dense.users) == 1):
            continue
        if dense.kwargs.get("memory_format") != torch.contiguous_format:
            continue
        forward = dense.args[0]
        if not (isinstance(forward, torch.fx.Node) and forward.target == permute and len(forward.users) == 1):
            continue
        order, inverse = list(forward.args[1]), list(back.args[1])
        if sorted(order) == list(range(len(order))) and [order.index(d) for d in range(len(order))] == inverse:
            found |= {forward, dense, back}
    return found


def pin_variable_layouts(state: ExportState) -> bool:
    """The program runs, and lowers, whichever layout a kept-whole composite returns.

    A composite kept whole (``scaled_dot_product_attention``) was traced with the layout its
    fused kernel gives.  At run time another kernel may give another (see
    ``_VARIABLE_LAYOUT_OPS``), and a lowering (``run_decompositions()``, ExecuTorch)
    replaces the op with ordinary ops, whose layout may differ again (``_lowered_layouts``).  The
    layout reaches the program through the ops after it: a ``view`` (a ``reshape`` or
    ``contiguous`` the trace found to be a no-op) is valid for the traced layout only.
    Where another layout would make a later op fail, the output is copied into the traced
    layout right after the op; elsewhere nothing changes.
    """
    placeholders = [n for n in state.gm.graph.nodes if n.op == "placeholder"]
    parameters = {n for n, spec in zip(placeholders, state.input_specs) if spec.kind == InputKind.PARAMETER}
    changed = False
    for node in [n for n in state.gm.graph.nodes if n.op == "call_function"]:
        traced = None
        for layout in itertools.chain(possible_layouts(node, parameters), _lowered_layouts(node)):
            traced = traced or tuple(_hint(s) for s in node.meta["val"].stride())
            if layout != traced and not _runs_with(node, layout):
                _pin(state, node)
                changed = True
                break  # one layout the program cannot run is enough: the later ones are not made
    return changed
