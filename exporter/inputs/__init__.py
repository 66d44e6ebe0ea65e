"""Inputs: example inputs bound to forward(), and the dynamic_shapes spec read against them."""

from .bind import BoundInputs, bind_inputs, describe_path
from .dynamic_shapes import plan_dynamic_shapes

__all__ = ["BoundInputs", "bind_inputs", "describe_path", "plan_dynamic_shapes"]
