"""Benchmark results as data: stamped markdown and JSON files, and the page listing them.

The benchmark scripts hand their tables to ``write``, which puts two files in
``docs/results`` (or ``--results-dir``): ``<name>.md``, a page saying how the numbers were
made (command, commit, torch, date, machine) followed by the tables, and ``<name>.json``,
``{"stamp": ..., "data": ...}`` with the raw numbers the plots are drawn from.  Names carry
the torch release where the numbers depend on it (``release_suffix()``).  A results file
names the commit that made it, so a tree with uncommitted changes to tracked files is
refused unless the script is given ``--allow-dirty`` (the commit is then stamped
``<sha>-dirty``, with the files that differ).

    python benchmarks/results.py index                    # rewrite docs/results/index.md
    python benchmarks/results.py index --results-dir DIR
    python benchmarks/results.py render zoo-torch-2.13     # rewrite a page from its JSON

The index opens with the headline figures (export time per torch release, the zoos'
outcomes, parity with torch.export), each linking to its page with the command that made
it, embeds the plots ``plots.py`` drew, then lists every results file, grouped by kind and
torch release.  Every number on it comes from a results file.  ``render`` rewrites pages
with the script that made them (``RENDERERS``), from the JSON alone, keeping their stamp:
the way to bring a page up to date with how its script presents the same measurements.
"""

from __future__ import annotations

import argparse
import datetime
import html
import importlib
import json
import math
import os
import platform
import shlex
import statistics
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
    ("parity", "Parity with torch.export"),
    ("branches", "Branch capture"),
    ("fuzz-flow", "Control-flow fuzzer"),
)
OTHER_KIND = "Other results"

TIME_RATIO = "time ratio (exporter / torch.export)"
"""Every table's heading for exporter's time over torch.export's: lower is better, 0.32
means exporter takes 32% of torch.export's time (defined on docs/benchmarks.md)."""
TIME_RATIO_DOC = "../benchmarks.md#the-time-ratio"

# The module that renders each kind's page from its JSON, by name prefix: its
# ``render(data) -> (markdown, data)`` returns the page body and the data to keep.
RENDERERS = {
    "export-time-first": "bench_first",
    "export-time": "bench_export",
    "zoo": "zoo",
    "parity": "tests.parity.run",
    "branches": "branches",
    "fuzz-flow": "tests.fuzz.flow.run",
}

