"""A transformers model zoo: every model type exported by exporter and by torch.export, side by side.

Run from the repository root:

    python benchmarks/zoo.py --fast                         # 8 models, about a minute
    python benchmarks/zoo.py --only llama,bert,whisper --jobs 2
    nice python benchmarks/zoo.py --json zoo-full.json --markdown zoo-full.md
    python benchmarks/zoo.py --only gpt2 --exporter-kwargs '{"draft": true}' --tool exporter
    python benchmarks/zoo.py --classes first --exporter-kwargs '{"ir": "training"}'
    python benchmarks/zoo.py --classes first --dynamic --jobs 2  # batch and sequence Dim.AUTO
    python benchmarks/zoo.py --fast --no-results            # only print
    python benchmarks/zoo.py --family diffusers             # diffusers' UNets, VAEs and transformers
    python benchmarks/zoo.py --family timm --limit 88       # one timm model per architecture family

Each run writes its summary and tables, and every row as JSON (model type as ``family``,
verdict as ``outcome``, and the row's ``kind``: text, vision, audio, multimodal or other for
transformers, UNet, autoencoder or transformer for diffusers), through ``results.write``:
``docs/results/zoo-torch-2.15.md`` and ``.json`` for the torch release that ran, named
``zoo-dynamic-...`` with ``--dynamic``, ``zoo-training-...`` with ``"ir": "training"``,
``zoo-fast-...`` with ``--fast`` and ``zoo-subset-...`` with ``--only``, ``--exclude``, one
``--tool`` or other exporter arguments, and ``zoo-diffusers-...`` with ``--family diffusers``
(``zoo-timm-...``, ``zoo-torchvision-...``, ``zoo-torchaudio-...`` likewise)
(``--results-dir`` to put them elsewhere, ``--no-results`` to only print, ``--allow-dirty``
to stamp results from a tree with uncommitted changes).

For every model type in transformers' ``CONFIG_MAPPING`` (or ``--only``), the zoo builds
a tiny randomly initialised model (``zoo_models.py``: shrunken default config, no
downloads) for its most servable head and its base model, runs it eagerly once, then
exports it with ``exporter.export`` and with the oracle
``torch.export.export(..., strict=False).run_decompositions({})`` (the same program
exporter returns), runs each program and compares every output tensor with the eager
one (rtol 1e-4, atol 1e-4). ``--family diffusers`` runs diffusers' model classes instead
(``zoo_diffusers.py``: the tiny configs and inputs of diffusers' own model tests), one
configuration per model type, static shapes only; ``--family timm``, ``torchvision`` and
``torchaudio`` run those libraries' models with random weights (``zoo_timm.py``,
``zoo_torchvision.py``, ``zoo_torchaudio.py``), batch 2. A tool's outcome is ``ok`` only when
its program runs and matches eager; otherwise ``fails`` (the export raised), ``run fails``, ``mismatch``,
``timeout`` or ``crash``.  Where both are ok, their graph signatures are compared entry by
entry (kind, name, target, persistence): ``signatures differ`` counts the models where
they do not.  With ``"ir": "training"`` in ``--exporter-kwargs`` the oracle is
``torch.export.export`` alone (the training IR, no ``run_decompositions``).

With ``--dynamic``, both tools get the same ``dynamic_shapes``: ``Dim.AUTO`` for every
input's batch dimension (dim 0 of the example's batch size) and sequence dimension (dim 1
of the example's sequence length), so each tool keeps dynamic what the model allows.  The
signature comparison then also covers which input dimensions each program kept dynamic
and their ranges, and each program is run a second time on fresh inputs, every dimension
it kept dynamic grown (batch 2 to 3, sequence 8 to 11), against eager on those inputs:
``fresh mismatch`` or ``fresh run fails`` when it does not hold there.

Each model type runs in its own forked subprocess (its head and base model share it, so
the modeling module is imported once); each step (a build, or one tool's export and
run) has a timeout, and a step that times out or crashes is charged with it while the
type's remaining steps go on in a fresh process. The parent imports
torch, transformers and exporter and warms up both tools once before forking, so no
model pays one-time setup and the times compare like for like; every process uses one
thread. The time ratio is exporter seconds / torch.export seconds (lower is better: 0.32
means exporter takes 32% of torch.export's time).  ``render(data)`` rewrites a results page
from its JSON (``python benchmarks/results.py render zoo-torch-2.13``).
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import importlib
import json
import math
import multiprocessing
import os
import platform
import statistics
import sys
import time
import warnings
from multiprocessing.connection import wait
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import attrs  # noqa: E402
import torch  # noqa: E402
from torch.utils._pytree import tree_leaves  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

# zoo_models sits beside this file, which is run as a script (not as a package).
sys.path.insert(0, str(Path(__file__).resolve().parent))

import results  # noqa: E402
import zoo_sides  # noqa: E402

import exporter  # noqa: E402


def __getattr__(name: str) -> Any:
    """``zoo.zoo_models`` and ``zoo.transformers``, imported on first use: only the
    transformers family needs them."""
    if name in ("zoo_models", "transformers"):
        return importlib.import_module(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


RTOL = ATOL = 1e-4
TOOLS = ("exporter", "torch")
TOOL_TITLES = {"exporter": "exporter", "torch": "torch.export"}
# Encoder, decoder, seq2seq, vision (ViT and a convnet), audio (CTC and speech seq2seq).
FAST = ("bert", "gpt2", "llama", "t5", "vit", "resnet", "wav2vec2", "whisper")
# The libraries the zoo takes models from: the module beside this file that builds them
# (``model_types``, ``cases``, ``build``) and the model types ``--fast`` runs.
FAMILIES = {
    "transformers": ("zoo_models", FAST),
    "diffusers": ("zoo_diffusers", ("unet_2d_condition", "autoencoder_kl", "sd3", "flux", "cogvideox", "wan")),
    "timm": ("zoo_timm", ("resnet18", "efficientnet_b0", "mobilenetv3_large_100", "convnext_atto",
                          "vit_tiny_patch16_224", "swin_tiny_patch4_window7_224", "coatnet_0_rw_224", "mixer_s16_224")),
    "torchvision": ("zoo_torchvision", ("resnet18", "mobilenet_v3_small", "vit_b_16", "swin_t",
                                        "fasterrcnn_mobilenet_v3_large_320_fpn", "deeplabv3_mobilenet_v3_large",
                                        "r3d_18", "raft_small")),
    "torchaudio": ("zoo_torchaudio", ("wav2vec2_base", "conformer", "emformer", "deepspeech", "conv_tasnet",
                                      "squim_objective")),
}
# The families whose examples share one batch size and whose dimension 1 is never the
# sequence length by accident: those --dynamic can mark (diffusers' latents vary their batch).
DYNAMIC_FAMILIES = ("transformers", "timm", "torchvision", "torchaudio")
VERDICTS = ("both ok", "only exporter ok", "only torch.export ok", "both fail", "not built")


@attrs.define
class Settings:
    """How the zoo runs: which tools, how long a model may take, what exporter is given."""

    tools: tuple[str, ...] = TOOLS
    timeout: float = 180.0
    """Seconds one step may take: building a model, or one tool exporting and running it."""
    jobs: int = 1
    classes: str = "head+base"
    """``head+base``: the most servable head and the base model; ``first``: the head only."""
    exporter_kwargs: dict[str, Any] = attrs.Factory(dict)
    """Extra keyword arguments for ``exporter.export`` (``draft=True`` and the like)."""
    dynamic: bool = False
    """Batch and sequence dimensions ``Dim.AUTO`` for both tools (``dynamic_inputs``)."""
    family: str = "transformers"
    """The library the models come from, a key of ``FAMILIES``."""
    log_dir: Path | None = None
    """Where each model's stdout/stderr go; None discards them."""
    warm_up: bool = True
    """Export a tiny module with each tool before forking, so no model pays one-time setup."""


