"""Run one generated program through exporter, eager and the torch.export oracle.

``check_source(source)`` loads a program file (as ``Program.render()`` writes it),
exports it with ``exporter.export`` and with the oracle
(``torch.export.export(strict=False).run_decompositions({})``), runs both programs and
the eager model side by side at the example sizes, on fresh values, and at the other
sizes of ``CHECK_SIZES``, and returns an ``Outcome``. Its ``klass`` is one of a small set
of strings; ``finding`` is true for the classes that mean exporter is wrong:

- a raw (non-``ExportError``) exception out of ``exporter.export``;
- an ``ExportError`` whose category does not fit (``pass``, ``verification``,
  ``internal``, a class that is not the category's owner, or a category unlike the
  oracle's failure);
- exporter fails where the oracle succeeds;
- the user's model changed by the export (state_dict values, training flags, attributes);
- ``ep.module()`` differs from eager (outputs, mutated inputs, buffers) where the
  oracle's program does not differ the same way, or rejects sizes the oracle's accepts.
"""

from __future__ import annotations

import contextlib
import linecache
import signal
import sys
import time
import types
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

import exporter
from tests.support import tree_difference

__all__ = ["Outcome", "check_source", "FuzzTimeout", "judge", "load_program"]

RTOL = 1e-4
ATOL = 1e-4


class FuzzTimeout(BaseException):
    """A program took longer than the runner allows (raised from SIGALRM)."""


@dataclass
class Outcome:
    klass: str
    finding: bool = False
    detail: str = ""
    seconds: float = 0.0
    notes: list = field(default_factory=list)


_COUNTER = [0]


def load_program(source: str, name: str | None = None) -> types.ModuleType:
    """Execute a program file as a fresh module whose source ``inspect`` and tracebacks can read."""
    _COUNTER[0] += 1
    name = name or f"fuzz_program_{_COUNTER[0]}"
    filename = f"/fuzz/{name}.py"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    mod = types.ModuleType(name)
    mod.__file__ = filename
    sys.modules[name] = mod
    exec(compile(source, filename, "exec"), mod.__dict__)
    return mod


def _unload(mod: types.ModuleType) -> None:
    sys.modules.pop(mod.__name__, None)
    linecache.cache.pop(mod.__file__, None)


def _clone(tree: Any) -> Any:
    return pytree.tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, tree)


def _snapshot(model: torch.nn.Module) -> dict:
    return {
        "state": {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()},
        "training": {n: m.training for n, m in model.named_modules()},
        "attrs": {n: sorted(vars(m)) for n, m in model.named_modules()},
        "requires_grad": {n: p.requires_grad for n, p in model.named_parameters()},
    }


def _model_change(before: dict, model: torch.nn.Module) -> str | None:
    after = _snapshot(model)
    for key in ("training", "attrs", "requires_grad"):
        if before[key] != after[key]:
            return f"{key} changed: {before[key]} -> {after[key]}"
    if sorted(before["state"]) != sorted(after["state"]):
        return f"state_dict keys changed: {sorted(before['state'])} -> {sorted(after['state'])}"
    for k, v in before["state"].items():
        w = after["state"][k]
        if type(w) is not torch.Tensor and not isinstance(w, torch.nn.Parameter):
            return f"state_dict[{k!r}] is now a {type(w).__name__}"
        if w.shape != v.shape or not torch.equal(w.detach(), v):
            return f"state_dict[{k!r}] value changed"
    return None


def _diff(ours: Any, ref: Any, what: str) -> str | None:
    """None when the pytrees match (tensors close, other leaves equal), else where they differ."""
    return tree_difference(ours, ref, rtol=RTOL, atol=ATOL, what=what)


def _run(module, inputs) -> tuple[Any, Any, BaseException | None]:
    args, kwargs = _clone(inputs)
    try:
        with torch.no_grad():
            out = module(*args, **kwargs)
    except FuzzTimeout:
        raise
    except Exception as e:  # noqa: BLE001 - a rejected size or a runtime failure, judged by the caller
        return None, (args, kwargs), e
    return out, (args, kwargs), None


