"""Inputs: example inputs bound to forward(), the dynamic_shapes spec read against them, and
container objects (KV caches) opened up into their tensors."""

from .bind import BoundInputs, bind_inputs, describe_path
from .containers import register_container, register_known_containers
from .dynamic_shapes import plan_dynamic_shapes, relaxed_dynamic_shapes

__all__ = [
    "BoundInputs",
    "bind_inputs",
    "describe_path",
    "plan_dynamic_shapes",
    "register_container",
    "register_known_containers",
    "relaxed_dynamic_shapes",
]
