"""``[tool.exporter]`` in a project's pyproject.toml: the models ``check`` runs with no MODEL
arguments, their baseline and tolerances, read from the nearest pyproject.toml upward from
the current directory that has the table (as pytest and ruff find theirs).

    [tool.exporter]
    models = [
        "models/net.py:Net",
        { model = "models/lm.py:TinyLM", example-inputs = "i64[2,16]@[0,1000)", dynamic = ["input_ids.1=seq:2..64"] },
        { id = "Net-wide", model = "models/net.py:Net", init-args = { hidden = 64 } },
    ]
    baseline = "exporter-baseline.json"
    rtol = 1e-4
    atol = 1e-5
    jobs = 2
    timeout = 600        # seconds per model; 0: no limit
    max-memory = "4G"    # resident memory per model

File paths in it are relative to the pyproject.toml's directory, wherever ``check`` runs.
"""

from __future__ import annotations

import os
import re
import tomllib
from typing import Any

import attrs

from .._errors import InputSpecError
from .loading import parse_reference
from .memory import parse_size
from .settings import ModelEntry
from .workers import parse_timeout

__all__ = ["CheckConfig", "find_config", "load_config"]

_TOP_KEYS = ("models", "baseline", "rtol", "atol", "jobs", "timeout", "max-memory")
_MODEL_KEYS = ("model", "id", "example-inputs", "dynamic", "init-args")
_FILE_REFERENCE = re.compile(r"^[^\s\[\]@=]+\.py:[A-Za-z_][\w.]*$")


@attrs.define
class CheckConfig:
    """What ``[tool.exporter]`` says; None where it says nothing (the command line's default holds)."""

    path: str
    """The pyproject.toml it came from."""
    models: list[ModelEntry]
    baseline: str | None = None
    """Resolved against the current directory."""
    rtol: float | None = None
    atol: float | None = None
    jobs: int | None = None
    timeout: float | None = None
    """Seconds; 0 (no limit) is kept as 0 so that it overrides the default."""
    max_memory: int | None = None
    """Bytes."""


def find_config(start: str) -> str | None:
    """The nearest pyproject.toml at or above ``start`` with a ``[tool.exporter]`` table."""
    directory = os.path.abspath(start)
    while True:
        candidate = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(candidate) and "exporter" in _read(candidate).get("tool", {}):
            return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise InputSpecError(f"{path} cannot be read: {e}", hint="fix the TOML syntax") from None


def _error(path: str, where: str, what: str, hint: str) -> InputSpecError:
    return InputSpecError(f"{path}: [tool.exporter] {where}: {what}", hint=hint)


def _here(root: str, path: str) -> str:
    """``path`` (relative to the pyproject.toml's directory) as seen from the current directory."""
    return path if os.path.isabs(path) else os.path.relpath(os.path.join(root, path))


def _local_reference(root: str, text: str) -> str:
    """A ``file.py:Name`` reference relative to ``root``, made relative to the current directory."""
    reference = parse_reference(text, "MODEL")
    if not reference.is_file or os.path.isabs(reference.module):
        return text
    return f"{_here(root, reference.module)}:{reference.attr}"


