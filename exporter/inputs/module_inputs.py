"""nn.Module objects passed as example inputs: their parameters and buffers become inputs.

``forward(self, x, helper)`` may take a module as an argument.  As torch.export does, the
module's class is registered as a pytree container whose children are the module's
parameters and buffers (by name), so they reach the program as user inputs
(``helper_proj_weight``) and a call of the program takes any module of that class.  The
registration is process-wide and kept: the program needs it to read its inputs.
"""

from __future__ import annotations

import copy
import json
import weakref
from typing import Any

import torch
import torch.utils._pytree as pytree

from .._torch_internals import register_flatten_spec, reparametrize_module

__all__ = ["register_module_inputs"]


class _ModuleOfClass(weakref.ref):
    """A reference to the example module; equal to any other of the same class, so a
    program's input spec matches calls with other instances."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__(module)
        self.cls = type(module)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ModuleOfClass) and self.cls is other.cls

    def __hash__(self) -> int:
        return hash(self.cls)

    def __deepcopy__(self, memo: dict) -> _ModuleOfClass:
        return _ModuleOfClass(self())


def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {**dict(module.named_parameters()), **dict(module.named_buffers())}


def _flatten(module: torch.nn.Module) -> tuple[list[torch.Tensor], list[Any]]:
    state = _state(module)
    return list(state.values()), [list(state), _ModuleOfClass(module)]


def _flatten_with_keys(module: torch.nn.Module):
    values, context = _flatten(module)
    return [(pytree.MappingKey(name), value) for name, value in zip(context[0], values)], context


def _structural_copy(module: torch.nn.Module) -> torch.nn.Module:
    new = copy.copy(module)
    new.__dict__ = {key: copy.copy(value) for key, value in module.__dict__.items()}
    for name, child in new.named_children():
        setattr(new, name, _structural_copy(child))
    return new


def _unflatten(values: list[Any], context: list[Any]) -> torch.nn.Module:
    names, reference = context
    module = reference() if reference is not None else None
    if module is None:
        raise RuntimeError("the module this input spec was made from no longer exists")
    current = _state(module)
    if all(value is current.get(name) for name, value in zip(names, values)):
        return module
    # A copy holding the given tensors (fakes while tracing); the example module is untouched.
    with reparametrize_module(module, dict(zip(names, values)), tie_weights=True, strict=True):
        return _structural_copy(module)


def _flatten_spec(module: torch.nn.Module, spec: pytree.TreeSpec) -> list[torch.Tensor]:
    return _flatten(module)[0]


def register_module_inputs(inputs: Any) -> None:
    """Register the class of every nn.Module among ``inputs``' leaves as a pytree container."""
    for leaf in pytree.tree_leaves(inputs):
        cls = type(leaf)
        if not isinstance(leaf, torch.nn.Module) or cls in pytree.SUPPORTED_NODES:
            continue
        pytree.register_pytree_node(
            cls,
            _flatten,
            _unflatten,
            serialized_type_name=f"{cls.__module__}.{cls.__qualname__}",
            flatten_with_keys_fn=_flatten_with_keys,
            to_dumpable_context=lambda context: json.dumps([context[0], None]),
            from_dumpable_context=lambda text: [json.loads(text)[0], None],
        )
        register_flatten_spec(cls, _flatten_spec)
