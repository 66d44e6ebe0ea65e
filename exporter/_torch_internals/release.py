"""The torch releases exporter supports, the one it runs on, and the fast paths proven on each.

A difference between releases is written once, in this package, with the releases it applies
to (``at_least``).  Bringing up a release: widen ``SUPPORTED``, run the suite with the fast
paths off, then add the release to ``FAST_PATHS_PROVEN`` for each fast path whose equality
tests pass on it."""

from __future__ import annotations

import os
import pathlib
import re
import sys

import torch

__all__ = [
    "ALLOW_UNSUPPORTED",
    "FAST_PATHS",
    "FAST_PATHS_PROVEN",
    "RELEASE",
    "SUPPORTED",
    "TORCH_VERSION",
    "UnsupportedTorch",
    "at_least",
    "check_supported",
    "started_as_command_line",
    "parse_release",
    "supported_range",
]

SUPPORTED = ((2, 13), (2, 14), (2, 15))
"""Every torch release (major, minor) the suite passes on; pyproject.toml's range says the same."""

ALLOW_UNSUPPORTED = "EXPORTER_ALLOW_UNSUPPORTED_TORCH"
"""Environment variable: when set (not 0), ``import exporter`` goes ahead on a release outside
``SUPPORTED``, with the fast paths off; for bringing up the next release."""

FAST_PATHS = (
    "recorder", "symbolic_memo", "direct_fakes", "direct_pre_dispatch", "memory_formats", "deferred_code", "meta_kernels",
)
"""The fast paths, each switched on by default only on the releases its equality tests pass on."""

FAST_PATHS_PROVEN: dict[str, frozenset[tuple[int, int]]] = {name: frozenset(SUPPORTED) for name in FAST_PATHS}
"""fast path -> the releases where it is on by default (its equality tests pass there)."""

TORCH_VERSION: str = torch.__version__
"""The torch version string, as reports show it (``2.15.0+cu132``)."""


class UnsupportedTorch(ImportError):
    """``import exporter`` on a torch release outside ``SUPPORTED``."""


UnsupportedTorch.__module__ = "exporter"  # as a traceback names it: the package refused to import


def parse_release(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string: ``2.15.0+cu132`` -> (2, 15)."""
    found = re.match(r"(\d+)\.(\d+)", str(version))
    if found is None:
        raise ValueError(f"not a torch version: {version!r}")
    return int(found[1]), int(found[2])


RELEASE: tuple[int, int] = parse_release(TORCH_VERSION)
"""The torch release exporter runs on, (major, minor)."""


def at_least(major: int, minor: int) -> bool:
    """Whether the running torch is release ``major.minor`` or later."""
    return RELEASE >= (major, minor)


def supported_range() -> str:
    """The supported releases as a pip requirement: ``torch>=2.13,<2.16``."""
    low, high = SUPPORTED[0], SUPPORTED[-1]
    return f"torch>={low[0]}.{low[1]},<{high[0]}.{high[1] + 1}"


def check_supported() -> None:
    """Raise ``UnsupportedTorch`` unless the running torch is a supported release (or
    ``ALLOW_UNSUPPORTED`` is set).

    The command line (``python -m exporter``, the ``exporter`` script) imports the package
    before its own code can run, so the refusal is its usage error from here: the one line
    on stderr and exit code 2, with the traceback only under ``-v``/``--verbose``."""
    if RELEASE in SUPPORTED or os.environ.get(ALLOW_UNSUPPORTED, "") not in ("", "0"):
        return
    low, high = SUPPORTED[0], SUPPORTED[-1]
    error = UnsupportedTorch(
        f"exporter supports torch {low[0]}.{low[1]} to {high[0]}.{high[1]} and found torch {TORCH_VERSION}: "
        f"install a supported release (pip install '{supported_range()}'), or set {ALLOW_UNSUPPORTED}=1 "
        "to try this one with the fast paths off"
    )
    if started_as_command_line() and not {"-v", "--verbose"} & set(sys.argv[1:]):
        sys.stderr.write(f"exporter: error: {error}\n")
        raise SystemExit(2)
    raise error


def started_as_command_line() -> bool:
    """Whether this process is exporter's command line: ``python [options] -m exporter ...``
    or the ``exporter`` console script."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    options = iter(argv[1:])
    for arg in options:
        if arg == "-m":
            return next(options, None) == "exporter"
        if arg.startswith("-m"):
            return arg == "-mexporter"
        if arg in ("-X", "-W"):  # Python's options that take a value
            next(options, None)
        elif arg == "-c" or not arg.startswith("-"):
            break
    return bool(sys.argv) and pathlib.Path(sys.argv[0]).stem == "exporter"
