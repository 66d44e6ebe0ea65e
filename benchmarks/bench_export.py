"""Export-time benchmark: exporter vs. the torch.export oracle, and vs. the fake-forward floor.

Run from the repository root:

    python benchmarks/bench_export.py                 # static, dynamic, meta, cold start
    python benchmarks/bench_export.py --quick         # a subset, under two minutes
    python benchmarks/bench_export.py --modes static --models gpt2,llama --layers 2 --repeats 10
    python benchmarks/bench_export.py --modes dynamic # batch and sequence length dynamic
    python benchmarks/bench_export.py --modes training # the training IR vs torch.export.export
    python benchmarks/bench_export.py --modes training-dynamic  # the same, batch and sequence dynamic
    python benchmarks/bench_export.py --memory        # RSS over 200 exports in one process
    python benchmarks/bench_export.py --modes repeated  # exports back to back, no forced collection
    python benchmarks/bench_export.py --quick --results-dir DIR  # results elsewhere than docs/results
    python benchmarks/bench_export.py --quick --no-results       # only print

Each run writes its tables and raw rows through ``results.write``: ``docs/results/<name>.md``
and ``.json``, stamped with the command, commit, torch release, date and machine.  The name
says what ran: ``export-time-torch-2.15`` for every mode, ``export-time-static-torch-2.15``
for a subset of modes, ``-quick`` with ``--quick``, ``-subset`` with ``--models`` or
``--layers``, ``export-memory-torch-2.15`` with ``--memory``.

One table per mode:

* ``static``: BERT, GPT-2, LLaMA, T5 (encoder and decoder at ``layers`` each) and ViT at 2
  and 8 layers, LLaMA also at 32; tiny configs (hidden 64), random weights, no downloads.
* ``dynamic``: BERT, GPT-2, LLaMA with batch and sequence length dynamic, and ``frames``, a
  plain-torch video model whose layers fold frames into the batch and out again, at 2 and 4
  layers, with its batch ``Dim.AUTO``; the program is
  also checked against eager at a second batch (and length); ``x static`` is exporter's time
  over its own static export of the same model.  The dynamic floor (``dyn floor s``) is
  one forward pass on fake tensors whose batch and sequence sizes are symbolic, in a fresh
  ShapeEnv (``symbolic_fake_forward``): what torch's symbolic-size arithmetic costs before
  anything is traced.  ``x dyn floor`` is exporter over it, ``dyn floor x static`` the
  floor over exporter's static export, ``dyn floor / oracle`` the floor over the oracle (a
  ratio target below it asks for less than one symbolic fake forward).  ``first s`` is
  exporter's time with the memos it keeps across exports emptied first
  (``forget_fake_results``): what the first export of a model in a process costs, where
  the other columns time a re-export; ``first ratio`` is that over the oracle.
* ``training``: the static models exported to the training IR (``ir="training"``) against
  ``torch.export.export`` itself (no ``run_decompositions``).
* ``training-dynamic``: the dynamic models and sizes, exported to the training IR against
  ``torch.export.export`` itself; ``x static`` is over exporter's static training-IR export.
* ``meta``: a LLaMA with LLaMA-7B dims (6.7B parameters) built under
  ``torch.device("meta")``, meta inputs; the program's output shapes are checked.
* ``cold``: whole processes, from ``benchmarks/bench_cold.py`` (``cold_start_rows``).
* ``repeated``: GPT-2 and LLaMA (8 layers) exported 20 times back to back by each tool
  with no collection forced in between (``back_to_back``), as ``check`` or a serving
  process runs exports: wall seconds per export, each export's median and max.  The other
  modes collect garbage before each timed call.

Each model is exported by ``exporter.export`` and by the oracle
``torch.export.export(..., strict=False).run_decompositions({})`` in the same process;
after one untimed warm-up of each, the two are timed alternately (median of ``repeats``)
so machine noise falls on both evenly.  The exporter's program is first checked against
the eager model; a row whose export raises or whose outputs differ is reported as FAILED.

* ``time ratio (exporter / torch.export)`` = exporter's seconds / the oracle's (lower is
  better: 0.32 means exporter takes 32% of torch.export's time).
* ``x floor`` = exporter / the floor: one forward pass of the same model under a
  ``FakeTensorMode`` with its parameters, buffers and inputs already fake (converted
  outside the timed region), no tracing: what running the model on fake tensors costs.
* ``peak MB``: the Python heap's peak during one export (``tracemalloc``, in a separate
  untimed run: exporter / oracle).  Tensors on the meta device take no memory.
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
import tracemalloc
import warnings
from collections.abc import Callable
from typing import Any

import torch
import transformers
from torch.utils._pytree import tree_leaves

import exporter
from exporter.trace.fast.recorder import forget_fake_results

# results.py and bench_cold.py sit beside this file, which is run as a script.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402

VOCAB, HIDDEN, HEADS, SEQ, BATCH = 1000, 64, 4, 32, 2
IMAGE, PATCH = 32, 4
MODELS = ("bert", "gpt2", "llama", "t5", "vit")
DYNAMIC_MODELS = ("bert", "gpt2", "llama", "frames")
DYNAMIC_LAYERS = {"frames": (2, 4)}
"""Depths other than 2 and 8: torch.export's time on ``frames`` grows exponentially with depth."""
FRAMES, FRAME_CHANNELS, FRAME_SIZE = 3, 8, 16
MODES = ("static", "dynamic", "training", "training-dynamic", "meta", "cold", "repeated")
MEMORY_MODEL, MEMORY_EXPORTS = ("gpt2", 2), 200

