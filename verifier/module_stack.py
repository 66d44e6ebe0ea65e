"""Rules for nn_module_stack and stack_trace metadata."""

from __future__ import annotations

import torch

from exporter._errors import VerificationError
from exporter._ir import graph_modules

__all__ = ["verify_module_stack", "verify_stack_traces"]


def _well_formed(stack) -> bool:
    return isinstance(stack, dict) and all(
        isinstance(key, str)
        and isinstance(value, tuple)
        and len(value) == 2
        and all(isinstance(part, str) for part in value)
        for key, value in stack.items()
    )


def verify_module_stack(gm: torch.fx.GraphModule) -> None:
    """call_function/get_attr nodes of the top graph carry a dict[str, (path, class)] stack;
    placeholders and outputs of every graph carry none."""
    for module in graph_modules(gm):
        top = module is gm
        for node in module.graph.nodes:
            stack = node.meta.get("nn_module_stack")
            if node.op in ("call_function", "get_attr"):
                if top and stack is None:
                    raise VerificationError(
                        f"node {node.name} ({node.op}) has no nn_module_stack metadata",
                        rule="nn_module_stack-present",
                        node=node.name,
                    )
                if stack is not None and not _well_formed(stack):
                    raise VerificationError(
                        f"node {node.name} ({node.op}) has a malformed nn_module_stack: "
                        f"expected dict[str, tuple[str, str]], found {stack!r}",
                        rule="nn_module_stack-format",
                        node=node.name,
                    )
            elif node.op in ("placeholder", "output") and stack:
                raise VerificationError(
                    f"{node.op} node {node.name} carries nn_module_stack {stack!r}; it must have none",
                    rule="nn_module_stack-absent",
                    node=node.name,
                )


def verify_stack_traces(gm: torch.fx.GraphModule) -> None:
    """stack_trace is None or a string; placeholders and outputs have none."""
    for module in graph_modules(gm):
        for node in module.graph.nodes:
            trace = node.meta.get("stack_trace")
            if node.op in ("placeholder", "output"):
                if trace:
                    raise VerificationError(
                        f"{node.op} node {node.name} carries a stack_trace; it must have none",
                        rule="stack_trace-absent",
                        node=node.name,
                    )
            elif trace is not None and not isinstance(trace, str):
                raise VerificationError(
                    f"node {node.name} has stack_trace of type {type(trace).__name__}; "
                    "expected a string or None",
                    rule="stack_trace-format",
                    node=node.name,
                )