def _buffers(module) -> dict:
    return {k: v for k, v in module.named_buffers()}


def _compare(res, eager_res, module, eager_module) -> str | None:
    out, inputs, err = res
    if err is not None:
        return f"raises {type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
    problem = _diff(out, eager_res[0], "output") or _diff(inputs, eager_res[1], "input after call")
    if problem:
        return problem
    ours_b, ref_b = _buffers(module), _buffers(eager_module)
    for name, ref in ref_b.items():
        if name not in ours_b:
            return f"buffer {name!r} missing from ep.module()"
        problem = _diff(ours_b[name], ref, f"buffer {name!r}")
        if problem:
            return problem
    return None


def _fits(category: exporter.Category, oracle_err: BaseException) -> bool:
    text = f"{type(oracle_err).__name__}: {oracle_err}"
    if "Constraints violated" in text or "ConstraintViolation" in text:
        return category in (exporter.Category.DYNAMIC_SHAPE_CONSTRAINT, exporter.Category.INPUT)
    if "data-dependent" in text or "GuardOnDataDependent" in text:
        return category in (
            exporter.Category.DATA_DEPENDENT_CONTROL_FLOW,
            exporter.Category.DATA_DEPENDENT_OUTPUT_SHAPE,
            exporter.Category.DYNAMIC_SHAPE_CONSTRAINT,
        )
    return True


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else ''}"