@attrs.define
class ToolResult:
    """One tool on one model: the outcome and, where it got that far, the export time."""

    outcome: str
    """ok | fails | run fails | mismatch | fresh run fails | fresh mismatch | other-side mismatch |
    timeout | crash"""
    seconds: float | None = None
    export_seconds: float | None = None
    """torch.export only: ``torch.export.export`` alone, before ``run_decompositions``."""
    error_type: str | None = None
    error: str | None = None
    """The first line of the error (or the mismatch found)."""
    category: str | None = None
    location: str | None = None
    hint: str | None = None
    max_abs_diff: float | None = None
    signature: list[list[Any]] | None = None
    """The program's inputs then outputs: kind, argument name, target, persistence."""
    how: str | None = None
    """exporter only: the setting the export took after the default one mismatched eager
    (``tracing_checks='eager'``), as ``--verify``'s hint says."""
    sides: str | None = None
    """exporter only, for a program with conds: what holding it to eager on inputs that take
    the other side found (``zoo_sides``)."""

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    def describe(self) -> str:
        """One cell of the table: the outcome, then the error type and first line."""
        if self.ok:
            notes = [note for note in (self.how, self.sides) if note]
            return f"{self.outcome} ({'; '.join(notes)})" if notes else self.outcome
        if not self.error:
            return self.outcome
        kind = f"{self.error_type}: " if self.error_type else ""
        where = f" [{self.category}]" if self.category else ""
        return f"{self.outcome}: {kind}{self.error}{where}"


@attrs.define
class Row:
    """One model class of one model type, and what each tool made of it."""

    model_type: str
    class_name: str | None
    built: bool = False
    reason: str | None = None
    """Why the model could not be built (None when it was)."""
    note: str = ""
    inputs: dict[str, str] = attrs.Factory(dict)
    parameters: int | None = None
    build_seconds: float | None = None
    results: dict[str, ToolResult] = attrs.Factory(dict)

    @property
    def verdict(self) -> str:
        """One of VERDICTS with both tools; ``<tool> ok|fails`` with one."""
        if not self.built:
            return "not built"
        ok = {tool: result.ok for tool, result in self.results.items()}
        if not ok:
            return "built"  # a build-only run (--tool none)
        if len(ok) == 1:
            ((tool, good),) = ok.items()
            return f"{TOOL_TITLES[tool]} {'ok' if good else 'fails'}"
        if ok["exporter"] and ok["torch"]:
            return "both ok"
        if ok["exporter"]:
            return "only exporter ok"
        if ok["torch"]:
            return "only torch.export ok"
        return "both fail"

    @property
    def signature_difference(self) -> str | None:
        """The first entry where the two programs' signatures differ, when both are ok."""
        mine, theirs = self.results.get("exporter"), self.results.get("torch")
        if not (mine and theirs and mine.ok and theirs.ok and mine.signature is not None and theirs.signature is not None):
            return None
        if mine.signature == theirs.signature:
            return None
        for i, (a, b) in enumerate(zip(mine.signature, theirs.signature)):
            if a != b:
                return f"entry {i}: exporter {a}, torch.export {b}"
        return f"exporter has {len(mine.signature)} entries, torch.export {len(theirs.signature)}"

    @property
    def ratio(self) -> float | None:
        """The time ratio, exporter seconds / torch.export seconds, when both exported and ran
        correctly (lower is better)."""
        mine, theirs = self.results.get("exporter"), self.results.get("torch")
        if mine and theirs and mine.ok and theirs.ok and mine.seconds and theirs.seconds:
            return mine.seconds / theirs.seconds
        return None

    def to_json(self, family: str = "transformers") -> dict[str, Any]:
        """The row as JSON: every field, the verdict (also as ``outcome``), the model type as
        ``family``, its ``kind`` (``model_kind``), the time ratio and the signature difference."""
        data = attrs.asdict(self, recurse=True)
        data.update(family=self.model_type, kind=model_kind(self.model_type, family), verdict=self.verdict,
                    outcome=self.verdict, ratio=self.ratio, signature_difference=self.signature_difference)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Row:
        """The row ``to_json`` wrote (its derived entries are computed again, not read)."""
        tool_fields = {field.name for field in attrs.fields(ToolResult)}
        tools = {tool: ToolResult(**{k: v for k, v in result.items() if k in tool_fields})
                 for tool, result in (data.get("results") or {}).items()}
        fields = {field.name for field in attrs.fields(cls)} - {"results"}
        return cls(**{k: v for k, v in data.items() if k in fields}, results=tools)


# --------------------------------------------------------------------- in the child


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(error).__name__


