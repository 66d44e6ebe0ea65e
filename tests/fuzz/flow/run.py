"""The control-flow fuzzer's long run: ``python -m tests.fuzz.flow.run --programs N --seed S --jobs J --out DIR``.

Programs ``S .. S+N-1`` are generated and judged (``runner.check_flow``) in ``J`` worker
processes; a finding is shrunk in its worker (``--no-shrink``: kept as generated). Writes to DIR ``summary.json`` and
``summary.txt`` (programs right, refused by category, findings; the features the programs
used; time) and ``findings/flow_seed_<n>.py``, each shrunk program headed by its outcome.
Exits 1 when there is a finding. ``--results`` also writes the counts as a stamped results
page, ``docs/results/fuzz-flow-torch-X.Y.md`` and ``.json`` (``benchmarks/results.py``).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import multiprocessing
import sys
import time
import warnings
from collections import Counter
from pathlib import Path


def _quiet() -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)


def _one(seed: int, shrinking: bool = True) -> dict:
    from .generator import generate
    from .runner import check_flow
    from .shrink import finding_file, shrink

    program = generate(seed)
    outcome = check_flow(program.render(), seed=seed)
    record = {
        "seed": seed, "klass": outcome.klass, "finding": outcome.finding, "detail": outcome.detail[:2000],
        "seconds": round(outcome.seconds, 2), "features": sorted(program.features()),
    }
    if outcome.finding and shrinking:
        print(f"seed {seed}: {outcome.klass}, shrinking", flush=True)
        small, small_outcome, tried = shrink(program, outcome)
        record.update(shrunk=finding_file(small, small_outcome), shrink_tried=tried)
    return record


def summarize(records: list[dict], seconds: float) -> dict:
    """The counts a run reports: right, refused (by category), findings (by class)."""
    classes = Counter(r["klass"] for r in records)
    return {
        "programs": len(records),
        "right": classes.get("right", 0),
        "refused": sum(n for k, n in classes.items() if k.startswith("refused:")),
        "findings": sum(1 for r in records if r["finding"]),
        "invalid": sum(n for k, n in classes.items() if k.startswith("invalid")),
        "classes": dict(classes.most_common()),
        "features": dict(Counter(f for r in records for f in r["features"]).most_common()),
        "seconds": round(seconds, 1),
        "finding_seeds": [r["seed"] for r in records if r["finding"]],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.flow.run", description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("fuzz-flow-out"))
    parser.add_argument("--no-shrink", action="store_true", help="judge only: keep findings as generated")
    parser.add_argument("--results", action="store_true",
                        help="write the counts as a stamped results file (docs/results/fuzz-flow-torch-X.Y)")
    parser.add_argument("--results-dir", type=Path, metavar="DIR", help="where --results writes (default docs/results)")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="--results from a tree with uncommitted changes (the stamp says -dirty)")
    ns = parser.parse_args(argv)
    stamped = _results_module() if ns.results else None
    if stamped is not None:
        try:
            stamped.check_clean(ns.allow_dirty)
        except stamped.DirtyTree as e:
            parser.exit(2, f"error: {e}\n")
    (ns.out / "findings").mkdir(parents=True, exist_ok=True)
    seeds = range(ns.seed, ns.seed + ns.programs)
    start = time.perf_counter()
    records: list[dict] = []
    with multiprocessing.get_context("spawn").Pool(ns.jobs, initializer=_quiet, maxtasksperchild=25) as pool:
        for record in pool.imap_unordered(functools.partial(_one, shrinking=not ns.no_shrink), seeds):
            records.append(record)
            if record.get("shrunk"):
                (ns.out / "findings" / f"flow_seed_{record['seed']}.py").write_text(record["shrunk"])
            if len(records) % 50 == 0:
                print(f"{len(records)} programs, {sum(r['finding'] for r in records)} finding(s)", flush=True)
    summary = summarize(sorted(records, key=lambda r: r["seed"]), time.perf_counter() - start)
    summary["command"] = " ".join(["python -m tests.fuzz.flow.run", *(argv if argv is not None else sys.argv[1:])])
    (ns.out / "summary.json").write_text(json.dumps({"summary": summary, "records": records}, indent=1))
    text = [f"{k}: {v}" for k, v in summary.items() if k not in ("classes", "features")]
    text += ["", "classes:"] + [f"  {n:5d}  {k}" for k, n in summary["classes"].items()]
    text += ["", "features:"] + [f"  {n:5d}  {k}" for k, n in summary["features"].items()]
    (ns.out / "summary.txt").write_text("\n".join(text) + "\n")
    print("\n".join(text[:8]))
    if stamped is not None:
        md_path, json_path = stamped.write(
            f"fuzz-flow-{stamped.release_suffix()}", markdown=render(summary)[0], data=summary,
            title=f"Control-flow fuzzer, torch {stamped.torch_release()}",
            argv=["-m", "tests.fuzz.flow.run", *(sys.argv[1:] if argv is None else argv)],
            results_dir=ns.results_dir, allow_dirty=ns.allow_dirty,
        )
        print(f"results: {md_path}, {json_path.name}")
    return 1 if summary["findings"] else 0


def render(data: dict) -> tuple[str, dict]:
    """The results page's body from a run's summary: the counts, each outcome class, the
    features the programs used (``benchmarks/results.py`` renders pages with it)."""
    out = [
        "Each program is a generated model with branches on tensor values, loops over "
        "data-sized tensors and Python state across both, exported on its example and held to "
        "eager on inputs that take every side ([the control-flow fuzzer](../testing.md#the-control-flow-fuzzer)). "
        "A finding is a wrong program, a raw exception, a refusal naming no line or a changed model.",
        "",
        "| programs | right | refused | findings | seconds |",
        "|---:|---:|---:|---:|---:|",
        f"| {data['programs']} | {data['right']} | {data['refused']} | {data['findings']} | {data['seconds']} |",
        "",
        "| outcome | programs |",
        "|---|---:|",
        *(f"| {klass} | {n} |" for klass, n in data["classes"].items()),
        "",
        "| what the programs did | programs |",
        "|---|---:|",
        *(f"| {feature} | {n} |" for feature, n in data["features"].items()),
    ]
    if data.get("finding_seeds"):
        out += ["", "Findings at seeds " + ", ".join(map(str, data["finding_seeds"])) + "."]
    return "\n".join(out) + "\n", data


def _results_module():
    """``benchmarks/results.py``, which stamps and writes results files (a script beside the
    benchmarks, not a package)."""
    import importlib

    root = Path(__file__).resolve().parents[3]
    if str(root / "benchmarks") not in sys.path:
        sys.path.insert(0, str(root / "benchmarks"))
    return importlib.import_module("results")


if __name__ == "__main__":
    sys.exit(main())
