"""``nn.Module``'s own tables: the parameters, buffers and submodules a module holds itself
(not its descendants'), which the passes and the trace read and edit in place."""

from __future__ import annotations

import torch

__all__ = ["non_persistent_buffers", "own_buffers", "own_parameters", "own_submodules"]


def own_parameters(module: torch.nn.Module) -> dict[str, torch.nn.Parameter | None]:
    """The dict of parameters registered on ``module`` itself, by name; editable in place."""
    return module._parameters


def own_buffers(module: torch.nn.Module) -> dict[str, torch.Tensor | None]:
    """The dict of buffers registered on ``module`` itself, by name; editable in place."""
    return module._buffers


def own_submodules(module: torch.nn.Module) -> dict[str, torch.nn.Module | None]:
    """The dict of ``module``'s direct submodules, by name; editable in place."""
    return module._modules


def non_persistent_buffers(module: torch.nn.Module) -> set[str]:
    """Names of ``module``'s own buffers left out of its ``state_dict``."""
    return module._non_persistent_buffers_set