def in_package(location: str | None) -> str | None:
    """A source location under an import root (site-packages) from the package on:
    ``diffusers/models/unets/unet_2d.py:310``, the same on every machine."""
    if location:
        roots = sorted((path for path in sys.path if path and os.path.isabs(path)), key=len, reverse=True)
        for root in roots:
            prefix = os.path.join(root, "")
            if location.startswith(prefix):
                return location[len(prefix):]
    return location


def _failure(outcome: str, error: BaseException, seconds: float | None) -> ToolResult:
    result = ToolResult(outcome, seconds, error_type=type(error).__name__, error=_first_line(error))
    if isinstance(error, exporter.ExportError):
        info = exporter.ErrorInfo.from_exception(error).to_json()
        result.category, result.location, result.hint = info["category"], in_package(info["location"]), info["hint"]
        result.error = info["message"].strip().splitlines()[0][:300] if info["message"].strip() else result.error
    return result


def _model_output() -> type | tuple[()]:
    """transformers' ModelOutput when transformers is in use (the other families run without it)."""
    transformers = sys.modules.get("transformers")
    return transformers.utils.ModelOutput if transformers is not None else ()


def tensor_leaves(output: Any) -> list[torch.Tensor]:
    """Every tensor in a model output, ModelOutput dataclasses flattened field by field."""
    if isinstance(output, _model_output()):
        output = output.to_tuple()
    leaves: list[torch.Tensor] = []
    for leaf in tree_leaves(output):
        if isinstance(leaf, _model_output()):
            leaves += tensor_leaves(leaf)
        elif isinstance(leaf, torch.Tensor):
            leaves.append(leaf)
    return leaves


def compare(expected: Any, actual: Any) -> tuple[str | None, float]:
    """The first difference between two outputs (None if none) and the max abs difference."""
    want, got = tensor_leaves(expected), tensor_leaves(actual)
    if len(want) != len(got):
        return f"program returns {len(got)} tensors, eager {len(want)}", math.nan
    worst = 0.0
    for i, (e, a) in enumerate(zip(want, got)):
        if e.shape != a.shape or e.dtype != a.dtype:
            return f"output {i}: {a.dtype}{list(a.shape)} vs eager {e.dtype}{list(e.shape)}", math.nan
        if e.numel() == 0:
            continue
        if e.is_floating_point() or e.is_complex():
            diff = (e - a).abs().nan_to_num(0.0).max().item()
        else:
            diff = float((e != a).any().item())
        worst = max(worst, diff)
        if not torch.allclose(e, a, rtol=RTOL, atol=ATOL, equal_nan=True):
            return f"output {i} differs from eager (max abs diff {diff:.3g})", worst
    return None, worst


def _export_with_exporter(model, kwargs, extra, dynamic_shapes=None) -> tuple[torch.export.ExportedProgram, None]:
    return exporter.export(model, (), kwargs, dynamic_shapes=dynamic_shapes, **extra), None


