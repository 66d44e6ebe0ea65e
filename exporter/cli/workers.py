"""Isolated workers for ``exporter check``: each model exported in a process of its own, watched
for time and memory, so that a model which hangs, crashes, exits or eats the machine fails alone.

Every model gets a fresh process, forked from a fork server that imported torch and exporter
once and never ran an op (so no thread pool or lock is copied mid-use, and a model's patches,
imports and leaked state die with its process). A worker leads its own process group; when it
ends or is stopped, the whole group is killed, so nothing it started keeps running.

The parent waits on every worker's pipe and exit at once, and each ``POLL`` seconds compares
each worker's resident memory (its children's included) with ``max_memory``: torch reserves far
more address space than it touches, so an address-space rlimit would fail healthy models.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import multiprocessing
import multiprocessing.connection
import os
import re
import signal
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from .._errors import AbortError, Category, ErrorInfo, InputSpecError
from .._torch_internals import DYNAMO_MODULE
from .memory import resident_memory

__all__ = ["DEFAULT_TIMEOUT", "Limits", "Outcome", "parse_timeout", "run_isolated"]

DEFAULT_TIMEOUT = 600.0
"""Seconds one model may take in ``check`` unless told otherwise: a large model's export and
verification take minutes, a hang takes forever."""

POLL = 0.05
"""Seconds between memory readings; a model touching memory at full speed overshoots the limit
by what it can touch in that time before it is stopped."""

_GRACE = 0.3
"""Seconds a timed-out worker gets to write its stack before it is killed."""

_PRELOAD = ["torch", DYNAMO_MODULE, "exporter.cli.job"]
"""Imported once in the fork server. An export imports Dynamo on first use (one to two seconds
of every model's time if each worker did it); importing starts no thread, so forking after it
is safe.
A name that no longer imports is skipped by multiprocessing."""


def parse_timeout(value: Any, what: str = "--timeout") -> float | None:
    """Seconds, or None (no limit) for 0."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if isinstance(value, bool) or not seconds >= 0 or seconds == float("inf"):
        raise InputSpecError(f"{what} {value!r} is not a number of seconds", hint=f"write {what} 600 (0: no limit)")
    return seconds or None


@attrs.frozen
class Limits:
    """What one model's worker may use before it is stopped."""

    timeout: float | None = DEFAULT_TIMEOUT
    """Seconds; None: no limit."""
    max_memory: int | None = None
    """Bytes of resident memory; None: no limit."""


@attrs.define
class Outcome:
    """How a worker ended: with a report, or stopped (``error`` says why, ``worker`` the facts)."""

    report: Any = None
    """The ExportReport the worker sent, if it got that far."""
    error: ErrorInfo | None = None
    worker: dict[str, Any] | None = None
    """For a worker that ended without a report: exit code or signal, seconds, peak memory, stage."""


# -- in the worker ---------------------------------------------------------------------------


def _die_with_parent() -> None:
    """Be killed when the fork server exits, as it does when ``check`` dies without cleaning up
    (SIGKILL): a hanging worker would otherwise run on. Linux only; elsewhere a no-op."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _work(settings, conn, dump_path: str) -> None:
    """The worker's body: export ``settings``, send stages as they start and then the report."""
    os.setpgrp()  # a group of its own, so the parent can kill whatever it starts along with it
    _die_with_parent()
    with open(dump_path, "w") as dump:
        # On a fatal signal, or the parent's SIGUSR1 at a timeout, write every thread's stack
        # where the parent can read it: that is where the model crashed or hung.
        faulthandler.enable(dump, all_threads=True)
        faulthandler.register(signal.SIGUSR1, dump, all_threads=True)
        from .job import run_export

        try:
            report = run_export(settings, on_stage=lambda stage: conn.send(("stage", stage)))
            report.program = None  # the data travels, the program does not
            conn.send(("report", report))
        except BaseException as e:  # noqa: BLE001 - run_export reports failures; this is one it could not
            conn.send(("error", ErrorInfo.from_exception(e)))
        finally:
            conn.close()
            # Now, not after atexit handlers or the model's threads, which could hang or crash.
            os._exit(0)


# -- in the parent ---------------------------------------------------------------------------


@attrs.define
class _Worker:
    key: str
    process: Any
    conn: Any
    dump_path: str
    started: float
    stage: str = "starting"
    report: Any = None
    error: ErrorInfo | None = None
    """What the worker sent when even reporting failed."""
    peak: int = 0
    stopped: Category | None = None
    """TIMEOUT or MEMORY when the parent killed it."""


def _context():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context


def _start(context, key: str, settings) -> _Worker:
    receive, send = context.Pipe(duplex=False)
    fd, dump_path = tempfile.mkstemp(prefix="exporter-worker-", suffix=".txt")
    os.close(fd)
    process = context.Process(target=_work, args=(settings, send, dump_path), name=f"exporter check {key}")
    process.start()
    send.close()
    return _Worker(key, process, receive, dump_path, time.monotonic())


def _drain(worker: _Worker) -> None:
    """Read every message the worker has sent so far."""
    while worker.conn is not None:
        try:
            if not worker.conn.poll():
                return
            kind, value = worker.conn.recv()
        except (EOFError, OSError):
            worker.conn.close()
            worker.conn = None
            return
        if kind == "stage":
            worker.stage = value
        elif kind == "report":
            worker.report = value
        else:
            worker.error = value


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:  # it may have died before making its group
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _stop(worker: _Worker, why: Category) -> None:
    worker.stopped = why
    if why is Category.TIMEOUT:
        try:  # ask for the stacks first: where it hangs is the news
            os.kill(worker.process.pid, signal.SIGUSR1)
            worker.process.join(_GRACE)
        except ProcessLookupError:
            pass
    _kill_group(worker.process.pid)


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')


def _user_location(dump: str) -> str | None:
    """The innermost frame outside Python, torch and exporter in a faulthandler dump, from the
    thread that crashed or was interrupted first."""
    libraries = (os.path.dirname(os.__file__), _package_dir())
    blocks = [b for b in dump.split("\n\n") if "hread 0x" in b]
    for block in sorted(blocks, key=lambda b: "Current thread" not in b):
        for line in block.splitlines():
            match = _FRAME.match(line)
            if match and not match["file"].startswith(libraries) and "site-packages" not in match["file"]:
                return f"{match['file']}:{match['line']}"
    return None


def _package_dir() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _ending(worker: _Worker, limits: Limits) -> Outcome:
    """The outcome of a worker that has ended."""
    if worker.report is not None or worker.error is not None:
        return Outcome(worker.report, worker.error)
    seconds = time.monotonic() - worker.started
    code = worker.process.exitcode
    try:
        with open(worker.dump_path) as f:
            dump = f.read()
    except OSError:
        dump = ""
    facts: dict[str, Any] = {"stage": worker.stage, "seconds": round(seconds, 3)}
    if limits.max_memory:
        facts["peak_memory"] = worker.peak
    where = f"while {worker.stage}"
    if worker.stopped is Category.TIMEOUT:
        category = Category.TIMEOUT
        message = f"stopped after {limits.timeout:g} s (--timeout) {where}"
        hint = "raise --timeout (timeout = ... in [tool.exporter]) if the model needs longer; a model waiting on a lock, input or the network never ends"
    elif worker.stopped is Category.MEMORY:
        category = Category.MEMORY
        message = f"stopped at {worker.peak / 2**20:,.0f} MiB resident, over --max-memory {limits.max_memory / 2**20:,.0f} MiB, {where}"
        hint = "raise --max-memory (max-memory = ... in [tool.exporter]), or give smaller example inputs"
    else:
        category = Category.CRASH
        if code is not None and code < 0:
            facts["signal"] = _signal_name(-code)
            message = f"the worker was killed by {facts['signal']} {where}"
            if -code == signal.SIGKILL:
                message += " (by someone else: often the system's out-of-memory killer)"
        else:
            facts["exit_code"] = code
            message = f"the worker exited with code {code} {where} (os._exit, or a native library exiting)"
        hint = "run the model on its own (python -m exporter MODEL -v) to see where it crashes"
    error = ErrorInfo(AbortError.__name__, category, message, _user_location(dump), hint, dump or None)
    return Outcome(error=error, worker=facts)


def _ended(worker: _Worker, limits: Limits) -> bool:
    """Whether the worker has ended, or has now been stopped for going over a limit."""
    _drain(worker)
    if worker.process.exitcode is not None:
        return True
    if limits.max_memory:
        worker.peak = max(worker.peak, resident_memory(worker.process.pid))
        if worker.peak > limits.max_memory:
            _stop(worker, Category.MEMORY)
            return True
    if limits.timeout is not None and time.monotonic() - worker.started > limits.timeout:
        _stop(worker, Category.TIMEOUT)
        return True
    return False


def _finish(worker: _Worker, limits: Limits) -> Outcome:
    _drain(worker)
    worker.process.join()
    _kill_group(worker.process.pid)  # whatever it started dies with it
    _drain(worker)
    outcome = _ending(worker, limits)
    if worker.conn is not None:
        worker.conn.close()
    worker.process.close()
    with contextlib.suppress(OSError):
        os.unlink(worker.dump_path)
    return outcome


@contextlib.contextmanager
def _terminate_raises() -> Iterator[None]:
    """CI cancels a job with SIGTERM: raise SystemExit instead of dying on the spot, so the
    workers are killed on the way out (main thread only, where signal handlers run)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(number: int, frame: Any) -> None:
        raise SystemExit(128 + number)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_isolated(
    jobs: Sequence[tuple[str, Any]],
    limits: Limits,
    workers: int = 1,
    on_done: Callable[[str, Outcome], None] | None = None,
) -> dict[str, Outcome]:
    """Run ``run_export(settings)`` for each ``(key, settings)`` in a process of its own, at
    most ``workers`` at once, and return how each ended, by key.

    ``on_done(key, outcome)`` is called as each ends. If the parent is interrupted, every
    running worker's process group is killed before the exception goes on.
    """
    context = _context()
    pending = deque(jobs)
    running: list[_Worker] = []
    outcomes: dict[str, Outcome] = {}
    with _terminate_raises():
        try:
            while pending or running:
                while pending and len(running) < max(workers, 1):
                    running.append(_start(context, *pending.popleft()))
                now = time.monotonic()
                waits_for = [max(w.started + limits.timeout - now, 0) for w in running] if limits.timeout else []
                waits_for += [POLL] if limits.max_memory else []
                multiprocessing.connection.wait(
                    [w.process.sentinel for w in running] + [w.conn for w in running if w.conn is not None],
                    min(waits_for, default=None),
                )
                for worker in [w for w in running if _ended(w, limits)]:
                    running.remove(worker)
                    outcomes[worker.key] = _finish(worker, limits)
                    if on_done:
                        on_done(worker.key, outcomes[worker.key])
        finally:
            for worker in running:
                _kill_group(worker.process.pid)
                worker.process.join()
                with contextlib.suppress(OSError):
                    os.unlink(worker.dump_path)
    return outcomes
