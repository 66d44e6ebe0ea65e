"""Process-wide state a trace reads or sets: the compiler flags, torch.fx's tracing flag,
and Dynamo (its config, its compile lock, the bodies it compiles for higher-order ops)."""

from __future__ import annotations

import sys
from typing import Any

import torch

__all__ = [
    "hop_compile_entry",
    "compiler_flags",
    "DYNAMO_MODULE",
    "dynamo_compile_lock",
    "forget_compiled",
    "hop_compile_module",
    "import_shape_env_modules",
    "loaded_dynamo_config",
    "set_compiler_flags",
]


DYNAMO_MODULE = "torch._dynamo"
"""Dynamo's package, by name: for a process to import ahead of the exports it will run (an
export imports it on first use), without importing it here."""


def compiler_flags() -> tuple[bool, bool]:
    """What ``torch.compiler.is_compiling()`` and ``is_exporting()`` report."""
    return torch.compiler._is_compiling_flag, torch.compiler._is_exporting_flag


def set_compiler_flags(compiling: bool, exporting: bool) -> None:
    torch.compiler._is_compiling_flag = compiling
    torch.compiler._is_exporting_flag = exporting


def loaded_dynamo_config() -> Any:
    """Dynamo's config module if something already imported Dynamo, else None.

    Higher-order ops such as ``torch.cond`` and ``while_loop`` compile their bodies with
    Dynamo; importing it ourselves would put Dynamo's import into every export."""
    return sys.modules.get("torch._dynamo.config")


def import_shape_env_modules() -> None:
    """Import what creating a ShapeEnv imports, which in torch 2.13-2.15 is all of Dynamo (through
    ``torch.fx.experimental.validator``, see tests/test_cold_start.py).  Every trace creates
    one; importing first lets a trace keep Dynamo's import out of its patches: Dynamo keeps
    references to ``max``, ``torch.tensor`` and others from import time."""
    import torch.fx.experimental.validator  # noqa: F401


def dynamo_compile_lock() -> Any:
    """The lock every Dynamo compilation in the process holds (``convert_frame.compile_lock``),
    or None while Dynamo is not loaded (then nothing can be compiling)."""
    convert_frame = sys.modules.get("torch._dynamo.convert_frame")
    return getattr(convert_frame, "compile_lock", None)


def hop_compile_entry() -> tuple[Any, str]:
    """Where a higher-order op's body is compiled with Dynamo and called (cond, while_loop,
    map, scan): (module, attribute name), for the patches to replace."""
    return hop_compile_module(), "_hop_compile_and_call"


def hop_compile_module() -> Any:
    """The module whose ``_hop_compile_and_call`` compiles a higher-order op's body (cond,
    while_loop, map, scan) with Dynamo."""
    import torch._higher_order_ops.utils as hop_utils

    return hop_utils


def forget_compiled(code: Any) -> None:
    """Drop every compiled entry Dynamo cached for ``code`` (it compiles again when next called)."""
    torch._C._dynamo.eval_frame.reset_code(code)
