"""Plots of the benchmark results: PNGs drawn from the JSON results files, beside them.

Run from the repository root (matplotlib needed):

    python benchmarks/plots.py                     # docs/results
    python benchmarks/plots.py --results-dir DIR

It reads every results file (``results.load``) and writes:

* ``plot-export-time-depth.png``: export time against model depth (layers), exporter and
  torch.export, one panel per model, one line per tool and torch release, from
  ``bench_export.py``'s static rows;
* ``plot-ratio.png``: the time ratio (exporter / torch.export) per model and depth, one
  panel per mode, one bar per torch release;
* ``plot-zoo-<name>.png`` for each zoo results file: how many models of each kind (text,
  vision, audio, multimodal... as the zoo groups them) had each outcome (both ok, only
  exporter ok, only torch.export ok, both fail, not built), stacked, and beside the bars
  the models that are not both ok (the page lists them all, with what happened).

Where several files hold the same row (a model, depth, mode and torch release), the newest
file's row is drawn.  A plot whose data is missing is skipped (and said so), and a plot
left from earlier data is removed.  Then the results index is rewritten.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

# results.py sits beside this file, which is run as a script.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402

DEPTH_PLOT = "plot-export-time-depth.png"
RATIO_PLOT = "plot-ratio.png"
TOOLS = (("exporter_median_s", "exporter", "tab:blue"), ("oracle_median_s", "torch.export", "tab:orange"))
# The zoo's outcomes as the plot names them, in stacking order, with their colours.
OUTCOMES = (
    ("both ok", "both ok", "tab:green"),
    ("only exporter ok", "only exporter", "tab:blue"),
    ("only torch.export ok", "only torch.export", "tab:orange"),
    ("both fail", "both fail", "tab:red"),
    ("not built", "not built", "tab:gray"),
)
OTHER_OUTCOME = ("other", "other", "lightgray")
NAMES_SHOWN = 40
"""The most model names the zoo plot lists beside its bars; the page lists every one."""
MARKERS = "osD^v<>"
LINESTYLES = ("-", "--", ":", "-.")


def export_rows(found: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every exported row of the export-time files, with its torch release and date; where
    several files hold the same (mode, model, layers, release), the newest file's row."""
    newest: dict[tuple, dict[str, Any]] = {}
    for name, content in found.items():
        if results.kind_of(name) != "Export time":
            continue
        info = content["stamp"]
        release = info.get("torch_release") or results.torch_release(info.get("torch", "?"))
        data = content.get("data") or {}
        for row in data.get("rows", []) if isinstance(data, dict) else []:
            if row.get("status", "ok") != "ok" or "model" not in row or "ratio" not in row:
                continue
            key = (row.get("mode"), row["model"], row.get("layers"), release)
            entry = {**row, "release": release, "date": info.get("date") or ""}
            if key not in newest or entry["date"] >= newest[key]["date"]:
                newest[key] = entry
    return list(newest.values())


