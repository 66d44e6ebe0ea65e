"""The fast recorder against make_fx on the transformers model zoo: same graph, how much faster.

Run from the repository root (one job: keep the other core free for timing benchmarks):

    nice -n 10 python benchmarks/recorder_zoo.py --fast --jobs 1            # 8 models
    nice -n 10 python benchmarks/recorder_zoo.py --jobs 1 --only bert,gpt2,llama,t5
    timeout 4200 nice -n 10 python benchmarks/recorder_zoo.py --jobs 1 --budget 4000 --json recorder_zoo.json
    nice -n 10 python benchmarks/recorder_zoo.py --jobs 1 --ir training   # the training IR

``exporter.trace.trace`` records a static trace with the fast recorder
(``exporter/trace/fast/recorder.py``) and hands make_fx whatever the recorder refuses;
``fast=FastPaths()`` (every fast path off) traces with make_fx only. The two must record the same program,
which ``tests/exporter/trace/test_recorder.py`` checks on the test corpora; this script
checks it on every model of ``zoo.py``'s zoo (built as ``zoo.py`` builds them, tiny random
weights, no downloads). Each model is traced both ways and classed as:

``same``                 the recorder traced; fingerprints (``tests.support.graph_fingerprint``)
                         and input/output specs equal
``refused:<reason>``     the recorder refused (the tracer logged "tracing with make_fx: ...")
                         and make_fx traced; the fingerprints are equal too
``functionalized``       the model writes in place: the functionalized make_fx trace was used
``DIFFERENT``            both traced, the fingerprints (or specs) differ: a recorder bug; the
                         first differing row pair is reported
``both fail``            both traces raise (whether type and message are equal is recorded)
``one fails``            only one raises (or times out, or crashes): a bug
``not built``            the zoo could not build the model

Each trace is run ``--repeat`` times (default 3) and timed by its fastest run, so the
first trace of a model type (which pays for its cold Python and dispatch caches) does
not count against whichever tracer happens to go first; the fingerprint is the first
run's, and a repeat that records a different graph is reported as unstable. The time
ratio is recorder seconds / make_fx seconds (``TIME_RATIO``; lower is better, as exporter's
time ratio to torch.export is), geometric mean over ``same`` models.

The machinery is ``zoo.py``'s: the parent imports and warms up once, each model type runs
in its own forked subprocess, each step (a build, or one tracer's traces) has a timeout
and a step that times out or crashes is charged with it. ``run_zoo`` runs "tools";
here the two tools are ``recorder`` and ``make_fx`` and zoo's ``run_tool``/``ToolResult``
are swapped for this script's while it runs (see ``_zoo_runs_traces``).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import hashlib
import json
import logging
import math
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# zoo and zoo_models sit beside this file, which is run as a script (not as a package);
# tests.support (graph_fingerprint) is in the repository root.
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

import attrs
import torch
import zoo
import zoo_models

from exporter.inputs import bind_inputs
from exporter.trace import trace
from exporter.trace.fast import FastPaths
from tests.support import graph_fingerprint

TOOLS = ("recorder", "make_fx")
TIME_RATIO = "time ratio (recorder / make_fx)"
FAST = {"recorder": FastPaths.resolve(True), "make_fx": FastPaths()}
CLASSES = ("same", "functionalized", "DIFFERENT", "both fail", "one fails", "not built")
"""The summary's order; ``refused:<reason>`` classes go after ``functionalized``."""
TRACER_LOGGER = "exporter.trace.tracer"
REFUSED_PREFIX = "tracing with make_fx: "
FUNCTIONALIZED_PREFIX = "tracing again, functionalized"
ROW_FIELDS = ("module", "op", "name", "target", "args", "kwargs", "meta")
"""The fields of a ``graph_fingerprint`` node row."""


