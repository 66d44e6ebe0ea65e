"""Draft tracing: where an export would stop, take what the example inputs do, and say so.

Under real-tensor propagation a guard on a data-dependent value is decided by the example's
value and deferred as a runtime assert, an operator without a fake kernel gets one from
its real outputs, and ``.numpy()`` returns the example's values (``values``).
``data_dependent_assumptions``, ``missing_fake_kernel_assumptions`` and
``values_taken_assumptions`` read those back as ``Assumption`` records with the user's line;
``mark_checked`` says which ones the program checks when it runs."""

from __future__ import annotations

import linecache
import operator
import re
import sys
from typing import Any

import attrs
import torch

from .._assumptions import Assumption, AssumptionKind
from .._ir import is_library_frame
from .._state import ExportState
from .._torch_internals import FakeTensor, OpOverload, has_fake_kernel, is_builtin_op, on_real_value_decision

__all__ = [
    "data_dependent_assumptions",
    "live_user_line",
    "mark_checked",
    "missing_fake_kernel_assumptions",
    "note_values_taken",
    "record_assumption_sites",
    "symbol_origins",
    "values_check_message",
    "values_taken_assumptions",
]

_PREFIX = "propagate_real_tensors:"
_SYMBOL = re.compile(r"\b[us]\d+\b")


_SITES = "exporter_assumption_sites"
_VALUES_TAKEN = "exporter_values_taken"


def record_assumption_sites(shape_env: Any) -> None:
    """Make ``shape_env`` note the user's line each time the example's value decides a guard.

    The ShapeEnv keeps a stack with each deferred assert but destroys it when the trace
    ends; the line is read from the live frames instead, when the decision is made.
    """
    sites: dict[tuple[str, str], tuple[str | None, str | None]] = {}
    setattr(shape_env, _SITES, sites)

    def note(orig_expr: Any, unsound_result: Any) -> None:
        sites.setdefault((str(orig_expr), str(unsound_result)), live_user_line())

    on_real_value_decision(shape_env, note)


def live_user_line() -> tuple[str | None, str | None]:
    """``file:line`` and source of the innermost running frame outside torch, exporter and the stdlib."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not is_library_frame(filename):
            return f"{filename}:{frame.f_lineno}", linecache.getline(filename, frame.f_lineno).strip() or None
        frame = frame.f_back
    return None, None


def _node_line(node: torch.fx.Node) -> tuple[str | None, str | None]:
    """The innermost ``File "...", line N`` of a node's stack trace, and its source."""
    trace = node.meta.get("stack_trace") or ""
    for line in reversed(trace.splitlines()):
        line = line.strip()
        if line.startswith('File "'):
            filename, _, rest = line[len('File "'):].partition('", line ')
            lineno = rest.split(",")[0]
            if lineno.isdigit():
                return f"{filename}:{lineno}", linecache.getline(filename, int(lineno)).strip() or None
    return None, None


def symbol_origins(gm: torch.fx.GraphModule) -> dict[str, str]:
    """For each data-dependent symbol the graph binds (``u0``), the op and line that made it."""
    origins = {}
    for node in gm.graph.nodes:
        for symbol in node.meta.get("unbacked_bindings", None) or {}:
            where, _ = _node_line(node)
            op = str(node.target).removesuffix(".default")
            origins[str(symbol)] = f"{symbol} = {op}" + (f" at {where}" if where else "")
    return origins


def _merged(found: list[Assumption]) -> list[Assumption]:
    """One record per (kind, line, assumption), counting repeats (a loop asks each pass)."""
    merged: dict[tuple, Assumption] = {}
    for a in found:
        key = (a.kind, a.location, a.assumed)
        if key in merged:
            previous = merged[key]
            merged[key] = attrs.evolve(previous, occurrences=previous.occurrences + 1)
        else:
            merged[key] = a
    return list(merged.values())


def data_dependent_assumptions(state: ExportState) -> list[Assumption]:
    """The data-dependent guards the example's values decided, in the order they were met."""
    shape_env = state.fake_mode.shape_env
    if shape_env is None:
        return []
    origins = symbol_origins(state.gm)
    sites = getattr(shape_env, _SITES, {})
    found = []
    asserts = [ra for group in shape_env.deferred_runtime_asserts.values() for ra in group]
    for ra in asserts:
        if not ra.msg.startswith(_PREFIX):
            continue
        expression, _, value = ra.msg[len(_PREFIX):].strip().rpartition(" == ")
        assumed = f"{expression} is {value}" if value in ("True", "False") else f"{expression} == {value}"
        location, code = sites.get((expression, value), (None, None))
        symbols = sorted({str(s) for s in ra.expr.free_symbols}, key=lambda s: (len(s), s))
        detail = "; ".join(origins[s] for s in symbols if s in origins) or None
        found.append(Assumption(AssumptionKind.DATA_DEPENDENT, assumed, location, code, detail))
    return _merged(found)


