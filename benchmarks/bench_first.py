"""First-export benchmark: the export a user meets, in a fresh process, beside torch.export's.

Run from the repository root:

    python benchmarks/bench_first.py                       # BERT, GPT-2, LLaMA, T5, ViT at 2 and 8 layers
    python benchmarks/bench_first.py --models bert --layers 2 --repeats 5
    python benchmarks/bench_first.py --no-results          # only print

Every measurement is a new Python process that imports torch, transformers and the tool,
builds the model (``bench_export.build_model``, tiny configs, random weights), and then
times one call: ``exporter.export`` or the oracle
``torch.export.export(..., strict=False).run_decompositions({})``.  That first call pays
what a process pays once: deferred imports, torch's first-call set-up, and caches that
start empty.  The process then exports the same model again and times that too, so the
warm figure of the same run stands beside the first one.  The two tools take turns,
``repeats`` processes each per model, so machine noise falls on both evenly; the table
shows medians.

* ``first ratio`` = exporter's first export / torch.export's first export, both in a
  fresh process (lower is better).
* ``warm ratio`` = the same for the second export in each process.

The table and the raw seconds are written through ``results.write`` to
``docs/results/export-time-first-torch-<release>.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402

MODELS = ("bert", "gpt2", "llama", "t5", "vit")
LAYERS = (2, 8)
TOOLS = ("exporter", "oracle")


def child(tool: str, model_name: str, layers: int) -> dict[str, float]:
    """In this (fresh) process: build the model, time its first and second export."""
    import torch

    import bench_export

    if tool == "exporter":
        import exporter  # noqa: F401 - imported before the clock starts, as a user's script does

    model = bench_export.build_model(model_name, layers)
    kwargs = bench_export.make_inputs(model_name)
    export = bench_export.run_exporter if tool == "exporter" else bench_export.run_oracle
    times = []
    for _ in range(2):
        start = time.perf_counter()
        program = export(model, kwargs)
        times.append(time.perf_counter() - start)
    assert isinstance(program, torch.export.ExportedProgram)
    return {"first_s": times[0], "warm_s": times[1]}


def measure(tool: str, model_name: str, layers: int) -> dict[str, float]:
    """Run ``child`` in a new interpreter and return what it measured."""
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", tool, model_name, str(layers)],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{tool} on {model_name} x{layers} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_one(model_name: str, layers: int, repeats: int) -> dict[str, Any]:
    """``repeats`` fresh processes per tool, taking turns; medians and ratios."""
    runs: dict[str, list[dict[str, float]]] = {tool: [] for tool in TOOLS}
    for _ in range(repeats):
        for tool in TOOLS:
            runs[tool].append(measure(tool, model_name, layers))
    row: dict[str, Any] = {"model": model_name, "layers": layers, "runs": runs}
    for tool in TOOLS:
        for when in ("first_s", "warm_s"):
            row[f"{tool}_{when}"] = statistics.median(r[when] for r in runs[tool])
    row["first_ratio"] = row["exporter_first_s"] / row["oracle_first_s"]
    row["warm_ratio"] = row["exporter_warm_s"] / row["oracle_warm_s"]
    return row


COLUMNS = (
    ("model", lambda r: r["model"]),
    ("layers", lambda r: str(r["layers"])),
    ("exporter first s", lambda r: f"{r['exporter_first_s']:.3f}"),
    ("torch.export first s", lambda r: f"{r['oracle_first_s']:.3f}"),
    ("first ratio", lambda r: f"{r['first_ratio']:.3f}"),
    ("exporter warm s", lambda r: f"{r['exporter_warm_s']:.3f}"),
    ("torch.export warm s", lambda r: f"{r['oracle_warm_s']:.3f}"),
    ("warm ratio", lambda r: f"{r['warm_ratio']:.3f}"),
)


def summary(rows: list[dict[str, Any]]) -> str:
    """The medians and maxima of both ratios over the rows."""
    first = [r["first_ratio"] for r in rows]
    warm = [r["warm_ratio"] for r in rows]
    return (f"first-export ratio: median {statistics.median(first):.3f}, max {max(first):.3f}; "
            f"warm ratio: median {statistics.median(warm):.3f}, max {max(warm):.3f}")


def render(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The page body from the results JSON (``results.py render`` calls this)."""
    rows = data["rows"]
    header = "| " + " | ".join(name for name, _ in COLUMNS) + " |"
    rule = "|" + "|".join("---" if i < 2 else "---:" for i in range(len(COLUMNS))) + "|"
    body = ["| " + " | ".join(cell(r) for _, cell in COLUMNS) + " |" for r in rows]
    text = (
        f"Each figure is the median of {data['repeats']} fresh processes per tool, the tools taking "
        "turns. `first` is the first export in the process, `warm` the second export of the same "
        "model in that process; the ratios are exporter's seconds over torch.export's "
        f"([{results.TIME_RATIO}]({results.TIME_RATIO_DOC})).\n\n"
        + "\n".join([header, rule, *body])
        + f"\n\n{summary(rows)}\n"
    )
    return text, data


def main(argv: list[str] | None = None) -> None:
    """Parse flags, measure every model, print the table, write the results files."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ", ".join(MODELS))
    parser.add_argument("--layers", default=",".join(map(str, LAYERS)), help="comma-separated layer counts")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per tool and model")
    parser.add_argument("--child", nargs=3, metavar=("TOOL", "MODEL", "LAYERS"), help=argparse.SUPPRESS)
    results.add_arguments(parser)
    opts = parser.parse_args(argv)
    if opts.child:
        tool, model_name, layers = opts.child
        print(json.dumps(child(tool, model_name, int(layers))))
        return
    models = [m.strip() for m in opts.models.split(",") if m.strip()]
    if unknown := [m for m in models if m not in MODELS]:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    layers = [int(n) for n in opts.layers.split(",") if n.strip()]
    rows = []
    for model_name in models:
        for n in layers:
            row = bench_one(model_name, n, opts.repeats)
            rows.append(row)
            print(" ".join(f"{name}={cell(row)}" for name, cell in COLUMNS), flush=True)
    print(summary(rows))
    data = {"repeats": opts.repeats, "rows": rows}
    markdown, data = render(data)
    subset = opts.models != ",".join(MODELS) or opts.layers != ",".join(map(str, LAYERS))
    name = f"export-time-first{'-subset' if subset else ''}-{results.release_suffix()}"
    results.write_from_args(opts, name, markdown=markdown, data=data, argv=results.script_argv(__file__, argv),
                            title=f"First export in a fresh process, torch {results.torch_release()}")


if __name__ == "__main__":
    main()