@attrs.define
class TraceResult(zoo.ToolResult):
    """One tracer on one model (``outcome`` ok | fails | timeout | crash, as zoo's)."""

    times: list[float] = attrs.Factory(list)
    """Seconds of each run (``seconds`` is the fastest)."""
    log: list[str] = attrs.Factory(list)
    """What the tracer logged on its first run."""
    fingerprint: bytes | None = None
    """The first run's ``graph_fingerprint``, pickled (it crosses the pipe as is)."""
    specs: str | None = None
    """``repr`` of the input and output specs."""
    nodes: int | None = None
    stable: bool | None = None
    """Whether every repeat recorded the first run's graph (None: one run)."""
    unstable: str | None = None
    """How a repeat differed from the first run."""
    state_changed: bool = False
    """Whether the model's parameters or buffers differ after the traces."""
    error_text: str | None = None
    """The whole error message (addresses masked), to compare two failures."""


# --------------------------------------------------------------------- in the child


def _mask(text: str) -> str:
    return re.sub(r" at 0x[0-9a-f]+", "", text)


@contextlib.contextmanager
def _tracer_log() -> Iterator[list[str]]:
    """The messages the tracer logs within the block (at DEBUG)."""

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    messages: list[str] = []
    logger = logging.getLogger(TRACER_LOGGER)
    handler, level = Capture(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def run_trace(tool: str, built: zoo_models.Built, options: dict[str, Any]) -> TraceResult:
    """Trace ``built`` with one tracer ``options["repeat"]`` times (zoo's ``run_tool``)."""
    repeat = max(1, int(options.get("repeat", 3)))
    model = built.model
    bound = bind_inputs(model, (), built.kwargs)
    before = {name: value.clone() for name, value in model.state_dict().items()}
    result: TraceResult | None = None
    first: list | None = None
    for run in range(repeat):
        gc.collect()
        with _tracer_log() as messages:
            start = time.perf_counter()
            try:
                state = trace(model, bound, fast=FAST[tool], training=options.get("ir") == "training")
            except Exception as e:  # noqa: BLE001 - a failing trace is an outcome
                seconds = time.perf_counter() - start
                if result is None:
                    result = zoo._failure("fails", e, seconds)
                    result.error_text = _mask(str(e))[:4000]
                    result.log = list(messages)
                else:
                    result.stable = False
                    result.unstable = f"run {run + 1} raised {type(e).__name__}: {zoo._first_line(e)}"
                break
            seconds = time.perf_counter() - start
        rows = graph_fingerprint(state.gm)
        if result is None:
            first = rows
            result = TraceResult(
                "ok",
                log=list(messages),
                fingerprint=pickle.dumps(rows),
                specs=_mask(f"{state.input_specs!r}\n{state.output_specs!r}"),
                nodes=sum(1 for row in rows if row[1] != "attributes"),
            )
        elif rows != first:
            result.stable = False
            difference = first_difference(first, rows, ("run 1", f"run {run + 1}"))
            result.unstable = f"run {run + 1} recorded another graph: {difference['text'] if difference else ''}"
        elif result.stable is None:
            result.stable = True
        result.times.append(seconds)
        del state
    assert result is not None
    if result.times:
        result.seconds = min(result.times)
    after = model.state_dict()
    result.state_changed = before.keys() != after.keys() or not all(
        torch.equal(before[name], after[name]) for name in before
    )
    return result


# ------------------------------------------------------------ comparing two graphs


def _window(a: str, b: str, width: int = 160) -> tuple[str, str]:
    """The part of two strings around where they first differ."""
    common = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, common - 40)
    cut = lambda s: ("…" if start else "") + s[start : start + width] + ("…" if len(s) > start + width else "")
    return cut(a), cut(b)


def _short(value: Any, width: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width] + "…"


def _field_differences(a: tuple, b: tuple) -> list[str]:
    """Which fields of two fingerprint rows differ, each with both values around the difference."""
    if len(a) != len(b) or a[1] == "attributes" or b[1] == "attributes":
        return [f"row {_short(a, 200)} vs {_short(b, 200)}"]
    out = []
    for field, x, y in zip(ROW_FIELDS, a, b):
        if x == y:
            continue
        if field == "meta":
            for key in sorted(set(x) | set(y)):
                if x.get(key, "<missing>") != y.get(key, "<missing>"):
                    ours, theirs = _window(str(x.get(key, "<missing>")), str(y.get(key, "<missing>")))
                    out.append(f"meta[{key!r}]: {ours!r} vs {theirs!r}")
        else:
            ours, theirs = _window(str(x), str(y))
            out.append(f"{field}: {ours!r} vs {theirs!r}")
    return out