def _entry(path: str, root: str, index: int, item: Any) -> ModelEntry:
    where = f"models[{index}]"
    if isinstance(item, str):
        item = {"model": item}
    if not isinstance(item, dict) or not isinstance(item.get("model"), str):
        raise _error(path, where, f"expected a reference string or a table with `model`, got {item!r}",
                     'write "path/to/file.py:Name" or { model = "path/to/file.py:Name", ... }')
    unknown = sorted(set(item) - set(_MODEL_KEYS))
    if unknown:
        raise _error(path, where, f"unknown key(s) {', '.join(unknown)}", f"a model table takes {', '.join(_MODEL_KEYS)}")
    dynamic = item.get("dynamic", [])
    dynamic = [dynamic] if isinstance(dynamic, str) else dynamic
    init_args = item.get("init-args", {})
    inputs = item.get("example-inputs")
    if not (isinstance(dynamic, list) and all(isinstance(d, str) for d in dynamic)):
        raise _error(path, where, f"`dynamic` must be a string or a list of strings, got {dynamic!r}",
                     'write dynamic = ["x.0=batch:1..64"]')
    if not isinstance(init_args, dict):
        raise _error(path, where, f"`init-args` must be a table, got {init_args!r}", "write init-args = { hidden = 64 }")
    if inputs is not None and not isinstance(inputs, str):
        raise _error(path, where, f"`example-inputs` must be a string, got {inputs!r}",
                     'write the shorthand ("f32[2,3]") or a function ("inputs.py:make_inputs")')
    if inputs is not None and _FILE_REFERENCE.match(inputs):
        inputs = _local_reference(root, inputs)
    try:
        model = _local_reference(root, item["model"])
    except InputSpecError as e:
        raise _error(path, where, e.message, e.hint or "") from None
    reference = str(item.get("id") or item["model"])
    return ModelEntry(
        reference=reference,
        model=model if model != reference else None,
        example_inputs=inputs,
        dynamic=tuple(dynamic),
        init_args=dict(init_args),
    )


def load_config(path: str) -> CheckConfig:
    """Read ``[tool.exporter]`` from the pyproject.toml at ``path``; errors name the key."""
    table = _read(path).get("tool", {}).get("exporter")
    if not isinstance(table, dict):
        raise InputSpecError(f"{path} has no [tool.exporter] table", hint="list the models: [tool.exporter] models = [...]")
    unknown = sorted(set(table) - set(_TOP_KEYS))
    if unknown:
        raise _error(path, "", f"unknown key(s) {', '.join(unknown)}", f"[tool.exporter] takes {', '.join(_TOP_KEYS)}")
    models = table.get("models")
    if not isinstance(models, list) or not models:
        raise _error(path, "models", "expected a non-empty list of models", 'write models = ["models/net.py:Net"]')
    root = os.path.dirname(os.path.abspath(path))
    entries = [_entry(path, root, i, item) for i, item in enumerate(models)]
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        if entry.reference in seen:
            raise _error(path, f"models[{i}]", f"{entry.reference!r} is listed twice",
                         'give each entry of the same model its own id = "..." (the name in reports and the baseline)')
        seen.add(entry.reference)
    for key in ("rtol", "atol"):
        if key in table and not isinstance(table[key], (int, float)):
            raise _error(path, key, f"expected a number, got {table[key]!r}", f"write {key} = 1e-4")
    if "jobs" in table and not (isinstance(table["jobs"], int) and table["jobs"] >= 1):
        raise _error(path, "jobs", f"expected a positive integer, got {table['jobs']!r}", "write jobs = 2")
    timeout = max_memory = None
    if "timeout" in table:
        try:
            timeout = parse_timeout(table["timeout"], "timeout =") or 0.0
        except InputSpecError:
            raise _error(path, "timeout", f"expected seconds, got {table['timeout']!r}", "write timeout = 600 (0: no limit)") from None
    if "max-memory" in table:
        try:
            max_memory = parse_size(table["max-memory"], "max-memory =")
        except InputSpecError:
            raise _error(path, "max-memory", f"expected a size, got {table['max-memory']!r}", 'write max-memory = "4G"') from None
    baseline = table.get("baseline")
    if baseline is not None and not isinstance(baseline, str):
        raise _error(path, "baseline", f"expected a path, got {baseline!r}", 'write baseline = "exporter-baseline.json"')
    return CheckConfig(
        path=path,
        models=entries,
        baseline=_here(root, baseline) if baseline else None,
        rtol=table.get("rtol"),
        atol=table.get("atol"),
        jobs=table.get("jobs"),
        timeout=timeout,
        max_memory=max_memory,
    )
