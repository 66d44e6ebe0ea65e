"""torch.export's own example database (``torch._export.db.examples``), differentially.

ExportDB is the catalogue torch.export documents its supported and unsupported Python
features with: each example is a module, its example inputs, its ``dynamic_shapes`` and a
support level.  Both tools export every example in both IRs: where torch.export succeeds,
exporter must too, with the oracle's signature and ``range_constraints`` and a program that
matches eager; where torch.export refuses, exporter must refuse with an ``ExportError`` or
give a program that matches eager.
"""

from __future__ import annotations

import copy
import re

import pytest
import torch
import torch.utils._pytree as pytree

import exporter
from tests.e2e.harness import _signature, assert_same_signature

examples = pytest.importorskip("torch._export.db.examples")
CASES = sorted(examples.all_examples().items())
IRS = ("inference", "training")


def _oracle(case, ir: str):
    program = torch.export.export(
        copy.deepcopy(case.model), copy.deepcopy(case.example_args), copy.deepcopy(case.example_kwargs or {}),
        dynamic_shapes=case.dynamic_shapes, strict=False,
    )
    return program.run_decompositions({}) if ir == "inference" else program


def _unnumbered(rows: list[tuple]) -> list[tuple]:
    """Output names without FX's counter: torch.export's ``run_decompositions`` re-traces and
    numbers nodes after the size arithmetic of that re-trace (see tests/e2e/test_dynamic.py)."""
    return [(kind, re.sub(r"_\d+$", "", name), *rest) for kind, name, *rest in rows]


def _assert_matches_eager(case, program) -> None:
    args, kwargs = case.example_args, case.example_kwargs or {}
    expected = copy.deepcopy(case.model)(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    got = program.module()(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    ours, theirs = pytree.tree_leaves(got), pytree.tree_leaves(expected)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if isinstance(b, torch.Tensor):
            torch.testing.assert_close(a, b)
        else:
            assert a == b


@pytest.mark.parametrize("ir", IRS)
@pytest.mark.parametrize("name, case", CASES, ids=[name for name, _ in CASES])
def test_exportdb_example(name, case, ir):
    try:
        oracle = _oracle(case, ir)
    except Exception:  # noqa: BLE001 - torch.export refuses: exporter must refuse or be right
        oracle = None
    model = copy.deepcopy(case.model)
    try:
        program = exporter.export(
            model, copy.deepcopy(case.example_args), copy.deepcopy(case.example_kwargs or {}),
            dynamic_shapes=case.dynamic_shapes, ir=ir,
        )
    except exporter.ExportError:
        assert oracle is None, f"{name}: torch.export exports it, exporter refused"
        return
    _assert_matches_eager(case, program)
    if oracle is not None:
        ours_in, ours_out = _signature(program)
        ref_in, ref_out = _signature(oracle)
        assert_same_signature(name, (ours_in, _unnumbered(ours_out)), (ref_in, _unnumbered(ref_out)))
        assert {str(k): v for k, v in program.range_constraints.items()} == {
            str(k): v for k, v in oracle.range_constraints.items()
        }


def test_every_example_is_collected():
    # the database ships with torch: an empty collection would pass vacuously
    assert len(CASES) >= 30
    assert any(case.support_level.name == "NOT_SUPPORTED_YET" for _, case in CASES)