def first_difference(a: list, b: list, names: tuple[str, str] = TOOLS) -> dict[str, Any] | None:
    """Where two fingerprints first differ: the row index, both rows (truncated) and the
    fields that differ; None when they are equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            fields = _field_differences(x, y)
            return {
                "index": i,
                names[0]: _short(x),
                names[1]: _short(y),
                "fields": fields,
                "text": f"row {i} ({x[2] if len(x) > 2 else x[1]} vs {y[2] if len(y) > 2 else y[1]}): " + "; ".join(fields),
            }
    if len(a) != len(b):
        i = min(len(a), len(b))
        x = a[i] if i < len(a) else "<end of graph>"
        y = b[i] if i < len(b) else "<end of graph>"
        return {"index": i, names[0]: _short(x), names[1]: _short(y), "fields": [],
                "text": f"row {i}: {names[0]} has {len(a)} rows, {names[1]} {len(b)}: {_short(x, 200)} vs {_short(y, 200)}"}
    return None


# ---------------------------------------------------------------- classifying a model

_REASON_CLASSES = (
    (r"reachable under two names", "module reachable under two names"),
    (r"^higher-order op", "higher-order op"),
    (r"^input \d+ is a ", "tensor-subclass input"),
    (r"^a symbolic input", "symbolic input"),
    (r"^a symbolic size", "symbolic size"),
    (r"the trace did not produce", "tensor from outside the trace"),
    (r"^an op returning a list of non-tensors", "op returning non-tensors"),
    (r"^an op returning a ", "op returning a non-tensor"),
    (r"reads a tensor's value", "reads a tensor's value"),
    (r"made a data-dependent size", "data-dependent size"),
)


def reason_class(reason: str) -> str:
    """A refusal's class: the recorder's message without the op, module or input it names;
    an error the recorder's trace raised (make_fx then traced) is ``error <type>``."""
    for pattern, name in _REASON_CLASSES:
        if re.search(pattern, reason):
            return name
    error = re.match(r"^([A-Za-z_][\w.]*)\(", reason)
    if error:
        return f"error {error.group(1)}"
    return re.sub(r"'[^']*'|\d+", "…", reason)[:60]


@attrs.define
class Outcome:
    """What one model's two traces say."""

    kind: str
    """One of CLASSES, or ``refused:<reason class>``."""
    detail: str = ""
    difference: dict[str, Any] | None = None
    ratio: float | None = None
    """The time ratio, recorder seconds / make_fx seconds, when both traced."""
    notes: list[str] = attrs.Factory(list)
    """Anything else worth a look: unstable repeats, model state changed by a trace."""


def _refusal(result: TraceResult) -> str | None:
    return next((m.removeprefix(REFUSED_PREFIX) for m in result.log if m.startswith(REFUSED_PREFIX)), None)


def _functionalized(result: TraceResult) -> str | None:
    return next((m for m in result.log if m.startswith(FUNCTIONALIZED_PREFIX)), None)


