"""Python stacks during a trace: each graph node's stack trace, recorded by walking the live
frames and formatting only the user's (the text make_fx would record), the user's function
calls each node was made in (``UserCalls``, for branch capture), and room on the
interpreter's frame stack so a trace's deep dispatch path does not straddle a chunk boundary
on every op (``on_roomy_stack``)."""

from __future__ import annotations

import contextlib
import functools
import linecache
import threading
import types
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

from .._ir import is_library_frame
from .._torch_internals import stack_trace_anchors, uninteresting_files

__all__ = ["UserCalls", "is_extent", "on_roomy_stack", "recording_user_calls", "user_calls_recorded", "user_stack_trace"]

_T = TypeVar("_T")

_REPEAT_CUTOFF = 3  # as traceback.StackSummary.format


def _kept(code, skip: set[str], anchors) -> bool:
    if code.co_filename in skip:
        return False
    return code.co_name == "forward" or (code.co_filename, code.co_name) in anchors


# id(code object) -> (the code object, whether its frames belong in a stack trace); a
# trace walks ~50 frames per node, nearly all the same tracer frames every time.  Keyed by
# id because hashing a code object hashes its bytecode and constants; the entry holds the code object, so its id stays its own.
# Generated code (graph modules) brings new code objects, so the table is emptied when it
# grows large.
_KEEP: dict[int, tuple] = {}
_KEEP_LIMIT = 100_000
_anchors_seen = 0


# id(frame) -> (the frame, the kept entries of its callers, innermost first), for the kept
# frames (``forward``s) seen during the current trace.  While a frame runs, its callers
# wait at the line that called it, so what they contribute to a stack trace is fixed: a
# walk stops at the first frame it has seen before instead of climbing the ~50 frames of
# module-call machinery and caller stack above it.  Entries hold their frames (ids stay
# theirs) and are dropped when the trace ends (``on_roomy_stack``).
_CALLERS: dict[int, tuple[FrameType, tuple]] = {}


def user_stack_trace(frame: FrameType | None) -> str | None:
    """The ``forward`` frames above ``frame``, formatted like ``traceback.format_list``."""
    global _anchors_seen
    anchors = stack_trace_anchors()
    if len(anchors) != _anchors_seen or len(_KEEP) > _KEEP_LIMIT:
        _KEEP.clear()
        _CALLERS.clear()
        _anchors_seen = len(anchors)
    kept: list[tuple[str, int, str]] = []
    walked: list[tuple[FrameType, int]] = []
    while frame is not None:
        code = frame.f_code
        entry = _KEEP.get(id(code))
        if entry is None:
            entry = _KEEP[id(code)] = (code, _kept(code, uninteresting_files(), anchors))
        if entry[1]:
            kept.append((code.co_filename, frame.f_lineno, code.co_name))
            seen = _CALLERS.get(id(frame))
            if seen is not None and seen[0] is frame:
                kept.extend(seen[1])
                break
            walked.append((frame, len(kept)))
        frame = frame.f_back
    for seen_frame, after in walked:
        _CALLERS[id(seen_frame)] = (seen_frame, tuple(kept[after:]))
    return _format(tuple(kept)) if kept else None


# Many nodes share a stack (every op on one source line), so each is formatted once.
@functools.lru_cache(maxsize=8192)
def _format(innermost_first: tuple[tuple[str, int, str], ...]) -> str:
    kept = innermost_first[::-1]
    lines: list[str] = []
    previous, count = None, 0
    for entry in kept:
        if entry != previous:
            if count > _REPEAT_CUTOFF:
                _fold(lines, count - _REPEAT_CUTOFF)
            previous, count = entry, 0
        count += 1
        if count > _REPEAT_CUTOFF:
            continue
        filename, lineno, name = entry
        lines.append(f'  File "{filename}", line {lineno}, in {name}\n')
        source = linecache.getline(filename, lineno).strip()
        if source:
            lines.append(f"    {source}\n")
    if count > _REPEAT_CUTOFF:
        _fold(lines, count - _REPEAT_CUTOFF)
    return "".join(lines).strip()


def _fold(lines: list[str], extra: int) -> None:
    lines.append(f"  [Previous line repeated {extra} more time{'s' if extra > 1 else ''}]\n")


# A frame of this many local slots (64 KiB) does not fit a 16 KiB chunk, so CPython opens
# a 128 KiB one for it: the trace's frames (~20 KiB deep on transformers models) then fit
# in the remaining 64 KiB; a deeper trace only spills into ordinary chunks, as before.
_ROOM_SLOTS = 8000


def _call(fn, *args):
    return fn(*args)


@functools.cache
def _roomy_call() -> Callable[..., Any]:
    code = _call.__code__
    names = code.co_varnames + tuple(f"_{i}" for i in range(_ROOM_SLOTS))
    try:
        roomy = code.replace(co_varnames=names, co_nlocals=len(names))
    except (TypeError, ValueError):  # an interpreter whose code objects do not allow it
        return _call
    return types.FunctionType(roomy, _call.__globals__, "_roomy_call")


