"""Benchmark results as data: stamped markdown and JSON files, and the page listing them.

The benchmark scripts hand their tables to ``write``, which puts two files in
``docs/results`` (or ``--results-dir``): ``<name>.md``, a page saying how the numbers were
made (command, commit, torch, date, machine) followed by the tables, and ``<name>.json``,
``{"stamp": ..., "data": ...}`` with the raw numbers the plots are drawn from.  Names carry
the torch release where the numbers depend on it (``release_suffix()``).

    python benchmarks/results.py index                    # rewrite docs/results/index.md
    python benchmarks/results.py index --results-dir DIR

The index lists every results file, grouped by kind and torch release, each with its stamp
line and links, and embeds the plots ``plots.py`` drew.  Every number on it comes from a
results file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "docs" / "results"
INDEX = "index.md"

# The kinds of results file the index groups, by name prefix, in the order shown.
KINDS = (
    ("export-time", "Export time"),
    ("export-memory", "Memory over many exports"),
    ("cold-start", "Cold start"),
    ("zoo", "Model zoo"),
)
OTHER_KIND = "Other results"

# The plots plots.py draws, in the order the index shows them: (file name prefix, caption).
PLOTS = (
    ("plot-export-time-depth", "Export time against model depth, static shapes"),
    ("plot-ratio", "Export time ratio, exporter / torch.export, per model and mode"),
    ("plot-zoo", "Model zoo outcome by model family"),
)


# ----------------------------------------------------------------------------- the stamp


def torch_release(version: str | None = None) -> str:
    """The major.minor release of a torch version string (``2.15.0+cpu`` -> ``2.15``);
    the installed torch's when ``version`` is None."""
    if version is None:
        import torch

        version = torch.__version__
    return ".".join(str(version).split("+")[0].split(".")[:2])


def release_suffix() -> str:
    """The part of a results name that says which torch release made it: ``torch-2.15``."""
    return f"torch-{torch_release()}"


def script_argv(script: str, argv: list[str] | None) -> list[str]:
    """A script's command line as ``sys.argv`` has it: ``script`` then its arguments (the
    process's own when ``argv`` is None, as a script's ``main(argv=None)`` reads them)."""
    return [script, *(sys.argv[1:] if argv is None else argv)]


def _relative(arg: str) -> str:
    """An absolute path inside the repository, relative to its root; anything else as is."""
    if os.path.isabs(arg):
        try:
            return str(Path(arg).resolve().relative_to(ROOT))
        except ValueError:
            return arg
    return arg


def command(argv: list[str] | None = None) -> str:
    """The command that ran, as one would type it at the repository root:
    ``python benchmarks/bench_export.py --modes static``."""
    argv = list(sys.argv if argv is None else argv)
    if not argv or argv[0] in ("", "-c"):
        return "python " + shlex.join(argv)
    return "python " + shlex.join([_relative(argv[0]), *(_relative(a) for a in argv[1:])])


def git_commit() -> str | None:
    """HEAD's short sha, with ``-dirty`` when tracked files differ from it (results files
    under docs/results do not count: the benchmarks write them); None outside a checkout."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    try:
        sha = git("rev-parse", "--short", "HEAD")
        changes = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                      f":(exclude){RESULTS_DIR.relative_to(ROOT).as_posix()}")
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{sha}-dirty" if changes else sha


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what ``platform.processor()`` says."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def stamp(argv: list[str] | None = None) -> dict[str, Any]:
    """How a measurement was made: command, commit, library versions, date (UTC) and machine.

    ``argv`` is the command line as ``sys.argv`` has it (the script first); default
    ``sys.argv``.  transformers' and diffusers' versions are given when the process imported them."""
    import torch

    import exporter

    transformers, diffusers = sys.modules.get("transformers"), sys.modules.get("diffusers")
    return {
        "command": command(argv),
        "commit": git_commit(),
        "torch": torch.__version__,
        "torch_release": torch_release(torch.__version__),
        "exporter": getattr(exporter, "__version__", None),
        "transformers": getattr(transformers, "__version__", None),
        "diffusers": getattr(diffusers, "__version__", None),
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpu_count": os.cpu_count(), "cpu_model": cpu_model(), "platform": platform.platform()},
    }


# ------------------------------------------------------------------------ results files


def machine_line(machine: dict[str, Any]) -> str:
    """The machine in a few words: ``2 CPUs, AMD EPYC, Linux-...``."""
    return f"{machine.get('cpu_count')} CPUs, {machine.get('cpu_model')}, {machine.get('platform')}"


def stamp_block(info: dict[str, Any]) -> str:
    """The "how it was made" list at the top of a results page."""
    versions = [f"exporter {info.get('exporter')}"]
    for library in ("transformers", "diffusers"):
        if info.get(library):
            versions.append(f"{library} {info[library]}")
    versions.append(f"Python {info.get('python')}")
    return "\n".join([
        f"- command: `{info.get('command')}`",
        f"- commit: `{info.get('commit')}`",
        f"- torch: {info.get('torch')} ({', '.join(versions)})",
        f"- date: {info.get('date')}",
        f"- machine: {machine_line(info.get('machine') or {})}",
    ])


def write(name: str, *, markdown: str, data: Any, argv: list[str] | None = None,
          title: str | None = None, results_dir: str | Path | None = None) -> tuple[Path, Path]:
    """Write ``<name>.md`` (title, stamp, ``markdown``) and ``<name>.json`` (``{"stamp", "data"}``)
    into ``results_dir`` (default docs/results), then rewrite its index; return both paths."""
    directory = Path(results_dir) if results_dir is not None else RESULTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    info = stamp(argv)
    md_path, json_path = directory / f"{name}.md", directory / f"{name}.json"
    json_path.write_text(json.dumps({"stamp": info, "data": data}, indent=1, default=str) + "\n")
    page = [
        f"# {title or name}", "",
        "How it was made:", "",
        stamp_block(info), "",
        f"The raw numbers: [{json_path.name}]({json_path.name}).", "",
        markdown.rstrip(), "",
    ]
    md_path.write_text("\n".join(page))
    write_index(directory)
    return md_path, json_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every benchmark script takes to place its results: ``--results-dir``, ``--no-results``."""
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR, metavar="DIR",
                        help="where the stamped markdown and JSON results go (default docs/results)")
    parser.add_argument("--no-results", action="store_true", help="only print; write no results files")