def classify(row: zoo.Row) -> Outcome:
    if not row.built:
        return Outcome("not built", row.reason or "")
    rec, mfx = row.results.get("recorder"), row.results.get("make_fx")
    if rec is None or mfx is None:
        return Outcome("one fails", f"missing result: recorder {rec and rec.outcome}, make_fx {mfx and mfx.outcome}")
    notes = []
    for tool, result in (("recorder", rec), ("make_fx", mfx)):
        if result.stable is False:
            notes.append(f"{tool} unstable: {result.unstable}")
        if result.state_changed:
            notes.append(f"{tool}: the model's parameters or buffers changed")
    if not rec.ok and not mfx.ok:
        same = (rec.outcome, rec.error_type, rec.error_text) == (mfx.outcome, mfx.error_type, mfx.error_text)
        detail = f"{'same error' if same else 'different errors'}: recorder {rec.describe()}"
        if not same:
            detail += f" | make_fx {mfx.describe()}"
        return Outcome("both fail", detail, notes=notes)
    if not rec.ok or not mfx.ok:
        failed, passed = ("recorder", rec) if not rec.ok else ("make_fx", mfx)
        path = _path(*(("make_fx", mfx) if failed == "recorder" else ("recorder", rec)))
        return Outcome("one fails", f"{failed} {passed.describe()}; the other traced ({path})", notes=notes)
    ratio = rec.seconds / mfx.seconds if rec.seconds and mfx.seconds else None
    path = _path("recorder", rec)
    difference = first_difference(pickle.loads(rec.fingerprint), pickle.loads(mfx.fingerprint))
    if difference is None and rec.specs != mfx.specs:
        ours, theirs = _window(rec.specs or "", mfx.specs or "", 300)
        difference = {"index": None, "recorder": ours, "make_fx": theirs, "fields": ["specs"],
                      "text": f"graphs equal, input/output specs differ: {ours!r} vs {theirs!r}"}
    if difference is not None:
        return Outcome("DIFFERENT", f"{path}; {difference['text']}", difference, ratio, notes)
    refusal = _refusal(rec)
    if refusal is not None:
        return Outcome(f"refused:{reason_class(refusal)}", refusal[:300], ratio=ratio, notes=notes)
    functionalized = _functionalized(rec)
    if functionalized is not None:
        return Outcome("functionalized", functionalized.partition(": ")[2][:300], ratio=ratio, notes=notes)
    return Outcome("same", ratio=ratio, notes=notes)


def _path(tool: str, result: TraceResult) -> str:
    """Which path a successful trace took, in a few words."""
    refusal, functionalized = _refusal(result), _functionalized(result)
    if refusal is not None:
        return f"recorder refused: {refusal[:150]}"
    if functionalized is not None:
        return f"{tool}: functionalized make_fx"
    return tool if result.log == [] else f"{tool}, log {result.log[:2]}"


# -------------------------------------------------------------------- in the parent


@contextlib.contextmanager
def _zoo_runs_traces() -> Iterator[None]:
    """zoo's children call ``zoo.run_tool`` for each (class, tool) step and its parent
    rebuilds each result as ``zoo.ToolResult``: both are this script's while it runs
    (forked children inherit them)."""
    saved = zoo.run_tool, zoo.ToolResult
    zoo.run_tool, zoo.ToolResult = run_trace, TraceResult
    try:
        yield
    finally:
        zoo.run_tool, zoo.ToolResult = saved


def warm_up() -> None:
    """Trace a tiny module both ways (and functionalized) before forking, so no model pays
    the tracers' one-time setup."""

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear, self.norm = torch.nn.Linear(4, 4), torch.nn.LayerNorm(4)
            self.register_buffer("seen", torch.zeros(4))

        def forward(self, x: torch.Tensor, write: bool = False) -> torch.Tensor:
            y = self.norm(torch.nn.functional.gelu(self.linear(x))).softmax(-1)
            if write:
                self.seen.add_(y.sum(0))
            return y

    model = Tiny().eval()
    for write in (False, True):
        bound = bind_inputs(model, (torch.randn(2, 4),), {"write": write})
        for fast in FAST.values():
            graph_fingerprint(trace(model, bound, fast=fast).gm)


class _Stop(Exception):
    """The time budget is spent (or the run was terminated): report what finished."""


def _geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def summarize(done: list[tuple[zoo.Row, Outcome]], planned: int) -> dict[str, Any]:
    counts = collections.Counter(outcome.kind for _, outcome in done)
    refused = sorted(kind for kind in counts if kind.startswith("refused:"))
    order = [*CLASSES[:2], *refused, *CLASSES[2:]]
    both_fail = [o for _, o in done if o.kind == "both fail"]
    details: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for _, outcome in done:
        if outcome.kind.startswith("refused:"):
            details[outcome.kind][re.sub(r"'[^']*\.[^']*'", "'…'", outcome.detail)[:120]] += 1
    ratio = lambda kinds: _geomean([o.ratio for _, o in done if o.ratio and kinds(o.kind)])
    same = [(row, o) for row, o in done if o.kind == "same" and o.ratio]
    return {
        "planned_rows": planned,
        "rows": len(done),
        "model_types": len({row.model_type for row, _ in done}),
        "counts": {kind: counts[kind] for kind in order if counts[kind] or kind in CLASSES},
        "both_fail_same_error": sum(o.detail.startswith("same error") for o in both_fail),
        "refused_details": {kind: dict(c.most_common(6)) for kind, c in details.items()},
        "time_ratio_geomean_same": ratio(lambda kind: kind == "same"),
        "time_ratio_geomean_all_traced": ratio(lambda kind: kind not in ("DIFFERENT",)),
        "seconds_same": {
            tool: sum(row.results[tool].seconds for row, _ in same) for tool in TOOLS
        },
        "not_built_reasons": dict(collections.Counter(
            (o.detail or "").split(":")[0] for _, o in done if o.kind == "not built"
        ).most_common()),
    }