# torch's own pytree code trips this deprecation on every export; it says nothing about
# the models and would bury the report.
warnings.filterwarnings(
    "ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning
)


class FrameLayer(torch.nn.Module):
    """One layer of a video model run on frames folded into the batch: a residual convolution
    of every frame, ``(videos * frames, channels, h, w)``, then the frames unfolded,
    ``(videos, channels, frames, h, w)``, convolved across time and folded back, as video
    VAEs and UNets do."""

    def __init__(self, channels: int, frames: int):
        super().__init__()
        self.frames = frames
        self.norm = torch.nn.GroupNorm(2, channels)
        self.spatial = torch.nn.Conv2d(channels, channels, 3, padding=1)
        self.temporal = torch.nn.Conv3d(channels, channels, (3, 1, 1), padding=(1, 0, 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.spatial(torch.nn.functional.silu(self.norm(x)))
        batch_frames, channels, height, width = x.shape
        videos = x[None].reshape(batch_frames // self.frames, self.frames, channels, height, width)
        mixed = self.temporal(videos.permute(0, 2, 1, 3, 4))
        return mixed.permute(0, 2, 1, 3, 4).reshape(batch_frames, channels, height, width)


def build_model(name: str, layers: int) -> torch.nn.Module:
    """Build a tiny randomly initialised transformers model (or ``frames``, ``layers``
    ``FrameLayer``s) in eval mode."""
    torch.manual_seed(0)
    if name == "frames":
        return torch.nn.Sequential(*(FrameLayer(FRAME_CHANNELS, FRAMES) for _ in range(layers))).eval()
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
    elif name == "t5":
        config = transformers.T5Config(
            vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=4 * HIDDEN, num_layers=layers,
            num_decoder_layers=layers, num_heads=HEADS, use_cache=False, decoder_start_token_id=0,
        )
        model = transformers.T5Model(config)
    elif name == "vit":
        config = transformers.ViTConfig(
            hidden_size=HIDDEN, num_hidden_layers=layers, num_attention_heads=HEADS,
            intermediate_size=4 * HIDDEN, image_size=IMAGE, patch_size=PATCH,
        )
        model = transformers.ViTModel(config, add_pooling_layer=False)
    else:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    return model.eval()


def make_inputs(name: str = "bert") -> dict[str, torch.Tensor]:
    """Example inputs: token ids and an attention mask with some right padding (pixels for ViT)."""
    gen = torch.Generator().manual_seed(0)
    if name == "frames":
        return {"input": torch.randn(2 * FRAMES, FRAME_CHANNELS, FRAME_SIZE, FRAME_SIZE, generator=gen)}
    if name == "vit":
        return {"pixel_values": torch.randn(BATCH, 3, IMAGE, IMAGE, generator=gen)}
    input_ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    attention_mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    # Padding makes the mask non-trivial, so the masking code paths are really traced.
    attention_mask[1, -SEQ // 4 :] = 0
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    if name == "t5":
        inputs["decoder_input_ids"] = torch.randint(0, VOCAB, (BATCH, SEQ // 2), generator=gen)
    return inputs


def build_meta_llama() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    """A LLaMA with LLaMA-7B dims (32 layers, hidden 4096, 6.7B parameters) on the meta device."""
    config = transformers.LlamaConfig(
        vocab_size=32000, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=32, intermediate_size=11008, max_position_embeddings=2048, use_cache=False,
    )
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config).eval()
    # No attention mask: transformers reads a mask's values (is it all ones?), which meta has not.
    return model, {"input_ids": torch.empty(1, 128, dtype=torch.long, device="meta")}


def dynamic_shapes(inputs: dict[str, torch.Tensor] | None = None, model: str = "bert") -> dict[str, dict[int, Any]]:
    """Batch and sequence length dynamic in every input (positions limit seq to 128); for
    ``frames``, the batch of videos times frames, ``Dim.AUTO`` (a named Dim would be refused:
    the batch must be a multiple of the frames)."""
    if model == "frames":
        return {"input": {0: torch.export.Dim.AUTO}}
    batch, seq = torch.export.Dim("batch", max=64), torch.export.Dim("seq", max=128)
    return {name: {0: batch, 1: seq} for name in (inputs or ("input_ids", "attention_mask"))}


def other_sizes(name: str, kwargs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inputs at another batch and sequence length (another number of videos for ``frames``),
    to check a dynamic program on."""
    if name == "frames":
        return {k: v.repeat(2, 1, 1, 1) for k, v in kwargs.items()}
    return {k: v.repeat(2, 3)[:, :SEQ + 13] for k, v in kwargs.items()}


def run_oracle(
    model: torch.nn.Module, kwargs: dict[str, Any], dynamic: Any = None, ir: str = "inference"
) -> torch.export.ExportedProgram:
    """Export with the reference pipeline exporter must match (for the training IR,
    torch.export.export itself; else followed by run_decompositions({}))."""
    program = torch.export.export(model, (), kwargs, dynamic_shapes=dynamic, strict=False)
    return program if ir == "training" else program.run_decompositions({})


def run_exporter(
    model: torch.nn.Module, kwargs: dict[str, Any], dynamic: Any = None, ir: str = "inference"
) -> torch.export.ExportedProgram:
    """Export with exporter."""
    return exporter.export(model, (), kwargs, dynamic_shapes=dynamic, ir=ir)


def fake_forward(model: torch.nn.Module, kwargs: dict[str, Any]) -> Callable[[], Any]:
    """The floor: a call running ``model`` once on fake parameters, buffers and inputs, which
    are made (tied weights tied) before it is returned."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    state = {
        **dict(model.named_parameters(remove_duplicate=False)),
        **dict(model.named_buffers(remove_duplicate=False)),
    }
    fake_state = {name: mode.from_tensor(t) for name, t in state.items()}
    fake_kwargs = {k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}

    def forward() -> Any:
        with mode:
            return torch.func.functional_call(model, fake_state, (), fake_kwargs, tie_weights=True)

    return forward


def symbolic_fake_forward(model: torch.nn.Module, kwargs: dict[str, Any], dims: int = 2) -> Callable[[], float]:
    """The dynamic floor: a call that makes a fresh ShapeEnv and fake mode, fake parameters
    and buffers, and inputs whose batch and sequence sizes (their first ``dims`` sizes) are
    symbolic (all untimed), then runs ``model`` once on them and returns the seconds that
    forward took.

    A fresh ShapeEnv per call, as each export has one; the fake-tensor cache off, as in
    exporter's dynamic exports (with a fresh ShapeEnv it costs more than it saves)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    state = {
        **dict(model.named_parameters(remove_duplicate=False)),
        **dict(model.named_buffers(remove_duplicate=False)),
    }

    def symbolic(t: torch.Tensor) -> StatelessSymbolicContext:
        sizes = [DimDynamic.DYNAMIC if i < dims else DimDynamic.STATIC for i in range(t.dim())]
        return StatelessSymbolicContext(dynamic_sizes=sizes)

    def forward() -> float:
        mode = FakeTensorMode(shape_env=ShapeEnv())
        mode.cache_enabled = False
        fake_state = {name: mode.from_tensor(t) for name, t in state.items()}
        fake_kwargs = {k: mode.from_tensor(v, symbolic_context=symbolic(v)) if isinstance(v, torch.Tensor) else v
                       for k, v in kwargs.items()}
        start = time.perf_counter()
        with mode:
            torch.func.functional_call(model, fake_state, (), fake_kwargs, tie_weights=True)
        return time.perf_counter() - start

    return forward


def check_outputs(model: torch.nn.Module, program: torch.export.ExportedProgram,
                  kwargs: dict[str, Any]) -> None:
    """Raise if the program's tensor outputs differ from the eager model's (atol 1e-4; on the
    meta device, shapes and dtypes only)."""
    on_meta = any(isinstance(v, torch.Tensor) and v.is_meta for v in kwargs.values())
    with torch.no_grad():
        # A meta model cannot run eagerly when it reads values (transformers' mask checks do);
        # on fake tensors it gives the same shapes.
        eager = fake_forward(model, kwargs)() if on_meta else model(**kwargs)
        expected = [t for t in tree_leaves(eager) if isinstance(t, torch.Tensor)]
        actual = [t for t in tree_leaves(program.module()(**kwargs)) if isinstance(t, torch.Tensor)]
    if len(expected) != len(actual):
        raise AssertionError(f"program returns {len(actual)} tensors, eager model {len(expected)}")
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e.shape != a.shape or e.dtype != a.dtype:
            raise AssertionError(f"output {i} is {tuple(a.shape)} {a.dtype}, eager {tuple(e.shape)} {e.dtype}")
        if e.device.type != "meta" and not torch.allclose(e, a, atol=1e-4):
            raise AssertionError(f"output {i} differs from eager (max abs diff {(e - a).abs().max().item()})")


def timed(fn: Callable[[], Any]) -> float:
    """Return the wall-clock seconds one call of ``fn`` takes."""
    # Collect first so garbage left by the previous export is not charged to this one.
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def peak_mb(fn: Callable[[], Any]) -> float:
    """The Python heap's peak (tracemalloc) during one call of ``fn``, in MB above the start."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 1e6


def bench_one(name: str, layers: int, repeats: int, dynamic: bool = False, *, memory: bool = False,
              built: tuple[torch.nn.Module, dict[str, Any]] | None = None, ir: str = "inference") -> dict[str, Any]:
    """Check and time one model; return its row (status, samples, medians, ratio, floor, peaks or error).

    With ``dynamic`` both export with batch and sequence length dynamic (``dynamic_shapes``),
    the program is also checked against eager at ``other_sizes``, and exporter's static
    export of the model is timed too.  ``built``: the model and inputs (default
    ``build_model(name, layers)`` and its inputs).  ``ir="training"``: both export the
    training IR (torch.export.export without run_decompositions).
    """
    row: dict[str, Any] = {"model": name, "layers": layers, "dynamic": dynamic, "ir": ir}
    try:
        model, kwargs = built or (build_model(name, layers), make_inputs(name))
        spec = dynamic_shapes(kwargs, name) if dynamic else None
        run_oracle(model, kwargs, spec, ir)
        program = run_exporter(model, kwargs, spec, ir)
        check_outputs(model, program, kwargs)
        if dynamic:
            check_outputs(model, program, other_sizes(name, kwargs))
            run_exporter(model, kwargs, None, ir)
        floor = fake_forward(model, kwargs)
        floor()
        symbolic_floor = symbolic_fake_forward(model, kwargs, 1 if name == "frames" else 2) if dynamic else None
        if symbolic_floor is not None:
            symbolic_floor()
        oracle, mine, floors, static, symbolic_floors, first = [], [], [], [], [], []
        for _ in range(repeats):
            oracle.append(timed(lambda: run_oracle(model, kwargs, spec, ir)))
            mine.append(timed(lambda: run_exporter(model, kwargs, spec, ir)))
            floors.append(timed(floor))
            if symbolic_floor is not None:
                static.append(timed(lambda: run_exporter(model, kwargs, None, ir)))
                symbolic_floors.append(symbolic_floor())
                forget_fake_results()  # nothing kept from earlier exports: a first export
                first.append(timed(lambda: run_exporter(model, kwargs, spec, ir)))
        if memory:
            row["exporter_peak_mb"] = peak_mb(lambda: run_exporter(model, kwargs, spec, ir))
            row["oracle_peak_mb"] = peak_mb(lambda: run_oracle(model, kwargs, spec, ir))
    except Exception as e:  # noqa: BLE001 - any failure is a FAILED row
        row.update(status="FAILED", error=f"{type(e).__name__}: {e}")
        print(f"[{name} x{layers}] FAILED: {row['error']}", flush=True)
        return row
    row.update(
        status="ok", oracle_s=oracle, exporter_s=mine, floor_s=floors,
        oracle_median_s=statistics.median(oracle), exporter_median_s=statistics.median(mine),
        floor_median_s=statistics.median(floors),
    )
    row["ratio"] = row["exporter_median_s"] / row["oracle_median_s"]
    row["x_floor"] = row["exporter_median_s"] / row["floor_median_s"]
    if dynamic:
        row["static_s"] = static
        row["x_static"] = row["exporter_median_s"] / statistics.median(static)
        row["dyn_floor_s"] = symbolic_floors
        row["dyn_floor_median_s"] = statistics.median(symbolic_floors)
        row["x_dyn_floor"] = row["exporter_median_s"] / row["dyn_floor_median_s"]
        row["dyn_floor_x_static"] = row["dyn_floor_median_s"] / statistics.median(static)
        row["first_s"] = first
        row["first_ratio"] = statistics.median(first) / row["oracle_median_s"]
    print(f"[{name} x{layers}] ok", flush=True)
    return row


def memory_growth(exports: int = MEMORY_EXPORTS, model: tuple[str, int] = MEMORY_MODEL) -> dict[str, Any]:
    """Export one model ``exports`` times in this process; RSS (from /proc) after each."""
    name, layers = model
    module, kwargs = build_model(name, layers), make_inputs(name)
    rss = []
    for _ in range(exports):
        run_exporter(module, kwargs)
        gc.collect()
        rss.append(_rss_mb())
    return {"model": name, "layers": layers, "exports": exports, "rss_mb": rss,
            "growth": rss[-1] / rss[min(9, exports - 1)] - 1.0}


def back_to_back(name: str, layers: int, exports: int) -> dict[str, Any]:
    """``exports`` exports of one model by each tool, one right after the other with no
    collection forced in between, as a ``check`` over many models or a serving process runs
    them: what the garbage collector's full-heap scans cost.  Exporter's block, then the
    oracle's, then both again; wall seconds per export and each export's own time."""
    model, kwargs = build_model(name, layers), make_inputs(name)
    tools = {"exporter": lambda: run_exporter(model, kwargs), "oracle": lambda: run_oracle(model, kwargs)}
    for run in tools.values():
        run()
    times: dict[str, list[float]] = {tool: [] for tool in tools}
    walls: dict[str, list[float]] = {tool: [] for tool in tools}
    for _ in range(2):
        for tool, run in tools.items():
            start = time.perf_counter()
            for _ in range(exports):
                began = time.perf_counter()
                run()
                times[tool].append(time.perf_counter() - began)
            walls[tool].append((time.perf_counter() - start) / exports)
    row: dict[str, Any] = {"model": name, "layers": layers, "exports": exports}
    for tool in tools:
        row[f"{tool}_wall_s"] = statistics.mean(walls[tool])
        row[f"{tool}_median_s"] = statistics.median(times[tool])
        row[f"{tool}_max_s"] = max(times[tool])
    row["ratio"] = row["exporter_wall_s"] / row["oracle_wall_s"]
    return row




def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


Columns = list[tuple[str, Callable[[dict[str, Any]], str]]]


def table_cells(rows: list[dict[str, Any]], columns: Columns | None = None) -> tuple[list[str], list[list[str]]]:
    """The header and the cells of one table (a failed row: its model, layers and FAILED)."""
    columns = columns or _EXPORT_COLUMNS
    header = [title for title, _ in columns]
    cells = [
        [cell(r) for _, cell in columns] if r.get("status", "ok") == "ok"
        else [r["model"], str(r["layers"]), *["-"] * (len(columns) - 3), "FAILED"]
        for r in rows
    ]
    return header, cells


def markdown_table(rows: list[dict[str, Any]], columns: Columns | None = None) -> str:
    """One table in markdown, for the results page (first two columns left-aligned)."""
    return results.markdown_table(*table_cells(rows, columns), left=2)


def print_table(rows: list[dict[str, Any]], columns: Columns | None = None) -> None:
    """Print one table, with rich on a terminal and plain text otherwise (first two columns left-aligned)."""
    header, cells = table_cells(rows, columns)
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


def _peaks(r: dict[str, Any]) -> str:
    if "exporter_peak_mb" not in r:
        return "-"
    return f"{r['exporter_peak_mb']:.0f} / {r['oracle_peak_mb']:.0f}"


_EXPORT_COLUMNS: Columns = [
    ("model", lambda r: r["model"]),
    ("layers", lambda r: str(r["layers"])),
    ("exporter s", lambda r: f"{r['exporter_median_s']:.3f}"),
    ("oracle s", lambda r: f"{r['oracle_median_s']:.3f}"),
    (results.TIME_RATIO, lambda r: f"{r['ratio']:.2f}"),
    ("floor s", lambda r: f"{r['floor_median_s']:.3f}"),
    ("x floor", lambda r: f"{r['x_floor']:.2f}"),
    ("peak MB exp/oracle", _peaks),
]


def _per_export(tool: str) -> Columns:
    return [(title, lambda r, key=f"{tool}_{key}": f"{r[key]:.3f}")
            for title, key in ((f"{tool} s/export", "wall_s"), ("median", "median_s"), ("max", "max_s"))]


_BACK_TO_BACK_COLUMNS = [*_EXPORT_COLUMNS[:2], *_per_export("exporter"), *_per_export("oracle"),
                         (results.TIME_RATIO, lambda r: f"{r['ratio']:.2f}")]

_DYNAMIC_COLUMNS = [
    *_EXPORT_COLUMNS[:7],
    ("x static", lambda r: f"{r['x_static']:.2f}"),
    ("dyn floor s", lambda r: f"{r['dyn_floor_median_s']:.3f}"),
    ("x dyn floor", lambda r: f"{r['x_dyn_floor']:.2f}"),
    ("dyn floor x static", lambda r: f"{r['dyn_floor_x_static']:.2f}"),
    ("dyn floor / oracle", lambda r: f"{r['dyn_floor_median_s'] / r['oracle_median_s']:.2f}"),
    ("first s", lambda r: f"{statistics.median(r['first_s']):.3f}"),
    ("first ratio", lambda r: f"{r['first_ratio']:.2f}"),
    _EXPORT_COLUMNS[7],
]

_COLD_COLUMNS: Columns = [
    ("command", lambda r: r["command"]),
    ("median s", lambda r: f"{r['median_s']:.2f}"),
    ("min s", lambda r: f"{r['min_s']:.2f}"),
    ("x import torch", lambda r: f"{r['ratio']:.2f}"),
]


def _summary(rows: list[dict[str, Any]]) -> str:
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        return "no model exported"
    ratios, floors = [r["ratio"] for r in ok], [r["x_floor"] for r in ok]
    geomean = math.exp(statistics.fmean(math.log(x) for x in ratios))
    text = (f"{results.TIME_RATIO}: median {statistics.median(ratios):.2f}, max {max(ratios):.2f}, geometric mean {geomean:.2f};"
            f" x floor: median {statistics.median(floors):.2f}, max {max(floors):.2f}; {len(ok)}/{len(rows)} models")
    if all("first_ratio" in r for r in ok):
        firsts = [r["first_ratio"] for r in ok]
        text += f"\nfirst-export ratio (no memo kept from earlier exports): median {statistics.median(firsts):.2f}, max {max(firsts):.2f}"
    by_layers = {(r["model"], r["layers"]): r["exporter_median_s"] / r["layers"] for r in ok}
    depth = [f"{m} {by_layers[(m, n)] / by_layers[(m, 8)]:.2f}" for m, n in by_layers if n > 8 and (m, 8) in by_layers]
    if depth:
        text += f"\ntime per layer at 32 layers / at 8: {', '.join(depth)}"
    return text


def _cold_rows(repeats: int) -> list[dict[str, Any]] | None:
    try:
        from bench_cold import cold_start_rows
    except ImportError:
        return None
    return cold_start_rows(repeats)


def results_name(modes: list[str], *, quick: bool = False, subset: bool = False,
                 memory: bool = False, shared: bool = False) -> str:
    """The results file's name for a run: what was measured, how, and the torch release
    (``export-time-torch-2.15`` for every mode, ``export-time-static-quick-torch-2.15``...)."""
    parts = ["export-memory"] if memory else ["export-time"]
    if not memory and set(modes) != set(MODES):
        parts += [m for m in MODES if m in modes]
    parts += [flag for flag, on in (("quick", quick), ("subset", subset), ("shared-memo", shared)) if on]
    return "-".join([*parts, results.release_suffix()])


def results_markdown(sections: list[tuple[str, str]], repeats: int) -> str:
    """The results page's body: one section per mode, then how the figures were taken."""
    out = []
    for mode, body in sections:
        out += [f"## {mode}", "", body, ""]
    out.append(f"Median of {repeats} timed runs of each tool after a warm-up; the "
               f"[{results.TIME_RATIO}](../benchmarks.md#the-time-ratio) is lower when exporter is faster. "
               "The columns are described on the [Benchmarks](../benchmarks.md) page.")
    return "\n".join(out)


def section_markdown(mode: str, rows: list[dict[str, Any]]) -> str:
    """One mode's part of the results page: its table, and under it the summary."""
    if mode == "cold":
        return markdown_table(rows, _COLD_COLUMNS)
    if mode == "repeated":
        return markdown_table(rows, _BACK_TO_BACK_COLUMNS)
    columns = _DYNAMIC_COLUMNS if mode in ("dynamic", "training-dynamic") else None
    return markdown_table(rows, columns) + "\n\n" + _summary_markdown(rows)


def render(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A results page from its JSON (``results.render``): the same rows, as this script
    presents them; the data is kept as it is."""
    modes = [m for m in data.get("modes", MODES) if any(r.get("mode") == m for r in data["rows"])]
    sections = [(mode, section_markdown(mode, [r for r in data["rows"] if r.get("mode") == mode])) for mode in modes]
    return results_markdown(sections, data["repeats"]), data


def _summary_markdown(rows: list[dict[str, Any]]) -> str:
    """The summary under a mode's table, and why each failed row failed."""
    lines = [f"- {line}" for line in _summary(rows).splitlines()]
    for r in rows:
        if r.get("status") == "FAILED":
            error = r["error"].splitlines()[0][:300].replace("`", "'")
            lines.append(f"- {r['model']} x{r['layers']} FAILED: `{error}`")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Parse flags, run every requested mode, print one table per mode, write the results
    files (and the raw numbers to ``--json`` when given)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {', '.join(MODES)}")
    parser.add_argument("--models", help="comma-separated subset (default: every model of the mode)")
    parser.add_argument("--layers", help="comma-separated layer counts (default 2,8; LLaMA also 32 when static)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of each exporter")
    parser.add_argument("--json", metavar="PATH", help="write the raw numbers to PATH")
    parser.add_argument("--dynamic", action="store_true", help="the dynamic mode only (same as --modes dynamic)")
    parser.add_argument("--quick", action="store_true",
                        help="a subset in under two minutes: 2-layer static and dynamic rows, 3 repeats, no memory")
    parser.add_argument("--memory", action="store_true",
                        help=f"only the memory growth check: {MEMORY_EXPORTS} exports of one model, RSS")
    parser.add_argument("--share-across-traces", action="store_true",
                        help="let dynamic traces share the symbolic memo (exporter.trace.fast.symbolic_memo."
                             "share_across_traces(), off by default): `exporter s` is then a re-export served "
                             "what the first computed, `first s` still starts empty")
    results.add_arguments(parser)
    opts = parser.parse_args(argv)
    command_line = results.script_argv(__file__, argv)
    if opts.share_across_traces:
        from exporter.trace.fast import symbolic_memo

        symbolic_memo.share_across_traces()
    versions = {"torch": torch.__version__, "transformers": transformers.__version__, "cpu_count": os.cpu_count()}
    report: dict[str, Any] = {"versions": versions}
    release = results.torch_release()

    if opts.memory:
        result = memory_growth()
        rss = result["rss_mb"]
        lines = [
            f"{result['exports']} exports of {result['model']} x{result['layers']} in one process, RSS (/proc) MB:",
            "  ".join(f"after {i + 1}: {rss[i]:.0f}" for i in (0, 9, 49, 99, 149, len(rss) - 1) if i < len(rss)),
            f"growth from export 10 to {result['exports']}: {100 * result['growth']:+.1f}% (target within 5%)",
        ]
        print("\n".join(lines))
        report["memory"] = result
        _dump(opts.json, report)
        results.write_from_args(
            opts, results_name([], memory=True), markdown="\n\n".join(lines), data={"memory": result},
            argv=command_line, title=f"Memory over many exports, torch {release}")
        return

    modes = ["dynamic"] if opts.dynamic else [m.strip() for m in opts.modes.split(",") if m.strip()]
    if unknown := [m for m in modes if m not in MODES]:
        parser.error(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}")
    name = results_name(modes, quick=opts.quick, subset=bool(opts.models or opts.layers),
                        shared=opts.share_across_traces)
    if opts.quick:
        modes = [m for m in modes if m in ("static", "dynamic")]
    repeats = 3 if opts.quick else opts.repeats
    memory = not opts.quick
    sections: list[tuple[str, str]] = []
    flat: list[dict[str, Any]] = []

    for mode in modes:
        print(f"\n== {mode} ==", flush=True)
        if mode == "cold":
            rows = _cold_rows(repeats)
            if rows is None:
                print("skipped: benchmarks/bench_cold.py (cold_start_rows) is not there")
                continue
            print_table(rows, _COLD_COLUMNS)
            sections.append((mode, section_markdown(mode, rows)))
        elif mode == "repeated":
            pairs = [(m, int(n)) for m in (opts.models or "gpt2,llama").split(",") for n in (opts.layers or "8").split(",")]
            rows = [back_to_back(m, n, 20) for m, n in pairs]
            print_table(rows, _BACK_TO_BACK_COLUMNS)
            sections.append((mode, section_markdown(mode, rows)))
        elif mode == "meta":
            rows = [bench_one("llama-7b-meta", 32, repeats, memory=memory, built=build_meta_llama())]
            print()
            print_table(rows)
            sections.append((mode, section_markdown(mode, rows)))
        else:
            dynamic = mode in ("dynamic", "training-dynamic")
            ir = "training" if mode.startswith("training") else "inference"
            available = DYNAMIC_MODELS if dynamic else MODELS
            models = [m.strip() for m in opts.models.split(",")] if opts.models else list(available)
            if unknown := [m for m in models if m not in available]:
                parser.error(f"unknown model(s) {', '.join(unknown)} for {mode}; choose from {', '.join(available)}")
            if opts.layers:
                pairs = [(m, int(n)) for m in models for n in opts.layers.split(",")]
            elif opts.quick:
                pairs = [(m, 2) for m in (["llama"] if dynamic else models)]
            else:
                pairs = [(m, n) for m in models for n in (DYNAMIC_LAYERS.get(m, (2, 8)) if dynamic else (2, 8))]
                pairs += [("llama", 32)] if not dynamic and "llama" in models else []
            rows = [bench_one(m, n, repeats, dynamic, memory=memory, ir=ir) for m, n in pairs]
            columns = _DYNAMIC_COLUMNS if dynamic else None
            print()
            print_table(rows, columns)
            print(_summary(rows))
            sections.append((mode, section_markdown(mode, rows)))
        report[mode] = rows
        flat += [{"mode": mode, **row} for row in rows]

    print(f"\ntorch {versions['torch']}, transformers {versions['transformers']}, "
          f"{versions['cpu_count']} CPUs, median of {repeats} after a warm-up")
    _dump(opts.json, report)
    title = f"Export time, torch {release}" if set(modes) == set(MODES) else \
        f"Export time ({', '.join(modes)}), torch {release}"
    results.write_from_args(
        opts, name, markdown=results_markdown(sections, repeats),
        data={"modes": modes, "repeats": repeats, "quick": opts.quick, "rows": flat},
        argv=command_line, title=title)


def _dump(path: str | None, report: dict[str, Any]) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