def write_from_args(args: argparse.Namespace, name: str, *, markdown: str, data: Any,
                    argv: list[str] | None, title: str | None = None) -> None:
    """``write`` as a script's ``--results-dir``/``--no-results`` ask; print where it went."""
    if args.no_results:
        return
    md_path, json_path = write(name, markdown=markdown, data=data, argv=argv, title=title,
                               results_dir=args.results_dir)
    print(f"results: {_relative(str(md_path))}, {_relative(str(json_path))}", flush=True)


def markdown_table(header: list[str], rows: list[list[str]], left: int = 1) -> str:
    """A markdown table; the first ``left`` columns left-aligned, the others right-aligned."""
    def cell(text: Any) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |",
             "|" + "|".join("---" if i < left else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# -------------------------------------------------------------------------------- index


def load(directory: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Every results file in ``directory`` (default docs/results): name -> ``{"stamp", "data"}``.
    JSON files without a stamp are not results files and are left out."""
    found = {}
    for path in sorted(Path(directory or RESULTS_DIR).glob("*.json")):
        try:
            content = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(content, dict) and isinstance(content.get("stamp"), dict):
            found[path.stem] = content
    return found


def kind_of(name: str) -> str:
    """The group a results name belongs to on the index (``KINDS``)."""
    for prefix, title in KINDS:
        if name == prefix or name.startswith(prefix + "-"):
            return title
    return OTHER_KIND


def stamp_line(info: dict[str, Any]) -> str:
    """One line saying when, with what and where a results file was made."""
    machine = info.get("machine") or {}
    return (f"{info.get('date')}, torch {info.get('torch')}, commit `{info.get('commit')}`, "
            f"{machine.get('cpu_count')} CPUs ({machine.get('cpu_model')})")


def index_markdown(directory: str | Path | None = None) -> str:
    """The index page of a results directory, made from its files alone."""
    directory = Path(directory or RESULTS_DIR)
    results = load(directory)
    out = [
        "# Results", "",
        "Every page here was written by a benchmark script in `benchmarks/`, stamped with the",
        "command, commit, torch release, date and machine that made it; the JSON beside each page",
        "holds the raw numbers. The plots are drawn from those files by `python benchmarks/plots.py`,",
        "which also rewrites this page (`python benchmarks/results.py index` rewrites it alone).",
        "How to run each script and what its columns mean: [Benchmarks](../benchmarks.md).", "",
    ]
    plots = sorted(p.name for p in directory.glob("plot-*.png"))
    if plots:
        out += ["## Plots", ""]
        shown = set()
        for prefix, caption in PLOTS:
            for plot in plots:
                if plot.startswith(prefix + "-") or plot == prefix + ".png":
                    if plot in shown:
                        continue
                    shown.add(plot)
                    detail = plot[len("plot-"):-len(".png")] if plot != prefix + ".png" else ""
                    text = f"{caption} ({detail})" if detail else caption
                    out += [f"![{text}]({plot})", "", f"*{text}.*", ""]
        for plot in plots:
            if plot not in shown:
                out += [f"![{plot}]({plot})", ""]
    if not results:
        out += ["No results yet: run the benchmark scripts (see [Benchmarks](../benchmarks.md)).", ""]
        return "\n".join(out)
    groups: dict[str, dict[str, list[str]]] = {}
    for name, content in results.items():
        release = content["stamp"].get("torch_release") or torch_release(content["stamp"].get("torch", "?"))
        groups.setdefault(kind_of(name), {}).setdefault(release, []).append(name)
    order = [title for _, title in KINDS] + [OTHER_KIND]
    for kind in sorted(groups, key=order.index):
        out += [f"## {kind}", ""]
        by_release = groups[kind]
        for release in sorted(by_release, key=release_key, reverse=True):
            out += [f"### torch {release}", ""]
            for name in sorted(by_release[release]):
                page = f"[{name}]({name}.md)" if (directory / f"{name}.md").exists() else name
                info = results[name]["stamp"]
                out.append(f"- {page} ([JSON]({name}.json)): {stamp_line(info)}")
                out.append(f"  `{info.get('command')}`")
            out.append("")
    return "\n".join(out)


def release_key(release: str) -> tuple:
    """A sort key putting torch releases in release order (``2.9`` before ``2.15``)."""
    return tuple(int(p) if p.isdigit() else -1 for p in release.split("."))


def write_index(directory: str | Path | None = None) -> Path:
    """Rewrite ``index.md`` in ``directory`` (default docs/results); return its path."""
    path = Path(directory or RESULTS_DIR) / INDEX
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(index_markdown(path.parent))
    return path


def main(argv: list[str] | None = None) -> int:
    """``index``: rewrite the results index."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("index",))
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR, metavar="DIR",
                        help="the results directory (default docs/results)")
    args = parser.parse_args(argv)
    path = write_index(args.results_dir)
    print(f"wrote {_relative(str(path))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