def _seconds(row: zoo.Row, tool: str) -> str:
    result = row.results.get(tool)
    return f"{result.seconds:.3f}" if result and result.seconds is not None else "-"


def progress_line(row: zoo.Row, outcome: Outcome, done: int, total: int) -> str:
    parts = [f"[{done}/{total}] {row.model_type} {row.class_name or ''}: {outcome.kind}"]
    if row.built:
        ratio = f" time ratio {outcome.ratio:.2f}" if outcome.ratio else ""
        parts.append(f"recorder {_seconds(row, 'recorder')}s make_fx {_seconds(row, 'make_fx')}s{ratio}")
    if outcome.detail and outcome.kind != "same":
        parts.append(outcome.detail[:400])
    parts += outcome.notes
    return " | ".join(parts)


def report_lines(done: list[tuple[zoo.Row, Outcome]], summary: dict[str, Any], wall: float) -> list[str]:
    models = f"{summary['rows']} of {summary['planned_rows']} models across {summary['model_types']} model types"
    lines = [f"{models}, wall time {wall:.0f} s"]
    width = max(len(kind) for kind in summary["counts"]) + 2
    for kind, count in summary["counts"].items():
        extra = ""
        if kind == "both fail" and count:
            extra = f"  (same error: {summary['both_fail_same_error']}, different errors: {count - summary['both_fail_same_error']})"
        lines.append(f"  {kind:<{width}}{count:>5}{extra}")
    for kind, details in summary["refused_details"].items():
        lines.append(f"  {kind}, most common reasons:")
        lines += [f"      {count:>4}  {detail}" for detail, count in details.items()]
    if summary["time_ratio_geomean_same"]:
        seconds = summary["seconds_same"]
        lines.append(
            f"{TIME_RATIO}, geometric mean over same: {summary['time_ratio_geomean_same']:.2f} "
            f"(total {seconds['recorder']:.1f} s vs {seconds['make_fx']:.1f} s)"
        )
    if summary["time_ratio_geomean_all_traced"]:
        lines.append(f"{TIME_RATIO}, geometric mean over all traced alike (refusals traced by make_fx): "
                     f"{summary['time_ratio_geomean_all_traced']:.2f}")
    if summary["not_built_reasons"]:
        lines.append("not built, by reason: " + ", ".join(f"{r}: {n}" for r, n in summary["not_built_reasons"].items()))
    problems = [(row, o) for row, o in done if o.kind in ("DIFFERENT", "one fails")]
    lines.append(f"DIFFERENT / one fails: {len(problems) or 'none'}")
    for row, outcome in problems:
        lines.append(f"  {row.model_type} {row.class_name}: {outcome.kind}: {outcome.detail[:1500]}")
        if outcome.difference:
            lines.append(f"      recorder: {outcome.difference['recorder']}")
            lines.append(f"      make_fx:  {outcome.difference['make_fx']}")
    different_errors = [(row, o) for row, o in done if o.kind == "both fail" and not o.detail.startswith("same error")]
    if different_errors:
        lines.append("both fail with different errors:")
        lines += [f"  {row.model_type} {row.class_name}: {o.detail[:800]}" for row, o in different_errors]
    noted = [(row, o) for row, o in done if o.notes]
    if noted:
        lines.append("notes (unstable repeats, model state changed):")
        lines += [f"  {row.model_type} {row.class_name}: {'; '.join(o.notes)[:800]}" for row, o in noted]
    return lines


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=HERE.parent, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""