def _export_with_torch(model, kwargs, extra, dynamic_shapes=None) -> tuple[torch.export.ExportedProgram, float]:
    start = time.perf_counter()
    program = torch.export.export(model, (), kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    export_seconds = time.perf_counter() - start
    if extra.get("ir") == "training":  # exporter's training IR: torch.export's own program
        return program, export_seconds
    return program.run_decompositions({}), export_seconds


def signature_rows(program: torch.export.ExportedProgram) -> list[list[Any]]:
    """Every input then output of the program's signature: kind, argument name, target,
    persistence (JSON-friendly); then, for a program with symbolic sizes, each user
    input's dynamic dimension: ``DYNAMIC``, input, dim, size expression and range."""
    sig = program.graph_signature
    rows = [
        [spec.kind.name, getattr(spec.arg, "name", repr(getattr(spec.arg, "value", None))), spec.target,
         getattr(spec, "persistent", None)]
        for spec in (*sig.input_specs, *sig.output_specs)
    ]
    for name, dim, size in dynamic_dims(program):
        expr = size.node.expr
        bounds = program.range_constraints.get(expr)
        rows.append(["DYNAMIC", name, dim, f"{expr} in {bounds}" if bounds is not None else str(expr)])
    return rows


def dynamic_dims(program: torch.export.ExportedProgram) -> list[tuple[str, int, torch.SymInt]]:
    """(user input, dim, size) for every dimension of a user input the program kept symbolic.

    A non-tensor input (``num_frames=3``, ``None``) is in the signature's user inputs as its
    value, with no placeholder: it has no dimensions."""
    placeholders = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    found = []
    for name in program.graph_signature.user_inputs:
        node = placeholders.get(name) if isinstance(name, str) else None
        value = node.meta.get("val") if node is not None else None
        if isinstance(value, torch.Tensor):
            found += [(name, dim, size) for dim, size in enumerate(value.shape) if isinstance(size, torch.SymInt)]
    return found


GROWN = {0: (2, 3), 1: (8, 11)}
"""``--dynamic``: the dimension, its example size (every family's batch of 2, the
transformers zoo's sequence of 8) and the size fresh inputs give it."""


def dynamic_inputs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``dynamic_shapes`` for the zoo's inputs: ``Dim.AUTO`` on every tensor's batch and
    sequence dimension (dim 0 and 1 when they have the example's batch and length), a list of
    tensors (a detector's images) entry by entry, in the input's own structure."""

    def dims(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return None
        found = {dim: torch.export.Dim.AUTO for dim, (size, _) in GROWN.items()
                 if value.dim() > dim and value.shape[dim] == size}
        return found or None

    return {name: torch.utils._pytree.tree_map(dims, value) for name, value in kwargs.items()}


def grown_inputs(kwargs: dict[str, Any], program: torch.export.ExportedProgram) -> dict[str, Any] | None:
    """Fresh inputs: each dimension ``program`` kept dynamic grown to its ``GROWN`` size by
    repeating its leading entries (token ids stay valid ids); None when it kept none."""
    user_inputs = dict(zip(program.graph_signature.user_inputs, kwargs))
    grow: dict[str, list[int]] = collections.defaultdict(list)
    for placeholder, dim, _ in dynamic_dims(program):
        grow[user_inputs.get(placeholder, placeholder)].append(dim)
    if not grow:
        return None
    fresh = dict(kwargs)
    for name, dims in grow.items():
        value = kwargs[name]
        for dim in dims:  # (only the GROWN dimensions are given Dim.AUTO)
            target = GROWN[dim][1]
            if target > 2 * value.shape[dim]:
                return None
            value = torch.cat([value, value.narrow(dim, 0, target - value.shape[dim])], dim)
        fresh[name] = value
    return fresh


EXPORTERS: dict[str, Callable[..., tuple[torch.export.ExportedProgram, float | None]]] = {
    "exporter": _export_with_exporter,
    "torch": _export_with_torch,
}


def run_tool(tool: str, built: zoo_models.Built, exporter_kwargs: dict[str, Any], dynamic: bool = False) -> ToolResult:
    """Export with one tool, run the program and compare it with the eager output (with
    ``dynamic``, also on fresh inputs of other sizes).  An exporter program that differs from
    eager is exported again with the model's tracing checks answered as eager
    (``tracing_checks='eager'``), the way out ``--verify`` names where the model takes another
    path while traced; the result says so."""
    result = _run_tool(tool, built, exporter_kwargs, dynamic)
    if tool == "exporter" and result.outcome == "mismatch" and "tracing_checks" not in exporter_kwargs:
        retried = _run_tool(tool, built, {**exporter_kwargs, "tracing_checks": "eager"}, dynamic)
        if retried.ok:
            retried.how = "tracing_checks='eager'"
            return retried
    return result


def _run_tool(tool: str, built: zoo_models.Built, exporter_kwargs: dict[str, Any], dynamic: bool = False) -> ToolResult:
    extra = exporter_kwargs if tool == "exporter" else {"ir": exporter_kwargs.get("ir", "inference")}
    shapes = dynamic_inputs(built.kwargs) if dynamic else None
    # torch's fake-tensor cache is process-wide: the tool run first would fill it for the
    # second, which then skips the fake propagation the first paid for.
    FakeTensorMode.cache_clear()
    gc.collect()
    start = time.perf_counter()
    try:
        program, export_seconds = EXPORTERS[tool](built.model, built.kwargs, extra, shapes)
    except Exception as e:
        return _failure("fails", e, time.perf_counter() - start)
    seconds = time.perf_counter() - start
    try:
        with torch.no_grad():
            actual = program.module()(**built.kwargs)
    except Exception as e:
        result = _failure("run fails", e, seconds)
        result.export_seconds = export_seconds
        return result
    difference, worst = compare(built.output, actual)
    if difference is not None:
        return ToolResult("mismatch", seconds, export_seconds, error=difference, max_abs_diff=worst)
    fresh = grown_inputs(built.kwargs, program) if dynamic else None
    if fresh is not None:
        try:
            with torch.no_grad():
                expected = built.model(**fresh)
        except Exception:
            expected = None  # the model itself does not take these sizes: nothing to hold the program to
        if expected is not None:
            try:
                with torch.no_grad():
                    actual = program.module()(**fresh)
            except Exception as e:
                result = _failure("fresh run fails", e, seconds)
                result.export_seconds = export_seconds
                return result
            difference, _ = compare(expected, actual)
            if difference is not None:
                return ToolResult("fresh mismatch", seconds, export_seconds, error=difference)
    sides = (
        zoo_sides.other_sides(built.model, built.kwargs, program, compare, built.weights)
        if tool == "exporter" and not dynamic else None
    )
    if sides is not None and sides.mismatch:
        return ToolResult("other-side mismatch", seconds, export_seconds, error=sides.mismatch, sides=sides.describe())
    return ToolResult("ok", seconds, export_seconds, max_abs_diff=worst, signature=signature_rows(program),
                      sides=sides.describe() if sides is not None else None)


def _describe_input(value: Any) -> str:
    """A tensor as its dtype and shape (``float32[2, 8]``), containers entry by entry."""
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return "[" + ", ".join(map(_describe_input, value)) + "]"
    if isinstance(value, dict) and any(isinstance(v, torch.Tensor) for v in value.values()):
        return "{" + ", ".join(f"{k!r}: {_describe_input(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _child(model_type: str, tasks: list[tuple[str, str]], settings: Settings, conn: Any) -> None:
    """Run ``(class name, tool)`` tasks of one model type, building each class when first
    needed; every step's result goes to ``conn`` as soon as it is known."""
    if settings.log_dir is not None:
        log = open(settings.log_dir / f"{model_type}.log", "ab")
    else:
        log = open(os.devnull, "wb")
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    warnings.filterwarnings("ignore")
    _quiet_libraries()
    models: dict[str, zoo_models.Built | None] = {}
    for class_name, tool in tasks:
        if class_name not in models:
            models[class_name] = _build(model_type, class_name, conn, settings.family)
        if models[class_name] is not None and tool is not None:
            result = run_tool(tool, models[class_name], settings.exporter_kwargs, settings.dynamic)
            conn.send(("result", class_name, tool, attrs.asdict(result)))
    conn.send(("done",))


def _build(model_type: str, class_name: str, conn: Any, family: str = "transformers") -> zoo_models.Built | None:
    """Build one class and run it eagerly; report either its inputs or why it was not built."""
    start = time.perf_counter()
    try:
        built = builders(family).build(model_type, class_name)
    except builders(family).NotBuilt as e:
        conn.send(("not built", class_name, str(e)))
        return None
    except Exception as e:
        conn.send(("not built", class_name, f"build fails: {type(e).__name__}: {_first_line(e)}"))
        return None
    conn.send(("built", class_name, {
        "inputs": {name: _describe_input(value) for name, value in built.kwargs.items()},
        "parameters": sum(p.numel() for p in built.model.parameters()),
        "note": built.note,
        "build_seconds": time.perf_counter() - start,
    }))
    return built


# -------------------------------------------------------------------- in the parent


def warm_up(tools: Iterable[str]) -> None:
    """Pay each tool's one-time setup in the parent, so forked children time exports only."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    kwargs = {"input": torch.randn(2, 4)}
    for tool in tools:
        EXPORTERS[tool](model, kwargs, {})[0].module()(**kwargs)


def builders(family: str) -> ModuleType:
    """The module that builds ``family``'s tiny models (imported on first use: the
    diffusers family needs diffusers, the default zoo does not)."""
    return importlib.import_module(FAMILIES[family][0])


def _quiet_libraries() -> None:
    """Silence the model libraries' own logging, transformers' and diffusers' when in use."""
    for library in ("transformers", "diffusers"):
        if library in sys.modules:
            sys.modules[library].logging.set_verbosity_error()



def plan(model_types: Iterable[str], classes: str, family: str = "transformers") -> list[Row]:
    """One row per model class to export; a type without any class gets a not-built row."""
    rows = []
    for model_type in model_types:
        names = builders(family).cases(model_type)[: 1 if classes == "first" else 2]
        if not names:
            rows.append(Row(model_type, None, reason=f"no model class: {family} registers none for this type"))
        rows += [Row(model_type, name) for name in names]
    return rows


@attrs.define
class _Job:
    """One child process working through the (class, tool) tasks left for one model type."""

    rows: dict[str, Row]
    tasks: list[tuple[str, str]]
    process: Any
    conn: Any
    started: float
    """When the step under way (a build, or one tool's export) began."""
    done: bool = False


def _start(rows: dict[str, Row], tasks: list[tuple[str, str]], settings: Settings) -> _Job:
    model_type = next(iter(rows.values())).model_type
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(model_type, tasks, settings, send), daemon=True)
    process.start()
    send.close()
    return _Job(rows, list(tasks), process, receive, time.monotonic())


def _drop_class(job: _Job, class_name: str) -> None:
    job.tasks = [task for task in job.tasks if task[0] != class_name]


def _drain(job: _Job) -> bool:
    """Apply every message the child has sent so far to its rows; say whether there was any."""
    received = False
    while True:
        try:
            if not job.conn.poll():
                return received
            message = job.conn.recv()
        except (EOFError, OSError):
            return received
        received = True
        kind, payload = message[0], message[1:]
        if kind == "not built":
            class_name, reason = payload
            job.rows[class_name].reason = reason
            _drop_class(job, class_name)
        elif kind == "built":
            class_name, info = payload
            job.rows[class_name].built = True
            for key, value in info.items():
                setattr(job.rows[class_name], key, value)
            if (class_name, None) in job.tasks:  # a build-only run: the build was the task
                job.tasks.remove((class_name, None))
        elif kind == "result":
            class_name, tool, result = payload
            job.rows[class_name].results[tool] = ToolResult(**result)
            job.tasks.remove((class_name, tool))
        elif kind == "done":
            job.done = True


def _stop(job: _Job, outcome: str, detail: str) -> None:
    """Charge the task under way with a timeout or crash; the tasks after it stay to run."""
    if job.process.is_alive():
        job.process.kill()
    job.process.join()
    job.conn.close()
    class_name, tool = job.tasks[0]
    row = job.rows[class_name]
    if row.built:
        row.results[tool] = ToolResult(outcome, error=detail)
        job.tasks.pop(0)
    else:
        row.reason = f"build {outcome}: {detail}"
        _drop_class(job, class_name)


def run_zoo(rows: list[Row], settings: Settings, on_row: Callable[[Row], None] = lambda row: None) -> list[Row]:
    """Run each model type in its own forked subprocess, ``settings.jobs`` at a time.

    A type's classes share the process (the modeling module is imported once). Each step
    (building a class, or one tool exporting it) gets ``settings.timeout`` seconds; when
    one times out or crashes, the type's remaining steps go on in a fresh process.
    ``on_row`` is called as each row is finished.
    """
    warnings.filterwarnings("ignore")
    builders(settings.family)  # imported once, before the children fork
    _quiet_libraries()
    torch.set_num_threads(1)
    if settings.log_dir is not None:
        settings.log_dir.mkdir(parents=True, exist_ok=True)
    if settings.warm_up:
        warm_up(settings.tools)
    by_type: dict[str, dict[str, Row]] = {}
    for row in rows:
        if row.class_name:
            by_type.setdefault(row.model_type, {})[row.class_name] = row
        else:
            on_row(row)
    pending = collections.deque(
        (type_rows, [(name, tool) for name in type_rows for tool in settings.tools or (None,)])
        for type_rows in by_type.values()
    )
    running: list[_Job] = []
    while pending or running:
        while pending and len(running) < settings.jobs:
            running.append(_start(*pending.popleft(), settings))
        wait([job.conn for job in running] + [job.process.sentinel for job in running], timeout=min(1.0, settings.timeout))
        for job in list(running):
            if _drain(job):
                job.started = time.monotonic()
            if not job.done and not job.process.is_alive():
                _drain(job)
            if job.done or (not job.tasks and not job.process.is_alive()):
                job.process.join()
                job.conn.close()
            elif not job.process.is_alive():
                _stop(job, "crash", f"process exited with code {job.process.exitcode}")
            elif time.monotonic() - job.started > settings.timeout:
                _stop(job, "timeout", f"no result after {settings.timeout:g} s")
            else:
                continue
            running.remove(job)
            if job.tasks:
                running.append(_start(job.rows, job.tasks, settings))
            else:
                for row in job.rows.values():
                    on_row(row)
    return rows


# ---------------------------------------------------------------------------- report


def summarize(rows: list[Row]) -> dict[str, Any]:
    """Counts per verdict, the time ratio's geometric mean and median where both are ok, and why each
    unbuilt type was not built."""
    counts = collections.Counter(row.verdict for row in rows)
    ratios = [row.ratio for row in rows if row.ratio]
    reasons = collections.Counter(row.reason.split(":")[0] for row in rows if not row.built and row.reason)
    return {
        "rows": len(rows),
        "model_types": len({row.model_type for row in rows}),
        "counts": {verdict: counts[verdict] for verdict in (*VERDICTS, *sorted(set(counts) - set(VERDICTS)))
                   if counts[verdict] or verdict in VERDICTS},
        "signatures_differ": sorted(row.model_type for row in rows if row.signature_difference),
        "other_sides": _other_sides(rows),
        "time_ratio_geomean": math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None,
        "time_ratio_median": statistics.median(ratios) if ratios else None,
        "not_built_reasons": dict(reasons.most_common()),
    }


def _other_sides(rows: list[Row]) -> dict[str, list[str]]:
    """The models whose exporter program holds conds, by what holding them to eager on inputs
    that take the other side found."""
    found: dict[str, list[str]] = {"matches eager": [], "no input takes another side": [], "differs": []}
    for row in rows:
        result = row.results.get("exporter")
        if result is None or not result.sides:
            continue
        if result.outcome == "other-side mismatch":
            found["differs"].append(row.model_type)
        elif "no generated input" in result.sides:
            found["no input takes another side"].append(row.model_type)
        else:
            found["matches eager"].append(row.model_type)
    return found


def _seconds(result: ToolResult | None) -> str:
    return f"{result.seconds:.2f}" if result and result.seconds is not None else ""


def _cells(row: Row, settings: Settings) -> list[str]:
    cells = [row.model_type, row.class_name or ""]
    if row.built:
        cells += [row.results[tool].describe() if tool in row.results else "" for tool in settings.tools]
    else:
        cells += [f"not built: {row.reason}", *[""] * (len(settings.tools) - 1)]
    cells += [_seconds(row.results.get(tool)) for tool in settings.tools]
    if len(settings.tools) == 2:
        cells.append(f"{row.ratio:.2f}" if row.ratio else "")
    return cells


def _headers(settings: Settings) -> list[str]:
    titles = [TOOL_TITLES[tool] for tool in settings.tools]
    ratio = [results.TIME_RATIO] if len(settings.tools) == 2 else []
    return ["model type", "class", *titles, *[f"{t} s" for t in titles], *ratio]


def progress_line(row: Row, done: int, total: int) -> str:
    """The one line printed as each model finishes."""
    parts = [f"[{done}/{total}] {row.model_type} {row.class_name or ''}: {row.verdict}"]
    if row.signature_difference:
        parts.append(f"signatures differ: {row.signature_difference}")
    if not row.built:
        parts.append(row.reason or "")
    for tool, result in row.results.items():
        seconds = f" {_seconds(result)}s" if result.seconds is not None else ""
        parts.append(f"{TOOL_TITLES[tool]} {result.describe()}{seconds}")
    return " | ".join(parts)


def print_report(rows: list[Row], settings: Settings, summary: dict[str, Any]) -> None:
    """The per-model table and the summary, on the terminal."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(160, Console().width))
    table = Table(*_headers(settings), show_lines=False)
    for row in rows:
        table.add_row(*_cells(row, settings))
    console.print(table)
    for line in summary_lines(summary):
        console.print(line, markup=False)


def summary_lines(summary: dict[str, Any]) -> list[str]:
    lines = [f"{summary['rows']} models across {summary['model_types']} model types"]
    lines += [f"  {verdict}: {count}" for verdict, count in summary["counts"].items()]
    differ = summary.get("signatures_differ", [])
    lines.append(f"  signatures differ (both ok): {len(differ)}" + (f" ({', '.join(differ)})" if differ else ""))
    for found, models in (summary.get("other_sides") or {}).items():
        if models:
            lines.append(f"  captured decisions, other side {found}: {len(models)} ({', '.join(models)})")
    if summary["time_ratio_geomean"]:
        lines.append(f"  {results.TIME_RATIO}, geometric mean where both ok: {summary['time_ratio_geomean']:.2f}, "
                     f"median {summary['time_ratio_median']:.2f}")
    if summary["not_built_reasons"]:
        lines.append("not built, by reason:")
        lines += [f"  {reason}: {count}" for reason, count in summary["not_built_reasons"].items()]
    return lines


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(rows: list[Row], settings: Settings, summary: dict[str, Any]) -> str:
    """The results page's body: the summary, the outcomes by kind, the models not both ok
    with what happened, and every model."""
    out = [f"**{summary['rows']} models across {summary['model_types']} {settings.family} model types**", ""]
    out += ["| outcome | models |", "|---|---:|"]
    out += [f"| {verdict} | {count} |" for verdict, count in summary["counts"].items()]
    if summary["time_ratio_geomean"]:
        out.append(f"| [{results.TIME_RATIO}](../benchmarks.md#the-time-ratio), geometric mean where both ok "
                   f"| {summary['time_ratio_geomean']:.2f} |")
        out.append(f"| [{results.TIME_RATIO}](../benchmarks.md#the-time-ratio), median where both ok "
                   f"| {summary['time_ratio_median']:.2f} |")
    if summary["not_built_reasons"]:
        out += ["", "| not built because | models |", "|---|---:|"]
        out += [f"| {_md(results.literal(reason))} | {count} |" for reason, count in summary["not_built_reasons"].items()]
    sides = {found: models for found, models in (summary.get("other_sides") or {}).items() if models}
    if sides:
        out += ["", "## Both sides of captured decisions", "",
                "Each exporter program with a `torch.cond` is also run on inputs changed so that a cond "
                "may go the other way (`zoo_sides.py`), and held to eager on each input where one does.", "",
                "| other side | models |", "|---|---|"]
        out += [f"| {found} | {len(models)}: {', '.join(models)} |" for found, models in sides.items()]
    kinds = {row.model_type: model_kind(row.model_type, settings.family) for row in rows}
    out += ["", "## By kind", "", kinds_table(rows, kinds)]
    out += ["", "## Not both ok", "", *not_both_ok(rows, settings, kinds)]
    out += ["", "## Every model", "", "<details><summary>every model</summary>", "",
            results.html_table(_headers(settings), [_cells(row, settings) for row in rows], left=2 + len(settings.tools)),
            "", "</details>"]
    return "\n".join(out) + "\n"


def kinds_table(rows: list[Row], kinds: dict[str, str]) -> str:
    """How many models of each kind had each verdict: the counts the zoo plot draws."""
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for row in rows:
        counts[kinds[row.model_type]][row.verdict] += 1
    verdicts = [v for v in VERDICTS if any(c[v] for c in counts.values())]
    verdicts += sorted({v for c in counts.values() for v in c} - set(verdicts))
    order = sorted(counts, key=lambda kind: -sum(counts[kind].values()))
    return results.markdown_table(["kind", "models", *verdicts],
                                  [[kind, str(sum(counts[kind].values())), *[str(counts[kind][v]) for v in verdicts]]
                                   for kind in order])


def not_both_ok(rows: list[Row], settings: Settings, kinds: dict[str, str]) -> list[str]:
    """The models whose verdict is not ``both ok``: those built, with each tool's outcome,
    then those not built, with why."""
    order = {verdict: i for i, verdict in enumerate(VERDICTS)}
    key = lambda row: (order.get(row.verdict, len(order)), kinds[row.model_type], row.model_type)
    built = sorted((row for row in rows if row.built and row.verdict != "both ok"), key=key)
    unbuilt = sorted((row for row in rows if not row.built), key=key)
    if not built and not unbuilt:
        return ["Every model is both ok."]
    titles = [TOOL_TITLES[tool] for tool in settings.tools]
    out = [f"{len(built) + len(unbuilt)} of {len(rows)} models: {len(built)} built, {len(unbuilt)} not built.", ""]
    if built:
        out.append(results.markdown_table(
            ["model type", "class", "kind", "outcome", *titles],
            [[row.model_type, row.class_name or "", kinds[row.model_type], row.verdict,
              *[results.literal(row.results[tool].describe()) if tool in row.results else "" for tool in settings.tools]]
             for row in built], left=4 + len(titles)))
    if unbuilt:
        which = "the model" if len(unbuilt) == 1 else f"the {len(unbuilt)} models"
        out += ["", f"<details><summary>{which} not built, and why</summary>", "",
                results.html_table(["model type", "class", "kind", "why"],
                                   [[row.model_type, row.class_name or "", kinds[row.model_type], row.reason or ""]
                                    for row in unbuilt], left=4),
                "", "</details>"]
    return out


def render(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A zoo results page from its JSON (``results.render``): the rows as they were run,
    their verdicts, kinds, time ratios and summary computed again by this script."""
    fields = {field.name for field in attrs.fields(Settings)}
    given = {k: v for k, v in (data.get("settings") or {}).items() if k in fields}
    settings = Settings(**{**given, "tools": tuple(given.get("tools", TOOLS)), "log_dir": None})
    rows = [Row.from_json(row) for row in data["rows"]]
    summary = summarize(rows)
    return markdown(rows, settings, summary), {**data, "summary": summary,
                                               "rows": [row.to_json(settings.family) for row in rows]}


# A transformers model type's kind: the first group holding one of its heads
# (modeling_auto's MODEL_FOR_<HEAD>_MAPPING_NAMES); else a word of its name (the parts of
# multimodal models: ``qwen2_vl_text``, ``siglip_vision_model``); else its sub-configs.
HEAD_KINDS = (
    ("multimodal", ("IMAGE_TEXT_TO_TEXT", "MULTIMODAL_LM", "VISUAL_QUESTION_ANSWERING", "DOCUMENT_QUESTION_ANSWERING",
                    "ZERO_SHOT_IMAGE_CLASSIFICATION", "ZERO_SHOT_OBJECT_DETECTION", "RETRIEVAL", "TEXT_RECOGNITION",
                    "TABLE_RECOGNITION")),
    ("audio", ("SPEECH_SEQ_2_SEQ", "CTC", "AUDIO_CLASSIFICATION", "AUDIO_FRAME_CLASSIFICATION", "AUDIO_XVECTOR",
               "TEXT_TO_SPECTROGRAM", "TEXT_TO_WAVEFORM", "RNNT", "TDT")),
    ("vision", ("VIDEO_CLASSIFICATION", "IMAGE_CLASSIFICATION", "OBJECT_DETECTION", "SEMANTIC_SEGMENTATION",
                "INSTANCE_SEGMENTATION", "UNIVERSAL_SEGMENTATION", "IMAGE_SEGMENTATION", "DEPTH_ESTIMATION",
                "MASK_GENERATION", "KEYPOINT_DETECTION", "KEYPOINT_MATCHING", "IMAGE_TO_IMAGE",
                "MASKED_IMAGE_MODELING", "BACKBONE", "IMAGE", "IMAGE_MATTING", "NORMAL_ESTIMATION",
                "POINTMAP_ESTIMATION", "POSE_ESTIMATION", "CAUSAL_IMAGE_MODELING")),
    ("other", ("TIME_SERIES_CLASSIFICATION", "TIME_SERIES_PREDICTION", "TIME_SERIES_REGRESSION", "DECISION")),
    ("text", ("CAUSAL_LM", "MASKED_LM", "SEQ_TO_SEQ_CAUSAL_LM", "SEQUENCE_CLASSIFICATION", "TOKEN_CLASSIFICATION",
              "QUESTION_ANSWERING", "MULTIPLE_CHOICE", "NEXT_SENTENCE_PREDICTION", "TEXT_ENCODING",
              "TABLE_QUESTION_ANSWERING")),
)
NAME_KINDS = (
    ("vision", {"vision", "visual", "image", "vit", "vq", "vqgan", "vqmodel", "video", "sam", "sam2", "sam3"}),
    ("audio", {"audio", "speech", "asr", "tts", "codec", "encodec", "xcodec", "xcodec2", "neucodec", "mimi",
               "wavtokenizer", "hifigan", "bigvgan", "token2wav", "musicgen"}),
    ("text", {"text"}),
)
SUB_CONFIG_KINDS = {"text_config": "text", "vision_config": "vision", "audio_config": "audio", "video_config": "vision"}


@functools.cache
def transformers_kind(model_type: str) -> str:
    """text, vision (images and video), audio, multimodal or other (time series, codecs' and
    detectors' parts...): what a transformers model type takes in, for grouping results."""
    from transformers.models.auto import modeling_auto
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    for kind, heads in HEAD_KINDS:
        if any(model_type in getattr(modeling_auto, f"MODEL_FOR_{head}_MAPPING_NAMES", {}) for head in heads):
            return kind
    words = set(model_type.replace("-", "_").split("_"))
    for kind, names in NAME_KINDS:
        if words & names:
            return kind
    try:
        config = CONFIG_MAPPING[model_type]
    except (KeyError, ImportError):
        config = None
    sub_kinds = {SUB_CONFIG_KINDS[name] for name in getattr(config, "sub_configs", {}) if name in SUB_CONFIG_KINDS}
    if len(sub_kinds) > 1:
        return "multimodal"
    return sub_kinds.pop() if sub_kinds else "other"


def model_kind(model_type: str, family: str = "transformers") -> str:
    """The kind a model type is grouped under on the results page and plot."""
    if family == "transformers":
        return transformers_kind(model_type)
    return builders(family).kind(model_type)


def environment() -> dict[str, str]:
    """Versions and machine; each model library's version once its family has imported it."""
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "exporter": exporter.__version__,
        "machine": platform.machine(),
        "cpus": str(os.cpu_count()),
    }
    for library in ("transformers", "diffusers", "timm", "torchvision", "torchaudio"):
        if library in sys.modules:
            versions[library] = sys.modules[library].__version__
    return versions