@contextlib.contextmanager
def _alarm(seconds: int | None):
    if not seconds or not hasattr(signal, "SIGALRM"):
        yield
        return

    def fire(signum, frame):
        raise FuzzTimeout(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def check_source(
    source: str, timeout: int | None = 120, always_oracle: bool = False, ir: str = "inference"
) -> Outcome:
    """Judge one program file; see the module docstring for the classes.

    The oracle exports only when exporter fails, differs from eager or rejects a size,
    unless ``always_oracle`` (then also "match, oracle fails to export" and "exporter
    matches, oracle differs" are told apart from "match").  ``ir="training"`` exports the
    training IR, against torch.export.export's own (without ``run_decompositions``)."""
    return judge(source, timeout, lambda mod: _check(mod, always_oracle, ir))


def judge(source: str, timeout: int | None, check: Any) -> Outcome:
    """``check(module)`` of ``source`` loaded as a fresh module, within ``timeout`` seconds (a
    program that takes longer is a finding), the module unloaded after and the time taken noted."""
    start = time.perf_counter()
    mod = None
    try:
        with _alarm(timeout):
            mod = load_program(source)
            outcome = check(mod)
    except FuzzTimeout as e:
        outcome = Outcome("timeout", True, str(e))
    finally:
        if mod is not None:
            _unload(mod)
    outcome.seconds = time.perf_counter() - start
    return outcome


def _check(mod, always_oracle: bool, ir: str = "inference") -> Outcome:
    example = mod.make_inputs()
    # The program must run eagerly (with grad, as export traces it) or it tests nothing.
    try:
        args, kwargs = _clone(example)
        mod.make_model()(*args, **kwargs)
    except Exception as e:  # noqa: BLE001
        return Outcome("invalid program: eager fails", False, _first_line(e))

    try:
        mod.dynamic_shapes()
    except Exception as e:  # noqa: BLE001
        return Outcome("invalid program: spec fails to build", False, _first_line(e))
    model = mod.make_model()
    before = _snapshot(model)
    ours_err = None
    ep = None
    try:
        args, kwargs = _clone(example)
        ep = exporter.export(model, args, kwargs, dynamic_shapes=mod.dynamic_shapes(), ir=ir)
    except exporter.ExportError as e:
        ours_err = e
    except FuzzTimeout:
        raise
    except BaseException as e:  # noqa: BLE001 - this is what the fuzzer looks for
        return Outcome("raw exception from exporter.export", True, _first_line(e))
    change = _model_change(before, model)
    if change:
        return Outcome("model changed by export", True, change)

    if ep is not None and not always_oracle:
        # A program that matches eager everywhere is a match whatever the oracle does: the
        # oracle (most of the cost) is asked only when exporter fails, differs or rejects.
        quick = _compare_programs(mod, ep, None, None, quick=True)
        if quick.klass == "match":
            return quick
        try:
            args, kwargs = _clone(example)
            ep = exporter.export(mod.make_model(), args, kwargs, dynamic_shapes=mod.dynamic_shapes(), ir=ir)
        except Exception as e:  # noqa: BLE001
            return Outcome("export not repeatable", True, _first_line(e))

    oracle_err = None
    oep = None
    try:
        args, kwargs = _clone(example)
        oep = torch.export.export(mod.make_model(), args, kwargs, dynamic_shapes=mod.dynamic_shapes(), strict=False)
        if ir != "training":
            oep = oep.run_decompositions({})
    except FuzzTimeout:
        raise
    except Exception as e:  # noqa: BLE001
        oracle_err = e

    if ours_err is not None:
        cat = ours_err.category
        detail = f"exporter: {_first_line(ours_err)}"
        if not isinstance(cat, exporter.Category) or cat.owner is None or not isinstance(ours_err, cat.owner):
            return Outcome("error class does not own its category", True, detail)
        if cat in (exporter.Category.PASS, exporter.Category.VERIFICATION, exporter.Category.INTERNAL):
            return Outcome(f"exporter bug category: {cat.value}", True, detail)
        if oracle_err is None:
            return Outcome(f"exporter fails, oracle succeeds: {cat.value}", True, detail)
        detail += f"\noracle: {_first_line(oracle_err)}"
        if not _fits(cat, oracle_err):
            return Outcome(f"category does not fit the oracle's failure: {cat.value}", True, detail)
        return Outcome(f"both fail: {cat.value}", False, detail)

    return _compare_programs(mod, ep, oep, oracle_err)


def _compare_programs(mod, ep, oep, oracle_err, quick: bool = False) -> Outcome:
    eager = mod.make_model()
    ours_m = ep.module()
    orc_m = oep.module() if oep is not None else None
    runs = [(mod.SIZES, 0), (mod.SIZES, 1)] + [(s, i + 2) for i, s in enumerate(mod.CHECK_SIZES)]
    notes = []
    for sizes, seed in runs:
        inputs = mod.make_inputs(sizes, seed)
        where = f"sizes {sizes}, seed {seed}"
        ours = _run(ours_m, inputs)
        orc = _run(orc_m, inputs) if orc_m is not None else None
        if quick and ours[2] is not None:
            return Outcome("needs the oracle", False, f"{where}: {_first_line(ours[2])}")
        if ours[2] is not None and (orc is None or orc[2] is not None):
            if sizes is mod.SIZES:
                kind = "both programs raise at the example sizes" if orc is not None else "program raises"
                return Outcome(kind, orc is None, f"{where}: {_first_line(ours[2])}")
            notes.append(f"rejected by both: {where}")
            continue
        ref = _run(eager, inputs)
        if ref[2] is not None:
            return Outcome("invalid sizes: eager fails", False, f"{where}: {_first_line(ref[2])}", notes=notes)
        ours_problem = _compare(ours, ref, ours_m, eager)
        orc_problem = _compare(orc, ref, orc_m, eager) if orc is not None else None
        if ours_problem is None:
            if orc is None:
                continue
            if orc_problem is not None:
                # The oracle's state has diverged from eager's: stop comparing here.
                return Outcome("exporter matches, oracle differs", False, f"{where}: oracle {orc_problem}")
            continue
        if orc is not None and orc_problem is not None:
            same = ours[2] is None and orc[2] is None and _diff(ours[:2], orc[:2], "") is None
            if same or (ours[2] is not None and orc[2] is not None):
                return Outcome("shared mismatch with eager", False, f"{where}: {ours_problem}")
        if ours[2] is not None:
            return Outcome("program rejects or raises where the oracle's runs", True, f"{where}: {ours_problem}")
        suffix = "" if orc is not None else " (oracle fails to export)"
        return Outcome("differs from eager" + suffix, True, f"{where}: {ours_problem}")
    if oracle_err is not None:
        return Outcome("match, oracle fails to export", False, _first_line(oracle_err), notes=notes)
    return Outcome("match", False, "", notes=notes)
