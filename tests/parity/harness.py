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

Each way the two differ is a ``Difference``: the field (``range of args[1].shape[0]``,
``output 0 (USER_OUTPUT) shape``, ``export``, ...) and exporter's and the oracle's value, with
the symbols of input sizes named for the input they are the size of (``args[0].shape[1]``):
torch names a symbol by a hash of its source's name (``s17``), which tools and releases may
spell differently.

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

import sympy
import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram
from torch.export.graph_signature import ConstantArgument, InputKind

import exporter
from exporter._ir import graph_symbols
from tests.support import tree_difference, value_field_differences

__all__ = [
    "CASES", "SUCCEEDED", "Difference", "ParityCase", "Raised", "Result", "case", "evaluate", "input_size_symbols",
    "oracle_summary", "program_differences", "summary",
]

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


SUCCEEDED = "succeeded"
"""The value of the ``export`` field on the side that exported."""


@dataclasses.dataclass(frozen=True)
class Raised:
    """An exception as a ``Difference`` holds it: its class, its category (an ``ExportError``'s;
    None for any other exception) and its whole text (with an ``ExportError``'s hint)."""

    error: type[BaseException]
    category: exporter.Category | None
    message: str

    @classmethod
    def of(cls, error: BaseException) -> Raised:
        return cls(type(error), getattr(error, "category", None), str(error))

    def __str__(self) -> str:
        category = f" ({self.category.value})" if self.category is not None else ""
        first_line = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return f"raised {self.error.__name__}{category}: {first_line}"[:300]


@dataclasses.dataclass(frozen=True)
class Difference:
    """One way exporter's export differs: ``field`` names what is compared, ``exporter`` and
    ``oracle`` hold the two values.  The oracle is torch.export, but for a field that runs
    exporter's program against eager (``example output against eager``), where ``exporter``
    says how they differ and ``oracle`` is None."""

    field: str
    exporter: Any
    oracle: Any

    def __str__(self) -> str:
        if self.oracle is None:
            return f"{self.field}: {self.exporter}"
        return f"{self.field}: exporter {self.exporter}, torch.export {self.oracle}"


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


def matches_eager(parity_case: ParityCase, program: ExportedProgram) -> list[Difference]:
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
                problems.append(Difference(f"{label}: the program raises where eager runs", Raised.of(e), None))
            continue  # both refuse the input (a failed check in the model, say): they agree
        if eager_error is not None:
            problems.append(Difference(f"{label}: the program runs where eager raises", f"eager {Raised.of(eager_error)}", None))
            continue
        for what, a, b in (("output", ours, ref), ("inputs after the call", ours_in, ref_in)):
            problem = tree_difference(a, b, rtol=parity_case.rtol, atol=parity_case.atol)
            if problem:
                problems.append(Difference(f"{label} {what} against eager", problem, None))
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