def on_roomy_stack(fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)``, with its frames in one freshly opened frame-stack chunk (see module doc);
    the frames the stack traces of its nodes remembered are let go when it returns."""
    try:
        return _roomy_call()(fn, *args)
    finally:
        _CALLERS.clear()


class UserCalls:
    """The calls of the user's functions (not torch's, exporter's or the standard library's)
    below the innermost ``forward`` that were running as each node was made.

    Branch capture ends a branch where the function that asked for the value returns, as it
    ends one where a module call returns.  A call is named by the order in which this run
    first saw it, so two runs that went the same way up to a point name the calls running
    there alike.  The frames are held until the run ends, so no name is given twice."""

    def __init__(self) -> None:
        self.of_node: dict[Any, tuple[int | str, ...]] = {}
        """Node -> the calls running when it was made, outermost first, then the extents
        (``opened``) it was made inside."""
        self._names: dict[int, tuple[FrameType, int]] = {}
        self._open: list[Any] = []
        self._opened = 0

    def open(self, extent: Any) -> str:
        """Name the nodes made from now on while ``extent.frame`` is on the stack and
        ``extent.holds(frame)``; the first node made outside it closes it for good.  Returns
        the name, given in order of opening (so alike in two runs that went the same way)."""
        extent.key = f"{_EXTENT}{self._opened}"
        self._opened += 1
        self._open.append(extent)
        return extent.key

    def running(self, frame: FrameType | None) -> tuple[int | str, ...]:
        """The names of the user's calls running at ``frame``, outermost first; none outside
        every ``forward`` (the caller of the export is no part of the model)."""
        if len(_CALL_KIND) > _KEEP_LIMIT:  # generated code keeps bringing new code objects
            _CALL_KIND.clear()
        start = frame
        frames: list[FrameType] = []
        while frame is not None:
            code = frame.f_code
            kind = _CALL_KIND.get(id(code))
            if kind is None:  # the entry holds its code object, so the id stays its own
                kind = _CALL_KIND[id(code)] = (code, _call_kind(code))
            if kind[1] == _FORWARD:
                break
            if kind[1] == _USER:
                frames.append(frame)
            frame = frame.f_back
        if frame is None:
            return ()
        names: list[int | str] = []
        for user in reversed(frames):
            named = self._names.get(id(user))
            if named is None:
                named = self._names[id(user)] = (user, len(self._names))
            names.append(named[1])
        if self._open:
            names.extend(self._inside(start))
        return tuple(names)

    def _inside(self, frame: FrameType | None) -> list[str]:
        """The open extents ``frame``'s stack is inside; the others are closed."""
        on_stack = {}
        while frame is not None:
            on_stack[id(frame)] = frame
            frame = frame.f_back
        inside = []
        for extent in list(self._open):
            live = on_stack.get(id(extent.frame))
            if live is not None and extent.holds(live):
                inside.append(extent.key)
            else:
                self._open.remove(extent)
        return inside

    def note(self, node: Any, frame: FrameType | None) -> None:
        self.of_node[node] = self.running(frame)

    def forget_frames(self) -> None:
        """Let the run's frames go (their names stay on the nodes)."""
        self._names.clear()
        self._open.clear()


_EXTENT = "@"
"""What an extent's name (``UserCalls.open``) starts with; calls are named by numbers, module
calls by their paths."""


def is_extent(key: str | int) -> bool:
    """Whether ``key``, in a stack ``UserCalls.running`` gives, names an extent, not a call."""
    return isinstance(key, str) and key.startswith(_EXTENT)


_FORWARD, _USER, _OTHER = range(3)
_CALL_KIND: dict[int, tuple[Any, int]] = {}
"""id(code object) -> (the code object, what its frames are to ``UserCalls``)."""


def _call_kind(code: types.CodeType) -> int:
    # a module's forward, not an autograd.Function's (``forward(ctx, ...)``)
    if code.co_name == "forward" and not (code.co_argcount and code.co_varnames[0] == "ctx"):
        return _FORWARD
    # code with no file (``python -c``, a REPL, ``exec``) is the user's too
    return _USER if code.co_filename.startswith("<") or not is_library_frame(code.co_filename) else _OTHER


_RECORDING = threading.local()


@contextlib.contextmanager
def recording_user_calls(calls: UserCalls) -> Any:
    """Within the block, each node the tracer makes in this thread is noted in ``calls``."""
    previous = getattr(_RECORDING, "calls", None)
    _RECORDING.calls = calls
    try:
        yield
    finally:
        _RECORDING.calls = previous
        calls.forget_frames()


def user_calls_recorded() -> UserCalls | None:
    """The ``UserCalls`` this thread's nodes are noted in, if any."""
    return getattr(_RECORDING, "calls", None)
