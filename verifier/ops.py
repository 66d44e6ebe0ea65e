"""Only functional ATen ops, higher-order ops and symbolic-int ops may appear in the graph."""

from __future__ import annotations

import builtins
import math
import operator

import torch
import torch.utils._pytree as pytree
from exporter._errors import VerificationError
from exporter._ir import graph_modules
from exporter._torch_internals import (
    schema_of,
    ENTER_AUTOCAST,
    EXIT_AUTOCAST,
    PREDISPATCH_FUNCTIONS,
    SET_GRAD_ENABLED,
    HigherOrderOperator,
    OpOverload,
    OpOverloadPacket,
    sym_sqrt,
)

__all__ = ["verify_functional_ops", "SYMBOLIC_OPS"]

SYMBOLIC_OPS = frozenset(
    {
        operator.getitem,
        operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
        operator.mod, operator.pow, operator.neg, operator.abs, operator.pos,
        operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge,
        operator.and_, operator.or_, operator.xor, operator.not_, operator.lshift, operator.rshift,
        math.ceil, math.floor, math.trunc, math.sqrt, builtins.round,
        torch.sym_float, torch.sym_int, torch.sym_max, torch.sym_min, torch.sym_not,
        torch.sym_ite, torch.sym_sum, sym_sqrt,
    }
)


def _describe(target) -> str:
    return getattr(target, "__qualname__", None) or str(target)


_REGION_MARKERS = frozenset({SET_GRAD_ENABLED, ENTER_AUTOCAST, EXIT_AUTOCAST})
"""What a training-IR trace records for grad-mode and autocast changes, until
``wrap_autograd_regions`` turns them into regions."""


def _check_target(node: torch.fx.Node, training: bool, markers: bool) -> None:
    target = node.target
    if markers and target in _REGION_MARKERS:
        return
    if training and target in PREDISPATCH_FUNCTIONS:
        return
    if isinstance(target, OpOverload):
        if schema_of(target).is_mutable and not training:
            raise VerificationError(
                f"node {node.name} calls {target}, which mutates its input "
                "(in-place or out= op); export IR allows functional ops only",
                rule="functional-ops",
                node=node.name,
            )
        return
    if isinstance(target, HigherOrderOperator) or target in SYMBOLIC_OPS:
        return
    if isinstance(target, OpOverloadPacket):
        raise VerificationError(
            f"node {node.name} calls op packet {target} instead of a resolved overload",
            rule="functional-ops",
            node=node.name,
        )
    raise VerificationError(
        f"node {node.name} calls {_describe(target)}, which is neither an ATen op, "
        "a higher-order op nor a symbolic-int op",
        rule="functional-ops",
        node=node.name,
    )


def verify_functional_ops(gm: torch.fx.GraphModule, *, training: bool = False, markers: bool = False) -> None:
    """Every call is a functional OpOverload, a HigherOrderOperator or a symbolic-int op, and
    carries ``val`` metadata; get_attr in the top-level graph reads only subgraphs and
    pytree specs (as torch.export's verifier allows); no call_module/call_method nodes.

    ``training``: the graph is training IR, where ops that write in place are allowed, and
    the functorch level and batch-dim calls of a ``torch.vmap`` inside the model (torch.export's
    TRAINING dialect); ``markers``: so are the grad-mode and autocast calls a training trace
    records before its regions are wrapped."""
    for module in graph_modules(gm):
        for node in module.graph.nodes:
            if node.op == "call_function":
                _check_target(node, training, markers)
                if module is gm and "val" not in node.meta:
                    raise VerificationError(
                        f"node {node.name} has no 'val' metadata (its fake output value)",
                        rule="val-present",
                        node=node.name,
                    )
            elif node.op in ("call_module", "call_method"):
                raise VerificationError(
                    f"node {node.name} is a {node.op} node ({node.target}); export IR is flat ATen",
                    rule="functional-ops",
                    node=node.name,
                )
            elif node.op == "get_attr" and module is gm:
                value = getattr(gm, node.target, None)
                if not isinstance(value, (torch.fx.GraphModule, pytree.TreeSpec)):
                    raise VerificationError(
                        f"node {node.name} reads attribute {node.target!r} of type "
                        f"{type(value).__name__}; tensors must be lifted to inputs",
                        rule="no-tensor-get-attr",
                        node=node.name,
                    )
