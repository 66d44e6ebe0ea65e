"""exporter: non-strict PyTorch export without Dynamo.

    import exporter
    ep = exporter.export(model, (x,), {"mask": mask})   # a torch.export.ExportedProgram
"""

from ._errors import ConstraintError, ExportError, InputSpecError, PassError, TraceError, VerificationError
from ._pipeline import export

__version__ = "0.1.0"

__all__ = [
    "export",
    "ExportError",
    "ConstraintError",
    "InputSpecError",
    "TraceError",
    "PassError",
    "VerificationError",
    "__version__",
]
