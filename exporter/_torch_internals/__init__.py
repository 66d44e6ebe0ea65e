"""Every private torch API exporter leans on, imported or wrapped in this one package.

Nothing else in exporter imports an underscored torch module or reads an underscored
attribute of a torch object (``torch.utils._pytree``, the pytree API every torch user calls,
is the exception); the architecture test holds it so.  The modules are split by concern; this
one checks the running release first (``release``), so an unsupported torch gets one line at
``import exporter``, then re-exports all of them but ``fast``, which only the fast paths
import."""

from .release import check_supported

check_supported()

from . import artifacts, control_flow, dispatch, fake, fx, modules, process, shapes, training  # noqa: E402
from .artifacts import *  # noqa: E402,F403
from .control_flow import *  # noqa: E402,F403
from .dispatch import *  # noqa: E402,F403
from .fake import *  # noqa: E402,F403
from .fx import *  # noqa: E402,F403
from .modules import *  # noqa: E402,F403
from .process import *  # noqa: E402,F403
from .release import RELEASE, TORCH_VERSION, UnsupportedTorch, at_least  # noqa: E402
from .shapes import *  # noqa: E402,F403
from .training import *  # noqa: E402,F403

__all__ = [
    *artifacts.__all__,
    *control_flow.__all__,
    *dispatch.__all__,
    *fake.__all__,
    *fx.__all__,
    *modules.__all__,
    *process.__all__,
    *shapes.__all__,
    *training.__all__,
    "RELEASE",
    "TORCH_VERSION",
    "UnsupportedTorch",
    "at_least",
]
