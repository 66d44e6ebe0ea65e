"""Write files so that a reader never sees half of one: to a temporary file, then moved into place."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["save_program", "write_atomically", "write_json"]


def write_atomically(path: str, write: Callable[[str], None], *, suffix: str = "") -> None:
    """Call ``write(temporary_path)``, then move the result to ``path``.

    The temporary file sits next to ``path`` (so the move is atomic); if ``write`` fails
    it is removed and an existing file at ``path`` stays as it was.
    """
    directory = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".exporter-", suffix=suffix, dir=directory)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; give it a new file's mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save_program(program: torch.export.ExportedProgram, path: str) -> None:
    """``torch.export.save`` to ``path``, atomically."""
    write_atomically(path, lambda tmp: torch.export.save(program, tmp), suffix=".pt2")


def write_json(path: str, data: Any) -> None:
    """``data`` as indented JSON with a final newline, atomically; values JSON lacks become strings."""

    def write(tmp: str) -> None:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2, default=str)
            f.write("\n")

    write_atomically(path, write, suffix=".json")
