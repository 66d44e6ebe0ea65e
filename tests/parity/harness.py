"""Parity with torch.export on cases ported from PyTorch's own export tests.

A ``ParityCase`` is one model from ``test/export/test_export.py`` in pytorch/pytorch
(named after the test it comes from), its example inputs, its ``dynamic_shapes`` and more
inputs the program must handle (other sizes for dynamic dims).  ``evaluate`` exports it
with both tools and says how they compare:

* torch.export (non-strict, ``run_decompositions({})``) succeeds: exporter must succeed,
  its program must match eager on every input, and its signature, range_constraints and
  every placeholder's and output's ``val`` (shape, strides, dtype, device, requires_grad)
  must equal the oracle's, but for ``KNOWN_VALUE_DIFFERENCES`` (tests/support.py);
* torch.export fails: exporter must fail with an ``ExportError`` or give a program that
  matches eager.

``evaluate(case, ir="training")`` holds exporter's training IR to ``torch.export.export``
itself (no ``run_decompositions``) by the same rules.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram
from torch.export.graph_signature import ConstantArgument

import exporter
from exporter._ir import graph_symbols
from tests.support import tree_difference, value_differences

__all__ = ["CASES", "ParityCase", "Result", "case", "evaluate", "oracle_summary", "summary"]

Inputs = tuple[tuple[Any, ...], dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class ParityCase:
    name: str
    """The torch test it is ported from (``test_cond_with_module_stack``), with ``[variant]``
    when one test gives several cases."""
    model: Callable[[], torch.nn.Module]
    inputs: Callable[[], Inputs]
    """The example inputs ``(args, kwargs)``; drawn under a fixed seed."""
    dynamic_shapes: Callable[[], Any] | None = None
    more_inputs: Callable[[], list[Inputs]] = lambda: []
    """Other inputs the program must handle like eager (other sizes for dynamic dims); where
    eager raises (a failed ``torch._check``), the program must raise too."""
    rtol: float = 1e-4
    atol: float = 1e-5

    def __repr__(self) -> str:
        return f"ParityCase({self.name})"


CASES: list[ParityCase] = []


def case(
    name: str,
    inputs: Callable[[], Any],
    *,
    dynamic_shapes: Callable[[], Any] | None = None,
    more_inputs: Callable[[], list[Any]] | None = None,
    rtol: float = 1e-4,
    atol: float = 1e-5,
):
    """Register a case; a decorator on the model class (or a function building the model).

    ``inputs`` returns ``args`` (a tuple) or ``(args, kwargs)``; ``more_inputs`` a list of
    the same.
    """

    def deco(build):
        CASES.append(
            ParityCase(
                name,
                build,
                lambda: _as_inputs(inputs()),
                dynamic_shapes,
                (lambda: [_as_inputs(i) for i in more_inputs()]) if more_inputs else (lambda: []),
                rtol,
                atol,
            )
        )
        return build

    return deco


def _as_inputs(value: Any) -> Inputs:
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], tuple) and isinstance(value[1], dict):
        return value
    if isinstance(value, tuple):
        return value, {}
    raise TypeError(f"inputs must be args (a tuple) or (args, kwargs), got {type(value).__name__}")


def _fresh(parity_case: ParityCase) -> tuple[torch.nn.Module, Inputs]:
    torch.manual_seed(0)
    model = parity_case.model()
    torch.manual_seed(1)
    return model, parity_case.inputs()


def _clone(value: Any) -> Any:
    # detached, so a requires_grad input stays a leaf (and copies of a program stay copyable)
    return pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone().requires_grad_(t.requires_grad), value)


def _oracle(model, args, kwargs, dynamic_shapes, ir: str = "inference") -> ExportedProgram:
    program = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    return program.run_decompositions({}) if ir == "inference" else program


def _ours(model, args, kwargs, dynamic_shapes, ir: str = "inference") -> ExportedProgram:
    return exporter.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, ir=ir)


@dataclasses.dataclass
class Outcome:
    program: ExportedProgram | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.program is not None

    def describe(self) -> str:
        if self.ok:
            return "ok"
        return f"{type(self.error).__name__}: {str(self.error).strip().splitlines()[0] if str(self.error).strip() else ''}"[:300]


def _run(export_fn, parity_case: ParityCase, ir: str) -> Outcome:
    model, (args, kwargs) = _fresh(parity_case)
    spec = parity_case.dynamic_shapes() if parity_case.dynamic_shapes else None
    try:
        return Outcome(export_fn(model, _clone(args), _clone(kwargs), spec, ir))
    except Exception as e:  # noqa: BLE001 - the outcome is the answer
        return Outcome(error=e)


def matches_eager(parity_case: ParityCase, program: ExportedProgram) -> list[str]:
    """How ``program`` differs from the eager model on the example and the more inputs
    (outputs and inputs after the call), each from a fresh copy of the model's state."""
    model, example = _fresh(parity_case)
    torch.manual_seed(2)
    runs = [("example", example), *((f"input {i + 1}", inputs) for i, inputs in enumerate(parity_case.more_inputs()))]
    problems = []
    for label, (args, kwargs) in runs:
        eager = copy.deepcopy(model)
        ref_in, ours_in = _clone((args, kwargs)), _clone((args, kwargs))
        try:
            with torch.no_grad():
                ref = eager(*ref_in[0], **ref_in[1])
        except Exception as e:  # noqa: BLE001
            ref, eager_error = None, e
        else:
            eager_error = None
        try:
            runner = _own_copy(program).module()
            with torch.no_grad():
                ours = runner(*ours_in[0], **ours_in[1])
        except Exception as e:  # noqa: BLE001
            if eager_error is None:
                problems.append(f"{label}: program raised {type(e).__name__}: {str(e).strip()[:200]}")
            continue  # both refuse the input (a failed check in the model, say): they agree
        if eager_error is not None:
            problems.append(f"{label}: eager raised {type(eager_error).__name__} ({eager_error}), the program did not")
            continue
        for what, a, b in (("output", ours, ref), ("inputs after the call", ours_in, ref_in)):
            problem = tree_difference(a, b, rtol=parity_case.rtol, atol=parity_case.atol)
            if problem:
                problems.append(f"{label} {what}: {problem}")
    return problems


