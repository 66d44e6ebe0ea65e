"""IR checks run on every exported program.

Each check is a function that raises ``exporter.VerificationError`` naming the node, the
rule and what it found.  Installed as ``exporter.verifier``; imports only exporter's
shared vocabulary (errors, IR names).  ``verify_program`` runs them all on every export;
``EXPORTER_VERIFY_EACH_PASS=1`` runs ``verify_structure`` (the rules every pass must keep)
after each pass.
"""

from .module_stack import verify_module_stack, verify_stack_traces
from .ops import verify_functional_ops
from .placeholders import verify_placeholder_names, verify_placeholders_match_specs
from .signature import verify_signature

__all__ = [
    "verify_program",
    "verify_structure",
    "verify_module_stack",
    "verify_stack_traces",
    "verify_placeholder_names",
    "verify_placeholders_match_specs",
    "verify_functional_ops",
    "verify_signature",
]


def verify_structure(gm, input_specs, *, training: bool = False) -> None:
    """The rules that hold from tracing on: functional ops only (in the training IR, ATen ops
    that may write and the not yet wrapped grad/autocast calls), one input spec per placeholder."""
    verify_functional_ops(gm, training=training, markers=training)
    verify_placeholders_match_specs(gm, input_specs)


def verify_program(program) -> None:
    """Run every check on a ``torch.export.ExportedProgram``."""
    gm = program.graph_module
    verify_module_stack(gm)
    verify_stack_traces(gm)
    verify_signature(program)
    verify_placeholder_names(gm, program.graph_signature.input_specs)
    verify_functional_ops(gm, training=program.dialect == "TRAINING")
