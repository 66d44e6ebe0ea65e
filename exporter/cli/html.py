"""The HTML report (``--html``, ``check --html``): one self-contained file to look at an export.

Model and inputs, the signature (grouped, expandable), the range table, the op histogram,
the module tree, the graph drawing, verification, timings and any failure with its source
line and hint. Everything is inline (styles, script, data): no network, no CDN, so the
file opens anywhere and can be attached to a CI run. The drawing is laid out in the page
by ``report_assets/graph.js`` from the data ``graph_data.py`` extracts.
"""

from __future__ import annotations

import html
import json
import linecache
import re
from importlib import resources
from typing import Any

from .artifacts import artifacts_table, lowering_lines
from .analysis import human_bytes as _bytes, input_names, module_tree, state_groups
from .save import write_atomically

__all__ = ["check_html", "export_html", "write_html"]

_USER_KINDS = ("USER_INPUT", "USER_OUTPUT")
_OUTPUT_KINDS = {"BUFFER_MUTATION": "updates buffer", "USER_INPUT_MUTATION": "updates input"}


def _asset(name: str) -> str:
    return (resources.files(__package__) / "report_assets" / name).read_text(encoding="utf-8")


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _shape(row: dict) -> str:
    if row.get("shape") is not None:
        return "[" + ", ".join(str(s) for s in row["shape"]) + "]"
    return repr(row["value"]) if "value" in row else ""


def _table(head: list[str], rows: list[list[str]], numeric: tuple[int, ...] = ()) -> str:
    """A table of already-escaped cells."""
    cells = "".join(f'<th class="num">{h}</th>' if i in numeric else f"<th>{h}</th>" for i, h in enumerate(head))
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"


def _json_script(element_id: str, data: Any) -> str:
    # "</script>" (or "<!--") in a name would end the element early: no "<" at all, JSON allows it escaped.
    text = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def _header(report, anchor: str) -> str:
    status = "ok" if report.ok else "failed"
    facts = [f"<code>{_e(report.model_class)}</code>"] if report.model_class else []
    if report.parameters is not None:
        facts.append(f"{report.parameters:,} parameters")
    facts.append("train mode" if report.settings.train else "eval mode")
    if report.ir:
        facts.append(f"IR: {_e(report.ir)}")
    if report.ops:
        facts.append(f"{sum(report.ops.values()):,} ops")
    return (
        f'<h1 id="{anchor}"><code>{_e(report.settings.model)}</code> <span class="badge {status}">{status}</span></h1>'
        f'<div class="sub">{" · ".join(facts)}</div>'
    )


def _inputs(report) -> str:
    rows = []
    for name, leaf in zip(input_names(report.signature, report.inputs, report.input_paths), report.inputs):
        if leaf["kind"] == "tensor":
            rows.append([f"<code>{_e(name)}</code>", "tensor", _e(leaf["dtype"]), f"<code>{_e(_shape(leaf))}</code>"])
        else:
            rows.append([f"<code>{_e(name)}</code>", "constant", _e(type(leaf["value"]).__name__), f"<code>{_e(repr(leaf['value']))}</code>"])
    dynamic = "".join(f"<code>--dynamic {_e(flag)}</code> " for flag in report.settings.dynamic)
    return (
        f"<h2>Inputs</h2><div class='sub'>from {_e(report.input_source)}</div>"
        + _table(["input", "kind", "dtype", "shape / value"], rows)
        + (f"<div>{dynamic}</div>" if dynamic else "")
    )


def _signature(report) -> str:
    signature = report.signature
    io_rows = []
    for side, key in (("input", "inputs"), ("output", "outputs")):
        for row in signature[key]:
            if side == "input" and row["kind"] not in _USER_KINDS:
                continue  # parameters and buffers: grouped below
            if row["kind"] in _USER_KINDS:
                label = row.get("path") or row["name"]
                graph_name = f" <span class='sub'>({_e(row['name'])})</span>" if row["name"] and row["name"] != label else ""
            else:
                what = _OUTPUT_KINDS.get(row["kind"], row["kind"].lower().replace("_", " "))
                label, graph_name = f"{what} {row.get('target') or row['name']}", ""
            io_rows.append([side, f"<code>{_e(label)}</code>{graph_name}", _e(row.get("dtype")), f"<code>{_e(_shape(row))}</code>"])
    parts = ["<h2>Signature</h2>", _table(["", "path", "dtype", "shape / value"], io_rows)]
    state = [r for r in signature["inputs"] if r["kind"] not in _USER_KINDS]
    groups = state_groups(signature)
    if groups:
        total = _bytes(sum(r.get("bytes") or 0 for r in state))
        parts.append(f"<h3>Parameters and buffers: {len(state):,} tensors, "
                     f"{sum(r.get('numel') or 0 for r in state):,} elements, {total}</h3>")
        for group in groups:
            members = [r for r in state if r.get("target") in group["targets"]]
            kinds = ", ".join(f"{n} {k.replace('_', ' ')}{'' if n == 1 else 's'}" for k, n in group["kinds"].items())
            rows = [
                [f"<code>{_e(r.get('target'))}</code>" + (" <span class='sub'>(not persistent)</span>" if r.get("persistent") is False else ""),
                 _e(r["kind"].lower()), f"<code>{_e(_shape(r))}</code>", _e(r.get("dtype")), f"{r.get('numel') or 0:,}"]
                for r in members
            ]
            parts.append(
                f"<details class='group'><summary>{_e(group['group'])} — {kinds}, {group['elements']:,} elements, "
                f"{_bytes(group['bytes'])}, {_e(', '.join(group['dtypes']))}</summary>"
                + _table(["target", "kind", "shape", "dtype", "elements"], rows, numeric=(4,))
                + "</details>"
            )
    return "".join(parts)


