"""Write files so that a reader never sees half of one: to a temporary file, then moved into place."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import torch

from .._errors import InputSpecError

__all__ = [
    "Staging",
    "output_error",
    "program_bytes",
    "require_writable",
    "save_program",
    "write_atomically",
    "write_json",
    "write_program",
    "writing",
]


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def output_error(path: str, error: OSError, what: str | None = None) -> InputSpecError:
    """``error`` from writing ``path`` as the CLI reports it: which file, why, and what to do."""
    reason = error.strerror or str(error)
    kept = "; the file already there is left as it was" if os.path.isfile(path) else ""
    hint = "free some space there, or write the file elsewhere" if error.errno in _FULL else "choose a location you can write to"
    return InputSpecError(f"cannot write {what + ' ' if what else ''}{path}: {reason}{kept}", hint=hint)


@contextlib.contextmanager
def writing(path: str, what: str | None = None) -> Iterator[None]:
    """Report an OSError raised inside as ``output_error(path, ...)``."""
    try:
        yield
    except OSError as e:
        raise output_error(path, e, what) from e


def require_writable(path: str, what: str) -> None:
    """Fail before any work is done when ``path`` could not be written: it is a directory, or
    the nearest existing directory above it takes no new file (read-only, permissions)."""
    if os.path.isdir(path):
        raise InputSpecError(f"{what} {path} is a directory", hint=f"give {what} a file name")
    directory = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(directory):
        directory = os.path.dirname(directory)
    with writing(path, what):
        if not os.path.isdir(directory):
            raise NotADirectoryError(errno.ENOTDIR, f"{directory} is not a directory")
        fd, probe = tempfile.mkstemp(prefix=".exporter-probe-", dir=directory)
        os.close(fd)
        os.unlink(probe)


def write_atomically(path: str, write: Callable[[str], None], *, suffix: str = "") -> None:
    """Call ``write(temporary_path)``, then move the result to ``path``.

    The temporary file sits next to ``path`` (so the move is atomic); if ``write`` fails
    it is removed and an existing file at ``path`` stays as it was. An OSError (a read-only
    or full location) is raised as ``output_error``, an InputSpecError naming the file.
    """
    with writing(path):
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


_IN_MEMORY = 256 << 20
"""Programs up to this size are saved to memory first and written by Python (see write_program)."""


def program_bytes(program: torch.export.ExportedProgram) -> int:
    """About what the .pt2 of ``program`` takes: its weights, buffers and tensor constants."""
    tensors = [*program.state_dict.values(), *program.constants.values()]
    return sum(t.nbytes for t in tensors if isinstance(t, torch.Tensor))


def write_program(program: torch.export.ExportedProgram, path: str) -> None:
    """``torch.export.save(program, path)``, such that a full disk is an OSError.

    torch's zip writer, when a write fails, throws again from its destructor and aborts the
    process. So a program is refused up front when its weights exceed the free space there, and
    one that fits in memory is saved to memory and written by Python, whose errors are errors.
    """
    size = program_bytes(program)
    free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free
    if size > free:
        raise OSError(errno.ENOSPC, f"No space left on device (the program needs about {size:,} bytes, {free:,} are free)")
    if size > _IN_MEMORY:
        torch.export.save(program, path)
        return
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    with open(path, "wb") as f:
        f.write(buffer.getbuffer())


def save_program(program: torch.export.ExportedProgram, path: str) -> None:
    """``write_program`` to ``path``, atomically."""
    write_atomically(path, lambda tmp: write_program(program, tmp), suffix=".pt2")


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
        with writing(destination):
            os.makedirs(final, exist_ok=True)
            directory = tempfile.mkdtemp(prefix=".exporter-", dir=final)
        self._staged.append((directory, final))
        return os.path.join(directory, os.path.basename(destination))

    def commit(self) -> None:
        """Move every staged file into its destination directory."""
        for directory, final in self._staged:
            for name in sorted(os.listdir(directory)):
                with writing(os.path.join(final, name)):
                    os.replace(os.path.join(directory, name), os.path.join(final, name))
            os.rmdir(directory)
        self._staged.clear()

    def discard(self) -> None:
        """Remove whatever is still staged (nothing after ``commit()``)."""
        for directory, _ in self._staged:
            shutil.rmtree(directory, ignore_errors=True)
        self._staged.clear()