# ------------------------------------------------------------------------------- CLI


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", type=_csv, help="comma-separated model types (default: all)")
    parser.add_argument("--exclude", type=_csv, default=[], help="comma-separated model types to skip")
    parser.add_argument("--limit", type=int, help="only the first N model types of the selection")
    parser.add_argument("--family", choices=tuple(FAMILIES), default="transformers",
                        help="the library the models come from (default transformers; diffusers needs the bench extra)")
    parser.add_argument("--fast", action="store_true",
                        help=f"transformers: only {', '.join(FAST)}, the head only; diffusers: "
                             f"{', '.join(FAMILIES['diffusers'][1])}")
    parser.add_argument("--classes", choices=("head+base", "first"), default="head+base",
                        help="head+base: the most servable head and the base model; first: the head only")
    parser.add_argument("--tool", choices=("exporter", "torch", "both", "none"), default="both",
                        help="none: only build each model and run it eagerly, to count what the zoo builds")
    parser.add_argument("--timeout", type=float, default=180.0,
                        help="seconds a build or one tool's export of one model may take (default 180)")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="models run in parallel (default 1)")
    parser.add_argument("--exporter-kwargs", type=json.loads, default={},
                        help='JSON object of extra exporter.export arguments, e.g. \'{"draft": true}\'')
    parser.add_argument("--dynamic", action="store_true",
                        help="batch and sequence dimensions Dim.AUTO for both tools; programs also checked on other sizes")
    parser.add_argument("--json", type=Path, help="write every row and the summary as JSON")
    parser.add_argument("--markdown", type=Path, help="write the summary and table as markdown")
    parser.add_argument("--logs", type=Path, help="keep each model's stdout/stderr in this folder")
    results.add_arguments(parser)
    args = parser.parse_args(argv)
    if not isinstance(args.exporter_kwargs, dict):
        parser.error("--exporter-kwargs must be a JSON object")
    if args.family not in DYNAMIC_FAMILIES and args.dynamic:
        parser.error(f"--dynamic marks batch and sequence dimensions: it is for the {', '.join(DYNAMIC_FAMILIES)} "
                     f"families only")
    check_model_types(parser, args)
    return args


