"""Where a dynamic export's time goes: seconds per pipeline stage, static against dynamic.

Run from the repository root:

    python benchmarks/profile_dynamic.py --models bert,gpt2,llama --layers 4 --repeats 3
    python benchmarks/profile_dynamic.py --models llama --profile out.prof   # cProfile one dynamic export

Builds the models of ``bench_export.py`` and exports each with and without dynamic batch
and sequence length, alternating, through ``exporter._pipeline.export_timed``; prints the
median seconds of each stage, the dynamic/static ratio of the totals, and the fake-tensor
cache's hits and misses in one export of each kind.  A static export after the first hits
torch's process-wide cache; a dynamic one caches on its own fresh ShapeEnv, so every
export starts cold, and a miss pays for the symbolic meta kernel and for building the
entry.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_export import build_model, dynamic_shapes, make_inputs  # noqa: E402

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from exporter._options import ExportOptions  # noqa: E402
from exporter._pipeline import export_timed  # noqa: E402


def _run(model, kwargs, spec) -> dict[str, float]:
    gc.collect()
    start = time.perf_counter()
    stages = export_timed(model, (), kwargs, ExportOptions(dynamic_shapes=spec)).timings
    stages["total"] = time.perf_counter() - start
    return stages


def _cache_counts(model, kwargs, spec) -> str:
    FakeTensorMode.cache_hits = FakeTensorMode.cache_misses = 0
    FakeTensorMode.cache_bypasses.clear()
    export_timed(model, (), kwargs, ExportOptions(dynamic_shapes=spec))
    bypasses = sum(FakeTensorMode.cache_bypasses.values())
    return f"hits {FakeTensorMode.cache_hits}, misses {FakeTensorMode.cache_misses}, bypasses {bypasses}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="bert,gpt2,llama")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", help="write a cProfile of one dynamic export of each model here")
    args = parser.parse_args()
    for name in args.models.split(","):
        model, kwargs = build_model(name, args.layers), make_inputs()
        spec = dynamic_shapes()
        _run(model, kwargs, None), _run(model, kwargs, spec)
        static, dynamic = [], []
        for _ in range(args.repeats):
            static.append(_run(model, kwargs, None))
            dynamic.append(_run(model, kwargs, spec))
        stages = list(dynamic[0])
        print(f"{name} x{args.layers}: stage  static s  dynamic s")
        for stage in stages:
            s = statistics.median(r.get(stage, 0.0) for r in static)
            d = statistics.median(r.get(stage, 0.0) for r in dynamic)
            print(f"  {stage:12s} {s:8.3f} {d:9.3f}")
        s = statistics.median(r["total"] for r in static)
        d = statistics.median(r["total"] for r in dynamic)
        print(f"  dynamic / static: {d / s:.2f}")
        print(f"  fake-tensor cache, static:  {_cache_counts(model, kwargs, None)}")
        print(f"  fake-tensor cache, dynamic: {_cache_counts(model, kwargs, spec)}", flush=True)
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            export_timed(model, (), kwargs, ExportOptions(dynamic_shapes=spec))
            profiler.disable()
            profiler.dump_stats(f"{args.profile}.{name}" if len(args.models.split(",")) > 1 else args.profile)


if __name__ == "__main__":
    main()
