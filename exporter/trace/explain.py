"""Explain a failure inside the model's forward: category, the user's source line, next step."""

from __future__ import annotations

import functools
import os
import traceback
from collections.abc import Iterator
from types import FrameType

import torch
import torch.utils._pytree as pytree

from .._errors import Category, TraceError
from .._ir import is_library_frame
from .._torch_internals import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    GuardOnDataDependentSymNode,
    OpOverload,
    UnsupportedOperatorException,
    is_condition,
    op_implementation_dirs,
)
from .preserve import module_preserved, state_bytes, state_values_restored
from .values import HashedSize, LeavesGraph

__all__ = ["eager_failure", "explain", "is_library_frame", "needed_a_data_sized_value", "user_location"]


def _user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if not is_library_frame(frame.filename):
            return frame
    return None


def user_location(exc: BaseException) -> str | None:
    """``file:line`` of the innermost traceback frame outside torch, exporter and the stdlib."""
    frame = _user_frame(exc)
    return f"{frame.filename}:{frame.lineno}" if frame else None


_BRANCH_HINT = (
    "branch with torch.cond(pred, true_fn, false_fn, operands), compute without the "
    "branch (torch.where), or state what holds with torch._check(...)"
)
# A plain number the data decides (`int(t)`, `float(t)`, `operator.index(t)`) where no
# branch is taken: the number has to stay a tensor or a symbolic size.
_NUMBER_HINT = (
    "keep the value a tensor (or read it with .item() and compute with the result, which stays "
    "symbolic) instead of making it a Python number, or export with branches='draft' to follow "
    "the example's value"
)
# torch.cond does not help a for loop whose trip count Python needs as a plain number
# (`range(t)` of a tensor, a `while` on a value): the loop has to run a number of times
# known when tracing (a loop over a data-sized tensor or `range(n.item())` is captured).
_LOOP_HINT = (
    "loop a fixed number of times (over range(num_experts), say, not over the entries "
    "present) and let masks or empty selections skip the unused iterations, or pass the "
    "count as a Python int"
)


_MODULE_HINT = (
    "keep the modules' weights stacked in one tensor and index that (as transformers' experts "
    "implementations do; exporter.export(..., experts_implementation='batched_mm') switches a "
    "transformers model to one), or call every module and mask what each computes"
)


def _picks_a_module(e: BaseException) -> bool:
    """Whether the data-dependent integer was asked for by a container of modules indexed
    with it (``self.experts[expert_idx]``)."""
    return any(
        frame.f_code.co_name == "__getitem__" and os.path.abspath(frame.f_code.co_filename) == _CONTAINERS
        for frame in _frames(e.__traceback__)
    )


_CONTAINERS = os.path.abspath(torch.nn.modules.container.__file__)


def _is_loop(line: str | None) -> bool:
    return bool(line) and line.lstrip().startswith("for ")


_SIZE_HINT = (
    "pass the size explicitly where the operator takes one (F.one_hot(labels, num_classes=N)) "
    "instead of letting it read the size from the data; torch._check cannot help here, the "
    "traced program needs one fixed number"
)


_HASH_HINT = (
    "keep sizes read from tensors out of set() and dict keys: compute on the tensor they came "
    "from (`(lengths != lengths[0]).any()` for `len(set(lengths.tolist())) > 1`) and branch with "
    "torch.cond or torch.where, pass them as Python ints, or export with draft=True to take the "
    "example's values (checked when the program runs)"
)
_TOLIST_HINT = (
    "keep it a tensor: loop over the tensor itself (`for v in t:`, which becomes a "
    "torch.while_loop), take len(t) (a size the program computes), or select with masks, "
    "instead of .tolist()"
)

_NUMPY_HINT = (
    "compute with torch ops instead (torch.cumsum, torch.argsort, torch.bincount, ...) so the "
    "program records the computation, or export with draft=True to take the example's values "
    "(checked when the program runs)"
)


def _frames(tb) -> Iterator[FrameType]:
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


@functools.cache
def _op_implementations() -> tuple[str, ...]:
    return op_implementation_dirs()


def needed_a_data_sized_value(error: BaseException) -> bool:
    """Whether ``error`` (a TraceError from ``explain``) is forward needing, as a plain
    number, the value of an integer only the data decides (``len(boxes)`` after
    ``nonzero``, ``int(count)``) or of such a float (``int(scale * x.max())``), rather than a
    bool or an operator's own output size."""
    seen = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, GuardOnDataDependentSymNode):
            # a float the data decides carries no assumptions: a question that is no condition asks for it
            number = bool(getattr(cause.cond, "is_integer", False)) or not is_condition(cause.cond)
            return number and _op_reading_a_size(cause) is None
        cause = cause.__cause__ or cause.__context__
    return False


def _asks_a_number(e: Exception) -> bool:
    """Whether ``e`` asks for a number the data decides, not for a bool."""
    return isinstance(e, GuardOnDataDependentSymNode) and needed_a_data_sized_value(e)


def _op_reading_a_size(e: Exception) -> str | None:
    """The operator whose own implementation needed an integer computed from tensor values
    (its output size: ``one_hot`` without ``num_classes`` takes ``labels.max() + 1``), when
    that is what ``e`` is; else None.

    The integer matters: a size has to be one number when tracing, and no branch or check in
    the user's code can supply it.  A bool guarded inside an operator stays the user's
    control flow (``for e in x.nonzero():`` asks ``unbind`` whether there are any rows), as
    does an integer taken in the user's own code (``range(n.item())``).
    """
    if not isinstance(e, GuardOnDataDependentSymNode) or not getattr(e.cond, "is_integer", False):
        return None
    frames = list(_frames(e.__traceback__))
    users = [i for i, frame in enumerate(frames) if not is_library_frame(frame.f_code.co_filename)]
    below = frames[users[-1] + 1 :] if users else frames
    implementations = [
        frame for frame in below if os.path.abspath(frame.f_code.co_filename).startswith(_op_implementations())
    ]
    if not implementations:
        return None
    # The outermost operator dispatched below the user's line is the one the line called.
    called = (frame.f_locals.get("func") for frame in below[: below.index(implementations[0])])
    op = next((func for func in called if isinstance(func, OpOverload)), None)
    return str(op) if op is not None else implementations[0].f_code.co_name