def environment() -> dict[str, str]:
    """zoo's environment, and which exporter source ran (HEAD and the uncommitted changes)."""
    return {
        **zoo.environment(),
        "git_head": _git("rev-parse", "HEAD").strip(),
        "git_diff_sha1": hashlib.sha1(_git("diff", "HEAD", "--", "exporter").encode()).hexdigest(),
        "recorder_sha1": hashlib.sha1((HERE.parent / "exporter/trace/fast/recorder.py").read_bytes()).hexdigest(),
    }


def _row_json(row: zoo.Row, outcome: Outcome) -> dict[str, Any]:
    results = {}
    for tool, result in row.results.items():
        data = attrs.asdict(result)
        data.pop("fingerprint", None)
        results[tool] = data
    return {
        "model_type": row.model_type, "class_name": row.class_name, "class": outcome.kind,
        "detail": outcome.detail, "ratio": outcome.ratio, "difference": outcome.difference, "notes": outcome.notes,
        "built": row.built, "reason": row.reason, "note": row.note, "inputs": row.inputs,
        "parameters": row.parameters, "build_seconds": row.build_seconds, "results": results,
    }


# ------------------------------------------------------------------------------- CLI


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", type=zoo._csv, help="comma-separated model types (default: all)")
    parser.add_argument("--exclude", type=zoo._csv, default=[], help="comma-separated model types to skip")
    parser.add_argument("--fast", action="store_true", help=f"only {', '.join(zoo.FAST)}, the head only")
    parser.add_argument("--classes", choices=("head+base", "first"), default="head+base",
                        help="head+base: the most servable head and the base model; first: the head only")
    parser.add_argument("--repeat", type=int, default=3, help="traces per tracer and model, timed by the fastest (default 3)")
    parser.add_argument("--timeout", type=float, default=180.0,
                        help="seconds a build or one tracer's traces of one model may take (default 180)")
    parser.add_argument("--ir", choices=("inference", "training"), default="inference",
                        help="the IR traced (training: the recorder in make_fx's pre-dispatch slot, against make_fx pre_dispatch=True)")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="model types run in parallel (default 1)")
    parser.add_argument("--budget", type=float, help="stop after this many seconds and report the models finished")
    parser.add_argument("--json", type=Path, help="write every model's outcome and the summary as JSON")
    parser.add_argument("--logs", type=Path, help="keep each model type's stdout/stderr in this folder")
    args = parser.parse_args(argv)
    zoo.check_model_types(parser, args)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    types = zoo.selected_types(args)
    settings = zoo.Settings(
        tools=TOOLS,
        timeout=args.timeout,
        jobs=max(1, args.jobs),
        classes="first" if args.fast else args.classes,
        exporter_kwargs={"repeat": args.repeat, "ir": args.ir},
        log_dir=args.logs,
        warm_up=False,
    )
    env = environment()
    rows = zoo.plan(types, settings.classes)
    done: list[tuple[zoo.Row, Outcome]] = []
    start = time.monotonic()

    def on_row(row: zoo.Row) -> None:
        outcome = classify(row)
        done.append((row, outcome))
        print(progress_line(row, outcome, len(done), len(rows)), file=sys.stderr, flush=True)
        if args.budget is not None and time.monotonic() - start > args.budget:
            raise _Stop(f"time budget of {args.budget:g} s spent")

    parent = os.getpid()

    def on_term(signum: int, frame: Any) -> None:
        if os.getpid() != parent:  # a forked child (timeout signals the whole group)
            os._exit(128 + signum)
        raise _Stop(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    stopped = None
    torch.set_num_threads(1)
    warm_up()
    try:
        with _zoo_runs_traces():
            zoo.run_zoo(rows, settings, on_row)
    except (_Stop, KeyboardInterrupt) as e:
        stopped = str(e) or type(e).__name__
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    wall = time.monotonic() - start
    summary = summarize(done, len(rows))
    if stopped:
        summary["stopped"] = stopped
        print(f"STOPPED EARLY ({stopped}): partial figures", flush=True)
    for line in report_lines(done, summary, wall):
        print(line, flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "settings": {**attrs.asdict(settings), "log_dir": str(settings.log_dir) if settings.log_dir else None},
            "environment": env,
            "wall_seconds": wall,
            "summary": summary,
            "rows": [_row_json(row, outcome) for row, outcome in done],
        }, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
