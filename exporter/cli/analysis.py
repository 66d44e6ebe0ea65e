"""What a report says about a program: signature rows, op counts, module tree, ranges, versions.

Sizes are written in the user's own Dim names (``[batch, 2*seq]``) wherever the
``dynamic_shapes`` plan names them, and user inputs and outputs by their pytree paths
(``input_ids``, ``past_key_values[0].key``, ``logits``).
"""

from __future__ import annotations

import importlib.metadata
import platform
from collections import Counter
from typing import Any

import sympy
import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind

from .._ir import user_input_nodes
from .._torch_internals import TORCH_VERSION
from .._ir import graph_modules

__all__ = [
    "dim_rows",
    "human_bytes",
    "expr_text",
    "input_names",
    "leaf_path",
    "library_versions",
    "module_op_counts",
    "module_tree",
    "op_histogram",
    "output_path",
    "output_paths",
    "range_rows",
    "signature_rows",
    "state_groups",
]


def leaf_path(path: tuple[Any, ...]) -> str:
    """A pytree key path as the user writes it: ``logits``, ``past_key_values[0].key``,
    ``inputs['mask']``; a leading string key is the bare name (a forward() parameter, or a
    field of a returned dict or ModelOutput)."""
    text = ""
    for i, key in enumerate(path):
        if isinstance(key, pytree.SequenceKey):
            text += f"[{key.idx}]"
        elif isinstance(key, pytree.GetAttrKey):
            text += f".{key.name}" if text else key.name
        elif isinstance(key, pytree.MappingKey):
            text += key.key if i == 0 and isinstance(key.key, str) else f"[{key.key!r}]"
        else:
            text += str(key)
    return text


def output_path(path: tuple[Any, ...]) -> str:
    """An output leaf's path: ``logits``, ``output[0]`` (a tuple's element), ``output`` (the only one)."""
    text = leaf_path(path)
    return "output" + text if not text or text.startswith("[") else text


def output_paths(program: torch.export.ExportedProgram) -> list[str]:
    """The pytree path of every user output (``logits``), from the program's output spec;
    ``output[i]`` for any leaf the spec cannot name."""
    n = sum(spec.kind is OutputKind.USER_OUTPUT for spec in program.graph_signature.output_specs)
    fallback = [f"output[{i}]" for i in range(n)] if n > 1 else ["output"] * n
    entries = program.module_call_graph
    spec = entries[0].signature.out_spec if entries and entries[0].signature is not None else None
    if spec is None:
        return fallback
    # Rebuild the output from stand-in leaves and read the paths back off it: a container
    # (a KV cache) may insist on tensors, so try the program's own values before plain objects.
    output = next((node for node in program.graph.nodes if node.op == "output"), None)
    values = [getattr(v, "meta", {}).get("val") for v in (output.args[0] if output is not None else [])]
    kinds = [out.kind for out in program.graph_signature.output_specs]
    user = [v for kind, v in zip(kinds, values) if kind is OutputKind.USER_OUTPUT]
    for leaves in (user, [object()] * spec.num_leaves):
        try:
            rebuilt = pytree.tree_unflatten(list(leaves), spec)
            paths = [output_path(path) for path, _ in pytree.tree_flatten_with_path(rebuilt)[0]]
        except Exception:  # noqa: BLE001 - a container that cannot be rebuilt or keyed: try the next, or number them
            continue
        if len(paths) == n:
            return paths
    return fallback


def expr_text(expr: Any, names: dict[sympy.Symbol, str]) -> str:
    """A size expression in the user's names: ``2*seq`` for ``2*s53``."""
    if not isinstance(expr, sympy.Expr) or not names:
        return str(expr)
    return str(expr.xreplace({s: sympy.Symbol(names[s]) for s in expr.free_symbols if s in names}))


def _size(size: Any, names: dict[sympy.Symbol, str]) -> int | str:
    if isinstance(size, int):
        return size
    if isinstance(size, torch.SymInt):
        return expr_text(size.node.expr, names)
    return str(size)


def _value_meta(val: Any, names: dict[sympy.Symbol, str]) -> dict[str, Any]:
    if isinstance(val, torch.Tensor):
        return {"shape": [_size(s, names) for s in val.shape], "dtype": str(val.dtype).replace("torch.", "")}
    if isinstance(val, torch.SymInt):
        return {"shape": None, "dtype": "SymInt"}
    return {"shape": None, "dtype": type(val).__name__}