# The plots plots.py draws, in the order the index shows them: (file name prefix, caption).
PLOTS = (
    ("plot-export-time-depth", "Export time against model depth, static shapes"),
    ("plot-ratio", f"Export {TIME_RATIO} per model and mode"),
    ("plot-zoo", "Model zoo outcomes by model kind"),
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


OUTPUT_OPTIONS = ("--results-dir", "--logs", "--json", "--markdown")
"""Options that say where a script writes, not what it measures: left out of the command a
stamp records, which is the one to type at the repository root to make the numbers again."""


def _without_outputs(args: list[str]) -> list[str]:
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in OUTPUT_OPTIONS:
            skip = True
        elif not arg.startswith(tuple(f"{option}=" for option in OUTPUT_OPTIONS)):
            kept.append(arg)
    return kept


def command(argv: list[str] | None = None) -> str:
    """The command that ran, as one would type it at the repository root:
    ``python benchmarks/bench_export.py --modes static`` (``OUTPUT_OPTIONS`` left out)."""
    argv = list(sys.argv if argv is None else argv)
    if not argv or argv[0] in ("", "-c"):
        return "python " + shlex.join(argv)
    return "python " + shlex.join([_relative(argv[0]), *(_relative(a) for a in _without_outputs(argv[1:]))])


class DirtyTree(RuntimeError):
    """The checkout has uncommitted changes to tracked files: numbers made from it could not
    be made again from the commit a stamp would name."""


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def changed_files(root: Path | None = None) -> list[str]:
    """The tracked files that differ from HEAD, but for the results directory (the benchmarks
    write there); empty outside a checkout."""
    root = root or ROOT
    try:
        status = _git(root, "status", "--porcelain", "--untracked-files=no", "--", ".",
                      f":(exclude){RESULTS_DIR.relative_to(ROOT).as_posix()}")
    except (OSError, subprocess.CalledProcessError):
        return []
    return [line[3:] for line in status.splitlines() if line.strip()]  # "XY path"


def git_commit(root: Path | None = None) -> str | None:
    """HEAD's short sha, with ``-dirty`` when tracked files differ from it (``changed_files``);
    None outside a checkout."""
    root = root or ROOT
    try:
        sha = _git(root, "rev-parse", "--short", "HEAD").strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{sha}-dirty" if changed_files(root) else sha


def check_clean(allow_dirty: bool = False, root: Path | None = None) -> None:
    """Raise ``DirtyTree`` naming the changed files, unless the tree is clean or ``allow_dirty``."""
    changed = changed_files(root)
    if changed and not allow_dirty:
        shown = ", ".join(changed[:12]) + (f" and {len(changed) - 12} more" if len(changed) > 12 else "")
        commit = git_commit(root) or "HEAD"
        raise DirtyTree(
            f"{len(changed)} tracked file(s) differ from commit {commit.removesuffix('-dirty')}: {shown}. "
            f"A results file names the commit that made it: commit the changes first, or pass "
            f"--allow-dirty to stamp it {commit}."
        )


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


def stamp(argv: list[str] | None = None, *, allow_dirty: bool = False) -> dict[str, Any]:
    """How a measurement was made: command, commit, library versions, date (UTC) and machine.

    ``argv`` is the command line as ``sys.argv`` has it (the script first); default
    ``sys.argv``.  transformers' and diffusers' versions are given when the process imported
    them.  A tree with uncommitted changes raises ``DirtyTree`` unless ``allow_dirty``; then
    the commit ends in ``-dirty`` and ``changed_files`` lists what differs."""
    import torch

    import exporter

    check_clean(allow_dirty)
    transformers, diffusers = sys.modules.get("transformers"), sys.modules.get("diffusers")
    changed = changed_files()
    return {
        "command": command(argv),
        "commit": git_commit(),
        **({"changed_files": changed} if changed else {}),
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
    changed = info.get("changed_files")
    more = f" and {len(changed) - 12} more" if changed and len(changed) > 12 else ""
    uncommitted = f" (uncommitted changes to {', '.join(f'`{f}`' for f in changed[:12])}{more})" if changed else ""
    return "\n".join([
        f"- command: `{info.get('command')}`",
        f"- commit: `{info.get('commit')}`{uncommitted}",
        f"- torch: {info.get('torch')} ({', '.join(versions)})",
        f"- date: {info.get('date')}",
        f"- machine: {machine_line(info.get('machine') or {})}",
    ])


def write(name: str, *, markdown: str, data: Any, argv: list[str] | None = None,
          title: str | None = None, results_dir: str | Path | None = None,
          allow_dirty: bool = False) -> tuple[Path, Path]:
    """Write ``<name>.md`` (title, stamp, ``markdown``) and ``<name>.json`` (``{"stamp", "data"}``)
    into ``results_dir`` (default docs/results), then rewrite its index; return both paths.
    Raises ``DirtyTree`` on a tree with uncommitted changes unless ``allow_dirty``."""
    info = stamp(argv, allow_dirty=allow_dirty)
    return _write_files(Path(results_dir) if results_dir is not None else RESULTS_DIR, name, info,
                        markdown=markdown, data=data, title=title)


def _write_files(directory: Path, name: str, info: dict[str, Any], *, markdown: str, data: Any,
                 title: str | None) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
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


def renderer(name: str) -> Any:
    """The module that renders results ``name``'s page (``RENDERERS``), imported."""
    for prefix, module in RENDERERS.items():
        if name == prefix or name.startswith(prefix + "-"):
            for path in (str(Path(__file__).resolve().parent), str(ROOT)):
                if path not in sys.path:
                    sys.path.insert(0, path)
            return importlib.import_module(module)
    raise ValueError(f"no script renders {name!r}: the kinds rendered are {', '.join(RENDERERS)}")


def render(name: str, results_dir: str | Path | None = None) -> Path:
    """Rewrite results ``name``'s page from its JSON with the script that made it, keeping the
    stamp and the title; the JSON keeps its stamp and takes what the script derives from the
    raw numbers (the raw numbers themselves are left as they are).  Return the page's path."""
    directory = Path(results_dir) if results_dir is not None else RESULTS_DIR
    content = json.loads((directory / f"{name}.json").read_text())
    markdown, data = renderer(name).render(content["data"])
    page = directory / f"{name}.md"
    first = page.read_text().splitlines()[:1] if page.exists() else []
    title = first[0].removeprefix("# ") if first and first[0].startswith("# ") else None
    md_path, _ = _write_files(directory, name, content["stamp"], markdown=markdown, data=data, title=title)
    return md_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every benchmark script takes to place its results: ``--results-dir``,
    ``--no-results``, ``--allow-dirty``."""
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR, metavar="DIR",
                        help="where the stamped markdown and JSON results go (default docs/results)")
    parser.add_argument("--no-results", action="store_true", help="only print; write no results files")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="write results from a tree with uncommitted changes (the stamp says -dirty)")


def require_clean(args: argparse.Namespace) -> None:
    """Stop before a run whose results ``write_from_args`` would refuse (see ``check_clean``)."""
    if not args.no_results:
        try:
            check_clean(args.allow_dirty)
        except DirtyTree as e:
            sys.exit(f"error: {e}")


def write_from_args(args: argparse.Namespace, name: str, *, markdown: str, data: Any,
                    argv: list[str] | None, title: str | None = None) -> None:
    """``write`` as a script's ``--results-dir``/``--no-results``/``--allow-dirty`` ask; print
    where it went.  A refused dirty tree stops the script with the reason."""
    if args.no_results:
        return
    try:
        md_path, json_path = write(name, markdown=markdown, data=data, argv=argv, title=title,
                                   results_dir=args.results_dir, allow_dirty=getattr(args, "allow_dirty", False))
    except DirtyTree as e:
        sys.exit(f"error: {e}")
    print(f"results: {_relative(str(md_path))}, {_relative(str(json_path))}", flush=True)


def markdown_table(header: list[str], rows: list[list[str]], left: int = 1, last_left: bool = False) -> str:
    """A markdown table; the first ``left`` columns left-aligned (and the last with
    ``last_left``), the others right-aligned."""
    def cell(text: Any) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    aligns = ["---" if i < left or (last_left and i == len(header) - 1) else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "|".join(aligns) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def literal(text: Any) -> str:
    """Free text (an error message, a reason) as a markdown page shows it, character for
    character, on one line: nothing in it starts a link, emphasis, code or a tag."""
    text = str(text).replace("\\", "\\\\").replace("\n", " ")
    for char in "`*_[]":
        text = text.replace(char, "\\" + char)
    return text.replace("<", "&lt;")


def html_table(header: list[str], rows: list[list[str]], left: int = 1) -> str:
    """A table as HTML, for inside ``<details>``, where a page's markdown is not read (cells
    are text: escaped); the first ``left`` columns left-aligned, the others right-aligned."""
    def cells(tag: str, values: list[str]) -> str:
        right = ' align="right"'
        return "".join(f"<{tag}{'' if i < left else right}>{html.escape(str(v))}</{tag}>" for i, v in enumerate(values))

    lines = ["<table>", f"<thead><tr>{cells('th', header)}</tr></thead>", "<tbody>"]
    lines += [f"<tr>{cells('td', row)}</tr>" for row in rows]
    return "\n".join([*lines, "</tbody>", "</table>"])


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
    """The index page of a results directory, made from its files alone: the headline
    figures, the plots, then every results file."""
    directory = Path(directory or RESULTS_DIR)
    results = load(directory)
    out = [
        "# Results", "",
        "Every page here was written by a script, stamped with the command, commit, torch release,",
        "date and machine that made it; the JSON beside each page holds the raw numbers. The plots",
        "are drawn from those files by `python benchmarks/plots.py`, which also rewrites this page",
        "(`python benchmarks/results.py index` rewrites it alone). How to run each script and what",
        "its columns mean: [Benchmarks](../benchmarks.md).", "",
    ]
    if not results:
        out += ["No results yet: run the benchmark scripts (see [Benchmarks](../benchmarks.md)).", ""]
    else:
        out += headline(results, directory)
    out += plots_markdown(directory, results)
    if results:
        out += files_markdown(results, directory)
    return "\n".join(out)


def _page(name: str, directory: Path, anchor: str = "") -> str:
    """A link target for results ``name``: its page where there is one, else its JSON."""
    return f"{name}.md{anchor}" if (directory / f"{name}.md").exists() else f"{name}.json"


def _headline_files(results: dict[str, dict[str, Any]], kind: str, partial: tuple[str, ...]) -> list[str]:
    """The files of ``kind`` that measure the whole set (none of the ``partial`` words in
    their name), oldest torch release first."""
    names = [n for n, c in results.items() if kind_of(n) == kind and not set(n.split("-")) & set(partial)]
    return sorted(names, key=lambda n: (release_key(_release(results[n])), n))


def _release(content: dict[str, Any]) -> str:
    info = content["stamp"]
    return info.get("torch_release") or torch_release(info.get("torch", "?"))


def _ratio(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) and math.isfinite(value) else "-"


def export_headline(results: dict[str, dict[str, Any]], directory: Path) -> list[str]:
    """Per torch release, the static and dynamic time ratio's median and max over the models,
    from the newest export-time file holding those rows (quick and subset runs left out)."""
    newest: dict[tuple[str, str], tuple[str, list[float]]] = {}
    for name in _headline_files(results, "Export time", ("quick", "subset", "memo")):
        content = results[name]
        data = content.get("data") or {}
        for mode in ("static", "dynamic"):
            ratios = [r["ratio"] for r in data.get("rows", []) if r.get("mode") == mode
                      and r.get("status", "ok") == "ok" and isinstance(r.get("ratio"), (int, float))]
            key = (_release(content), mode)
            if ratios and (key not in newest or content["stamp"].get("date", "") >= results[newest[key][0]]["stamp"].get("date", "")):
                newest[key] = (name, ratios)
    releases = sorted({release for release, _ in newest}, key=release_key)
    if not releases:
        return []
    rows = []
    for release in releases:
        cells, commands = [f"torch {release}"], []
        for mode in ("static", "dynamic"):
            if (release, mode) not in newest:
                cells += ["-", "-"]
                continue
            name, ratios = newest[(release, mode)]
            cells += [f"[{statistics.median(ratios):.2f}]({_page(name, directory, '#' + mode)})", f"{max(ratios):.2f}"]
            command = results[name]["stamp"].get("command")
            if command not in commands:
                commands.append(command)
        rows.append(cells + [", ".join(f"`{c}`" for c in commands)])
    table = markdown_table([TIME_RATIO, "static: median", "max", "dynamic: median", "max", "made by"], rows,
                           last_left=True)
    return [f"Export time: the [time ratio]({TIME_RATIO_DOC}) over the models (lower is better), each torch",
            "release against its own torch.export:", "", table, ""]


ZOO_OUTCOMES = (("both ok", "both ok"), ("only exporter ok", "only exporter"),
                ("only torch.export ok", "only torch.export"), ("both fail", "both fail"), ("not built", "not built"))


def _zoo_median(data: dict[str, Any]) -> float | None:
    """The time ratio's median where both ok: from the summary, or from the rows of a run
    written before summaries gave it."""
    median = (data.get("summary") or {}).get("time_ratio_median")
    if median is None:
        ratios = [row["ratio"] for row in data.get("rows") or [] if row.get("ratio")]
        median = statistics.median(ratios) if ratios else None
    return median


def zoo_headline(results: dict[str, dict[str, Any]], directory: Path) -> list[str]:
    """Each whole zoo run's outcome counts and its time ratio (fast and subset runs left out)."""
    rows = []
    names = _headline_files(results, "Model zoo", ("fast", "subset", "builds"))
    family = lambda name: ((results[name].get("data") or {}).get("settings") or {}).get("family", "transformers")
    for name in sorted(names, key=lambda name: (release_key(_release(results[name])), family(name) != "transformers")):
        data = results[name].get("data") or {}
        summary = data.get("summary") or {}
        counts = summary.get("counts") or {}
        settings = data.get("settings") or {}
        variant = [word for word, on in (("dynamic shapes", settings.get("dynamic")),
                                         ("training IR", (settings.get("exporter_kwargs") or {}).get("ir") == "training"))
                   if on]
        label = f"{family(name)}{' (' + ', '.join(variant) + ')' if variant else ''}, torch {_release(results[name])}"
        rows.append([f"[{label}]({_page(name, directory)})", str(summary.get("rows", "-")),
                     *[str(counts.get(outcome, 0)) for outcome, _ in ZOO_OUTCOMES],
                     _ratio(summary.get("time_ratio_geomean")), _ratio(_zoo_median(data)),
                     f"`{results[name]['stamp'].get('command')}`"])
    if not rows:
        return []
    header = ["zoo", "models", *[title for _, title in ZOO_OUTCOMES], f"{TIME_RATIO}, geometric mean", "median", "made by"]
    lines = ["Model zoos: every model exported by both tools, each program run against eager; the time",
             "ratio is over the models both export:", "", markdown_table(header, rows, last_left=True), ""]
    for name in (n for n in results if kind_of(n) == "Model zoo" and "builds" in n.split("-")):
        summary = (results[name].get("data") or {}).get("summary") or {}
        built = (summary.get("counts") or {}).get("built", 0)
        lines += [f"What the zoo builds, torch {_release(results[name])}: [{built} of {summary.get('rows', '-')} "
                  f"model types]({_page(name, directory)}) built and run eagerly "
                  f"(`{results[name]['stamp'].get('command')}`).", ""]
    return lines


PARITY_COLUMNS = (("cases", "cases"), ("oracle_ok", "torch.export exports"), ("match", "exporter matches"),
                  ("known_differences", "known differences"), ("other_differences", "other differences"),
                  ("ours_only", "only exporter exports"), ("both_fail", "both refuse"))


def parity_headline(results: dict[str, dict[str, Any]], directory: Path) -> list[str]:
    """Each whole parity run's counts per IR (runs of some cases only left out)."""
    rows = []
    for name in _headline_files(results, "Parity with torch.export", ("subset",)):
        data = results[name].get("data") or {}
        for ir, counts in (data.get("summary") or {}).items():
            rows.append([f"[{ir} IR, torch {_release(results[name])}]({_page(name, directory, '#' + ir + '-ir')})",
                         *[str(counts.get(key, "-")) for key, _ in PARITY_COLUMNS],
                         f"`{results[name]['stamp'].get('command')}`"])
    if not rows:
        return []
    header = ["parity", *[title for _, title in PARITY_COLUMNS], "made by"]
    return ["Parity with torch.export on cases ported from its own tests: where torch.export exports,",
            "exporter must too, with the same signature, ranges and values and a program that matches eager:", "",
            markdown_table(header, rows, last_left=True), ""]


def first_export_headline(results: dict[str, dict[str, Any]], directory: Path) -> list[str]:
    """Per torch release, the newest whole first-export run (``bench_first.py``): the first
    export's time ratio and the second's, median and max over the models."""
    newest: dict[str, str] = {}
    for name in results:
        if name.startswith("export-time-first-") and "subset" not in name.split("-"):
            release = _release(results[name])
            if release not in newest or results[name]["stamp"].get("date", "") >= \
                    results[newest[release]]["stamp"].get("date", ""):
                newest[release] = name
    rows = []
    for release in sorted(newest, key=release_key):
        name = newest[release]
        data_rows = (results[name].get("data") or {}).get("rows") or []
        first = [r["first_ratio"] for r in data_rows if isinstance(r.get("first_ratio"), (int, float))]
        warm = [r["warm_ratio"] for r in data_rows if isinstance(r.get("warm_ratio"), (int, float))]
        if first and warm:
            rows.append([f"torch {release}", f"[{statistics.median(first):.2f}]({_page(name, directory)})",
                         f"{max(first):.2f}", f"{statistics.median(warm):.2f}", f"{max(warm):.2f}",
                         f"`{results[name]['stamp'].get('command')}`"])
    if not rows:
        return []
    table = markdown_table([TIME_RATIO, "first export: median", "max", "second export: median", "max", "made by"],
                           rows, last_left=True)
    return ["The first export in a fresh process, the one a user meets, and the second in the same",
            "process, each side by side with torch.export's:", "", table, ""]


def headline(results: dict[str, dict[str, Any]], directory: Path) -> list[str]:
    """The headline figures, each linking to its page, with the command that made it."""
    sections = [part(results, directory)
                for part in (export_headline, first_export_headline, zoo_headline, parity_headline)]
    body = [line for section in sections for line in section]
    return ["## Headline", "", *body] if body else []


def plots_markdown(directory: Path, results: dict[str, dict[str, Any]]) -> list[str]:
    """The plots in ``directory``, in ``PLOTS`` order, each with its caption."""
    plots = sorted(p.name for p in directory.glob("plot-*.png"))
    if not plots:
        return []
    out = ["## Plots", ""]
    shown = set()
    for prefix, caption in PLOTS:
        for plot in plots:
            if plot in shown or not (plot.startswith(prefix + "-") or plot == prefix + ".png"):
                continue
            shown.add(plot)
            detail = plot[len("plot-"):-len(".png")] if plot != prefix + ".png" else ""
            text = f"{caption} ({detail})" if detail else caption
            out += [f"![{text}]({plot})", "", f"*{text}.*"]
            if prefix == "plot-zoo" and detail in results:
                out[-1] += f" The models not both ok: [{detail}]({_page(detail, directory, '#not-both-ok')})."
            out.append("")
    out += [line for plot in plots if plot not in shown for line in (f"![{plot}]({plot})", "")]
    return out


def files_markdown(results: dict[str, dict[str, Any]], directory: Path) -> list[str]:
    """Every results file, grouped by kind and torch release (newest first), with its stamp."""
    out = []
    groups: dict[str, dict[str, list[str]]] = {}
    for name, content in results.items():
        groups.setdefault(kind_of(name), {}).setdefault(_release(content), []).append(name)
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
    return out


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
    """``index``: rewrite the results index; ``render NAME...``: rewrite pages from their JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("index", "render"))
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="render: the results to rewrite (zoo-torch-2.13, or its .json or .md)")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR, metavar="DIR",
                        help="the results directory (default docs/results)")
    args = parser.parse_args(argv)
    if args.command == "render":
        if not args.names:
            parser.error("render needs the names of the results to rewrite")
        for name in args.names:
            path = render(Path(name).name.removesuffix(".json").removesuffix(".md"), args.results_dir)
            print(f"wrote {_relative(str(path))}")
    elif args.names:
        parser.error("index takes no names")
    path = write_index(args.results_dir)
    print(f"wrote {_relative(str(path))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