def _tensor_outputs(node: torch.fx.Node) -> list[tuple[torch.fx.Node, torch.Tensor]]:
    value = node.meta.get("val")
    if isinstance(value, torch.Tensor):
        return [(node, value)]
    outputs = []
    for user in node.users:
        if user.target is operator.getitem and isinstance(user.meta.get("val"), torch.Tensor):
            outputs.append((user, user.meta["val"]))
    return outputs


def missing_fake_kernel_assumptions(state: ExportState) -> list[Assumption]:
    """Operators the trace ran for real for want of a fake kernel; each tensor output's dtype,
    device and layout (what the inferred kernel fixed) is asserted after the call."""
    found = []
    graph = state.gm.graph
    for node in list(graph.nodes):
        op = node.target
        if node.op != "call_function" or not isinstance(op, OpOverload) or is_builtin_op(op) or has_fake_kernel(op):
            continue
        outputs = _tensor_outputs(node)
        for out, value in outputs:
            with graph.inserting_after(out):
                check = graph.call_function(
                    torch.ops.aten._assert_tensor_metadata.default,
                    (out,),
                    {"dtype": value.dtype, "device": value.device, "layout": value.layout},
                )
            check.meta.update(
                {k: node.meta[k] for k in ("nn_module_stack", "stack_trace", "source_fn_stack") if k in node.meta}
            )
            check.meta["val"] = None
        location, code = _node_line(node)
        shown = ", ".join(f"{str(v.dtype).removeprefix('torch.')} with {v.dim()} dims" for _, v in outputs)
        found.append(
            Assumption(
                AssumptionKind.MISSING_FAKE_KERNEL,
                f"outputs as the real kernel returned them on the example inputs ({shown or 'no tensors'}; sizes "
                "data-dependent)",
                location,
                code,
                detail=f"{op} has no fake kernel (torch.library.register_fake)",
                checked=bool(outputs),
            )
        )
    return _merged(found)


@attrs.frozen
class _ValuesTaken:
    location: str | None
    code: str | None
    shown: str


def values_check_message(location: str | None) -> str:
    """The message of the ``_assert_async`` that checks the values taken at ``location``."""
    where = f" at {location}" if location else ""
    return f"draft export assumed the example's values for .numpy(){where}; this input gives others"


def note_values_taken(fake: FakeTensor, location: str | None, code: str | None, shown: str) -> None:
    """Note that a draft trace gave the user's line the example's values of ``fake``
    (``shown``), checked by an ``_assert_async`` with ``values_check_message(location)``."""
    shape_env = fake.fake_mode.shape_env
    if shape_env is not None:
        if not hasattr(shape_env, _VALUES_TAKEN):
            setattr(shape_env, _VALUES_TAKEN, [])
        getattr(shape_env, _VALUES_TAKEN).append(_ValuesTaken(location, code, shown))


def values_taken_assumptions(state: ExportState) -> list[Assumption]:
    """The tensors whose example values a draft trace handed to Python (``.numpy()``)."""
    shape_env = state.fake_mode.shape_env
    found = [
        Assumption(
            AssumptionKind.TENSOR_VALUES, f"values == {taken.shown}", taken.location, taken.code,
            detail="Tensor.numpy() on a traced tensor; an aten._assert_async compares the values",
        )
        for taken in getattr(shape_env, _VALUES_TAKEN, ())
    ]
    return _merged(found)


def mark_checked(assumptions: list[Assumption], gm: torch.fx.GraphModule) -> list[Assumption]:
    """Mark each data-dependent assumption that an ``_assert_scalar`` of the graph checks, and
    each tensor's values an ``_assert_async`` checks."""
    messages = [
        str(n.args[1]) for n in gm.graph.nodes
        if n.op == "call_function" and n.target is torch.ops.aten._assert_scalar.default and len(n.args) > 1
    ]
    value_checks = {
        str(n.args[1]) for n in gm.graph.nodes
        if n.op == "call_function" and n.target is torch.ops.aten._assert_async.msg and len(n.args) > 1
    }
    marked = []
    for a in assumptions:
        if a.kind is AssumptionKind.TENSOR_VALUES:
            a = attrs.evolve(a, checked=values_check_message(a.location) in value_checks)
        elif a.kind is AssumptionKind.DATA_DEPENDENT:
            expression = a.assumed.rsplit(" is ", 1)[0].rsplit(" == ", 1)[0]
            symbols = _SYMBOL.findall(expression)
            checked = any(all(s in m for s in symbols) for m in messages) if symbols else False
            a = attrs.evolve(a, checked=checked)
        marked.append(a)
    return marked
