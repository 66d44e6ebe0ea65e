"""Graph passes: each a plain function ``pass_name(state: ExportState) -> bool`` (changed?).

``DEFAULT_PASSES`` is the pipeline exporter runs, in order, after tracing.
"""

from .eliminate_dead_code import eliminate_dead_code
from .functionalize_constant_writes import functionalize_constant_writes
from .insert_runtime_asserts import insert_runtime_asserts
from .lift_constants import lift_constants
from .name_placeholders import name_placeholders
from .normalize_module_stack import normalize_module_stack
from .order_inputs import order_inputs
from .pin_variable_layouts import pin_variable_layouts
from .remove_state_copies import remove_state_copies
from .restore_fqns import restore_fqns

__all__ = [
    "DEFAULT_PASSES",
    "eliminate_dead_code",
    "functionalize_constant_writes",
    "insert_runtime_asserts",
    "lift_constants",
    "name_placeholders",
    "normalize_module_stack",
    "order_inputs",
    "pin_variable_layouts",
    "remove_state_copies",
    "restore_fqns",
]

DEFAULT_PASSES = (
    remove_state_copies,
    insert_runtime_asserts,
    eliminate_dead_code,
    functionalize_constant_writes,
    pin_variable_layouts,
    lift_constants,
    restore_fqns,
    order_inputs,
    name_placeholders,
    normalize_module_stack,
)