def signature_rows(
    program: torch.export.ExportedProgram,
    names: dict[sympy.Symbol, str] | None = None,
    input_paths: list[str] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Input and output specs as plain rows: kind, name, target, persistent, shape, dtype, and
    for user inputs and outputs their pytree ``path`` (inputs: ``input_paths``, one per flat
    user input, rooted at the forward() parameter names)."""
    names = names or {}
    nodes = {n.name: n for n in program.graph.nodes}
    paths = {"inputs": iter(input_paths or []), "outputs": iter(output_paths(program))}

    def row(spec, side: str) -> dict[str, Any]:
        name = getattr(spec.arg, "name", "")
        node = nodes.get(name)
        val = node.meta.get("val") if node is not None else getattr(spec.arg, "value", None)
        out = {"kind": spec.kind.name, "name": name, "target": spec.target}
        if spec.kind in (InputKind.USER_INPUT, OutputKind.USER_OUTPUT):
            path = next(paths[side], None)
            if path is not None:
                out["path"] = path
        if getattr(spec, "persistent", None) is not None:
            out["persistent"] = spec.persistent
        if not isinstance(val, (torch.Tensor, torch.SymInt)):
            out["value"] = val if isinstance(val, (int, float, bool, str, type(None))) else repr(val)
        out.update(_value_meta(val, names))
        if isinstance(val, torch.Tensor) and spec.kind not in (InputKind.USER_INPUT, OutputKind.USER_OUTPUT):
            out["numel"] = val.numel()
            out["bytes"] = val.numel() * val.element_size()
        return out

    sig = program.graph_signature
    return {
        "inputs": [row(s, "inputs") for s in sig.input_specs],
        "outputs": [row(s, "outputs") for s in sig.output_specs],
    }


def input_names(
    signature: dict[str, list[dict[str, Any]]] | None, inputs: list[dict[str, Any]], bound: list[str] | None = None
) -> list[str]:
    """Each example input leaf (``describe_leaf`` rows) by the forward() path it binds to
    (``input_ids``): from the signature, else from the binding (``bound``, when the export
    failed after the inputs were bound), else as given (``args[0]``)."""
    paths = [r.get("path") for r in (signature or {}).get("inputs", []) if r["kind"] == "USER_INPUT"]
    for names in (paths, bound or []):
        if len(names) == len(inputs) and all(names):
            return names
    return [leaf["path"] for leaf in inputs]


_STATE_KINDS = ("PARAMETER", "BUFFER", "CONSTANT_TENSOR", "CUSTOM_OBJ", "TOKEN")


def _group_parts(target: str, depth: int, collapse: bool) -> tuple[str, ...]:
    """The module subtree a state tensor is counted in: its module path, with ``collapse`` cut
    after the first numbered child (every layer of a stack in one group), cut to ``depth`` parts."""
    parts = target.split(".")[:-1]
    if collapse:
        for i, part in enumerate(parts):
            if part.isdigit():
                parts = [*parts[:i], "#"]
                break
    return tuple(parts[:depth])


def _group_name(parts: tuple[str, ...], indices: set[int]) -> str:
    if parts and parts[-1] == "#":
        low, high = min(indices), max(indices)
        span = f"{low}-{high}" if len(indices) == high - low + 1 and high > low else "*" if len(indices) > 1 else str(low)
        parts = (*parts[:-1], span)
    return ".".join(parts) or "(root)"


def state_groups(signature: dict[str, list[dict[str, Any]]], limit: int = 12) -> list[dict[str, Any]]:
    """Parameters, buffers and constants summed per module subtree, at most ``limit`` groups
    (shallower subtrees until they fit): count per kind, tensors, elements, bytes, dtypes, and
    the targets counted.
    A stack of numbered layers is one group (``model.layers.0-31``)."""
    rows = [r for r in signature.get("inputs", []) if r["kind"] in _STATE_KINDS]
    deepest = max((len((r["target"] or "").split(".")) for r in rows), default=0)
    # Each module on its own if they fit; else stacks of layers as one; else shallower subtrees.
    for collapse, depth in [(False, deepest), *((True, d) for d in range(deepest, 0, -1))]:
        groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for row in rows:
            groups.setdefault(_group_parts(row["target"] or "", depth, collapse), []).append(row)
        if len(groups) <= limit:
            break
    result = []
    for parts, members in groups.items():
        indices = set()
        if parts and parts[-1] == "#":
            prefix = len(parts) - 1
            indices = {int(m["target"].split(".")[prefix]) for m in members}
        kinds = Counter(m["kind"] for m in members)
        result.append(
            {
                "group": _group_name(parts, indices),
                "kinds": {kind.lower(): kinds[kind] for kind in _STATE_KINDS if kinds[kind]},
                "tensors": len(members),
                "elements": sum(m.get("numel") or 0 for m in members),
                "bytes": sum(m.get("bytes") or 0 for m in members),
                "dtypes": sorted({m["dtype"] for m in members if m.get("dtype")}),
                "targets": [m["target"] for m in members],
            }
        )
    return result


def op_histogram(program: torch.export.ExportedProgram) -> dict[str, int]:
    """call_function targets, counted over the graph and its subgraphs, most frequent first."""
    counts: Counter[str] = Counter()
    for module in graph_modules(program.graph_module):
        counts.update(str(n.target) for n in module.graph.nodes if n.op == "call_function")
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _path_order(path: str) -> list[tuple[int, Any]]:
    """Module paths in tree order, numbered children by number (``layers.2`` before ``layers.10``)."""
    return [(0, int(a)) if a.isdigit() else (1, a) for a in path.split(".")] if path else []


def module_op_counts(program: torch.export.ExportedProgram) -> list[dict[str, Any]]:
    """Per module path (from nn_module_stack): class, ops recorded directly in it, and in total."""
    own: Counter[str] = Counter()
    classes: dict[str, str] = {}
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        stack = node.meta.get("nn_module_stack") or {}
        paths = [path for path, _ in stack.values()]
        for path, cls in stack.values():
            classes.setdefault(path, cls.rsplit(".", 1)[-1])
        own[paths[-1] if paths else ""] += 1
    total: Counter[str] = Counter()
    for path, count in own.items():
        parts = path.split(".") if path else []
        total[""] += count
        for i in range(1, len(parts) + 1):
            total[".".join(parts[:i])] += count
    rows = []
    for path in sorted(set(total) | set(classes), key=_path_order):
        if total[path] == 0 and path not in classes:
            continue
        rows.append({"path": path, "class": classes.get(path, ""), "ops": own[path], "total_ops": total[path]})
    return rows


def _module_shape(path: str, children: dict[str, list[str]], rows: dict[str, dict[str, Any]]) -> tuple:
    """What makes two modules the same for the tree: class, op counts, and their children's."""
    row = rows[path]
    kids = tuple((c.rsplit(".", 1)[-1], _module_shape(c, children, rows)) for c in children.get(path, []))
    return (row["class"], row["ops"], row["total_ops"], kids)


def _index(path: str) -> int | None:
    last = path.rsplit(".", 1)[-1]
    return int(last) if last.isdigit() else None


def module_tree(modules: list[dict[str, Any]], root_name: str = "") -> dict[str, Any]:
    """The rows of ``module_op_counts`` as a tree of ``{name, path, class, ops, total_ops, count,
    children}``, where a run of consecutive numbered siblings of the same shape (class, op
    counts, children) is one node with ``count`` > 1 and a name like ``0-31``: a stack of
    identical layers shows once."""
    rows = {row["path"]: row for row in modules}
    children: dict[str, list[str]] = {}
    for path in rows:
        if path:
            parent = path.rsplit(".", 1)[0] if "." in path else ""
            while parent not in rows and parent:
                parent = parent.rsplit(".", 1)[0] if "." in parent else ""
            children.setdefault(parent, []).append(path)

    def node(path: str, parent: str, count: int, last: str) -> dict[str, Any]:
        row = rows.get(path, {"class": "", "ops": 0, "total_ops": 0})
        name = (path[len(parent) + 1 :] if parent else path) or root_name
        if count > 1:
            name += f"-{last.rsplit('.', 1)[-1]}"
        return {"name": name, "path": path, "class": row["class"], "ops": row["ops"], "total_ops": row["total_ops"],
                "count": count, "children": grouped(path)}

    def grouped(parent: str) -> list[dict[str, Any]]:
        runs: list[list[str]] = []
        for path in children.get(parent, []):
            last = runs[-1] if runs else None
            if (
                last
                and _index(path) is not None
                and _index(last[-1]) is not None
                and _index(path) == _index(last[-1]) + 1
                and _module_shape(path, children, rows) == _module_shape(last[0], children, rows)
            ):
                last.append(path)
            else:
                runs.append([path])
        return [node(run[0], parent, len(run), run[-1]) for run in runs]

    return node("", "", 1, "")


def _json_bound(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, OverflowError, ValueError, AttributeError):
        return None  # unbounded (sympy fails on int(int_oo) in one of these ways, depending on its version)


def range_rows(program: torch.export.ExportedProgram) -> dict[str, list[int | None]]:
    """Each range constraint as ``expression -> [min, max]`` (None where unbounded)."""
    return {str(expr): [_json_bound(vr.lower), _json_bound(vr.upper)] for expr, vr in program.range_constraints.items()}


def _narrowing(declared: list[int | None], accepted: list[int | None]) -> str:
    """Why the program accepts less than was declared, as far as the bounds tell."""
    (d_low, d_high), (low, high) = declared, accepted
    notes = []
    if low is not None and (d_low is None or low > d_low):
        if low == 2 and (d_low or 0) <= 1:
            notes.append("min 2: torch traces sizes 0 and 1 as constants, not dynamically")
        else:
            notes.append(f"min raised to {low} by the model's code")
    if high is not None and (d_high is None or high < d_high):
        notes.append(f"max lowered to {high} by the model's code")
    return "; ".join(notes)


def dim_rows(
    program: torch.export.ExportedProgram,
    names: dict[sympy.Symbol, str] | None = None,
    plan: Any = None,
    input_paths: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The range table: every dynamic size of the program in the user's names, with the range
    the program accepts, the range declared for it, where it appears, and why they differ.

    ``kind`` is the user's request (``named``, ``derived``, ``auto``, ``dynamic``), or ``size``
    for a symbol only other sizes are written in, ``data-dependent`` for one an op produced
    (``nonzero``, ``.item()``)."""
    names = names or {}
    nodes = user_input_nodes(program)
    paths = input_paths or [f"input[{i}]" for i in range(len(nodes))]
    where: dict[Any, list[str]] = {}
    request_of: dict[Any, Any] = {}
    for leaf, node in enumerate(nodes):
        val = node.meta.get("val") if node is not None else None
        if not isinstance(val, torch.Tensor):
            continue
        requests = plan.requests.get(leaf, {}) if plan is not None else {}
        for index, size in enumerate(val.shape):
            if isinstance(size, torch.SymInt) and not size.node.expr.is_number:
                where.setdefault(size.node.expr, []).append(f"{paths[leaf]}.shape[{index}]")
                if index in requests:
                    request_of.setdefault(size.node.expr, requests[index])
    order = {expr: i for i, expr in enumerate(where)}
    rows = []
    for expr, vr in program.range_constraints.items():
        accepted = [_json_bound(vr.lower), _json_bound(vr.upper)]
        request = request_of.get(expr)
        if request is not None:
            kind = request.kind.value
        elif expr in where or any(expr in other.free_symbols for other in where):
            kind = "size"
        else:
            kind = "data-dependent"
        declared = None
        if request is not None and request.kind.is_dim:
            declared = [request.min, _json_bound(request.max) if request.max is not None else None]
        elif request is not None:
            declared = [request.min, request.max]
        row = {
            "name": expr_text(expr, names),
            "symbol": str(expr),
            "kind": kind,
            "min": accepted[0],
            "max": accepted[1],
            "declared": declared,
            "inputs": where.get(expr, []),
            "note": _narrowing(declared, accepted) if declared is not None else "",
        }
        rows.append((order.get(expr, len(order)), row))
    # the sizes the user declared first, in the order they appear in the inputs
    rows.sort(key=lambda entry: (entry[1]["kind"] in ("size", "data-dependent"), entry[0]))
    return [row for _, row in rows]


def library_versions(model: torch.nn.Module | None) -> dict[str, str]:
    """Python, torch, exporter, and the distributions the model's classes come from."""
    from .. import __version__

    versions = {"python": platform.python_version(), "torch": TORCH_VERSION, "exporter": __version__}
    if model is None:
        return versions
    roots = {type(m).__module__.split(".")[0] for m in model.modules()}
    for root in sorted(roots - {"torch", "builtins", "__main__"}):
        try:
            versions[root] = importlib.metadata.version(root)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def human_bytes(size: float) -> str:
    """``2.6 KB``: a byte count in the largest unit below 1024 of it (B, KB, MB, GB)."""
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""
