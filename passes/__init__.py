"""Graph passes: each a plain function ``pass_name(state: ExportState) -> bool`` (changed?)."""

from .eliminate_dead_code import eliminate_dead_code
from .lift_constants import lift_constants
from .name_placeholders import name_placeholders
from .normalize_module_stack import normalize_module_stack
from .order_inputs import order_inputs
from .restore_fqns import restore_fqns

__all__ = [
    "eliminate_dead_code",
    "lift_constants",
    "name_placeholders",
    "normalize_module_stack",
    "order_inputs",
    "restore_fqns",
]