def _dims(report) -> str:
    if not getattr(report, "dims", None):
        return ""
    rows = []
    for d in report.dims:
        declared = "—" if not d.get("declared") else f"{_bound(d['declared'][0])}..{_bound(d['declared'][1])}"
        note = f"<span class='warn'>{_e(d['note'])}</span>" if d.get("note") else ""
        rows.append([f"<code>{_e(d['name'])}</code>", _e(d["kind"]), f"{_bound(d['min'])}..{_bound(d['max'])}", declared,
                     f"<code>{_e(', '.join(d['inputs']))}</code>", note])
    return "<h2>Dynamic sizes</h2>" + _table(["size", "kind", "accepts", "declared", "where", "note"], rows)


def _bound(value: Any) -> str:
    return "" if value is None else _e(value)


def _ops(report) -> str:
    if not report.ops:
        return ""
    top = max(report.ops.values())
    rows = [[f"<code>{_e(op)}</code>", str(n), f"<span class='bar' style='width:{max(1, round(160 * n / top))}px'></span>"]
            for op, n in report.ops.items()]
    return (f"<h2>Ops: {sum(report.ops.values()):,} calls, {len(report.ops)} kinds</h2>"
            "<details><summary>histogram</summary>" + _table(["op", "count", ""], rows, numeric=(1,)) + "</details>")


def _module_tree(report) -> str:
    if not report.modules:
        return ""

    def item(node: dict, depth: int) -> str:
        own = f", {node['ops']} here" if node["ops"] and node["ops"] != node["total_ops"] else ""
        times = f" x{node['count']}" if node["count"] > 1 else ""
        each = " each" if node["count"] > 1 else ""
        label = (f"{_e(node['name'])} <span class='sub'>({_e(node['class'])}{times}): "
                 f"{node['total_ops']} ops{each}{own}</span>")
        if not node["children"]:
            return f"<li><span>{label}</span></li>"
        opened = " open" if depth < 2 else ""
        inner = "".join(item(child, depth + 1) for child in node["children"])
        return f"<li><details{opened}><summary>{label}</summary><ul>{inner}</ul></details></li>"

    root = module_tree(report.modules, report.model_name or "(model)")
    return f"<h2>Module tree</h2><div class='tree'><ul>{item(root, 0)}</ul></div>"


def _graph(report, anchor: str) -> str:
    graph = getattr(report, "graph", None)
    if not graph:
        return ""
    element = f"{anchor}-graph"
    return (
        f"<h2 id='{anchor}-drawing'>Graph</h2><div class='sub'>Modules are boxes: click a closed one to open it, the title of an open one "
        "to close it. Ops show their target, shape and module on hover. Find opens the modules around what it "
        "finds (so can a link: report.html#find=linear). Parameters and buffers are not drawn.</div>"
        f"<div class='graph' data-graph='{element}'><div class='graph-bar'>"
        "<button data-action='reset'>overview</button><button data-action='expand-all'>open all</button>"
        "<button data-action='collapse-all'>close all</button>"
        "<input class='graph-find' type='search' placeholder='find an op or module, Enter'>"
        "<span class='graph-status'></span></div>"
        f"<div class='graph-canvas'></div></div>{_json_script(element, graph)}"
    )


