"""Baselines for ``exporter check``: per model, the signature, dynamic sizes and op histogram that were accepted.

A model whose signature or op histogram changes is reported as drift, with a readable diff
and, since it is the usual cause, any torch or model-library version change since the
baseline was recorded.
"""

from __future__ import annotations

import difflib
import json
import os
from typing import Any

from .._errors import InputSpecError
from .save import write_json

__all__ = [
    "BASELINE_SCHEMA",
    "baseline_entry",
    "drift",
    "durations",
    "load_baseline",
    "newer_schema",
    "read_json",
    "save_baseline",
]

BASELINE_SCHEMA = "exporter.baseline/1"
_SIGNATURE_KEYS = ("kind", "name", "target", "persistent", "shape", "dtype", "value")


def baseline_entry(report) -> dict[str, Any]:
    """What a baseline keeps of an export: signature, op histogram, versions, and the seconds it
    took (what ``check --shard`` balances by; never drift)."""
    return {
        "signature": report.signature,
        "dims": [{k: d[k] for k in ("name", "kind", "min", "max")} for d in report.dims],
        "ops": report.ops,
        "versions": report.versions,
        "seconds": round(report.timings.get("total", 0.0), 1),
    }


def durations(models: dict[str, Any]) -> dict[str, float]:
    """Recorded seconds per model of a baseline (entries from before they were recorded have none)."""
    return {name: entry["seconds"] for name, entry in models.items() if isinstance(entry.get("seconds"), (int, float))}


def load_baseline(path: str) -> dict[str, Any]:
    """The baseline's models (by reference); an absent file is an empty baseline. A file that is
    not one (broken, cut short, another tool's, a newer exporter's) is refused, never overwritten."""
    if not os.path.exists(path):
        return {}
    data = read_json(path, "--baseline", "fix the file or delete it and record it again with --update-baseline")
    schema = data.get("schema") if isinstance(data, dict) else None
    if isinstance(schema, str) and newer_schema(schema, BASELINE_SCHEMA):
        raise InputSpecError(
            f"--baseline {path} was written by a newer exporter (schema {schema}); this one reads {BASELINE_SCHEMA}",
            hint="upgrade exporter (pip install -U torch-exporter) to check against it; it is left as it is",
        )
    if schema != BASELINE_SCHEMA or not isinstance(data.get("models"), dict):
        raise InputSpecError(
            f"--baseline {path} is not an exporter baseline (schema {BASELINE_SCHEMA})",
            hint="give the file --update-baseline wrote, or a path with no file to record a new one",
        )
    return data["models"]


def read_json(path: str, what: str, hint: str) -> Any:
    """``path``'s JSON; an error names the file, where the JSON broke and whether it was cut short."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        return json.loads(raw.decode("utf-8"))
    except OSError as e:
        raise InputSpecError(f"{what} {path} cannot be read: {e.strerror or e}", hint=hint) from None
    except UnicodeDecodeError as e:
        raise InputSpecError(f"{what} {path} is not JSON: byte {e.start} is not UTF-8 text", hint=hint) from None
    except json.JSONDecodeError as e:
        cut = not e.doc[e.pos:].strip()
        why = "it ends early, as a file cut short does" if cut else e.msg
        raise InputSpecError(
            f"{what} {path} is not valid JSON: {why} (line {e.lineno}, column {e.colno})", hint=hint
        ) from None


def newer_schema(found: str, known: str) -> bool:
    """``exporter.baseline/2`` is newer than ``exporter.baseline/1``; other names are not."""
    name, _, version = found.rpartition("/")
    known_name, _, known_version = known.rpartition("/")
    return name == known_name and version.isdigit() and int(version) > int(known_version)


def save_baseline(path: str, models: dict[str, Any]) -> None:
    """Write ``models`` (reference -> entry) as the baseline, sorted for stable diffs in review."""
    write_json(path, {"schema": BASELINE_SCHEMA, "models": {k: models[k] for k in sorted(models)}})


def _signature_lines(signature: dict[str, list[dict[str, Any]]] | None) -> list[str]:
    lines = []
    for side in ("inputs", "outputs"):
        for row in (signature or {}).get(side, []):
            fields = [f"{k}={row[k]}" for k in _SIGNATURE_KEYS if row.get(k) is not None]
            lines.append(f"{side[:-1]} " + " ".join(fields))
    return lines


def _dim_line(dim: dict[str, Any]) -> str:
    low, high = dim.get("min"), dim.get("max")
    return f"{dim['name']} ({dim['kind']}) {'' if low is None else low}..{'' if high is None else high}"


def drift(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Readable differences between a baseline entry and a fresh one; empty if none."""
    lines: list[str] = []
    sig_old, sig_new = _signature_lines(old.get("signature")), _signature_lines(new.get("signature"))
    if sig_old != sig_new:
        lines.append("signature changed:")
        lines += [
            "  " + line
            for line in difflib.unified_diff(sig_old, sig_new, "baseline", "now", lineterm="", n=1)
            if not line.startswith(("---", "+++"))
        ]
    # baselines recorded before the range table have no "dims": nothing to hold against
    if "dims" in old and old["dims"] != new.get("dims"):
        lines.append("dynamic sizes changed:")
        lines += [f"  - {_dim_line(d)}" for d in old["dims"] if d not in new.get("dims", [])]
        lines += [f"  + {_dim_line(d)}" for d in new.get("dims", []) if d not in old["dims"]]
    ops_old, ops_new = old.get("ops", {}), new.get("ops", {})
    changed_ops = sorted(op for op in set(ops_old) | set(ops_new) if ops_old.get(op, 0) != ops_new.get(op, 0))
    if changed_ops:
        lines.append("op histogram changed:")
        for op in changed_ops:
            a, b = ops_old.get(op, 0), ops_new.get(op, 0)
            lines.append(f"  {op}: {a} -> {b} ({b - a:+d})")
    if lines:
        v_old, v_new = old.get("versions", {}), new.get("versions", {})
        moved = [
            f"{name} {v_old[name]} -> {v_new[name]}"
            for name in sorted(set(v_old) & set(v_new))
            if name not in ("python", "exporter") and v_old[name] != v_new[name]
        ]
        if moved:
            lines.append(
                "versions changed since the baseline (the usual cause of drift): " + ", ".join(moved)
            )
    return lines
