"""``python -m exporter merge SHARD.json ...``: the ``check --shard K/N --json`` files of a CI
matrix joined into the one summary an unsharded run writes, from which the CLI writes one
JUnit file and one updated baseline.

Merging refuses shards that do not add up: from different runs (other model lists or shard
counts), a shard missing or given twice, a model checked twice or not at all.
"""

from __future__ import annotations

from typing import Any

from .._errors import InputSpecError
from .baseline import newer_schema, read_json
from .check import CHECK_SCHEMA, CheckResult, check_json

__all__ = ["load_shard", "merge_shards"]


def load_shard(path: str) -> dict[str, Any]:
    """A ``check --json`` file; an error names the file when it is not one."""
    data = read_json(path, "shard file", "give the --json files the shards wrote")
    schema = data.get("schema") if isinstance(data, dict) else None
    if isinstance(schema, str) and newer_schema(schema, CHECK_SCHEMA):
        raise InputSpecError(
            f"{path} was written by a newer exporter (schema {schema}); this one reads {CHECK_SCHEMA}",
            hint="merge with the exporter version the shards ran",
        )
    if not isinstance(data, dict) or data.get("schema") != CHECK_SCHEMA or not isinstance(data.get("models"), list):
        raise InputSpecError(
            f"{path} is not the --json of `exporter check` (schema {CHECK_SCHEMA})",
            hint="give the files written by `python -m exporter check --shard K/N --json FILE`",
        )
    return data


def _order(shards: dict[str, dict[str, Any]]) -> list[str]:
    """Every model of the run, in the run's order, after checking that the shards add up."""
    described = {path: data.get("shard") for path, data in shards.items()}
    if not any(described.values()):  # plain check runs: their models, in the order given
        return [m["reference"] for data in shards.values() for m in data["models"]]
    unsharded = [path for path, info in described.items() if not info]
    if unsharded:
        raise InputSpecError(f"{unsharded[0]} is not from a --shard run, the others are", hint="merge the shards of one run")
    first_path, first = next(iter(described.items()))
    for path, info in described.items():
        if info["count"] != first["count"] or info["models"] != first["models"]:
            raise InputSpecError(
                f"{path} and {first_path} come from different runs (other models or shard counts)",
                hint="merge the shards of one run: same model list, same N in --shard K/N",
            )
    indices = sorted(info["index"] for info in described.values())
    expected = list(range(1, first["count"] + 1))
    if indices != expected:
        missing = [str(i) for i in expected if i not in indices]
        twice = sorted({str(i) for i in indices if indices.count(i) > 1})
        what = "; ".join(filter(None, [missing and f"missing shard(s) {', '.join(missing)}", twice and f"shard(s) {', '.join(twice)} given twice"]))
        raise InputSpecError(f"the shards do not add up to {first['count']}: {what}", hint="give every shard's --json once")
    return list(first["models"])


def merge_shards(shards: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], list[CheckResult]]:
    """The merged ``check --json`` summary (equal to an unsharded run's, timings aside) and the
    results read back from it, for the table, JUnit and the baseline."""
    order = _order(shards)
    found: dict[str, dict[str, Any]] = {}
    for path, data in shards.items():
        for model in data["models"]:
            if model["reference"] in found:
                raise InputSpecError(f"{model['reference']} was checked by two shards ({path} is the second)",
                                     hint="merge the shards of one run")
            found[model["reference"]] = model
    missing = [reference for reference in order if reference not in found]
    extra = sorted(set(found) - set(order))
    if missing or extra:
        what = f"no result for {', '.join(missing)}" if missing else f"results for models not in the run: {', '.join(extra)}"
        raise InputSpecError(f"the shards do not cover the run: {what}", hint="give every shard's --json once")
    results = [CheckResult.from_json(found[reference]) for reference in order]
    merged = check_json(results)
    merged["models"] = [found[reference] for reference in order]  # as the shards wrote them
    return merged, results
