"""The long fuzz run: ``python -m tests.fuzz.run --programs N --seed S --jobs J --out DIR``.

Programs ``S .. S+N-1`` are generated, checked (``runner.check_source``) in ``J``
worker processes, and every finding is shrunk in its worker. Writes to DIR:
``summary.json`` and ``summary.txt`` (counts by outcome class, findings, features,
time, rate) and ``findings/seed_<n>.py``, each shrunk program with its outcome in a
header comment. Exits 1 when there is a finding.
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


def _one(seed: int, ir: str = "inference") -> dict:
    from .generator import generate
    from .runner import check_source
    from .shrink import shrink

    program = generate(seed)
    source = program.render()
    check = functools.partial(check_source, ir=ir)
    outcome = check(source)
    record = {
        "seed": seed,
        "klass": outcome.klass,
        "finding": outcome.finding,
        "detail": outcome.detail,
        "seconds": outcome.seconds,
        "features": sorted(program.features()),
    }
    if outcome.finding:
        print(f"seed {seed}: {outcome.klass}, shrinking", flush=True)
        small, small_outcome, tried = shrink(program, outcome, check=check)
        record.update(
            shrunk=small.render(),
            shrunk_detail=small_outcome.detail,
            shrink_tried=tried,
            original=source,
        )
    return record


def finding_file(record: dict) -> str:
    """The shrunk program, headed by what the runner found."""
    detail = record.get("shrunk_detail") or record["detail"]
    header = [f"# fuzz finding, seed {record['seed']}: {record['klass']}"]
    header += [f"#   {line}" for line in detail.splitlines()]
    return "\n".join(header) + "\n" + record["shrunk"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("fuzz-out"))
    parser.add_argument("--ir", choices=("inference", "training"), default="inference",
                        help="export this IR (training: against torch.export.export's own)")
    ns = parser.parse_args(argv)
    out: Path = ns.out
    (out / "findings").mkdir(parents=True, exist_ok=True)
    seeds = range(ns.seed, ns.seed + ns.programs)
    start = time.perf_counter()
    classes: Counter = Counter()
    examples: dict[str, list] = {}
    features: Counter = Counter()
    findings = []
    done = 0
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(ns.jobs, initializer=_quiet, maxtasksperchild=100) as pool:
        for record in pool.imap_unordered(functools.partial(_one, ir=ns.ir), seeds):
            done += 1
            classes[record["klass"]] += 1
            examples.setdefault(record["klass"], []).append(record["seed"])
            features.update(record["features"])
            if record["finding"]:
                findings.append(record)
                path = out / "findings" / f"seed_{record['seed']}.py"
                path.write_text(finding_file(record))
                print(f"[{done}] FINDING seed {record['seed']}: {record['klass']} -> {path}", flush=True)
            if done % 25 == 0:
                rate = done / (time.perf_counter() - start)
                print(f"[{done}/{ns.programs}] {rate:.2f} programs/s {dict(classes)}", flush=True)
    seconds = time.perf_counter() - start
    summary = {
        "command": " ".join(["python -m tests.fuzz.run"] + (argv if argv is not None else sys.argv[1:])),
        "programs": ns.programs,
        "first_seed": ns.seed,
        "ir": ns.ir,
        "jobs": ns.jobs,
        "seconds": round(seconds, 1),
        "programs_per_second": round(ns.programs / seconds, 3),
        "classes": dict(classes.most_common()),
        "example_seeds": {k: sorted(v)[:5] for k, v in examples.items()},
        "findings": [
            {k: r[k] for k in ("seed", "klass", "detail", "shrunk_detail") if k in r} for r in findings
        ],
        "features": dict(features.most_common()),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    lines = [
        f"{ns.programs} programs (seeds {ns.seed}..{ns.seed + ns.programs - 1}), {ns.jobs} jobs, "
        f"{seconds:.0f} s, {ns.programs / seconds:.2f} programs/s",
        "",
        "outcomes:",
        *[f"  {n:6d}  {k}   (e.g. seeds {sorted(examples[k])[:3]})" for k, n in classes.most_common()],
        "",
        f"findings: {len(findings)}",
        *[f"  seed {r['seed']}: {r['klass']}" for r in sorted(findings, key=lambda r: r["seed"])],
        "",
        "programs exercising:",
        *[f"  {n:6d}  {k}" for k, n in features.most_common()],
    ]
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
