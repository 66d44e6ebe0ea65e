"""Export-time benchmark: exporter vs. the torch.export oracle on small transformers models.

Run from the repository root:

    python benchmarks/bench_export.py
    python benchmarks/bench_export.py --models gpt2,llama --layers 2 --repeats 10 --json out.json
    python benchmarks/bench_export.py --dynamic   # batch and sequence length dynamic

Each model (BERT, GPT-2, LLaMA at 2 and 8 layers, tiny configs, random weights, no
downloads) is exported by ``exporter.export`` and by the oracle
``torch.export.export(..., strict=False).run_decompositions({})`` in the same process.
After one untimed warm-up run of each, the two are timed alternately so machine noise
falls on both evenly. The exporter's program is first checked against the eager model;
a row whose export raises or whose outputs differ is reported as FAILED.

The ratio is exporter median time / oracle median time: lower is better, below 1.0
means exporter exports faster than torch.export.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time
import warnings
from typing import Any, Callable

import torch
import transformers
from torch.utils._pytree import tree_leaves

import exporter

VOCAB, HIDDEN, HEADS, SEQ, BATCH = 1000, 64, 4, 32, 2
MODELS = ("bert", "gpt2", "llama")

# torch's own pytree code trips this deprecation on every export; it says nothing about
# the models and would bury the report.
warnings.filterwarnings(
    "ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning
)


def build_model(name: str, layers: int) -> torch.nn.Module:
    """Build a tiny randomly initialised transformers model in eval mode."""
    torch.manual_seed(0)
    if name == "bert":
        config = transformers.BertConfig(
            vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=layers,
            num_attention_heads=HEADS, intermediate_size=4 * HIDDEN, max_position_embeddings=128,
        )
        model = transformers.BertModel(config)
    elif name == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=VOCAB, n_embd=HIDDEN, n_layer=layers, n_head=HEADS, n_positions=128,
            bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1, use_cache=False,
        )
        model = transformers.GPT2LMHeadModel(config)
    elif name == "llama":
        config = transformers.LlamaConfig(
            vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=layers,
            num_attention_heads=HEADS, num_key_value_heads=HEADS, intermediate_size=4 * HIDDEN,
            max_position_embeddings=128, use_cache=False,
        )
        model = transformers.LlamaForCausalLM(config)
    else:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    return model.eval()


def make_inputs() -> dict[str, torch.Tensor]:
    """Example inputs: random token ids and an attention mask with some right padding."""
    gen = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    attention_mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    # Padding makes the mask non-trivial, so the masking code paths are really traced.
    attention_mask[1, -SEQ // 4 :] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def dynamic_shapes() -> dict[str, dict[int, Any]]:
    """Batch and sequence length dynamic in both inputs (positions limit seq to 128)."""
    batch, seq = torch.export.Dim("batch", max=64), torch.export.Dim("seq", max=128)
    return {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}


def run_oracle(model: torch.nn.Module, kwargs: dict[str, Any], dynamic: Any = None) -> torch.export.ExportedProgram:
    """Export with the reference pipeline exporter must match."""
    return torch.export.export(model, (), kwargs, dynamic_shapes=dynamic, strict=False).run_decompositions({})


def run_exporter(model: torch.nn.Module, kwargs: dict[str, Any], dynamic: Any = None) -> torch.export.ExportedProgram:
    """Export with exporter."""
    return exporter.export(model, (), kwargs, dynamic_shapes=dynamic)


def check_outputs(model: torch.nn.Module, program: torch.export.ExportedProgram,
                  kwargs: dict[str, Any]) -> None:
    """Raise if the program's tensor outputs differ from the eager model's (atol 1e-4)."""
    with torch.no_grad():
        expected = [t for t in tree_leaves(model(**kwargs)) if isinstance(t, torch.Tensor)]
        actual = [t for t in tree_leaves(program.module()(**kwargs)) if isinstance(t, torch.Tensor)]
    if len(expected) != len(actual):
        raise AssertionError(f"program returns {len(actual)} tensors, eager model {len(expected)}")
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e.shape != a.shape or not torch.allclose(e, a, atol=1e-4):
            diff = (e - a).abs().max().item() if e.shape == a.shape else "shape mismatch"
            raise AssertionError(f"output {i} differs from eager (max abs diff {diff})")


def timed(fn: Callable[[], Any]) -> float:
    """Return the wall-clock seconds one call of ``fn`` takes."""
    # Collect first so garbage left by the previous export is not charged to this one.
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_one(name: str, layers: int, repeats: int, dynamic: bool = False) -> dict[str, Any]:
    """Check and time one model; return its row (status, samples, medians, ratio or error).

    With ``dynamic`` both export with batch and sequence length dynamic, and the program is
    also checked against eager at a second batch and sequence length.
    """
    row: dict[str, Any] = {"model": name, "layers": layers, "dynamic": dynamic}
    try:
        model, kwargs = build_model(name, layers), make_inputs()
        spec = dynamic_shapes() if dynamic else None
        run_oracle(model, kwargs, spec)
        program = run_exporter(model, kwargs, spec)
        check_outputs(model, program, kwargs)
        if dynamic:
            check_outputs(model, program, {k: v.repeat(2, 3)[:, :SEQ + 13] for k, v in kwargs.items()})
        oracle, mine = [], []
        for _ in range(repeats):
            oracle.append(timed(lambda: run_oracle(model, kwargs, spec)))
            mine.append(timed(lambda: run_exporter(model, kwargs, spec)))
    except Exception as e:
        row.update(status="FAILED", error=f"{type(e).__name__}: {e}")
        print(f"[{name} x{layers}] FAILED: {row['error']}", flush=True)
        return row
    row.update(
        status="ok", oracle_s=oracle, exporter_s=mine,
        oracle_median_s=statistics.median(oracle), exporter_median_s=statistics.median(mine),
    )
    row["ratio"] = row["exporter_median_s"] / row["oracle_median_s"]
    print(f"[{name} x{layers}] ok", flush=True)
    return row


def print_table(rows: list[dict[str, Any]]) -> None:
    """Print the results table, with rich on a terminal and plain text otherwise."""
    header = ["model", "layers", "oracle median s", "exporter median s", "ratio"]
    cells = [
        [r["model"], str(r["layers"]), f"{r['oracle_median_s']:.3f}",
         f"{r['exporter_median_s']:.3f}", f"{r['ratio']:.2f}"]
        if r["status"] == "ok" else [r["model"], str(r["layers"]), "-", "-", "FAILED"]
        for r in rows
    ]
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table()
        for i, h in enumerate(header):
            table.add_column(h, justify="left" if i < 2 else "right")
        for c in cells:
            table.add_row(*c)
        Console().print(table)
        return
    widths = [max(len(x) for x in col) for col in zip(header, *cells)]
    for line in [header, ["-" * w for w in widths], *cells]:
        print("  ".join(x.ljust(w) if i < 2 else x.rjust(w)
                        for i, (x, w) in enumerate(zip(line, widths))))


def main(argv: list[str] | None = None) -> None:
    """Parse flags, benchmark every requested model, print the report, optionally dump JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    parser.add_argument("--layers", default="2,8", help="comma-separated layer counts")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of each exporter")
    parser.add_argument("--json", metavar="PATH", help="write the raw numbers to PATH")
    parser.add_argument("--dynamic", action="store_true",
                        help="export with dynamic batch (max 64) and sequence length (max 128)")
    opts = parser.parse_args(argv)
    models = [m.strip() for m in opts.models.split(",") if m.strip()]
    if unknown := [m for m in models if m not in MODELS]:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    layer_counts = [int(n) for n in opts.layers.split(",")]

    rows = [bench_one(m, n, opts.repeats, opts.dynamic) for m in models for n in layer_counts]
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "cpu_count": os.cpu_count()}
    ratios = [r["ratio"] for r in rows if r["status"] == "ok"]
    geomean = math.exp(statistics.fmean(math.log(x) for x in ratios)) if ratios else None

    print()
    print_table(rows)
    print()
    if geomean is None:
        print("geometric mean ratio: n/a (no model exported)")
    else:
        print(f"geometric mean ratio (exporter/oracle, lower is better): {geomean:.2f}"
              f" over {len(ratios)}/{len(rows)} models")
    print(f"torch {versions['torch']}, transformers {versions['transformers']}, "
          f"{versions['cpu_count']} CPUs, {opts.repeats} repeats"
          + (", dynamic batch and sequence length" if opts.dynamic else ", static shapes"))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"versions": versions, "repeats": opts.repeats, "dynamic": opts.dynamic, "rows": rows,
                       "geomean_ratio": geomean}, f, indent=2)


if __name__ == "__main__":
    main()
