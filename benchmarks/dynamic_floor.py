"""What a dynamic export's first trace must pay: its symbolic kernels, against the oracle.

Run from the repository root:

    python benchmarks/dynamic_floor.py --ir training                 # against torch.export.export
    python benchmarks/dynamic_floor.py --ir inference --layers 2,8   # against + run_decompositions({})

On symbolic sizes torch's fake-tensor cache is off, so each distinct call of a trace runs
its fake kernel (sympy work on every size and stride); exporter's symbolic memo serves the
repeats, but a call whose key the trace has not met yet must be computed.  Nothing else in
the process can answer it by default: sharing results across traces is opt-in
(``exporter.trace.fast.symbolic_memo.share_across_traces``), because a served result may hold
fewer of the answers torch works out lazily, which moves node names by what the process
exported before.

For each model (batch and sequence length dynamic), exporter and the oracle alternate in
one process, median of ``--repeats`` after a warm-up.  Exporter's time is split by timing
its symbolic memo, the outermost call into the trace's fake mode:

* ``kernels s``: fake kernels run for calls not served (first calls of their key);
* ``served s``: the memo's own work on calls it served, and its keys;
* ``rest s``: everything above the fake mode (make_fx's tracing, the model's Python) and
  the passes.

``kernels / oracle`` is a bound on any first export that computes each distinct call
once with torch's kernels: the ratio cannot go below it without a cheaper kernel.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import sys
import time
from collections.abc import Iterator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_export import build_model, dynamic_shapes, make_inputs  # noqa: E402

import torch  # noqa: E402

import exporter  # noqa: E402
from exporter.trace.fast import symbolic_memo  # noqa: E402


@contextlib.contextmanager
def memo_timed(seconds: dict[str, float]) -> Iterator[None]:
    """Add to ``seconds["dispatch"]`` the time spent in the symbolic memo's outermost calls
    and to ``seconds["kernels"]`` the part of it spent in the fake mode's own dispatch
    (the kernels of calls it did not serve)."""
    original = symbolic_memo.SymbolicMemo.__call__
    depth = 0

    def timed(self, dispatch, func, types, args, kwargs):
        nonlocal depth
        if depth:
            return original(self, dispatch, func, types, args, kwargs)

        def computed(*a):
            start = time.perf_counter()
            try:
                return dispatch(*a)
            finally:
                seconds["kernels"] += time.perf_counter() - start

        depth += 1
        start = time.perf_counter()
        try:
            return original(self, computed, func, types, args, kwargs)
        finally:
            seconds["dispatch"] += time.perf_counter() - start
            depth -= 1

    symbolic_memo.SymbolicMemo.__call__ = timed
    try:
        yield
    finally:
        symbolic_memo.SymbolicMemo.__call__ = original


def _oracle(model, kwargs, spec, ir: str) -> float:
    gc.collect()
    start = time.perf_counter()
    program = torch.export.export(model, (), kwargs, dynamic_shapes=spec, strict=False)
    if ir == "inference":
        program.run_decompositions({})
    return time.perf_counter() - start


def _exporter(model, kwargs, spec, ir: str) -> dict[str, float]:
    gc.collect()
    seconds = {"dispatch": 0.0, "kernels": 0.0}
    with memo_timed(seconds):
        start = time.perf_counter()
        exporter.export(model, (), kwargs, dynamic_shapes=spec, ir=ir)
        seconds["total"] = time.perf_counter() - start
    return seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="bert,gpt2,llama")
    parser.add_argument("--layers", default="2,8")
    parser.add_argument("--ir", choices=("training", "inference"), default="training")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    oracle_name = "torch.export.export" + ("" if args.ir == "training" else " + run_decompositions({})")
    print(f"ir={args.ir}, batch and sequence dynamic, oracle: {oracle_name}")
    header = ("model", "layers", "exporter s", "oracle s", "ratio", "kernels s", "served s", "rest s", "kernels / oracle")
    print("  ".join(f"{h:>{max(len(h), 6)}}" for h in header))
    bounds = []
    for name in args.models.split(","):
        for layers in map(int, args.layers.split(",")):
            model, kwargs = build_model(name, layers), make_inputs(name)
            spec = dynamic_shapes(kwargs)
            _exporter(model, kwargs, spec, args.ir), _oracle(model, kwargs, spec, args.ir)  # warm-up
            ours, theirs = [], []
            for _ in range(args.repeats):
                ours.append(_exporter(model, kwargs, spec, args.ir))
                theirs.append(_oracle(model, kwargs, spec, args.ir))
            total = statistics.median(r["total"] for r in ours)
            kernels = statistics.median(r["kernels"] for r in ours)
            served = statistics.median(r["dispatch"] - r["kernels"] for r in ours)
            oracle = statistics.median(theirs)
            bounds.append(kernels / oracle)
            row = (name, layers, f"{total:.3f}", f"{oracle:.3f}", f"{total / oracle:.2f}", f"{kernels:.3f}",
                   f"{served:.3f}", f"{total - kernels - served:.3f}", f"{kernels / oracle:.2f}")
            print("  ".join(f"{str(v):>{max(len(h), 6)}}" for v, h in zip(row, header)), flush=True)
    print(f"kernels / oracle: median {statistics.median(bounds):.2f}, max {max(bounds):.2f}")


if __name__ == "__main__":
    main()
