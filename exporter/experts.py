"""Switches a library ships for a pattern that does not export, applied for the user.

transformers' mixture-of-experts blocks (classes decorated with ``use_experts_implementation``)
run, with ``experts_implementation="eager"``, a Python loop over the experts some token
picked (``for expert_idx in expert_hit:``): a data-dependent loop torch.export cannot trace,
and branch capture makes a ``torch.while_loop``.  The same blocks can run as batched or
grouped matrix products over all experts, which export faster and run without a loop.  ``experts_implementation_applied`` switches a model for the duration of an export;
``check_against_unswitched`` holds the program to the model as the user configured it;
``suggest_switch`` names the switch in the hint of the failure it avoids.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree

from ._errors import Category, InputSpecError, TraceError, VerificationError

__all__ = [
    "AUTOMATIC_EXPERTS_IMPLEMENTATION",
    "EXPERTS_IMPLEMENTATIONS",
    "automatic_experts_implementation",
    "check_against_unswitched",
    "experts_blocks",
    "experts_implementation_applied",
    "suggest_switch",
]

EXPERTS_IMPLEMENTATIONS = ("batched_mm", "grouped_mm", "eager")
"""The experts implementations that export: the batched and grouped matrix products, and
transformers' own loop over the experts hit (``eager``), captured as a ``torch.while_loop``
whose body skips the padding expert with a ``torch.cond`` (branch capture only)."""


AUTOMATIC_EXPERTS_IMPLEMENTATION = "batched_mm"
"""What an export switches a looping experts block to when the user chose none: it runs on
every device torch does (``grouped_mm`` needs kernels some CPUs and releases lack)."""

_DISPATCHER_FILE = os.path.join("transformers", "integrations", "moe.py")


def _is_experts_dispatcher(cls: type) -> bool:
    # the decorator's forward wraps (functools.wraps) the class's own loop
    forward = getattr(cls, "forward", None)
    code = getattr(forward, "__code__", None)
    return code is not None and hasattr(forward, "__wrapped__") and code.co_filename.endswith(_DISPATCHER_FILE)


def experts_blocks(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The submodules whose forward dispatches on ``config._experts_implementation``."""
    return [(name, m) for name, m in model.named_modules() if _is_experts_dispatcher(type(m))]


def _switchable(model: torch.nn.Module) -> bool:
    return callable(getattr(model, "set_experts_implementation", None)) and bool(experts_blocks(model))


def automatic_experts_implementation(model: torch.nn.Module) -> str | None:
    """The implementation to export ``model``'s experts blocks with when the user chose none:
    ``AUTOMATIC_EXPERTS_IMPLEMENTATION`` where one of them runs its loop over the experts a
    batch hits (``eager``, transformers' default for some models), else None."""
    if not _switchable(model):
        return None
    configured = model.get_experts_implementation()
    values = configured.values() if isinstance(configured, dict) else [configured]
    return AUTOMATIC_EXPERTS_IMPLEMENTATION if any(v in (None, "eager") for v in values) else None


@contextlib.contextmanager
def experts_implementation_applied(model: torch.nn.Module, implementation: str | None) -> Iterator[None]:
    """Run ``model``'s experts blocks with ``implementation`` inside the block, then restore
    the model's own setting (also on failure).  ``None`` changes nothing."""
    if implementation is None:
        yield
        return
    if implementation not in EXPERTS_IMPLEMENTATIONS:
        raise InputSpecError(
            f"experts_implementation={implementation!r} is not one that exports",
            hint=f"use one of {', '.join(map(repr, EXPERTS_IMPLEMENTATIONS))}",
        )
    if not _switchable(model):
        raise InputSpecError(
            f"experts_implementation={implementation!r} was given, but {type(model).__name__} has no "
            "transformers mixture-of-experts block that can switch implementation",
            hint="drop the option; it applies to transformers models whose experts classes use "
            "use_experts_implementation (Mixtral, Qwen-MoE, DeepSeek, ...)",
        )
    original = model.get_experts_implementation()
    model.set_experts_implementation(implementation)
    try:
        yield
    finally:
        model.set_experts_implementation(original)


def _tensors(value: Any) -> list[torch.Tensor]:
    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def check_against_unswitched(
    program: torch.export.ExportedProgram,
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    implementation: str,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-4,
) -> None:
    """The program, traced with the switch, computes what the model as configured computes
    on the example inputs; ``VerificationError`` (rule ``switched-numerics``) if not."""
    with torch.no_grad():
        expected = _tensors(model(*args, **kwargs))
        got = _tensors(program.module()(*args, **kwargs))
    if len(got) != len(expected):
        raise VerificationError(
            f"with experts_implementation={implementation!r} the program returns {len(got)} tensors, "
            f"the model as configured {len(expected)}",
            rule="switched-numerics",
            hint="export without experts_implementation (draft=True takes the loop as the example runs it)",
        )
    for i, (a, b) in enumerate(zip(got, expected)):
        if a.device.type == "meta" or b.device.type == "meta":
            continue  # no values to compare
        if a.shape != b.shape:
            raise VerificationError(
                f"with experts_implementation={implementation!r} output {i} has shape {tuple(a.shape)}, the model "
                f"as configured gives {tuple(b.shape)}",
                rule="switched-numerics",
                hint="export without experts_implementation (draft=True takes the loop as the example runs it)",
            )
        if not torch.allclose(a.float(), b.float(), rtol=rtol, atol=atol, equal_nan=True):
            diff = (a.float() - b.float()).abs().max().item()
            raise VerificationError(
                f"with experts_implementation={implementation!r} output {i} differs from the model as "
                f"configured by up to {diff:.3g} (rtol {rtol}, atol {atol})",
                rule="switched-numerics",
                hint="try the other implementation, or export without the switch using draft=True",
            )


def _files_of_experts_code(model: torch.nn.Module) -> set[str]:
    files = set()
    for _, block in experts_blocks(model):
        original = inspect.unwrap(type(block).forward)
        try:
            files.add(os.path.abspath(inspect.getsourcefile(original) or ""))
        except TypeError:
            continue
    return files


def suggest_switch(model: torch.nn.Module, error: TraceError) -> None:
    """If ``error`` is a data-dependent failure in an experts block that can switch to an
    implementation that exports, say so first in its hint."""
    if error.category is not Category.DATA_DEPENDENT_CONTROL_FLOW or not error.location or not _switchable(model):
        return
    if os.path.abspath(error.location.rsplit(":", 1)[0]) not in _files_of_experts_code(model):
        return
    current = model.get_experts_implementation()
    error.hint = (
        f"this is a transformers mixture-of-experts block running its experts loop "
        f"(experts_implementation={current.get('', current)!r}); it has implementations that export: "
        "exporter.export(..., experts_implementation='batched_mm') (command line: "
        "--experts-implementation batched_mm) switches it for the export and checks the program "
        f"against the model as configured. Otherwise: {error.hint}"
    )
