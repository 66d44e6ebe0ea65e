"""exporter: non-strict PyTorch export without Dynamo.

    import exporter
    ep = exporter.export(model, (x,), {"mask": mask})   # a torch.export.ExportedProgram

Failures are ``ExportError`` subclasses; ``ErrorInfo.from_exception(e)`` turns any
failure into plain data (type, category, message, location, hint).
``report_submodules(model, args, kwargs)`` says which submodules of a failing model
export on their own, and where the problem is.  ``to_executorch(ep, "model.pte")`` lowers
programs to an ExecuTorch file (with the ``executorch`` extra).
"""

from importlib import metadata as _metadata

from ._assumptions import Assumption, AssumptionKind, DraftReport
from ._branch_report import BranchDecision, BranchLoop, BranchReport
from ._notes import Note, NoteKind
from ._errors import (
    Category,
    AbortError,
    ConstraintError,
    ErrorInfo,
    ExportError,
    InputSpecError,
    LoweringError,
    PassError,
    TraceError,
    VerificationError,
)
from ._pipeline import export
from .executorch import to_executorch
from .submodules import ModuleStatus, SubmoduleNode, SubmoduleReport, report_submodules
from .inputs import register_container, register_known_containers

_DISTRIBUTION = "torch-exporter"
"""The name exporter is installed under (``pip install torch-exporter``); it imports as ``exporter``."""

try:
    __version__ = _metadata.version(_DISTRIBUTION)
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "export",
    "to_executorch",
    "register_container",
    "register_known_containers",
    "Assumption",
    "AssumptionKind",
    "DraftReport",
    "BranchReport",
    "BranchDecision",
    "BranchLoop",
    "Note",
    "NoteKind",
    "Category",
    "ErrorInfo",
    "ExportError",
    "ConstraintError",
    "InputSpecError",
    "TraceError",
    "PassError",
    "VerificationError",
    "LoweringError",
    "AbortError",
    "report_submodules",
    "SubmoduleReport",
    "SubmoduleNode",
    "ModuleStatus",
    "__version__",
]
