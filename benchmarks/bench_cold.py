"""Cold-start benchmark: whole processes, from interpreter start to exit.

Run from the repository root:

    python benchmarks/bench_cold.py              # 7 runs of each command
    python benchmarks/bench_cold.py --quick      # 3 runs
    python benchmarks/bench_cold.py --repeats 11 --json cold.json
    python benchmarks/bench_cold.py --quick --no-results   # only print

Each command runs once untimed (a warm-up: the OS file cache, and Python's bytecode cache
written if missing), then ``repeats`` times, the commands taking turns so machine noise
falls on all of them evenly; the table shows each command's median time and its ratio to
the median of ``python -c "import torch"``, in wall time and in CPU time (the steadier of
the two on a shared machine).  The processes run in a scratch directory (the CLI writes
its ``.pt2`` there) with ``PYTHONDONTWRITEBYTECODE`` removed from their environment: a
user's Python caches bytecode, and cold start without the cache measures the compiler.

The table and the rows are written through ``results.write`` to
``docs/results/cold-start-torch-2.15.md`` and ``.json`` (the torch release's; ``--results-dir``
to put them elsewhere, ``--no-results`` to only print).  ``cold_start_rows(repeats)`` returns
the rows as data for other benchmarks.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

# results.py sits beside this file, which is run as a script.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
MLP = f"{EXAMPLES / 'mlp.py'}:MLP"
CHECK_MODELS = (MLP, f"{EXAMPLES / 'cnn.py'}:SmallCNN", f"{EXAMPLES / 'tiny_transformer.py'}:TinyTransformer")

# The oracle: the same model and inputs through torch.export, saved as the CLI saves.
_ORACLE = f"""
import sys, torch
sys.path.insert(0, {str(EXAMPLES)!r})
from mlp import MLP, example_inputs
program = torch.export.export(MLP(), example_inputs(), strict=False).run_decompositions({{}})
torch.export.save(program, "MLP_oracle.pt2")
"""

# (label, arguments after the Python executable); the first is the baseline of the ratios.
COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("import torch", ("-c", "import torch")),
    ("import exporter", ("-c", "import exporter")),
    ("exporter mlp.py:MLP -q", ("-m", "exporter", MLP, "-q")),
    ("torch.export.export(MLP) + save", ("-c", _ORACLE)),
    ("exporter check, 1 model", ("-m", "exporter", "check", "-q", MLP)),
    ("exporter check, 3 models", ("-m", "exporter", "check", "-q", *CHECK_MODELS)),
)


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(args: tuple[str, ...], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one process.  CPU time is the steadier figure on a
    machine other jobs share: waiting for a core counts in wall time only."""
    start, cpu = time.perf_counter(), _cpu_of_children()
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, _cpu_of_children() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)!r} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return elapsed, cpu


def cold_start_rows(repeats: int) -> list[dict[str, Any]]:
    """One row per command: ``command``, ``median_s``, ``min_s``, ``runs`` (every wall time,
    in seconds), ``ratio`` (median over the median of ``import torch``), and the same of the
    processes' CPU time: ``cpu_median_s``, ``cpu_runs``, ``cpu_ratio``."""
    env = _environment()
    times: dict[str, list[float]] = {label: [] for label, _ in COMMANDS}
    cpu: dict[str, list[float]] = {label: [] for label, _ in COMMANDS}
    with tempfile.TemporaryDirectory(prefix="bench_cold_") as cwd:
        for _, args in COMMANDS:
            _run(args, cwd, env)
        for _ in range(repeats):
            for label, args in COMMANDS:
                wall, used = _run(args, cwd, env)
                times[label].append(wall)
                cpu[label].append(used)
    baseline = statistics.median(times[COMMANDS[0][0]])
    cpu_baseline = statistics.median(cpu[COMMANDS[0][0]])
    return [
        {
            "command": label,
            "median_s": statistics.median(runs),
            "min_s": min(runs),
            "runs": runs,
            "ratio": statistics.median(runs) / baseline,
            "cpu_median_s": statistics.median(cpu[label]),
            "cpu_runs": cpu[label],
            "cpu_ratio": statistics.median(cpu[label]) / cpu_baseline,
        }
        for label, runs in times.items()
    ]


def _cells(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The table's header and cells."""
    header = ["command", "median s", "min s", "x import torch", "CPU s", "CPU x import torch"]
    cells = [[r["command"], f"{r['median_s']:.2f}", f"{r['min_s']:.2f}", f"{r['ratio']:.2f}",
              f"{r['cpu_median_s']:.2f}", f"{r['cpu_ratio']:.2f}"] for r in rows]
    return header, cells


def _check_scaling(rows: list[dict[str, Any]]) -> str:
    """How much more checking three models costs than one, in wall and CPU time."""
    by_label = {r["command"]: r for r in rows}
    one, three = by_label["exporter check, 1 model"], by_label["exporter check, 3 models"]
    return (f"check, 3 models / 1 model: {three['median_s'] / one['median_s']:.2f} wall, "
            f"{three['cpu_median_s'] / one['cpu_median_s']:.2f} CPU")


def _table(rows: list[dict[str, Any]]) -> str:
    """The table as the terminal shows it."""
    width = max(len(r["command"]) for r in rows)
    lines = [f"{'command':<{width}}  median s  min s  x import torch  CPU s  CPU x import torch"]
    lines += [
        f"{r['command']:<{width}}  {r['median_s']:8.2f}  {r['min_s']:5.2f}  {r['ratio']:14.2f}"
        f"  {r['cpu_median_s']:5.2f}  {r['cpu_ratio']:18.2f}"
        for r in rows
    ]
    lines.append(_check_scaling(rows))
    return "\n".join(lines)


def markdown(rows: list[dict[str, Any]], repeats: int) -> str:
    """The table for the results page, and how it was taken."""
    return "\n\n".join([
        results.markdown_table(*_cells(rows)),
        _check_scaling(rows),
        (f"Median of {repeats} runs of each command after a warm-up, the commands taking turns; "
         "`PYTHONDONTWRITEBYTECODE` unset. `x import torch` is the command's time over `python -c \"import torch\"`'s."),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed runs of each command (default 7)")
    parser.add_argument("--quick", action="store_true", help="3 timed runs of each command")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    results.add_arguments(parser)
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else args.repeats
    import torch

    rows = cold_start_rows(repeats)
    print(_table(rows))
    print(
        f"torch {torch.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"median of {repeats} after a warm-up, PYTHONDONTWRITEBYTECODE unset"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    results.write_from_args(
        args, f"cold-start-{results.release_suffix()}", markdown=markdown(rows, repeats),
        data={"repeats": repeats, "rows": rows}, argv=results.script_argv(__file__, argv),
        title=f"Cold start, torch {results.torch_release()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
