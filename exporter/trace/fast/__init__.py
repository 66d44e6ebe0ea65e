"""The fast paths: code that only makes a trace faster, each piece standing in for a part of
make_fx or the fake-tensor machinery, all behind one switch.

``FastPaths`` says which are on: ``resolve`` reads the keyword (``export(...,
fast_paths=...)``), else ``EXPORTER_FAST_PATHS`` (``0`` or ``1``), else turns on each path
proven on the running torch release (``_torch_internals.release.FAST_PATHS_PROVEN``).  Off, a
trace is make_fx's and torch's own, with the same program.  This package's other modules are
imported only when a path they hold is on."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import attrs

from ..._torch_internals.release import FAST_PATHS, FAST_PATHS_PROVEN, RELEASE

__all__ = ["FAST_PATHS_ENV", "FastPaths"]

FAST_PATHS_ENV = "EXPORTER_FAST_PATHS"
"""Environment variable: ``0`` turns every fast path off, ``1`` on (also on a release where
they are not proven); unset, each is on where it is proven."""


@attrs.frozen
class FastPaths:
    """Which fast paths a trace takes (all off by default: the plain path)."""

    recorder: bool = False
    symbolic_memo: bool = False
    direct_fakes: bool = False
    direct_pre_dispatch: bool = False
    memory_formats: bool = False
    deferred_code: bool = False
    meta_kernels: bool = False

    @classmethod
    def resolve(cls, switch: bool | None = None) -> FastPaths:
        """The fast paths for a trace: all on (``switch=True``), all off (``False``), or, for
        ``None``, as ``EXPORTER_FAST_PATHS`` says, else each where it is proven on this release."""
        if switch is None:
            value = os.environ.get(FAST_PATHS_ENV, "").strip()
            if value not in ("", "0", "1"):
                raise ValueError(f"{FAST_PATHS_ENV}={value!r}: use 0 (off) or 1 (on), or leave it unset")
            switch = None if value == "" else value == "1"
        if switch is None:
            return cls(**{name: RELEASE in FAST_PATHS_PROVEN[name] for name in FAST_PATHS})
        return cls(**dict.fromkeys(FAST_PATHS, bool(switch)))

    @property
    def any(self) -> bool:
        return any(attrs.astuple(self))

    def direct_fake(self) -> Callable[[Any, Any], Any] | None:
        """``fake_of_plain_tensor(mode, t)`` when ``direct_fakes`` is on."""
        if not self.direct_fakes:
            return None
        from ..._torch_internals.fast import fake_of_plain_tensor

        return fake_of_plain_tensor

    def memory_formats_remembered(self) -> contextlib.AbstractContextManager:
        """The ``memory_formats`` patch, entered with the trace's other patches."""
        if not self.memory_formats:
            return contextlib.nullcontext()
        from .patches import memory_formats_remembered

        return memory_formats_remembered()

    def program_code_deferred(self) -> contextlib.AbstractContextManager:
        """The ``deferred_code`` patch, entered around making the program."""
        if not self.deferred_code:
            return contextlib.nullcontext()
        from .patches import program_code_deferred

        return program_code_deferred()

    def pre_dispatch_for_make_fx(self) -> contextlib.AbstractContextManager:
        """The ``direct_pre_dispatch`` patch for a training-IR trace by make_fx."""
        if not self.direct_pre_dispatch:
            return contextlib.nullcontext()
        from ..._torch_internals.fast import is_make_fx_mode
        from .patches import direct_pre_dispatch

        return direct_pre_dispatch(is_make_fx_mode)

    def meta_kernels_for(self, fake_mode: Any) -> contextlib.AbstractContextManager:
        """The ``meta_kernels`` path, in front of ``fake_mode``'s dispatch."""
        if not self.meta_kernels:
            return contextlib.nullcontext()
        from ..._torch_internals import fake_dispatch_through
        from .meta_kernels import MetaKernels

        return fake_dispatch_through(fake_mode, MetaKernels(fake_mode))

    def symbolic_memo_for(self, fake_mode: Any, *, training: bool) -> contextlib.AbstractContextManager:
        """A dynamic trace's ``symbolic_memo``, in front of ``fake_mode``'s dispatch."""
        if not self.symbolic_memo:
            return contextlib.nullcontext()
        from ..._torch_internals import fake_dispatch_through
        from .symbolic_memo import SymbolicMemo

        return fake_dispatch_through(fake_mode, SymbolicMemo(fake_mode, kernels="training" if training else "inference"))
