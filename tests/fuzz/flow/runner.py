"""Judge one control-flow program: export it on its example and run the program against eager
on inputs chosen to take every side.

``check_flow(source)`` returns an ``Outcome`` whose ``klass`` is

- ``right``: the program equals eager on every input, where eager raises too;
- ``refused: <category>``: exporter refused the model with an ``ExportError`` that names a
  line (a refusal without one is ``refused without a line``, a finding);
- ``wrong: ...``: a finding: the program differs from eager on an input, raises where eager
  returns, or returns where eager raises;
- another finding: a raw exception out of ``exporter.export``, or the model changed;
- ``invalid: ...``: eager fails on the example (a generator slip, not exporter's).

The inputs: eight-value ``x`` in four spreads, with labels holding 0, 1, 2, 3 and 5 classes
(so loops go round no times, once, twice, three times and more), then random ones drawn
while they reach a side of a cond or a loop count the others did not.  ``detail`` says how
much of the program the inputs reached (``sides_taken``).
"""

from __future__ import annotations

import copy
import random
import warnings
from typing import Any

import torch

import exporter
from exporter.cli.sides import count_sides
from exporter.testing import Sides
from tests.fuzz.runner import FuzzTimeout, Outcome, _model_change, _snapshot, judge

__all__ = ["check_flow", "inputs_for"]

RTOL = ATOL = 1e-4
EXTRA_DRAWS = 40
"""Random inputs drawn, at most, to reach sides the fixed inputs do not."""


def _labels(classes: int, g: torch.Generator, n: int = 8, kinds: int = 6) -> torch.Tensor:
    """``n`` labels holding exactly ``classes`` distinct classes among ``0 .. kinds - 1``, -1 elsewhere."""
    chosen = torch.randperm(kinds, generator=g)[:classes]
    labels = torch.full((n,), -1)
    if classes:
        positions = torch.randperm(n, generator=g)
        labels[positions[:classes]] = chosen
        rest = positions[classes:]
        keep = torch.rand(len(rest), generator=g) < 0.6
        labels[rest[keep]] = chosen[torch.randint(0, classes, (int(keep.sum()),), generator=g)]
    return labels


def inputs_for(seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The fixed inputs: every spread of ``x`` with every count of classes."""
    g = torch.Generator().manual_seed(seed)
    pool = []
    for classes in (0, 1, 2, 3, 5):
        for scale, shift in ((1.0, 0.0), (0.3, 0.7), (0.3, -0.7), (2.0, 0.0)):
            pool.append((torch.randn(8, generator=g) * scale + shift, _labels(classes, g)))
    return pool


def _draw(r: random.Random, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    scale, shift = r.choice([0.1, 0.5, 1.0, 3.0]), r.uniform(-1.5, 1.5)
    return torch.randn(8, generator=g) * scale + shift, _labels(r.randint(0, 6), g)


def _call(fn: Any, inputs: tuple) -> tuple[Any, BaseException | None]:
    args = tuple(t.clone() for t in inputs)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args), None
    except FuzzTimeout:
        raise
    except Exception as e:  # noqa: BLE001 - judged by the caller
        return None, e


def _describe(inputs: tuple) -> str:
    x, labels = inputs
    return f"x={[round(v, 4) for v in x.tolist()]}, labels={labels.tolist()}"


def _judge(program: Any, make_model: Any, inputs: tuple) -> str | None:
    """Why the program is wrong on ``inputs`` (None: it equals eager, raising included)."""
    expected, eager_error = _call(make_model(), inputs)
    got, error = _call(program, inputs)
    if eager_error is not None and error is not None:
        return None
    if eager_error is not None:
        return f"returns where eager raises {type(eager_error).__name__}: {eager_error}"
    if error is not None:
        return f"raises where eager returns: {type(error).__name__}: {str(error).splitlines()[0][:300]}"
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return f"returns {getattr(got, 'shape', got)} where eager returns {tuple(expected.shape)}"
    if not torch.allclose(got, expected, rtol=RTOL, atol=ATOL, equal_nan=True):
        return f"differs from eager: {got.tolist()} where eager gives {expected.tolist()}"
    return None


def _merge(into: Sides, more: Sides) -> bool:
    """Add ``more`` to ``into``; whether it reached anything new."""
    new = False
    for mine, theirs in ((into.conds, more.conds), (into.loops, more.loops)):
        for where, seen in theirs.items():
            known = mine.setdefault(where, set())
            if not seen <= known:
                new = True
                known |= seen
    into.lines.update(more.lines)
    return new


def _reached(sides: Sides) -> tuple[int, int]:
    """How many sides (cond sides, and the loop counts 0, 1 and 2 or more) were reached, of how many."""
    reached = total = 0
    for seen in sides.conds.values():
        reached, total = reached + len(seen), total + 2
    for counts in sides.loops.values():
        kinds = {min(c, 2) for c in counts}
        reached, total = reached + len(kinds), total + 3
    return reached, total


def check_flow(source: str, timeout: int | None = 120, seed: int = 0) -> Outcome:
    """Judge one program file (see the module doc)."""
    return judge(source, timeout, lambda mod: _check(mod, seed))


def _check(mod: Any, seed: int) -> Outcome:
    example = mod.EXAMPLE
    _, error = _call(mod.make_model(), example)
    if error is not None:
        return Outcome("invalid: eager fails on the example", False, f"{type(error).__name__}: {error}")
    model = mod.make_model()
    before = _snapshot(model)
    try:
        program = exporter.export(model, tuple(t.clone() for t in example))
    except exporter.ExportError as e:
        change = _model_change(before, model)
        if change:
            return Outcome("model changed by a failed export", True, change)
        cat = e.category
        if not isinstance(e, cat.owner) or cat in (exporter.Category.PASS, exporter.Category.VERIFICATION):
            return Outcome(f"exporter bug category: {cat.value}", True, str(e))
        if not e.location:
            return Outcome("refused without a line", True, str(e))
        return Outcome(f"refused: {cat.value}", False, str(e))
    except FuzzTimeout:
        raise
    except BaseException as e:  # noqa: BLE001 - this is what the fuzzer looks for
        return Outcome("raw exception from exporter.export", True, f"{type(e).__name__}: {e}")
    change = _model_change(before, model)
    if change:
        return Outcome("model changed by export", True, change)
    module = program.module()
    counting = copy.deepcopy(module)  # for the sides each input reaches
    sides = Sides()
    inputs = [example, *inputs_for(seed)]
    r, g = random.Random(seed), torch.Generator().manual_seed(seed + 1)
    draws = 0
    k = 0
    while k < len(inputs):
        given = inputs[k]
        wrong = _judge(module, mod.make_model, given)
        if wrong is not None:
            return Outcome("wrong: " + wrong.split(":")[0], True, f"on {_describe(given)}: {wrong}")
        reached = Sides()
        try:
            count_sides(counting, reached, given)
        except Exception:  # noqa: BLE001 - the program's own check refused the input, as eager did
            pass
        _merge(sides, reached)
        k += 1
        while k == len(inputs) and sides.missing() and draws < EXTRA_DRAWS:
            draws += 1
            candidate = _draw(r, g)
            reached = Sides()
            try:
                count_sides(counting, reached, candidate)
            except Exception:  # noqa: BLE001
                continue
            probe = Sides({w: set(v) for w, v in sides.conds.items()}, {w: set(v) for w, v in sides.loops.items()})
            if _merge(probe, reached):
                inputs.append(candidate)
    reached, total = _reached(sides)
    return Outcome("right", False, f"{len(inputs)} inputs reached {reached} of {total} sides and loop counts")
