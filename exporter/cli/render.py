"""Render export and check reports for people: the only module that imports rich."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from .._assumptions import DraftReport
from .._branch_report import BranchReport
from .._errors import Category, ErrorInfo
from ..submodules import ModuleStatus, SubmoduleNode, SubmoduleReport
from .analysis import human_bytes as _bytes, input_names, module_tree, state_groups
from .artifacts import artifacts_table, lowering_lines

__all__ = [
    "progress",
    "render_check",
    "render_branches",
    "render_draft",
    "render_error",
    "render_export",
    "render_quiet",
    "render_submodules",
    "shown_location",
    "shown_path",
    "shown_paths_in",
]


@contextlib.contextmanager
def progress(console: Console) -> Iterator[Callable[[str], None]]:
    """A ``stage(text)`` callback: a live status line on a terminal, silent otherwise."""
    if not console.is_terminal:
        yield lambda text: None
        return
    with console.status("starting") as status:
        yield lambda text: status.update(f"{text}...")


def _size(path: str) -> str:
    return _bytes(float(os.path.getsize(path)))


def shown_path(path: str) -> str:
    """``path`` as the terminal shows it: relative to the current directory when it lies under
    it, as the user would have typed it; absolute elsewhere. Reports keep the absolute path."""
    if not os.path.isabs(path):
        return path
    here = os.getcwd()
    try:
        under = os.path.commonpath([here, path]) == here
    except ValueError:  # another drive
        return path
    return os.path.relpath(path, here) if under else path


def shown_location(location: str) -> str:
    """A source location, ``file.py:LINE``, with its file shown as ``shown_path`` shows it."""
    file, colon, line = location.rpartition(":")
    return shown_path(file) + colon + line if colon and line.isdigit() else shown_path(location)


def shown_paths_in(text: str) -> str:
    """``text`` (a message, a detail) with the paths in it that lie under the current directory
    shown relative to it, as ``shown_path`` shows a path."""
    here = os.getcwd()
    if os.path.dirname(here) == here:  # the root: every absolute path lies under it
        return text
    return re.sub(r"(?<![\w.~/-])" + re.escape(os.path.join(here, "")), "", text)


def _artifacts_table(report) -> Group:
    """One row per artifact (``artifacts_table``), then the ExecuTorch methods' lowering."""
    columns, rows = artifacts_table(report.artifacts, relative=False)
    file = columns.index("file")
    for row in rows:
        row[file] = shown_path(row[file])
    table = Table(box=None, pad_edge=False)
    for column in columns:
        table.add_column(column, justify="left" if column in ("artifact", "file", "check") else "right")
    for artifact, row in zip(report.artifacts, rows):
        style = "dim" if artifact.verified is None else "green" if artifact.verified else "red"
        table.add_row(*(escape(cell) for cell in row[:-1]), Text(row[-1], style=style))
    lines = [Text(line, style="dim") for line in lowering_lines(report.artifacts)]
    written = "written" if report.ok else "none written: the export failed"
    return _titled(f"artifacts ({written})", Group(table, *lines) if lines else table)


def _shape(row: dict) -> str:
    if row.get("shape") is not None:
        return "[" + ", ".join(str(s) for s in row["shape"]) + "]"
    if "value" in row:
        return repr(row["value"])
    return ""


def _titled(title: str, body) -> Group:
    # Titles printed above rather than as table titles, which wrap to the table's width.
    return Group(Text(title, style="bold"), body)


def _inputs_table(report) -> Group:
    table = Table(box=None, pad_edge=False)
    for column in ("input", "kind", "dtype", "shape / value"):
        table.add_column(column, overflow="fold")
    for name, leaf in zip(input_names(report.signature, report.inputs, report.input_paths), report.inputs):
        if leaf["kind"] == "tensor":
            table.add_row(escape(name), "tensor", leaf["dtype"], escape(_shape(leaf)))
        else:
            table.add_row(escape(name), "constant", type(leaf["value"]).__name__, escape(repr(leaf["value"])))
    return _titled(f"inputs from {report.input_source}", table)


_IO_KINDS = ("USER_INPUT", "USER_OUTPUT")
_OUTPUT_KINDS = {"BUFFER_MUTATION": "updates buffer", "USER_INPUT_MUTATION": "updates input"}
_EXTRA_ROWS = 8
"""Rows of non-user outputs (buffer mutations, ...) shown before ``--signature full`` is needed."""