def _releases(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({r["release"] for r in rows}, key=results.release_key)


def plot_depth(rows: list[dict[str, Any]], directory: Path) -> Path | None:
    """Export time against layers for both tools, one panel per model (static rows)."""
    static = [r for r in rows if r.get("mode") == "static" and isinstance(r.get("layers"), int)]
    if not static:
        return None
    models = sorted({r["model"] for r in static})
    releases = _releases(static)
    columns = min(len(models), 3)
    lines = math.ceil(len(models) / columns)
    figure, axes = plt.subplots(lines, columns, figsize=(max(6.5, 4.2 * columns), 3.4 * lines + 0.6),
                                squeeze=False, layout="constrained")
    for ax in axes.flat[len(models):]:
        ax.set_visible(False)
    for ax, model in zip(axes.flat, models):
        depths = set()
        for i, release in enumerate(releases):
            points = sorted((r["layers"], r) for r in static if r["model"] == model and r["release"] == release)
            if not points:
                continue
            depths.update(layers for layers, _ in points)
            for key, tool, colour in TOOLS:
                ax.plot([layers for layers, _ in points], [r[key] for _, r in points], color=colour,
                        marker=MARKERS[i % len(MARKERS)], linestyle=LINESTYLES[i % len(LINESTYLES)],
                        label=f"{tool}, torch {release}")
        ax.set_title(model)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(sorted(depths), [str(d) for d in sorted(depths)])
        ax.minorticks_off()
        ax.set_xlabel("layers")
        ax.set_ylabel("export time, s (median)")
        ax.grid(True, which="major", alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncol=2 * max(1, columns // 2), frameon=False)
    figure.suptitle("Export time against model depth, static shapes")
    return _save(figure, directory / DEPTH_PLOT)


def plot_ratio(rows: list[dict[str, Any]], directory: Path) -> Path | None:
    """exporter / torch.export time per model and depth, one panel per mode, a bar per release."""
    if not rows:
        return None
    modes = sorted({r.get("mode") or "?" for r in rows}, key=_mode_order)
    releases = _releases(rows)
    groups = {mode: sorted({(r["model"], r.get("layers")) for r in rows if (r.get("mode") or "?") == mode},
                           key=lambda g: (g[0], g[1] if isinstance(g[1], int) else 0)) for mode in modes}
    widest = max(len(g) for g in groups.values())
    figure, axes = plt.subplots(len(modes), 1, figsize=(max(6.0, 0.9 * widest * max(1, len(releases)) / 2 + 2),
                                                        2.8 * len(modes)), squeeze=False, layout="constrained")
    width = 0.8 / len(releases)
    for ax, mode in zip(axes[:, 0], modes):
        mode_rows = {(r["model"], r.get("layers"), r["release"]): r["ratio"]
                     for r in rows if (r.get("mode") or "?") == mode}
        for i, release in enumerate(releases):
            xs, ys = [], []
            for x, (model, layers) in enumerate(groups[mode]):
                if (model, layers, release) in mode_rows:
                    xs.append(x - 0.4 + width * (i + 0.5))
                    ys.append(mode_rows[(model, layers, release)])
            bars = ax.bar(xs, ys, width, label=f"torch {release}", color=f"C{i}")
            ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(groups[mode])), [f"{m} x{n}" for m, n in groups[mode]], rotation=30, ha="right")
        ax.set_title(mode)
        ax.set_ylabel(results.TIME_RATIO.replace(" (", "\n("))
        ax.grid(True, axis="y", alpha=0.3)
    axes[0, 0].legend(frameon=False)
    figure.suptitle(f"Export {results.TIME_RATIO}, lower is better")
    return _save(figure, directory / RATIO_PLOT)


def _mode_order(mode: str) -> tuple[int, str]:
    order = ("static", "dynamic", "training", "training-dynamic", "meta", "repeated")
    return (order.index(mode) if mode in order else len(order), mode)


def zoo_outcomes(content: dict[str, Any]) -> dict[str, dict[str, int]]:
    """kind -> outcome -> how many of its models had it, from a zoo results file."""
    counts: dict[str, dict[str, int]] = {}
    for row in _zoo_rows(content):
        per_kind = counts.setdefault(row.get("kind") or "unknown", {})
        outcome = row.get("outcome") or row.get("verdict") or "?"
        per_kind[outcome] = per_kind.get(outcome, 0) + 1
    return counts


def _zoo_rows(content: dict[str, Any]) -> list[dict[str, Any]]:
    data = content.get("data") or {}
    return data.get("rows", []) if isinstance(data, dict) else []


def not_both_ok(content: dict[str, Any]) -> dict[str, list[str]]:
    """outcome -> the model types that had it, for every outcome but both ok, in OUTCOMES order."""
    found: dict[str, list[str]] = collections.defaultdict(list)
    for row in _zoo_rows(content):
        outcome = row.get("outcome") or row.get("verdict") or "?"
        if outcome != "both ok":
            found[outcome].append(row.get("model_type") or row.get("family") or "?")
    order = [o for o, _, _ in OUTCOMES]
    return {o: sorted(found[o]) for o in sorted(found, key=lambda o: (order.index(o) if o in order else len(order), o))}


def plot_zoo(name: str, content: dict[str, Any], directory: Path) -> Path | None:
    """One zoo file's outcomes: a stacked horizontal bar per model kind, and beside it the
    models that are not both ok."""
    counts = zoo_outcomes(content)
    if not counts:
        return None
    kinds = sorted(counts, key=lambda kind: (-sum(counts[kind].values()), kind))
    known = {outcome for outcome, _, _ in OUTCOMES}
    shown = [o for o in OUTCOMES if any(o[0] in c for c in counts.values())]
    if any(set(c) - known for c in counts.values()):
        shown.append(OTHER_OUTCOME)
    figure, (bars, names) = plt.subplots(1, 2, figsize=(12, 1.9 + 0.5 * len(kinds)), width_ratios=(3, 2),
                                         layout="constrained")
    left = [0] * len(kinds)
    widest = max(sum(c.values()) for c in counts.values())
    for outcome, label, colour in shown:
        if outcome == OTHER_OUTCOME[0]:
            values = [sum(n for o, n in counts[k].items() if o not in known) for k in kinds]
        else:
            values = [counts[k].get(outcome, 0) for k in kinds]
        drawn = bars.barh(range(len(kinds)), values, left=left, color=colour, label=label, height=0.7)
        bars.bar_label(drawn, labels=[str(v) if v >= 0.025 * widest else "" for v in values], label_type="center",
                       fontsize=8, color="white" if colour in ("tab:green", "tab:blue", "tab:red") else "black")
        left = [a + b for a, b in zip(left, values)]
    bars.set_yticks(range(len(kinds)), [f"{k} ({sum(counts[k].values())})" for k in kinds])
    bars.invert_yaxis()
    bars.set_xlabel("models")
    bars.xaxis.get_major_locator().set_params(integer=True)
    bars.spines[["top", "right"]].set_visible(False)
    bars.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1 - 0.2 / len(kinds)), ncol=len(shown), frameon=False)
    names.axis("off")
    reasons = ((content.get("data") or {}).get("summary") or {}).get("not_built_reasons") or {}
    names.text(0, 1, _names_text(not_both_ok(content), reasons), va="top", ha="left", fontsize=8,
               family="monospace", transform=names.transAxes, in_layout=False)
    total = sum(sum(c.values()) for c in counts.values())
    family = ((content.get("data") or {}).get("settings") or {}).get("family") or "model"
    release = content["stamp"].get("torch_release") or results.torch_release(content["stamp"].get("torch", "?"))
    figure.suptitle(f"The {family} zoo on torch {release} ({name}): {total} models by kind and outcome")
    return _save(figure, directory / f"plot-{name}.png")


