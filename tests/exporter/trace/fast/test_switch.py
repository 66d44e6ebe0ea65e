"""The one switch: every fast path on or off, the same program either way, and off means the
fast paths' modules are never imported."""

import json
import os
import pathlib
import subprocess
import sys

import attrs
import pytest
import torch

import exporter
from exporter._torch_internals import release
from exporter.trace.fast import FAST_PATHS_ENV, FastPaths
from tests.e2e.cases import CASES, TRANSFORMER_CASES
from tests.e2e.dynamic_cases import DYNAMIC_CASES
from tests.support import graph_fingerprint

ROOT = pathlib.Path(__file__).resolve().parents[4]


def test_the_switch_turns_every_fast_path_on_or_off():
    assert attrs.astuple(FastPaths.resolve(True)) == (True,) * len(release.FAST_PATHS)
    assert FastPaths.resolve(False) == FastPaths() and not FastPaths().any


@pytest.mark.parametrize("value, expected", [("0", False), ("1", True)])
def test_the_environment_variable_is_the_switch_when_no_keyword_is_given(monkeypatch, value, expected):
    monkeypatch.setenv(FAST_PATHS_ENV, value)
    assert FastPaths.resolve() == FastPaths.resolve(expected)
    assert FastPaths.resolve(not expected) == FastPaths.resolve(not expected)  # the keyword wins


def test_unset_each_fast_path_is_on_only_where_it_is_proven(monkeypatch):
    monkeypatch.delenv(FAST_PATHS_ENV)
    assert FastPaths.resolve() == FastPaths.resolve(True)  # every path is proven on this release
    unproven = {**release.FAST_PATHS_PROVEN, "symbolic_memo": frozenset({(2, 99)})}
    monkeypatch.setattr("exporter.trace.fast.FAST_PATHS_PROVEN", unproven)
    assert FastPaths.resolve() == attrs.evolve(FastPaths.resolve(True), symbolic_memo=False)


def test_a_bad_value_of_the_variable_is_an_input_error_naming_it(monkeypatch):
    monkeypatch.setenv(FAST_PATHS_ENV, "yes")
    with pytest.raises(exporter.InputSpecError, match=f"{FAST_PATHS_ENV}='yes'.*0 \\(off\\) or 1 \\(on\\)"):
        exporter.export(torch.nn.ReLU(), (torch.randn(2),))


_PROBE = """
import json, sys, torch, exporter
model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
exporter.export(model, (torch.randn(2, 3),))
exporter.export(model, (torch.randn(2, 3),), dynamic_shapes=({0: torch.export.Dim.AUTO},), ir="training")
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("exporter.trace.fast.", "exporter._torch_internals.fast")))))
"""


@pytest.mark.parametrize("value", ["0", "1"])
def test_switched_off_the_fast_paths_modules_are_never_imported(value):
    env = {**os.environ, FAST_PATHS_ENV: value}
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    if value == "0":
        assert imported == []
    else:
        assert {"exporter.trace.fast.recorder", "exporter.trace.fast.symbolic_memo", "exporter._torch_internals.fast"} <= set(imported)


def _same(on, off):
    assert graph_fingerprint(on.graph_module) == graph_fingerprint(off.graph_module)
    assert on.graph_signature == off.graph_signature
    assert on.range_constraints == off.range_constraints


IRS = pytest.mark.parametrize("ir", ["inference", "training"])


@IRS
@pytest.mark.parametrize("case", CASES + TRANSFORMER_CASES, ids=lambda c: c.name)
def test_static_programs_are_the_same_with_the_fast_paths_on_and_off(case, ir):
    model = case.make_model()
    args, kwargs = case.make_inputs(0)
    _same(exporter.export(model, args, kwargs, ir=ir, fast_paths=True), exporter.export(model, args, kwargs, ir=ir, fast_paths=False))


@pytest.mark.slow
@IRS
@pytest.mark.parametrize("case", DYNAMIC_CASES, ids=lambda c: c.name)
def test_dynamic_programs_are_the_same_with_the_fast_paths_on_and_off(case, ir):
    model = case.make_model()
    args, kwargs = case.make_inputs(case.sizes(), 0)
    programs = [
        exporter.export(model, args, kwargs, dynamic_shapes=case.make_dynamic_shapes(), ir=ir, fast_paths=fast)
        for fast in (True, False)
    ]
    _same(*programs)
