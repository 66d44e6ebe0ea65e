"""The control-flow fuzzer (``tests/fuzz/flow``): its seeded runs, its findings, and tests that
it can fail.

Each seed is one generated model with branches on values, loops over data-sized tensors and
Python state across both, exported and held to eager on inputs chosen to take every side
(``flow.runner.check_flow``). A program that differs from eager, raises where eager returns
or returns where eager raises fails the test with its source and the command that shrinks it.
The default run judges a few seeds; the ``fuzz`` marker runs 500 (CI runs it on every
supported torch release); the long run is ``python -m tests.fuzz.flow.run``
(docs/testing.md, "The control-flow fuzzer"). Every shrunk finding ``findings/flow_*.py`` is
judged too: a strict xfail until fixed, a regression test once it has a ``FIXED = "..."`` line.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from pathlib import Path

import pytest
import torch

import exporter
from tests.fuzz.flow.generator import generate
from tests.fuzz.flow.runner import check_flow, inputs_for
from tests.fuzz.flow.shrink import finding_file, shrink
from tests.fuzz.runner import Outcome, load_program

QUICK_SEEDS = range(0, 12)
SLOW_QUICK_SEEDS = {11}
"""Quick seeds whose program takes over 6 s: with the slow tests."""
CI_SEEDS = range(0, int(os.environ.get("EXPORTER_FUZZ_PROGRAMS", "500")))
"""The seeded run's programs: 500, fewer where ``EXPORTER_FUZZ_PROGRAMS`` says so (CI's
runs on the releases besides the default, which share its generator and machinery)."""
FINDINGS = sorted((Path(__file__).parent / "findings").glob("flow_*.py"))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        yield
        logging.disable(logging.NOTSET)


def _judge(seed: int) -> None:
    source = generate(seed).render()
    outcome = check_flow(source, seed=seed)
    assert not outcome.finding, (
        f"seed {seed}: {outcome.klass}\n{outcome.detail}\n"
        f"shrink it: python -m tests.fuzz.flow.run --programs 1 --seed {seed} --out fuzz-flow-{seed}\n\n{source}"
    )
    assert not outcome.klass.startswith("invalid"), f"the generator wrote a bad program:\n{source}"


@pytest.mark.parametrize("seed", [pytest.param(s, marks=pytest.mark.slow) if s in SLOW_QUICK_SEEDS else s for s in QUICK_SEEDS])
def test_seeded_program(seed):
    _judge(seed)


@pytest.mark.fuzz
@pytest.mark.parametrize("seed", CI_SEEDS)
def test_seeded_run(seed):
    _judge(seed)


def _finding(path: Path):
    text = path.read_text()
    if re.search(r"^FIXED = ", text, re.M):
        return pytest.param(path, id=path.stem)
    reason = text.split('"""')[1].strip().splitlines()[0]
    return pytest.param(path, id=path.stem, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason))


@pytest.mark.parametrize("path", [_finding(p) for p in FINDINGS])
def test_finding_is_fixed(path):
    text = path.read_text()
    seed = int(re.search(r"^SEED = (\d+)", text, re.M).group(1))
    outcome = check_flow(text, seed=seed)
    assert not outcome.finding, f"{outcome.klass}: {outcome.detail}"


def test_programs_are_deterministic_and_run_eagerly_on_their_example():
    for seed in range(300, 340):
        source = generate(seed).render()
        assert generate(seed).render() == source
        mod = load_program(source)
        with torch.no_grad():
            try:
                mod.make_model()(*mod.EXAMPLE)
            except ValueError:
                pass  # a generated input check may refuse the example: the runner calls that invalid


def test_the_inputs_go_round_loops_no_times_once_and_many_times():
    counts = {len(torch.unique(labels[labels >= 0])) for _, labels in inputs_for(0)}
    assert counts == {0, 1, 2, 3, 5}


def test_the_programs_cover_what_the_fuzzer_is_for():
    features = set().union(*(generate(seed).features() for seed in range(200)))
    assert {
        "branch", "loop", "counter", "flag", "float", "list", "attribute", "last item", "break", "continue",
        "return in loop", "early return", "stored check", "raise stored", "branch in loop", "loop in loop",
        "layers", "helper", "branch helper call", "fixed loop", "step continue", "step break", "step branch",
        "step branch state",
    } <= features


def _export_other(monkeypatch, wrap):
    """``exporter.export`` exports ``wrap(model)`` instead of the model."""
    real = exporter.export

    def other(model, args, kwargs=None, **options):
        return real(wrap(model), args, kwargs, **options)

    monkeypatch.setattr(exporter, "export", other)


class _Zeros(torch.nn.Module):
    def forward(self, x, labels):
        return torch.zeros_like(x)


class _Raises(torch.nn.Module):
    """The model, refusing labels above the example's (an input check the program asserts)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x, labels):
        if (labels > 2).any():
            raise ValueError("a class above 2")
        return self.model(x, labels)


def _right_seed() -> int:
    return next(s for s in range(100) if check_flow(generate(s).render(), seed=s).klass == "right")


def test_a_program_that_differs_from_eager_is_a_finding(monkeypatch):
    seed = _right_seed()
    _export_other(monkeypatch, lambda model: _Zeros())
    outcome = check_flow(generate(seed).render(), seed=seed)
    assert outcome.finding and outcome.klass == "wrong: differs from eager", outcome


def test_a_program_that_raises_where_eager_returns_is_a_finding(monkeypatch):
    seed = _right_seed()
    _export_other(monkeypatch, _Raises)
    outcome = check_flow(generate(seed).render(), seed=seed)
    assert outcome.finding and outcome.klass == "wrong: raises where eager returns", outcome


def test_a_raw_exception_and_a_refusal_without_a_line_are_findings(monkeypatch):
    def raw(*args, **kwargs):
        raise KeyError("zuf0")

    monkeypatch.setattr(exporter, "export", raw)
    assert check_flow(generate(3).render(), seed=3).klass == "raw exception from exporter.export"

    def unplaced(*args, **kwargs):
        raise exporter.TraceError("no line", category=exporter.Category.BRANCH_CAPTURE)

    monkeypatch.setattr(exporter, "export", unplaced)
    outcome = check_flow(generate(3).render(), seed=3)
    assert (outcome.klass, outcome.finding) == ("refused without a line", True)


def test_shrink_keeps_the_finding_and_drops_the_rest():
    """With a stand-in check: a finding is a program that appends to its list."""
    seed = next(s for s in range(500) if "list" in generate(s).features() and len(generate(s).paths()) > 6)
    program = generate(seed)

    def check(source):
        found = "items.append" in source
        return Outcome("appends" if found else "right", found)

    small, outcome, tried = shrink(program, check(program.render()), check=check)
    assert outcome.klass == "appends" and tried > 0
    assert len(small.paths()) < len(program.paths())
    lines = [s.line for top in small.stmts for s in top.walk()]
    assert sum("items.append" in line for line in lines) == 1 and len(lines) <= 2  # the append, and its loop
    text = finding_file(small, outcome)
    assert text.startswith('"""appends (control-flow fuzzer') and f"SEED = {seed}" in text
    load_program(text)  # the finding file is a program the runner can judge