def check_model_types(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Stop with a usage error when ``--only`` names a model type the zoo does not have
    (or the family's library is not installed)."""
    family = getattr(args, "family", "transformers")
    try:
        known = builders(family).model_types()
    except ImportError as e:
        install = "pip install -e '.[bench]'" if family in ("transformers", "diffusers") else f"pip install {family}"
        parser.error(f"--family {family} needs {e.name or 'its library'}: {install}")
    unknown = set(args.only or []) - set(known)
    if unknown:
        parser.error(f"unknown model types: {', '.join(sorted(unknown))}")


def selected_types(args: argparse.Namespace) -> list[str]:
    """The model types ``--fast``/``--only``/``--exclude``/``--limit`` ask for, in order."""
    family = getattr(args, "family", "transformers")
    types = list(FAMILIES[family][1]) if args.fast else args.only or builders(family).model_types()
    return [t for t in types if t not in set(args.exclude)][: getattr(args, "limit", None)]


def results_name(args: argparse.Namespace) -> str:
    """The results file's name for a run: ``zoo-torch-2.15``, with ``-diffusers``, ``-fast``,
    ``-subset``, ``-dynamic`` and ``-training`` as the options ask."""
    kwargs = dict(args.exporter_kwargs)
    training = kwargs.pop("ir", None) == "training"
    subset = bool(args.only or args.exclude or getattr(args, "limit", None) or kwargs
                  or args.tool not in ("both", "none"))
    family = getattr(args, "family", "transformers")
    flags = ((family, family != "transformers"), ("builds", args.tool == "none"), ("fast", args.fast),
             ("subset", subset), ("dynamic", args.dynamic), ("training", training))
    return "-".join(["zoo", *(flag for flag, on in flags if on), results.release_suffix()])


def results_title(args: argparse.Namespace) -> str:
    """The results page's title: the zoo, its variant and the torch release."""
    parts = results_name(args).split("-")
    family = getattr(args, "family", "transformers")
    variant = [word for word, on in ((family, family != "transformers"), ("builds only", "builds" in parts),
                                     ("fast set", "fast" in parts),
                                     ("subset", "subset" in parts),
                                     ("dynamic shapes", "dynamic" in parts), ("training IR", "training" in parts)) if on]
    return f"Model zoo{' (' + ', '.join(variant) + ')' if variant else ''}, torch {results.torch_release()}"


def main(argv: list[str] | None = None) -> int:
    """Run the zoo as the options ask; print the table and write the results files."""
    args = parse_args(argv)
    results.require_clean(args)
    types = selected_types(args)
    settings = Settings(
        tools={"both": TOOLS, "none": ()}.get(args.tool, (args.tool,)),
        timeout=args.timeout,
        jobs=max(1, args.jobs),
        classes="first" if args.fast else args.classes,
        exporter_kwargs=args.exporter_kwargs,
        dynamic=args.dynamic,
        family=args.family,
        log_dir=args.logs,
    )
    rows = plan(types, settings.classes, settings.family)
    finished = 0

    def report(row: Row) -> None:
        nonlocal finished
        finished += 1
        print(progress_line(row, finished, len(rows)), file=sys.stderr, flush=True)

    start = time.monotonic()
    run_zoo(rows, settings, report)
    wall = time.monotonic() - start
    summary = summarize(rows)
    print_report(rows, settings, summary)
    print(f"wall time {wall:.0f} s", flush=True)
    data = {
        "settings": {**attrs.asdict(settings), "log_dir": str(settings.log_dir) if settings.log_dir else None},
        "environment": environment(),
        "wall_seconds": wall,
        "summary": summary,
        "rows": [row.to_json(settings.family) for row in rows],
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=1, default=str))
    table = markdown(rows, settings, summary)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(table)
    results.write_from_args(args, results_name(args), markdown=table, data=data,
                            argv=results.script_argv(__file__, argv), title=results_title(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
