"""Notes: what a program does differently from the model run eagerly, as data, as words, on
the program, and in the log."""

import json
import logging

import attrs
import pytest
import torch

import exporter
from exporter._notes import Note, NoteKind, notes_of

HERE = __file__


def _line(marker: str) -> str:
    with open(HERE) as f:
        for i, line in enumerate(f, 1):
            if f"line-marker: {marker}" in line:
                return f"{HERE}:{i}"
    raise AssertionError(marker)


def test_each_kind_carries_the_text_reports_show():
    assert NoteKind.BUFFER_NOT_WRITTEN_BACK.value == "buffer not written back"
    assert NoteKind.EXPERTS_SWITCHED.value == "experts implementation switched"
    assert NoteKind("buffer not written back") is NoteKind.BUFFER_NOT_WRITTEN_BACK
    assert exporter.Note is Note and exporter.NoteKind is NoteKind


def test_a_note_has_a_kind_a_message_and_by_default_no_location():
    note = Note(NoteKind.EXPERTS_SWITCHED, "ran all experts")
    assert (note.kind, note.message, note.location) == (NoteKind.EXPERTS_SWITCHED, "ran all experts", None)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        note.message = "else"
    assert note == Note(NoteKind.EXPERTS_SWITCHED, "ran all experts")


def test_a_note_shows_its_message_and_then_its_location():
    assert str(Note(NoteKind.EXPERTS_SWITCHED, "ran all experts")) == "ran all experts"
    located = Note(NoteKind.BUFFER_NOT_WRITTEN_BACK, "replaced buffer 'b'", "model.py:7")
    assert str(located) == "replaced buffer 'b'\n  at model.py:7"


def test_a_note_is_plain_json_data_with_the_kinds_text():
    note = Note(NoteKind.BUFFER_NOT_WRITTEN_BACK, "replaced buffer 'b'", "model.py:7")
    data = note.to_json()
    assert data == {"kind": "buffer not written back", "message": "replaced buffer 'b'", "location": "model.py:7"}
    assert json.loads(json.dumps(data)) == data
    assert Note(NoteKind(data["kind"]), data["message"], data["location"]) == note


def test_notes_of_is_empty_for_an_object_without_notes_and_a_tuple_otherwise():
    assert notes_of(object()) == ()

    class Holder:
        def __init__(self):
            self.notes = [Note(NoteKind.EXPERTS_SWITCHED, "m")]

    assert notes_of(Holder()) == (Note(NoteKind.EXPERTS_SWITCHED, "m"),)


class RebuildsTable(torch.nn.Module):
    """A position table rebuilt for the input's length: a buffer replaced with another shape."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.zeros(4, 4))

    def forward(self, x):
        n = x.shape[1]
        if self.table.shape[0] != n:
            idx = torch.arange(n)
            self.table = (idx[:, None] - idx[None, :]).float()  # line-marker: rebuilt
        return x + self.table.sum(0)


def test_an_ordinary_program_has_no_notes():
    program = exporter.export(torch.nn.Linear(4, 4), (torch.randn(2, 4),))
    assert program.notes == () and notes_of(program) == ()


def test_a_buffer_replaced_with_another_shape_is_a_note_on_the_program():
    model = RebuildsTable().eval()
    program = exporter.export(model, (torch.randn(2, 8, 8),))
    (note,) = notes_of(program)
    assert note.kind is NoteKind.BUFFER_NOT_WRITTEN_BACK
    assert "replaced buffer 'table' (4, 4) float32 with (8, 8) float32" in note.message
    assert note.location == _line("rebuilt")
    assert str(note).endswith(f"\n  at {_line('rebuilt')}")
    assert model.table.shape == (4, 4)


def test_each_note_is_logged_as_a_warning_with_the_program(caplog):
    with caplog.at_level(logging.WARNING, logger="exporter"):
        program = exporter.export(RebuildsTable().eval(), (torch.randn(2, 8, 8),))
    (note,) = program.notes
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and r.getMessage() == str(note)]
    assert len(warned) == 1 and warned[0].name.startswith("exporter")


def test_an_ordinary_export_logs_no_note(caplog):
    with caplog.at_level(logging.WARNING, logger="exporter"):
        exporter.export(torch.nn.Linear(4, 4), (torch.randn(2, 4),))
    assert not [r for r in caplog.records if "replaced buffer" in r.getMessage()]
