"""The differential fuzzer's seeded run, and tests that its parts can fail.

Each seed is one generated program checked against eager and torch.export
(``runner.check_source``); a finding fails the test with the program's source and the
command that shrinks it. The long run is ``python -m tests.fuzz.run``
(docs/testing.md, "Fuzzing"). Every shrunk finding under ``findings/`` is checked too, as a
strict xfail until exporter is fixed; a finding with a ``FIXED = "..."`` line is a
regression test.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

import exporter
from tests.fuzz import runner
from tests.fuzz.generator import generate
from tests.fuzz.runner import check_source, load_program
from tests.fuzz.shrink import shrink

SEEDS = range(100_000, 100_024)
FINDINGS = sorted((Path(__file__).parent / "findings").glob("[0-9][0-9][0-9]_*.py"))


def _reset_dynamo() -> None:
    # torch.cond compiles its body with Dynamo, whose caches outlive an export and can change
    # the next one (finding 001): each test starts and ends with them empty, so the seeded
    # run neither sees nor leaves state for other tests in its xdist worker. The long run
    # does not reset, which is how 001 was found.
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()


@pytest.fixture(autouse=True)
def _quiet():
    _reset_dynamo()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        yield
        logging.disable(logging.NOTSET)
    _reset_dynamo()


@pytest.mark.parametrize("seed", SEEDS)
def test_seeded_program(seed):
    source = generate(seed).render()
    outcome = check_source(source)
    assert not outcome.finding, (
        f"seed {seed}: {outcome.klass}\n{outcome.detail}\n"
        f"shrink it: python -m tests.fuzz.run --programs 1 --seed {seed} --out fuzz-{seed}\n\n{source}"
    )
    assert not outcome.klass.startswith("invalid program"), f"the generator wrote a bad program:\n{source}"


TRAINING_SEEDS = range(100_024, 100_032)


@pytest.mark.parametrize("seed", TRAINING_SEEDS)
def test_seeded_program_in_the_training_ir(seed):
    """The same judgement of ``exporter.export(..., ir="training")``, against eager and
    torch.export's training IR."""
    source = generate(seed).render()
    outcome = check_source(source, ir="training")
    assert not outcome.finding, (
        f"seed {seed} (training IR): {outcome.klass}\n{outcome.detail}\n"
        f"shrink it: python -m tests.fuzz.run --programs 1 --seed {seed} --ir training --out fuzz-{seed}\n\n{source}"
    )


def _finding_param(path: Path):
    text = path.read_text()
    if re.search(r"^FIXED = ", text, re.M):  # fixed: the finding is a regression test now
        return pytest.param(path, id=path.stem)
    reason = re.search(r'"""(.*?)"""', text, re.S).group(1).strip().splitlines()[0]
    return pytest.param(
        path, id=path.stem, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)
    )


_FRESH_PROCESS = """
import json, sys, warnings, logging
warnings.simplefilter("ignore"); logging.disable(logging.WARNING)
from tests.fuzz.runner import check_source, load_program
source = open(sys.argv[1]).read()
for first in getattr(load_program(source), "RUN_FIRST", ()):
    check_source(first)
outcome = check_source(source)
print(json.dumps([outcome.klass, outcome.finding, outcome.detail]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("path", [_finding_param(p) for p in FINDINGS])
def test_finding_is_fixed(path):
    """In a fresh process (a finding may need other programs run first: ``RUN_FIRST``)."""
    root = Path(__file__).parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS, str(path)], cwd=root, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    if done.returncode != 0:  # a broken check is an error, not the expected failure
        raise RuntimeError(done.stderr[-3000:])
    klass, finding, detail = json.loads(done.stdout.strip().splitlines()[-1])
    assert not finding, f"{klass}: {detail}"


def test_programs_are_deterministic_and_shape_correct_by_construction():
    """Every generated program builds and runs eagerly at its example and check sizes."""
    for seed in range(200, 260):
        program = generate(seed)
        source = program.render()
        assert generate(seed).render() == source
        mod = load_program(source)
        for sizes in [mod.SIZES, *mod.CHECK_SIZES]:
            args, kwargs = mod.make_inputs(sizes, 0)
            with torch.no_grad():
                mod.make_model()(*args, **kwargs)


def test_a_raw_exception_is_a_finding(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("not an ExportError")

    monkeypatch.setattr(exporter, "export", broken)
    outcome = check_source(generate(3).render())
    assert (outcome.klass, outcome.finding) == ("raw exception from exporter.export", True)


def test_a_wrong_program_is_a_finding(monkeypatch):
    """A program that computes something else than the model differs from eager."""
    real = exporter.export

    class Other(torch.nn.Module):
        def forward(self, *args, **kwargs):
            return torch.zeros(())

    def wrong(model, args, kwargs=None, dynamic_shapes=None, **options):
        return real(Other(), args, kwargs, **options)

    monkeypatch.setattr(exporter, "export", wrong)
    outcome = check_source(generate(5).render())
    assert outcome.finding and outcome.klass == "differs from eager", outcome


def test_a_changed_model_is_a_finding(monkeypatch):
    real = exporter.export

    def meddling(model, args, kwargs=None, dynamic_shapes=None, **options):
        model.train(not model.training)
        return real(model, args, kwargs, dynamic_shapes=dynamic_shapes, **options)

    monkeypatch.setattr(exporter, "export", meddling)
    outcome = check_source(generate(7).render())
    assert (outcome.klass, outcome.finding) == ("model changed by export", True)


def test_exporter_failing_where_the_oracle_succeeds_is_a_finding(monkeypatch):
    def refuses(*args, **kwargs):
        raise exporter.TraceError("refused", category=exporter.Category.UNSUPPORTED_OPERATOR)

    monkeypatch.setattr(exporter, "export", refuses)
    outcome = check_source(generate(3).render())
    assert outcome.finding and outcome.klass.startswith("exporter fails, oracle succeeds"), outcome


def test_shrink_keeps_the_finding_and_drops_the_rest():
    """With a stand-in check (a finding = the program mutates through masked_fill_)."""
    seed = next(s for s in range(1000) if "masked_fill" in generate(s).features() and len(generate(s).stmts) > 6)
    program = generate(seed)

    def check(source):
        found = "masked_fill_" in source
        return runner.Outcome("masked_fill" if found else "match", found)

    small, outcome, tried = shrink(program, check(program.render()), check=check)
    assert outcome.klass == "masked_fill" and tried > 0
    assert len(small.stmts) < len(program.stmts)
    assert [s.tag for s in small.stmts if s.defines is None] == ["masked_fill"]
    assert len(small.args) == 1 and not small.spec_enabled