def _fold_table(*columns: str) -> Table:
    # Long paths fold onto a second line rather than being cut to "model.layer…".
    table = Table(box=None, pad_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _io_row(row: dict) -> list[str]:
    label = row.get("path") or row["name"] or "—"
    return [escape(label), row.get("dtype") or "", escape(_shape(row))]


def _bounds(low, high) -> str:
    return f"{'' if low is None else low}..{'' if high is None else high}"


def _state_summary(report) -> str:
    rows = [r for r in report.signature["inputs"] if r["kind"] not in _IO_KINDS]
    kinds = {}
    for r in rows:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    counted = ", ".join(_count(n, kind.lower().replace("_", " ")) for kind, n in kinds.items())
    elements = sum(r.get("numel") or 0 for r in rows)
    size = sum(r.get("bytes") or 0 for r in rows)
    return f"{counted} ({_count(elements, 'element')}, {_bytes(size)})" if rows else "no parameters or buffers"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def _signature_summary(report) -> Group:
    """User inputs and outputs in full, by their pytree paths and in the user's Dim names; the
    state grouped per module subtree."""
    signature = report.signature
    inputs = [r for r in signature["inputs"] if r["kind"] == "USER_INPUT"]
    outputs = [r for r in signature["outputs"] if r["kind"] == "USER_OUTPUT"]
    others = [r for r in signature["outputs"] if r["kind"] != "USER_OUTPUT"]
    io = _fold_table("", "path", "dtype", "shape / value")
    for side, rows in (("input", inputs), ("output", outputs)):
        for row in rows:
            io.add_row(side, *_io_row(row))
    for row in others[:_EXTRA_ROWS]:
        what = _OUTPUT_KINDS.get(row["kind"], row["kind"].lower().replace("_", " "))
        io.add_row("output", escape(f"{what} {row.get('target') or row['name']}"), row.get("dtype") or "", escape(_shape(row)))
    if len(others) > _EXTRA_ROWS:
        io.add_row("output", f"... {len(others) - _EXTRA_ROWS} more (--signature full)", "", "")
    parts = [Text(f"signature: {_count(len(inputs), 'input')}, {_count(len(outputs), 'output')}", style="bold"), io]
    groups = state_groups(signature)
    if groups:
        table = Table(box=None, pad_edge=False)
        table.add_column("module", overflow="fold")
        table.add_column("tensors", justify="right")
        table.add_column("elements", justify="right")
        table.add_column("size", justify="right")
        table.add_column("dtype", overflow="fold")
        for g in groups:
            kinds = ", ".join(_count(n, k.replace("_", " ")) for k, n in g["kinds"].items() if k != "parameter")
            name = g["group"] + (f" ({kinds})" if kinds else "")
            table.add_row(escape(name), str(g["tensors"]), f"{g['elements']:,}", _bytes(g["bytes"]), ", ".join(g["dtypes"]))
        parts += [
            Text(f"{_state_summary(report)} by module", style="bold"),
            table,
            Text("--signature full lists every one", style="dim"),
        ]
    return Group(*parts)


def _module_prefix(target: str) -> str:
    """The module a state tensor is listed under: its path up to the first numbered layer
    (``model.layers.0``), else its own module."""
    parts = target.split(".")
    for i, part in enumerate(parts[:-1]):
        if part.isdigit():
            return ".".join(parts[: i + 1])
    return ".".join(parts[:-1])


def _signature_full(report) -> Group:
    """Every row of the signature. State tensors are listed under their module (or layer),
    by the rest of their target, so the part that tells them apart is never cut; user inputs
    and outputs by their paths (with the graph's name where it differs: ``logits = linear_14``).
    Anything still too long folds."""
    table = _fold_table("kind", "target / path", "shape", "dtype")
    for column in (table.columns[0], table.columns[2], table.columns[3]):
        column.no_wrap = True
    under = None
    for side in ("inputs", "outputs"):
        for row in report.signature[side]:
            name = row.get("path") or row.get("target") or row["name"] or "—"
            if row["kind"] in _IO_KINDS and row["name"] and row["name"] != name:
                name += f" = {row['name']}"
            elif row["kind"] not in _IO_KINDS and row.get("target"):
                prefix = _module_prefix(row["target"])
                if prefix and prefix != under:
                    table.add_row("", Text(f"{prefix}.", style="bold"), "", "")
                under = prefix or None
                name = "  " + row["target"][len(prefix) + 1 :] if prefix else name
            if row.get("persistent") is False:
                name += " (not persistent)"
            # the kinds tell inputs from outputs (USER_INPUT, PARAMETER / USER_OUTPUT, BUFFER_MUTATION)
            kind = row["kind"].lower().replace("user_", "").replace("_", " ")
            table.add_row(kind, escape(name), escape(_shape(row)), row.get("dtype") or "")
    return _titled("signature", table)


def _dims_table(report) -> Group:
    """The range table: each dynamic size by the user's name, its accepted and declared range."""
    table = Table(box=None, pad_edge=False)
    for column in ("size", "kind", "accepts", "declared", "where"):
        table.add_column(column, overflow="fold")
    notes = []
    for row in report.dims:
        declared = _bounds(*row["declared"]) if row.get("declared") else "—"
        places = row["inputs"] if len(row["inputs"]) <= 4 else [*row["inputs"][:3], f"{len(row['inputs']) - 3} more"]
        table.add_row(escape(row["name"]), row["kind"], _bounds(row["min"], row["max"]), declared, escape(", ".join(places)))
        if row.get("note"):
            notes.append(Text(f"{row['name']}: {row['note']}", style="yellow"))
    return Group(Text("dynamic sizes", style="bold"), table, *notes)


def _ops_table(report, limit: int = 25) -> Group:
    total = sum(report.ops.values())
    table = Table()
    table.add_column("op")
    table.add_column("count", justify="right")
    items = list(report.ops.items())
    for op, count in items[:limit]:
        table.add_row(escape(op), str(count))
    if len(items) > limit:
        table.add_row(f"... {len(items) - limit} more", str(sum(c for _, c in items[limit:])))
    return _titled(f"ops ({total} calls, {len(report.ops)} kinds)", table)


def _ops(n: int) -> str:
    return f"{n} op" if n == 1 else f"{n} ops"


def _module_tree(report) -> Tree:
    """The module tree with op counts; identical numbered layers are one line (``0-31 ... x32``)."""
    root = module_tree(report.modules, report.model_name or "")
    tree = Tree(f"[bold]{escape(root['name'])}[/] ({escape(root['class'])}): {_ops(root['total_ops'])}")

    def add(branch: Tree, node: dict) -> None:
        for child in node["children"]:
            own = f", {child['ops']} here" if child["ops"] != child["total_ops"] and child["ops"] else ""
            if child["count"] > 1:
                label = f"{child['name']} ({child['class']} x{child['count']}): {_ops(child['total_ops'])} each{own}"
            else:
                label = f"{child['name']} ({child['class']}): {_ops(child['total_ops'])}{own}"
            add(branch.add(escape(label)), child)

    add(tree, root)
    return tree


def _verification_table(report) -> Group:
    """One row per run and output; errors, which are long, as notes below the table."""
    table = Table(box=None, pad_edge=False)
    for column in ("inputs", "output", "max abs error", "max rel error", ""):
        table.add_column(column, justify="right" if "error" in column else "left", overflow="fold", no_wrap=column == "inputs")
    notes = []
    for run in report.verification:
        if run.eager_error:
            table.add_row(escape(run.label), "—", "", "", Text("eager fails", style="yellow"))
            notes.append(Text(f"{run.label}: eager fails at these inputs, so nothing to compare (is the declared range too wide?): {run.eager_error}", style="yellow"))
            continue
        if run.error:
            table.add_row(escape(run.label), "—", "", "", Text("ERROR (below)", style="red"))
            notes.append(Text(f"{run.label}: {run.error}", style="red"))
            continue
        if run.ok and len(run.outputs) > 1:  # one row a run: a KV cache has dozens of outputs
            worst_abs = max(out.max_abs for out in run.outputs)
            worst_rel = max(out.max_rel for out in run.outputs)
            table.add_row(escape(run.label), f"all {len(run.outputs)}", f"{worst_abs:.3g}", f"{worst_rel:.3g}", Text("ok", style="green"))
            continue
        for out in run.outputs:
            note = f" ({out.note})" if out.note else ""
            mark = Text("ok" + note, style="green") if out.ok else Text("MISMATCH" + note, style="red")
            table.add_row(escape(run.label), escape(out.path), f"{out.max_abs:.3g}", f"{out.max_rel:.3g}", mark)
    title = f"program vs eager (rtol {report.settings.rtol:g}, atol {report.settings.atol:g})"
    return Group(Text(title, style="bold"), table, *notes)


def _timings_table(report) -> Group:
    table = Table(box=None, pad_edge=False)
    table.add_column("stage")
    table.add_column("seconds", justify="right")
    for stage, seconds in report.timings.items():
        parent, _, sub = stage.partition(".")
        table.add_row(f"  {sub}" if sub else stage, f"{seconds:.3f}")
    return _titled("time", table)


def render_export(
    report, console: Console, *, show_graph: bool = False, verbose: bool = False, signature: str = "summary"
) -> None:
    """The full summary of one export (or its failure); ``signature="full"`` lists every
    parameter and buffer instead of their sums per module."""
    title = f"[bold]{escape(report.settings.model)}[/]"
    if report.model_class:
        params = f"{report.parameters:,} parameters" if report.parameters is not None else ""
        mode = "train" if report.settings.train else "eval"
        console.print(f"{title}  {escape(report.model_class)}, {params}, {mode} mode")
    else:
        console.print(title)
    if report.inputs:
        console.print(_inputs_table(report))
    if report.signature:
        console.print(_signature_full(report) if signature == "full" else _signature_summary(report))
        if getattr(report, "dims", None):
            console.print(_dims_table(report))
        console.print(_ops_table(report))
        console.print(_module_tree(report))
    if report.verification is not None:
        console.print(_verification_table(report))
    if show_graph and report.program is not None:
        from rich.syntax import Syntax  # brings pygments; for --graph only

        code = report.program.graph_module.print_readable(print_output=False, include_stride=False, include_device=False)
        console.print(Syntax(code.strip(), "python", theme="ansi_dark", word_wrap=True))
    if report.draft is not None:
        render_draft(report.draft, console)
    if getattr(report, "branches", None) is not None:
        render_branches(report.branches, console)
    for note in getattr(report, "notes", ()):
        where = f" at {shown_location(note.location)}" if note.location else ""
        console.print(Text(f"note: {note.kind.value}{where}: {shown_paths_in(note.message)}", style="yellow"))
    if getattr(report, "artifacts", None):
        console.print(_artifacts_table(report))
    if len(report.timings) > 1:
        console.print(_timings_table(report))
    if report.ok:
        if report.output_file:
            console.print(f"[green]saved[/] {escape(shown_path(report.output_file))} ({_size(report.output_file)})")
            for a in report.artifacts[1:]:
                console.print(f"[green]saved[/] {escape(shown_path(a.path))} ({_bytes(a.bytes)})")
        elif report.artifacts:
            for a in report.artifacts:
                console.print(f"[green]saved[/] {escape(shown_path(a.path))} ({_bytes(a.bytes)})")
        else:
            console.print("[green]exported[/]")
    else:
        render_error(report.error, console, verbose=verbose)
        if report.submodules is not None:
            render_submodules(report.submodules, console)


def render_draft(draft: DraftReport, console: Console) -> None:
    """The assumptions a draft export made, one row each: kind, where, what, whether checked."""
    if draft.sound:
        console.print("[green]draft export: nothing assumed[/] (the same program as without --draft)")
        return
    table = Table(
        title=f"draft export: {len(draft.assumptions)} assumption(s) taken from the example inputs",
        title_justify="left",
        title_style="bold yellow",
    )
    table.add_column("#", justify="right")
    table.add_column("kind")
    table.add_column("where")
    table.add_column("assumed")
    table.add_column("checked at run time")
    for i, a in enumerate(draft.assumptions, 1):
        where = Text(shown_location(a.location) if a.location else "?", style="cyan")
        if a.code:
            where.append(f"\n{a.code}", style="default")
        assumed = a.assumed + (f"\n{shown_paths_in(a.detail)}" if a.detail else "")
        if a.occurrences > 1:
            assumed += f"\n({a.occurrences} times)"
        table.add_row(str(i), a.kind.value, where, Text(assumed), "[green]yes[/]" if a.checked else "[red]no[/]")
    console.print(table)


def render_branches(branches: BranchReport, console: Console) -> None:
    """The values the program branches on, one row each: where forward asked, the predicate
    the program computes and where its symbols come from, and how many conds it became."""
    table = Table()
    table.add_column("#", justify="right")
    table.add_column("where")
    table.add_column("predicate")
    table.add_column("conds", justify="right")
    for i, d in enumerate(branches.decisions, 1):
        where = _line_and_code(d.location, d.code)
        if d.within:
            where.append(f"\ninside the branch at {shown_location(d.within[-1])}", style="dim")
        predicate = Text(d.predicate)
        for symbol in d.symbols:
            predicate.append(f"\n{shown_paths_in(symbol)}", style="dim")
        uses = f"\n({d.uses} uses)" if d.uses > 1 else ""
        table.add_row(str(i), where, predicate, f"{d.conds}{uses}")
    if branches.decisions:
        title = f"{len(branches.decisions)} branch(es) on tensor values, captured as torch.cond from {branches.runs} runs of forward"
        console.print(_titled(title, table))
    if branches.loops:
        loops = Table(box=None, padding=(0, 1), show_header=True, header_style="bold")
        loops.add_column("#", justify="right")
        loops.add_column("where")
        loops.add_column("carried", justify="right")
        breaking = any(loop.breaks for loop in branches.loops)
        if breaking:
            loops.add_column("breaks out at")
        for i, loop in enumerate(branches.loops, 1):
            row = [str(i), _line_and_code(loop.location, loop.code), str(loop.carried)]
            loops.add_row(*row, *([loop.breaks or ""] if breaking else []))
        console.print(_titled(f"{len(branches.loops)} loop(s) over data-sized tensors, captured as torch.while_loop", loops))


def _line_and_code(location: str | None, code: str | None) -> Text:
    """Where forward asked (``file.py:LINE``, cyan) and the line's code under it."""
    where = Text(shown_location(location) if location else "?", style="cyan")
    if code:
        where.append(f"\n{code}", style="default")
    return where


def _submodule_label(node: SubmoduleNode, parent: str, root_error: ErrorInfo | None, ascii_only: bool) -> Group:
    name = node.name[len(parent) + 1 :] if parent else node.name
    line = Text(f"{name} ({node.class_name}) " if name else f"{node.class_name} ")
    seconds = Text(f"  {node.seconds:.2f} s", style="dim") if node.seconds is not None else Text("")
    if node.status is ModuleStatus.OK:
        line.append("ok" if ascii_only else "✓ ok", style="green").append_text(seconds)
    elif node.status is ModuleStatus.FAILED:
        line.append("FAIL " if ascii_only else "✗ ", style="bold red").append(node.error.category.value, style="red")
        line.append_text(seconds)
    elif node.status is ModuleStatus.NOT_CALLED and node.children:
        line.append("not called itself", style="dim")  # a ModuleList: what it holds is
    else:
        line.append(node.status.value, style="dim")
    if node.frontier:
        line.append("  <- problem is here" if ascii_only else "  ← problem is here", style="bold red")
    lines = [line]
    if node.error is not None and node.error.location:
        lines.append(Text(f"at {shown_location(node.error.location)}", style="cyan"))
    # The model's own error is in the panel above; a frontier module failing otherwise says how.
    if node.frontier and node.error != root_error:
        lines.append(Text(shown_paths_in(node.error.headline)))
        if node.error.hint:
            lines.append(Text(f"hint: {node.error.hint}", style="yellow"))
    return Group(*lines)


def render_submodules(submodules: SubmoduleReport, console: Console) -> None:
    """The tree of modules exported on their own: which export, which fail, where the problem is."""
    ascii_only = console.options.ascii_only  # as rich's own tree guides fall back to ASCII
    root = submodules.root

    def add(branch: Tree, node: SubmoduleNode) -> None:
        for child in node.children:
            add(branch.add(_submodule_label(child, node.name, root.error, ascii_only)), child)

    tree = Tree(_submodule_label(root, "", root.error, ascii_only))
    add(tree, root)
    console.print(_titled(f"submodules exported on their own, static shapes ({submodules.seconds:.2f} s)", tree))
    if root.status is ModuleStatus.OK:
        console.print(Text(f"{root.class_name} exports on its own", style="bold green"))
    elif submodules.frontier:
        where = ", ".join(f"{n.name or '<model>'} ({n.class_name})" for n in submodules.frontier)
        console.print(Text(f"the problem is in {where}", style="bold"))


def render_quiet(report, console: Console) -> None:
    """One line."""
    seconds = report.timings.get("total", 0.0)
    if report.ok:
        files = [a.path for a in getattr(report, "artifacts", [])] or [report.output_file] * bool(report.output_file)
        where = f" -> {', '.join(map(shown_path, files))}" if files else ""
        drafted = ""
        if report.draft is not None and not report.draft.sound:
            drafted = f", {len(report.draft.assumptions)} draft assumption(s)"
        if getattr(report, "branches", None) is not None:
            if report.branches.decisions:
                drafted += f", {len(report.branches.decisions)} branch(es) as torch.cond"
            if report.branches.loops:
                drafted += f", {len(report.branches.loops)} loop(s) as torch.while_loop"
        console.print(
            f"ok {report.settings.model}: {_ops(sum(report.ops.values()))}{drafted}{where} ({seconds:.2f} s)",
            highlight=False,
            soft_wrap=True,
        )
    else:
        error = report.error
        location = f" at {shown_location(error.location)}" if error.location else ""
        frontier = [n.name for n in report.submodules.frontier if n.name] if report.submodules else []
        where = f"; fails in {', '.join(frontier)}" if frontier else ""
        console.print(
            f"FAILED {report.settings.model}: [{error.category.value}] {shown_paths_in(error.headline)}{location}{where}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


def _error_body(error: ErrorInfo) -> list[Text]:
    body = [Text(shown_paths_in(error.message))]
    if error.location:
        body.append(Text(f"at {shown_location(error.location)}", style="cyan"))
    if error.hint:
        body.append(Text(f"hint: {error.hint}", style="yellow"))
    return body


def render_error(error: ErrorInfo, console: Console, *, verbose: bool = False) -> None:
    """The error: category, message, where in the user's code, what to do; traceback only if verbose."""
    body = _error_body(error)
    if verbose and error.traceback:
        body.append(Text(error.traceback, style="dim"))
    elif not verbose and error.category is Category.INTERNAL:
        body.append(Text("run with -v for the traceback", style="dim"))
    label = "input error" if error.is_input_error else f"export failed: {error.category.value}"
    console.print(Panel(Group(*body), title=Text(label, style="bold red"), title_align="left", border_style="red"))


def render_check(results, console: Console, *, title: str = "exporter check", verbose: bool = False) -> None:
    """The check table (model, status, ops, params, time, drift) and the details of failures."""
    console.print(Text(title, style="bold"))
    table = Table()
    for column in ("model", "status", "ops", "params", "time", "drift / reason"):
        table.add_column(column, justify="right" if column in ("ops", "params", "time") else "left")
    styles = {"ok": "green", "drift": "yellow", "failed": "red", "no baseline": "yellow"}
    for r in results:
        report = r.report
        table.add_row(
            escape(r.reference),
            Text(r.status, style=styles.get(r.status, "")),
            str(sum(report.ops.values())) if report.ok else "—",
            f"{report.parameters:,}" if report.parameters is not None else "—",
            f"{report.timings.get('total', 0.0):.2f}s",
            f"{len(r.drift)} lines" if r.drift else escape(r.note or (report.error.category.value if report.error else "")),
        )
    console.print(table)
    for r in results:
        if r.drift:
            console.print(
                Panel(
                    Text("\n".join(r.drift)),
                    title=Text(f"{r.reference}: drift from baseline", style="yellow"),
                    title_align="left",
                    border_style="yellow",
                )
            )
        elif not r.report.ok:
            error = r.report.error
            console.print(
                Panel(
                    Group(*_error_body(error), *([Text(error.traceback, style="dim")] if verbose and error.traceback else [])),
                    title=Text(f"{r.reference}: {error.category.value}", style="red"),
                    title_align="left",
                    border_style="red",
                )
            )
    passed = sum(r.passed for r in results)
    style = "green" if passed == len(results) else "red"
    console.print(f"[{style}]{passed}/{len(results)} models passed[/]")