def _names_text(found: dict[str, list[str]], reasons: dict[str, int], width: int = 58) -> str:
    """The models not both ok by outcome, wrapped; those not built by reason when they are
    many (the page names each one)."""
    if not found:
        return "every model is both ok"
    lines, left = ["not both ok (the page says what happened to each):"], NAMES_SHOWN
    for outcome, models in found.items():
        lines.append("")
        if outcome == "not built" and len(models) > NAMES_SHOWN // 4 and reasons:
            lines += textwrap.wrap(f"not built ({len(models)}), the zoo could not make the model or its inputs:",
                                   width)
            lines += [f"  {count:4}  {reason}"[:width] for reason, count in list(reasons.items())[:8]]
            continue
        shown = models[:max(left, 1)]
        left -= len(shown)
        rest = f" and {len(models) - len(shown)} more" if len(models) > len(shown) else ""
        lines += textwrap.wrap(f"{outcome} ({len(models)}): {', '.join(shown)}{rest}", width, subsequent_indent="  ")
    return "\n".join(lines)


def _save(figure: Any, path: Path) -> Path:
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def make_plots(directory: Path) -> list[Path]:
    """Draw every plot the results in ``directory`` allow; remove plots left from earlier
    data; say what was drawn and skipped; return the PNGs written."""
    found = results.load(directory)
    rows = export_rows(found)
    written: list[Path] = []
    for what, draw in (("export time against depth (no static export-time rows)", plot_depth),
                       ("export time ratio (no export-time rows)", plot_ratio)):
        path = draw(rows, directory)
        if path is None:
            print(f"skipped: {what}")
        else:
            written.append(path)
    zoos = [name for name in found if results.kind_of(name) == "Model zoo"]
    if not zoos:
        print("skipped: zoo outcomes (no zoo results)")
    for name in zoos:
        path = plot_zoo(name, found[name], directory)
        if path is None:
            print(f"skipped: zoo outcomes of {name} (no rows)")
        else:
            written.append(path)
    for stale in sorted(set(directory.glob("plot-*.png")) - set(written)):
        stale.unlink()
        print(f"removed {stale.name}: its data is gone")
    for path in written:
        print(f"wrote {path.name}")
    return written


def main(argv: list[str] | None = None) -> int:
    """Draw the plots, then rewrite the results index."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results-dir", type=Path, default=results.RESULTS_DIR, metavar="DIR",
                        help="the results directory to read and draw into (default docs/results)")
    args = parser.parse_args(argv)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    make_plots(args.results_dir)
    index = results.write_index(args.results_dir)
    print(f"wrote {index.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
