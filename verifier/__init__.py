"""IR checks run on every exported program.

Each check is a function that raises ``exporter.VerificationError`` naming the node, the
rule and what it found.  ``verify_program`` runs them all; ``EXPORTER_VERIFY_EACH_PASS=1``
also runs the graph checks after every pass.
"""

from .module_stack import verify_module_stack, verify_stack_traces
from .ops import verify_functional_ops
from .placeholders import verify_placeholder_names
from .signature import verify_signature

__all__ = [
    "verify_program",
    "verify_graph",
    "verify_module_stack",
    "verify_stack_traces",
    "verify_placeholder_names",
    "verify_functional_ops",
    "verify_signature",
]


def verify_graph(gm, input_specs) -> None:
    """The checks that need only the graph module and its input specs."""
    verify_module_stack(gm)
    verify_stack_traces(gm)
    verify_placeholder_names(gm, input_specs)
    verify_functional_ops(gm)


def verify_program(program) -> None:
    """Run every check on a ``torch.export.ExportedProgram``."""
    verify_graph(program.graph_module, program.graph_signature.input_specs)
    verify_signature(program)