def input_size_symbols(program: ExportedProgram) -> dict[sympy.Symbol, sympy.Symbol]:
    """Each symbol that is a user input's size (or a symbolic number input), renamed for the
    first input path it is, in signature order: ``args[0].shape[1]``, ``kwargs['kw1'].shape[0]``,
    ``args[2]``.  Symbols of no input (data-dependent ones) are left out."""
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    users = [placeholders.get(s.arg.name) for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    names: dict[sympy.Symbol, sympy.Symbol] = {}
    for path, node in zip(_user_input_paths(program, len(users)), users):
        value = node.meta.get("val") if node is not None else None
        if isinstance(value, torch.Tensor):
            numbers = [(f"{path}.shape[{d}]", n) for d, n in enumerate(value.shape)]
        else:
            numbers = [(path, value)]
        for name, number in numbers:
            expr = number.node.expr if isinstance(number, torch.SymInt | torch.SymFloat | torch.SymBool) else None
            if isinstance(expr, sympy.Symbol) and expr not in names:
                names[expr] = sympy.Symbol(name, **expr.assumptions0)
    return names


def _user_input_paths(program: ExportedProgram, count: int) -> list[str]:
    """Where each user input is in the call's ``(args, kwargs)``: ``args[0]``, ``kwargs['x']``;
    ``input 0``, ... when the program's ``in_spec`` does not say (a module input's node cannot
    be rebuilt from stand-in leaves)."""
    in_spec = program.call_spec.in_spec
    try:
        paths, _ = pytree.tree_flatten_with_path(pytree.tree_unflatten(list(range(count)), in_spec))
    except Exception:  # noqa: BLE001 - the paths only name symbols
        paths = []
    if [leaf for _, leaf in paths] != list(range(count)):
        return [f"input {i}" for i in range(count)]
    return [("args", "kwargs")[path[0].idx] + pytree.keystr(path[1:]) for path, _ in paths]


_SYMBOL = re.compile(r"\b[su]\d+\b")


def range_rows(program: ExportedProgram) -> dict[str, Any]:
    """The range constraints of the symbols the program uses: ``(lower, upper)`` by the name
    ``input_size_symbols`` gives an input's size; the others, under ``"other symbols"``, as a
    sorted list of ``(expression, lower, upper)`` with each symbol written as its kind (``s#``:
    an input size, ``u#``: data-dependent), the numbering being the tracer's own.

    Symbols the program never uses are left out: torch.export's ``run_decompositions``
    re-traces the program and lists the data-dependent symbols of that re-trace too."""
    used, names = graph_symbols(program.graph_module), input_size_symbols(program)
    rows: dict[str, Any] = {}
    others = []
    for expr, vr in program.range_constraints.items():
        if not expr.free_symbols <= used:
            continue
        if expr in names:
            rows[str(names[expr])] = (_bound(vr.lower), _bound(vr.upper))
        else:
            others.append((_SYMBOL.sub(lambda m: f"{m.group(0)[0]}#", str(expr)), _bound(vr.lower), _bound(vr.upper)))
    if others:
        rows["other symbols"] = sorted(others, key=repr)
    return rows


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
    problems: list[Difference]

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
    problems: list[Difference] = []
    if ours.ok:
        problems += matches_eager(parity_case, ours.program)
    elif not isinstance(ours.error, exporter.ExportError):
        problems.append(Difference("export (exporter must raise an ExportError)", Raised.of(ours.error), _side(oracle)))
    elif oracle.ok:
        problems.append(Difference("export", Raised.of(ours.error), SUCCEEDED))
    if oracle.ok and ours.ok:
        problems += program_differences(ours.program, oracle.program)
    return Result(parity_case.name, oracle, ours, problems)


def _side(outcome: Outcome) -> Any:
    return SUCCEEDED if outcome.ok else Raised.of(outcome.error)


def program_differences(ours: ExportedProgram, oracle: ExportedProgram) -> list[Difference]:
    """How ``ours`` differs from ``oracle``: its signature (input and output by position), its
    range constraints (by symbol) and its placeholder and output values (by field), but for
    ``KNOWN_VALUE_DIFFERENCES``."""
    differences = []
    for side in ("inputs", "outputs"):
        mine, theirs = signature_rows(ours)[side], signature_rows(oracle)[side]
        for i in range(max(len(mine), len(theirs))):
            a, b = (mine[i] if i < len(mine) else None), (theirs[i] if i < len(theirs) else None)
            if a != b:
                differences.append(Difference(f"signature {side[:-1]} {i}", a, b))
    mine, theirs = range_rows(ours), range_rows(oracle)
    for name in sorted(mine.keys() | theirs.keys(), key=lambda n: (n == "other symbols", n)):
        if mine.get(name) != theirs.get(name):
            differences.append(Difference("ranges of other symbols" if name == "other symbols" else f"range of {name}",
                                          mine.get(name), theirs.get(name)))
    values, _ = value_field_differences(
        ours, oracle, ours_symbols=input_size_symbols(ours), oracle_symbols=input_size_symbols(oracle)
    )
    differences += [Difference(f"{d.where} {d.field}", d.ours, d.oracle) for d in values]
    return differences


def summary(results: list[Result]) -> dict[str, int]:
    counts = {"cases": len(results), "match": 0, "both fail": 0, "ours only": 0, "differ": 0}
    for result in results:
        counts[result.verdict] += 1
    return counts


def oracle_summary(results: list[Result]) -> dict[str, int]:
    return {"oracle ok": sum(r.oracle.ok for r in results), "exporter ok": sum(r.ours.ok for r in results)}
