"""Plots of the benchmark results: PNGs drawn from the JSON results files, beside them.

Run from the repository root (matplotlib needed):

    python benchmarks/plots.py                     # docs/results
    python benchmarks/plots.py --results-dir DIR

It reads every results file (``results.load``) and writes:

* ``plot-export-time-depth.png``: export time against model depth (layers), exporter and
  torch.export, one panel per model, one line per tool and torch release, from
  ``bench_export.py``'s static rows;
* ``plot-ratio.png``: exporter's time over torch.export's per model and depth, one panel
  per mode, one bar per torch release;
* ``plot-zoo-<name>.png`` for each zoo results file: every model family's outcome, stacked
  (both ok, only exporter ok, only torch.export ok, both fail, not built).

Where several files hold the same row (a model, depth, mode and torch release), the newest
file's row is drawn.  A plot whose data is missing is skipped (and said so), and a plot
left from earlier data is removed.  Then the results index is rewritten.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
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
FAMILIES_PER_PANEL = 60
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
        ax.set_ylabel("exporter / torch.export")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0, 0].legend(frameon=False)
    figure.suptitle("Export time ratio, exporter / torch.export (lower is better)")
    return _save(figure, directory / RATIO_PLOT)


def _mode_order(mode: str) -> tuple[int, str]:
    order = ("static", "dynamic", "training", "training-dynamic", "meta", "repeated")
    return (order.index(mode) if mode in order else len(order), mode)


def zoo_outcomes(content: dict[str, Any]) -> dict[str, dict[str, int]]:
    """family (model type) -> outcome -> how many of its models had it, from a zoo results file."""
    data = content.get("data") or {}
    counts: dict[str, dict[str, int]] = {}
    for row in data.get("rows", []) if isinstance(data, dict) else []:
        family = row.get("family") or row.get("model_type") or "?"
        outcome = row.get("outcome") or row.get("verdict") or "?"
        per_family = counts.setdefault(family, {})
        per_family[outcome] = per_family.get(outcome, 0) + 1
    return counts


def plot_zoo(name: str, content: dict[str, Any], directory: Path) -> Path | None:
    """One zoo file's outcomes: a stacked horizontal bar per model family."""
    counts = zoo_outcomes(content)
    if not counts:
        return None
    families = sorted(counts)
    known = {outcome for outcome, _, _ in OUTCOMES}
    shown = [o for o in OUTCOMES if any(o[0] in c for c in counts.values())]
    if any(set(c) - known for c in counts.values()):
        shown.append(OTHER_OUTCOME)
    panels = math.ceil(len(families) / FAMILIES_PER_PANEL)
    tallest = min(len(families), FAMILIES_PER_PANEL)
    width = max(6.5, 4.5 * panels)
    figure, axes = plt.subplots(1, panels, figsize=(width, 2.2 + 0.18 * tallest), squeeze=False, layout="constrained")
    for p, ax in enumerate(axes[0]):
        chunk = families[p * FAMILIES_PER_PANEL:(p + 1) * FAMILIES_PER_PANEL]
        left = [0] * len(chunk)
        for outcome, label, colour in shown:
            if outcome == OTHER_OUTCOME[0]:
                values = [sum(n for o, n in counts[f].items() if o not in known) for f in chunk]
            else:
                values = [counts[f].get(outcome, 0) for f in chunk]
            ax.barh(range(len(chunk)), values, left=left, color=colour, label=label, height=0.8)
            left = [a + b for a, b in zip(left, values)]
        ax.set_yticks(range(len(chunk)), chunk, fontsize=7)
        ax.set_ylim(tallest - 0.5, -0.5)
        ax.set_xlabel("models")
        ax.xaxis.get_major_locator().set_params(integer=True)
    total = sum(sum(c.values()) for c in counts.values())
    figure.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center",
                  ncol=min(len(shown), int(width // 1.9)), frameon=False)
    figure.suptitle(f"{name}: {total} models, {len(families)} model families")
    return _save(figure, directory / f"plot-{name}.png")


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