def explain(e: Exception) -> TraceError:
    """A TraceError saying what kind of failure ``e`` is, where in the user's code, and what to do."""
    frame = _user_frame(e)
    where = f"{frame.filename}:{frame.lineno}" if frame else None
    code = f" (`{frame.line}`)" if frame and frame.line else ""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if isinstance(e, HashedSize):
        return TraceError(
            f"forward() hashes a size computed from tensor values{code} (a set() member or dict key "
            f"needs its value), but export traces with shapes only, not values [{e.size}]",
            category=Category.DATA_DEPENDENT_CONTROL_FLOW,
            location=where,
            hint=_HASH_HINT,
        )
    if isinstance(e, LeavesGraph):
        return TraceError(
            f"forward() takes a tensor's values out of the graph with .numpy(){code}: what NumPy "
            f"computes from them is not recorded, and export traces with shapes only, not values [{text}]",
            category=Category.DATA_LEAVES_GRAPH,
            location=where,
            hint=_NUMPY_HINT,
        )
    if frame is not None and ".tolist(" in (frame.line or "") and (
        # a length asked (an integer): a list's values tested are a branch like any other
        (isinstance(e, GuardOnDataDependentSymNode) and getattr(e.cond, "is_integer", False))
        or "unallocated storage" in text
    ):
        return TraceError(
            f"forward() turns a tensor whose length only the data decides into a Python list{code}: "
            f"the list needs as many items as the data has, but export traces with shapes only, not "
            f"values [torch: {text}]",
            category=Category.DATA_DEPENDENT_OUTPUT_SHAPE,
            location=where,
            hint=_TOLIST_HINT,
        )
    op = _op_reading_a_size(e)
    if op is not None:
        return TraceError(
            f"{op} reads its output size from the values of a tensor{code}, but export traces "
            f"with shapes only, not values [torch: {text}]",
            category=Category.DATA_DEPENDENT_OUTPUT_SHAPE,
            location=where,
            hint=_SIZE_HINT,
        )
    if isinstance(e, GuardOnDataDependentSymNode) and _picks_a_module(e):
        return TraceError(
            f"forward() picks a submodule by a tensor's value{code} (a ModuleList or ModuleDict "
            f"indexed with a tensor), but a program computes with one fixed set of modules, and "
            f"export traces with shapes only, not values [torch: {text}]",
            category=Category.DATA_DEPENDENT_CONTROL_FLOW,
            location=where,
            hint=_MODULE_HINT,
        )
    if isinstance(e, GuardOnDataDependentSymNode) or isinstance(e, DataDependentOutputException):
        return TraceError(
            f"forward() needs the value of a tensor to decide what to do{code}, but export "
            f"traces with shapes only, not values [torch: {text}]",
            category=Category.DATA_DEPENDENT_CONTROL_FLOW,
            location=where,
            hint=_LOOP_HINT if frame and _is_loop(frame.line) else _NUMBER_HINT if _asks_a_number(e) else _BRANCH_HINT,
        )
    if isinstance(e, DynamicOutputShapeException):
        return TraceError(
            f"operator {e.func} has an output shape that depends on tensor data{code}",
            category=Category.DATA_DEPENDENT_OUTPUT_SHAPE,
            location=where,
            hint="declare the size with torch._check_is_size / torch._check on the result",
        )
    if isinstance(e, UnsupportedOperatorException):
        return TraceError(
            f"operator {e.func} has no fake-tensor (meta) implementation, so it cannot be traced{code}",
            category=Category.UNSUPPORTED_OPERATOR,
            location=where,
            hint="register one with torch.library.register_fake, or replace the call",
        )
    lowered = text.lower()
    if isinstance(e, (NotImplementedError, RuntimeError)) and (
        "fake impl" in lowered or "meta tensor" in lowered or "fake tensor" in lowered and "kernel" in lowered
    ):
        return TraceError(
            f"an operator cannot run on fake tensors{code}: {text}",
            category=Category.UNSUPPORTED_OPERATOR,
            location=where,
            hint="register a fake kernel with torch.library.register_fake, or replace the call",
        )
    return TraceError(
        f"the model raised {type(e).__name__} while running on fake tensors{code}: {text}",
        category=Category.MODEL_ERROR,
        location=where,
        hint="run the model eagerly on the same inputs; if that works, the failing line "
        "probably needs real tensor values (.item() or .tolist() into plain Python, printing a tensor)",
    )


# Restoring the model after an eager run needs a copy of its state; above this size the
# eager check is skipped rather than risk running out of memory.
_EAGER_CHECK_MAX_BYTES = 1 << 30


def eager_failure(model: torch.nn.Module, args, kwargs) -> tuple[bool, BaseException | None]:
    """Run ``model`` eagerly on copies of the inputs, without grad: (whether it ran, what it raised).

    The model's parameters and buffers are copied and put back (values and storage), so it
    ends as it started.  Models whose state exceeds 1 GiB are not run: ``(False, None)``.
    """
    if state_bytes(model) > _EAGER_CHECK_MAX_BYTES:
        return False, None
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), (args, kwargs))
    try:
        with state_values_restored(model), module_preserved(model), torch.no_grad():
            model(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - any failure is the answer
        return True, e
    return True, None
