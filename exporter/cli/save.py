"""Write files so that a reader never sees half of one: to a temporary file, then moved into place."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["Staging", "save_program", "write_atomically", "write_json"]


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


class Staging:
    """Several files written in hidden directories beside their destinations, then moved into
    place together: an export writing a .pt2, an AOTInductor package and an ONNX file writes
    all of them or, when any step fails, none.

    Each destination gets its own directory, so a file keeps its final name while staged (an
    ONNX file names its external-data file by that name) and companions written next to it
    move with it.
    """

    def __init__(self) -> None:
        self._staged: list[tuple[str, str]] = []

    def path(self, destination: str) -> str:
        """Where to write ``destination`` until ``commit()``."""
        final = os.path.dirname(os.path.abspath(destination))
        os.makedirs(final, exist_ok=True)
        directory = tempfile.mkdtemp(prefix=".exporter-", dir=final)
        self._staged.append((directory, final))
        return os.path.join(directory, os.path.basename(destination))

    def commit(self) -> None:
        """Move every staged file into its destination directory."""
        for directory, final in self._staged:
            for name in sorted(os.listdir(directory)):
                os.replace(os.path.join(directory, name), os.path.join(final, name))
            os.rmdir(directory)
        self._staged.clear()

    def discard(self) -> None:
        """Remove whatever is still staged (nothing after ``commit()``)."""
        for directory, _ in self._staged:
            shutil.rmtree(directory, ignore_errors=True)
        self._staged.clear()