def _verification(report) -> str:
    if report.verification is None:
        return ""
    rows = []
    for run in report.verification:
        if run.eager_error:
            rows.append([_e(run.label), "—", "", "", f"<span class='warn'>eager fails at these inputs (nothing to compare): {_e(run.eager_error)}</span>"])
        elif run.error:
            rows.append([_e(run.label), "—", "", "", f"<span class='bad'>{_e(run.error)}</span>"])
        elif run.ok and len(run.outputs) > 1:
            worst_abs = max(out.max_abs for out in run.outputs)
            worst_rel = max(out.max_rel for out in run.outputs)
            rows.append([_e(run.label), f"all {len(run.outputs)} outputs", f"{worst_abs:.3g}", f"{worst_rel:.3g}", "<span class='ok'>ok</span>"])
        else:
            for out in run.outputs:
                note = f" ({_e(out.note)})" if out.note else ""
                mark = f"<span class='ok'>ok{note}</span>" if out.ok else f"<span class='bad'>MISMATCH{note}</span>"
                rows.append([_e(run.label), f"<code>{_e(out.path)}</code>", f"{out.max_abs:.3g}", f"{out.max_rel:.3g}", mark])
    title = f"Program vs eager (rtol {report.settings.rtol:g}, atol {report.settings.atol:g})"
    return f"<h2>{title}</h2>" + _table(["inputs", "output", "max abs error", "max rel error", ""], rows, numeric=(2, 3))


def _timings(report) -> str:
    if not report.timings:
        return ""
    rows = [[("&nbsp;&nbsp;" + _e(k.partition(".")[2])) if "." in k else _e(k), f"{v:.3f}"] for k, v in report.timings.items()]
    return "<h2>Time</h2>" + _table(["stage", "seconds"], rows, numeric=(1,))


def _source_line(location: str | None) -> str:
    """The line of the user's code a location (``path/file.py:12``) points at, if readable."""
    match = re.match(r"^(.*?):(\d+)", location or "")
    if not match:
        return ""
    return linecache.getline(match[1], int(match[2])).strip()


def _error(report) -> str:
    error = report.error
    if error is None:
        return ""
    parts = [f"<h2>Failure: {_e(error.category.value)}</h2><div class='error'><pre>{_e(error.message)}</pre>"]
    if error.location:
        parts.append(f"<div class='where'>at {_e(error.location)}</div>")
        line = _source_line(error.location)
        if line:
            parts.append(f"<pre class='mono source'>{_e(line)}</pre>")
    if error.hint:
        parts.append(f"<div class='hint'>hint: {_e(error.hint)}</div>")
    parts.append("</div>")
    return "".join(parts)


def _submodules(report) -> str:
    """With --report-submodules: which submodules export on their own, and where the problem is."""
    submodules = getattr(report, "submodules", None)
    if submodules is None:
        return ""

    def item(node, parent: str) -> str:
        name = (node.name[len(parent) + 1 :] if parent else node.name) or node.class_name
        status = node.status.value
        css = "ok" if status == "ok" else "bad" if status == "failed" else "sub"
        label = f"<code>{_e(name)}</code> <span class='sub'>({_e(node.class_name)})</span> <span class='{css}'>{_e(status)}</span>"
        if node.frontier:
            label += " <span class='bad'>&larr; problem is here</span>"
        if node.error is not None and node.frontier:
            label += f"<div class='where'>{_e(node.error.location or '')}</div><div>{_e(node.error.headline)}</div>"
        inner = "".join(item(child, node.name) for child in node.children)
        return f"<li><span>{label}</span>{f'<ul>{inner}</ul>' if inner else ''}</li>"

    return (f"<h2>Submodules exported on their own ({submodules.seconds:.2f} s)</h2>"
            f"<div class='tree'><ul>{item(submodules.root, '')}</ul></div>")


def _draft(report) -> str:
    """With --draft: what the export took from the example inputs, and whether it is checked."""
    draft = getattr(report, "draft", None)
    if draft is None:
        return ""
    if draft.sound:
        return "<h2>Draft export</h2><div class='ok'>nothing assumed: the same program as without --draft</div>"
    rows = []
    for i, a in enumerate(draft.assumptions, 1):
        where = f"<span class='mono'>{_e(a.location or '?')}</span>" + (f"<pre class='mono'>{_e(a.code)}</pre>" if a.code else "")
        assumed = _e(a.assumed) + (f"<div class='sub'>{_e(a.detail)}</div>" if a.detail else "")
        assumed += f" <span class='sub'>({a.occurrences} times)</span>" if a.occurrences > 1 else ""
        checked = "<span class='ok'>yes</span>" if a.checked else "<span class='bad'>no</span>"
        rows.append([str(i), _e(a.kind.value), where, assumed, checked])
    return (f"<h2>Draft export: {len(draft.assumptions)} assumption(s) taken from the example inputs</h2>"
            + _table(["#", "kind", "where", "assumed", "checked at run time"], rows))


