"""Every bad input to ``exporter.export`` is answered with an ``ExportError`` that names the
input and says what to do, and leaves the model as it was.

Each row: what the caller passed, the error class, a pattern the message must match (it
names the offending input), and a pattern the hint must match (what to do).
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn
from torch.export import Dim

import exporter

from . import harness


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x, mask=None):
        y = self.lin(x)
        return y if mask is None else y * mask


X = torch.randn(2, 4)
BATCH = Dim("batch")


def _call(**overrides):
    call = {"model": Net(), "args": (X,), "kwargs": None}
    call.update(overrides)
    model, args, kwargs = call.pop("model"), call.pop("args"), call.pop("kwargs")
    return model, args, kwargs, call


ROWS = [
    # (id, overrides, error, message pattern, hint pattern)
    ("model is a function", {"model": lambda x: x + 1}, exporter.InputSpecError, r"nn\.Module", r"wrap|Module"),
    ("model is a class", {"model": Net}, exporter.InputSpecError, r"class Net", r"Net\(\.\.\.\)"),
    ("model is None", {"model": None}, exporter.InputSpecError, r"NoneType|None", r"nn\.Module"),
    ("args is a tensor", {"args": X}, exporter.InputSpecError, r"args.*tuple", r"\(x,\)|tuple"),
    ("args is a dict", {"args": {"x": X}}, exporter.InputSpecError, r"args.*tuple", r"kwargs|tuple"),
    ("kwargs is a list", {"kwargs": [X]}, exporter.InputSpecError, r"kwargs.*dict", r"kwargs="),
    ("too many args", {"args": (X, X, X)}, exporter.InputSpecError, r"forward\(\)|argument", r"."),
    ("unknown keyword", {"kwargs": {"nope": X}}, exporter.InputSpecError, r"nope", r"."),
    ("a leaf of no known kind", {"args": ({1, 2},)}, exporter.InputSpecError, r"set", r"."),
    ("strict=True", {"strict": True}, exporter.InputSpecError, r"strict=True", r"drop strict=True"),
    ("an unknown ir", {"ir": "fast"}, exporter.InputSpecError, r"ir='fast'", r"ir='inference'"),
    (
        "preserve names no submodule",
        {"preserve_module_call_signature": ("encoder",)},
        exporter.InputSpecError,
        r"encoder",
        r"lin",
    ),
    (
        "dynamic_shapes names an unknown input",
        {"dynamic_shapes": {"y": {0: BATCH}}},
        exporter.InputSpecError,
        r"'y'",
        r"x",
    ),
    (
        "dynamic_shapes dim out of range",
        {"dynamic_shapes": {"x": {5: BATCH}}},
        exporter.InputSpecError,
        r"5|dim",
        r".",
    ),
    (
        "dynamic_shapes of the wrong structure",
        {"dynamic_shapes": ({0: BATCH}, {0: BATCH}, {0: BATCH})},
        exporter.InputSpecError,
        r"dynamic_shapes",
        r".",
    ),
    (
        "a Dim of example size 1",
        {"args": (torch.randn(1, 4),), "dynamic_shapes": {"x": {0: BATCH}}},
        exporter.InputSpecError,
        r"x\.shape\[0\].*batch.*size is 1",
        r".",
    ),
    (
        "a Dim whose range excludes the example",
        {"dynamic_shapes": {"x": {0: Dim("b", min=3, max=8)}}},
        exporter.InputSpecError,
        r"b|x",
        r".",
    ),
    (
        "experts_implementation unknown",
        {"experts_implementation": "loop"},
        exporter.InputSpecError,
        r"loop",
        r"batched_mm|grouped_mm",
    ),
]


@pytest.mark.parametrize("overrides, error, message, hint", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_a_bad_input_is_answered(overrides, error, message, hint):
    model, args, kwargs, options = _call(**overrides)
    before = harness.snapshot_model(model) if isinstance(model, nn.Module) else None
    with pytest.raises(exporter.ExportError) as info:
        exporter.export(model, args, kwargs, **options)
    e = info.value
    assert isinstance(e, error), f"{type(e).__name__}: {e}"
    assert re.search(message, str(e)), f"message does not name the input: {e}"
    assert e.hint and re.search(hint, e.hint), f"hint does not say what to do: {e.hint!r}"
    if before is not None:
        harness.assert_model_unchanged(model, before)
