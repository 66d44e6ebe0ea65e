"""The unfunctionalized first try of a trace: which writes it records out of place, and which
send the model to a functionalized trace.

Functionalization costs a good share of a trace and changes nothing in a program that never
writes to a tensor, so a model is first traced without it.  A write to a fresh intermediate
that nothing views is recorded as the out-of-place op functionalization would record
(``WriteWatch``); any other write ends the try with ``NeedsFunctionalization``."""

from __future__ import annotations

import operator
from typing import Any

import attrs
import torch

from .._torch_internals import OpOverload, has_effects, rename_node, schema_of

__all__ = ["NeedsFunctionalization", "WriteWatch", "aliases", "writes"]


class NeedsFunctionalization(Exception):
    """The unfunctionalized trace met a write it cannot record out of place: trace again, functionalized."""


def writes(target) -> bool:
    """Whether an op writes to a tensor (in-place, out=) or has a side effect."""
    return isinstance(target, OpOverload) and (schema_of(target).is_mutable or has_effects(target))


def aliases(target) -> bool:
    """Whether an op's result may share memory with an argument (views, in-place and out= ops)."""
    return any(r.alias_info is not None for r in schema_of(target).returns)


# In-place ops the unfunctionalized trace records as their out-of-place op when they write
# to a fresh intermediate, and how the out-of-place op's dtype is known to be the tensor's
# own (functionalization would otherwise cast the result back with _to_copy).
_DETACH = torch.ops.aten.detach.default
_KEEPS_DTYPE = frozenset({"masked_fill_", "index_put_", "fill_", "zero_", "relu_"})
_PROMOTES = frozenset({"add_", "sub_", "mul_", "div_"})
# Elementwise ops (the in-place activations of vision models among them) whose result has a
# floating tensor's own dtype when every other argument is a real Python number or an option.
_FLOATING = frozenset({
    "silu_", "gelu_", "mish_", "hardswish_", "hardsigmoid_", "hardtanh_", "sigmoid_", "tanh_",
    "leaky_relu_", "elu_", "celu_", "selu_", "threshold_", "clamp_", "clamp_min_", "clamp_max_",
    "exp_", "neg_", "abs_", "sqrt_", "rsqrt_", "reciprocal_", "pow_", "erf_", "sin_", "cos_",
    "log_", "floor_", "ceil_", "round_", "trunc_", "nan_to_num_",
})


def _out_of_place(target: OpOverload) -> OpOverload | None:
    """``aten.add.Tensor`` for ``aten.add_.Tensor``, when it takes the same arguments."""
    namespace, _, name = target.name().partition("::")
    packet, _, overload = name.partition(".")
    if packet not in _KEEPS_DTYPE and packet not in _PROMOTES and packet not in _FLOATING:
        return None
    functional = getattr(getattr(getattr(torch.ops, namespace), packet[:-1], None), overload or "default", None)
    if not isinstance(functional, OpOverload) or aliases(functional) or schema_of(functional).is_mutable:
        return None
    signature = [(a.name, str(a.type)) for a in schema_of(target).arguments]
    return functional if signature == [(a.name, str(a.type)) for a in schema_of(functional).arguments] else None


def _same_dtype_result(packet: str, node: torch.fx.Node) -> bool:
    if packet in _KEEPS_DTYPE:
        return True
    self_val = node.args[0].meta.get("val")
    if packet in _FLOATING:
        others = (*node.args[1:], *node.kwargs.values())
        return (
            isinstance(self_val, torch.Tensor)
            and self_val.dtype.is_floating_point
            and all(o is None or type(o) in (bool, int, float, str) for o in others)
        )
    other = node.args[1] if len(node.args) > 1 else node.kwargs.get("other")
    if not isinstance(self_val, torch.Tensor):
        return False
    if isinstance(other, torch.fx.Node):
        other_val = other.meta.get("val")
        return isinstance(other_val, torch.Tensor) and other_val.dtype == self_val.dtype
    if isinstance(other, bool):
        return True
    if isinstance(other, int):
        return self_val.dtype != torch.bool
    return isinstance(other, float) and self_val.dtype.is_floating_point


def _fresh_and_unaliased(written: Any, write: torch.fx.Node, graph: torch.fx.Graph | None) -> bool:
    """Whether ``written`` made a new tensor in the traced graph that nothing seen so far views."""
    if not isinstance(written, torch.fx.Node) or written.graph is not graph or written.op != "call_function":
        return False
    made = written
    if written.target is operator.getitem and isinstance(written.args[0], torch.fx.Node):
        made = written.args[0]  # one result of an op with several (batch norm's output)
    if not isinstance(made.target, OpOverload) or aliases(made.target):
        return False
    return all(
        user is write or user.target is _DETACH or (isinstance(user.target, OpOverload) and not aliases(user.target))
        for user in written.users
    )


@attrs.define
class WriteWatch:
    """Node hook: while ``functionalized`` is off, a write to a fresh intermediate that
    nothing views (``buckets += t``, ``scores.masked_fill_(...)``) is recorded as the
    out-of-place op that functionalization would record; any other write to a tensor (or
    a side effect) aborts the trace.

    Functionalizing such a write changes nothing else in the graph (there is no other
    alias to update and no input to copy back), so the two traces agree node for node;
    the node is renamed as the out-of-place op's node would have been named."""

    functionalized: bool = False
    graph: torch.fx.Graph | None = None
    """The top-level graph: the first node the watch sees is one of its placeholders."""
    written: set[torch.fx.Node] = attrs.field(factory=set)
    """The nodes recorded out of place: the values of tensors written so far."""
    stale: set[torch.fx.Node] = attrs.field(factory=set)
    """Detached aliases taken before a write (autograd's saved results among them): their
    nodes hold the value from before it, so nothing may read them."""
    _writers: dict[Any, bool] = attrs.field(factory=dict)
    """target -> whether it writes (``writes``), worked out once per target and trace."""

    def reset(self) -> None:
        """Forget a try's graph, for the next try."""
        self.graph = None
        self.written.clear()
        self.stale.clear()

    def __call__(self, node: torch.fx.Node) -> None:
        if self.graph is None:
            self.graph = node.graph
        if self.functionalized:
            return
        if self.stale and any(arg in self.stale for arg in node.all_input_nodes):
            raise NeedsFunctionalization(f"{node.target} reads a detached alias of a tensor written in place")
        if node.op != "call_function":
            return
        writing = self._writers.get(node.target)
        if writing is None:
            writing = self._writers[node.target] = writes(node.target)
        if not writing:
            # Functionalization replays each new view of a written tensor from its base
            # when the view is first used, adding view nodes this trace would not have.
            viewing = node.target is not _DETACH and (not isinstance(node.target, OpOverload) or aliases(node.target))
            if self.written and viewing and any(arg in self.written for arg in node.all_input_nodes):
                raise NeedsFunctionalization(f"{node.target} of a tensor written in place")
            return
        functional = None if has_effects(node.target) else _out_of_place(node.target)
        packet = node.target.name().partition("::")[2].partition(".")[0]
        if (
            functional is None
            or node.graph is not self.graph
            or not node.args
            or not _fresh_and_unaliased(node.args[0], node, self.graph)
            or not _same_dtype_result(packet, node)
        ):
            raise NeedsFunctionalization(str(node.target))
        self.stale.update(user for user in node.args[0].users if user.target is _DETACH)
        node.target = functional
        rename_node(node, packet[:-1])
        self.written.add(node)