def _branches(report) -> str:
    """The values the program branches on (captured as torch.cond), and the notes on what it
    does differently from eager."""
    parts = []
    branches = getattr(report, "branches", None)
    if branches is not None:
        rows = []
        for i, d in enumerate(branches.decisions, 1):
            where = f"<span class='mono'>{_e(d.location or '?')}</span>" + (f"<pre class='mono'>{_e(d.code)}</pre>" if d.code else "")
            if d.within:
                where += f"<div class='sub'>inside the branch at {_e(d.within[-1])}</div>"
            predicate = f"<span class='mono'>{_e(d.predicate)}</span>" + "".join(f"<div class='sub'>{_e(s)}</div>" for s in d.symbols)
            rows.append([str(i), where, predicate, str(d.uses), str(d.conds)])
        if rows:
            parts.append(f"<h2>Branches on tensor values: {len(branches.decisions)}, captured as torch.cond from {branches.runs} runs</h2>"
                         + _table(["#", "where", "predicate", "uses", "conds"], rows, numeric=(3, 4)))
        loops = [
            [str(i), f"<span class='mono'>{_e(loop.location or '?')}</span>" + (f"<pre class='mono'>{_e(loop.code)}</pre>" if loop.code else ""),
             str(loop.carried), f"<span class='mono'>{_e(loop.breaks or '')}</span>"]
            for i, loop in enumerate(branches.loops, 1)
        ]
        if loops:
            parts.append(f"<h2>Loops over data-sized tensors: {len(loops)}, captured as torch.while_loop</h2>"
                         + _table(["#", "where", "carried values", "a step breaks out at"], loops, numeric=(2,)))
    notes = getattr(report, "notes", ())
    if notes:
        parts.append("<h2>Notes</h2>" + "".join(
            f"<div class='sub'><b>{_e(n.kind.value)}</b>{f' at <span class=mono>{_e(n.location)}</span>' if n.location else ''}: {_e(n.message)}</div>"
            for n in notes
        ))
    return "".join(parts)


def _artifacts(report) -> str:
    if not report.artifacts:
        return ""
    columns, rows = artifacts_table(report.artifacts, relative=False)
    cells = [[_e(c) if i != 1 else f"<code>{_e(c)}</code>" for i, c in enumerate(row)] for row in rows]
    lines = "".join(f"<div class='sub'>{_e(line)}</div>" for line in lowering_lines(report.artifacts))
    return "<h2>Artifacts</h2>" + _table(columns, cells, numeric=tuple(range(2, len(columns) - 1))) + lines


def _section(report, anchor: str) -> str:
    body = [_header(report, anchor), _error(report), _submodules(report)]
    if report.inputs:
        body.append(_inputs(report))
    if report.signature:
        body += [_signature(report), _dims(report), _ops(report), _module_tree(report), _graph(report, anchor)]
    body += [_draft(report), _branches(report), _verification(report), _artifacts(report), _timings(report)]
    versions = ", ".join(f"{k} {v}" for k, v in report.versions.items())
    if versions:
        body.append(f"<div class='sub' style='margin-top:16px'>{_e(versions)}</div>")
    return "".join(body)


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_e(title)}</title><style>{_asset('report.css')}</style></head>"
        f"<body>{body}<script>{_asset('graph.js')}</script></body></html>\n"
    )


def export_html(report) -> str:
    """The page of one export's report."""
    return _page(f"exporter: {report.settings.model}", _section(report, "model"))


def check_html(results, title: str = "exporter check") -> str:
    """One page for a ``check`` run: the table of models, each linking to its own report below."""
    rows = []
    for i, r in enumerate(results, 1):
        report = r.report
        status = r.status.replace(" ", "-")
        note = f"{len(r.drift)} lines of drift" if r.drift else (r.note or "")
        if not report.ok and report.error is not None:
            note = f"{report.error.category.value}: {report.error.headline}"
        rows.append([
            f"<a href='#model-{i}'><code>{_e(r.reference)}</code></a>", f"<span class='badge {status}'>{_e(r.status)}</span>",
            str(sum(report.ops.values())) if report.ok else "—",
            f"{report.parameters:,}" if report.parameters is not None else "—",
            f"{report.timings.get('total', 0.0):.2f}s", _e(note),
        ])
    passed = sum(r.passed for r in results)
    sections = []
    for i, r in enumerate(results, 1):
        drift = ""
        if r.drift:
            drift = "<h2>Drift from baseline</h2><pre class='mono'>" + _e("\n".join(r.drift)) + "</pre>"
        sections.append(f"<section class='model'>{_section(r.report, f'model-{i}')}{drift}</section>")
    body = (
        f"<h1>{_e(title)}</h1><div class='sub'>{passed}/{len(results)} models passed</div>"
        + _table(["model", "status", "ops", "params", "time", ""], rows, numeric=(2, 3, 4))
        + "".join(sections)
    )
    return _page(title, body)


def write_html(path: str, text: str) -> None:
    """Write the page (UTF-8), atomically, as the other reports are written."""

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    write_atomically(path, write, suffix=".html")
