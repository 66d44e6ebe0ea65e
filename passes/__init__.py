"""Graph passes: each a plain function ``pass_name(state: ExportState) -> bool`` (changed?).

``DEFAULT_PASSES`` is the pipeline exporter runs, in order, after tracing.
"""

from .check_conversions import check_conversions
from .eliminate_dead_code import eliminate_dead_code
from .functionalize_constant_writes import functionalize_constant_writes
from .insert_runtime_asserts import insert_runtime_asserts
from .lift_constants import lift_constants
from .name_placeholders import name_placeholders
from .normalize_module_stack import normalize_module_stack
from .order_inputs import order_inputs
from .pin_variable_layouts import layout_pin_nodes, pin_variable_layouts
from .remove_state_copies import remove_state_copies
from .restore_fqns import restore_fqns
from .wrap_autograd_regions import wrap_autograd_regions

__all__ = [
    "DEFAULT_PASSES",
    "TRAINING_PASSES",
    "check_conversions",
    "eliminate_dead_code",
    "functionalize_constant_writes",
    "insert_runtime_asserts",
    "lift_constants",
    "name_placeholders",
    "normalize_module_stack",
    "order_inputs",
    "layout_pin_nodes",
    "pin_variable_layouts",
    "remove_state_copies",
    "restore_fqns",
    "wrap_autograd_regions",
]

DEFAULT_PASSES = (
    remove_state_copies,
    insert_runtime_asserts,
    functionalize_constant_writes,
    lift_constants,
    eliminate_dead_code,
    pin_variable_layouts,
    restore_fqns,
    order_inputs,
    name_placeholders,
    normalize_module_stack,
)

TRAINING_PASSES = (
    insert_runtime_asserts,
    check_conversions,
    eliminate_dead_code,
    lift_constants,
    pin_variable_layouts,
    wrap_autograd_regions,
    restore_fqns,
    order_inputs,
    name_placeholders,
    normalize_module_stack,
)
"""The pipeline for ``ir="training"``: writes stay in place (nothing to turn into updates
or out-of-place ops), and grad/autocast regions are wrapped after
constants are lifted, so a constant a region reads is one of its inputs."""
