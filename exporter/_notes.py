"""What a program does differently from the model run eagerly, said once so nobody is surprised.

An export that succeeds may still leave out something forward() did, where a program cannot
hold it and torch.export leaves it out too: a buffer replaced with a tensor of another shape is
computed where forward uses it but not written back.  Each such place is a ``Note``; the
program carries them as ``ep.notes`` and the command line shows them with the program."""

from __future__ import annotations

import enum

import attrs

__all__ = ["Note", "NoteKind", "notes_of"]


class NoteKind(enum.Enum):
    """What the program leaves out; the value is the text reports carry."""

    BUFFER_NOT_WRITTEN_BACK = "buffer not written back"
    """forward() replaced a buffer with a tensor of another shape or dtype: the program computes
    the new value where forward uses it, and each call computes it again; the buffer keeps the
    shape and value it had."""
    EXPERTS_SWITCHED = "experts implementation switched"
    """A transformers mixture-of-experts block loops over the experts a batch hits (a loop as
    long as the data says): the program runs all experts as batched matrix products instead,
    and was checked against the model as configured on the example inputs."""


@attrs.frozen
class Note:
    """One thing the program does differently from eager, and where in the model."""

    kind: NoteKind
    message: str
    """What happened and what the program does instead."""
    location: str | None = None
    """``file.py:LINE`` of the user's code it is about."""

    def to_json(self) -> dict:
        """The note as the JSON report writes it."""
        return {"kind": self.kind.value, "message": self.message, "location": self.location}

    def __str__(self) -> str:
        return self.message + (f"\n  at {self.location}" if self.location else "")


def notes_of(program: object) -> tuple[Note, ...]:
    """The notes an export attached to ``program`` (none for a program exporter did not make)."""
    return tuple(getattr(program, "notes", ()))