def _own_copy(program: ExportedProgram) -> ExportedProgram:
    """A copy of ``program`` whose state the run may change; the program itself if it cannot
    be copied (some tensor subclasses cannot), so runs then share its state."""
    try:
        return copy.deepcopy(program)
    except Exception:  # noqa: BLE001
        return program


def _spec_row(spec) -> tuple:
    if isinstance(spec.arg, ConstantArgument):
        return (spec.kind.name, "constant", repr(spec.arg.value))
    return (spec.kind.name, type(spec.arg).__name__, spec.target, getattr(spec, "persistent", None))


def signature_rows(program: ExportedProgram) -> dict[str, list[tuple]]:
    """Kind, argument type, target and persistence of every input and output, in order.

    Names are left out: the oracle numbers nodes after its own re-trace."""
    sig = program.graph_signature
    return {"inputs": [_spec_row(s) for s in sig.input_specs], "outputs": [_spec_row(s) for s in sig.output_specs]}


_SYMBOL = re.compile(r"\b[su]\d+\b")


def range_rows(program: ExportedProgram) -> list[tuple[str, Any, Any]]:
    """The range constraints of the symbols the program uses, sorted, each torch symbol name
    written as its kind (``s#``: an input size, ``u#``: data-dependent): the numbering is
    the tracer's own.

    Symbols the program never uses are left out: torch.export's ``run_decompositions``
    re-traces the program and lists the data-dependent symbols of that re-trace too."""
    used = graph_symbols(program.graph_module)
    rows = [
        (_SYMBOL.sub(lambda m: f"{m.group(0)[0]}#", str(expr)), _bound(vr.lower), _bound(vr.upper))
        for expr, vr in program.range_constraints.items()
        if expr.free_symbols <= used
    ]
    return sorted(rows, key=repr)


def _bound(value: Any) -> Any:
    """A range bound as a plain number; None where unbounded (either way)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isinf(number) or abs(number) > 2**62:
        return None
    return int(number) if number == int(number) else number


@dataclasses.dataclass
class Result:
    name: str
    oracle: Outcome
    ours: Outcome
    problems: list[str]

    @property
    def verdict(self) -> str:
        """``match``, ``both fail``, ``ours only`` (we export what the oracle cannot), or ``differ``."""
        if self.problems:
            return "differ"
        if self.oracle.ok:
            return "match"
        return "ours only" if self.ours.ok else "both fail"


def evaluate(parity_case: ParityCase, ir: str = "inference") -> Result:
    """Export with both tools and compare (see module doc).  ``ir="training"``: exporter's
    training IR against ``torch.export.export`` itself, without ``run_decompositions``."""
    oracle, ours = _run(_oracle, parity_case, ir), _run(_ours, parity_case, ir)
    problems: list[str] = []
    if ours.ok:
        problems += [f"exporter's program: {p}" for p in matches_eager(parity_case, ours.program)]
    elif not isinstance(ours.error, exporter.ExportError):
        problems.append(f"exporter raised a raw {ours.describe()}")
    if oracle.ok and not ours.ok:
        problems.append(f"torch.export succeeds, exporter fails: {ours.describe()}")
    if oracle.ok and ours.ok:
        if signature_rows(ours.program) != signature_rows(oracle.program):
            problems.append(f"signature differs: ours {signature_rows(ours.program)}, oracle {signature_rows(oracle.program)}")
        if range_rows(ours.program) != range_rows(oracle.program):
            problems.append(f"range_constraints differ: ours {range_rows(ours.program)}, oracle {range_rows(oracle.program)}")
        problems += [f"placeholder or output value differs: {p}" for p in value_differences(ours.program, oracle.program)[0]]
    return Result(parity_case.name, oracle, ours, problems)


def summary(results: list[Result]) -> dict[str, int]:
    counts = {"cases": len(results), "match": 0, "both fail": 0, "ours only": 0, "differ": 0}
    for result in results:
        counts[result.verdict] += 1
    return counts


def oracle_summary(results: list[Result]) -> dict[str, int]:
    return {"oracle ok": sum(r.oracle.ok for r in results), "exporter ok": sum(r.ours.ok for r in results)}
