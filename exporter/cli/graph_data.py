"""The program's graph as plain data for the HTML report's drawing: the module tree, the ops in
it and the dataflow between them.

Parameters and buffers are left out (they would be most of the nodes and every edge into a
linear); user inputs and outputs are nodes of the root, by their pytree paths. The data
is small lists rather than dicts: a 32-layer LLaMA has thousands of ops.
"""

from __future__ import annotations

from typing import Any

import sympy
import torch
from torch.export.graph_signature import InputKind, OutputKind

from .analysis import expr_text, output_paths

__all__ = ["NODE_FIELDS", "graph_data"]

NODE_FIELDS = ("name", "label", "module", "args", "shape", "kind", "target")
"""What each entry of ``nodes`` holds, in order: the graph's node name, the short label drawn
(``linear``, or the input's path), the index of its module in ``modules``, the indices of
the nodes it reads, its shape and dtype as text, ``op``/``input``/``output``, and the full
op target."""


def _short(target: Any) -> str:
    """``aten.linear.default`` -> ``linear``; ``<built-in function getitem>`` -> ``getitem``."""
    text = getattr(target, "__name__", None) or str(target)
    if text.startswith("aten."):
        text = text.split(".")[1]
    return text.split(".")[0] if "." in text and not text.startswith("<") else text


def _shape_text(val: Any, names: dict[sympy.Symbol, str]) -> str:
    def size(s: Any) -> str:
        return expr_text(s.node.expr, names) if isinstance(s, torch.SymInt) else str(s)

    if isinstance(val, torch.Tensor):
        return f"{str(val.dtype).replace('torch.', '')}[{', '.join(size(s) for s in val.shape)}]"
    if isinstance(val, (list, tuple)):
        return "(" + ", ".join(_shape_text(v, names) for v in val) + ")"
    if isinstance(val, torch.SymInt):
        return f"SymInt {size(val)}"
    return "" if val is None else type(val).__name__


def graph_data(program: torch.export.ExportedProgram, names: dict[sympy.Symbol, str] | None = None,
               input_paths: list[str] | None = None) -> dict[str, Any]:
    """``{"modules": [[path, class, parent], ...], "nodes": [[...NODE_FIELDS], ...]}``; module 0
    is the root (path ``""``), nodes are in the graph's (topological) order."""
    names = names or {}
    signature = program.graph_signature
    user_inputs = [s.arg.name for s in signature.input_specs if s.kind is InputKind.USER_INPUT and hasattr(s.arg, "name")]
    labels = dict(zip(user_inputs, input_paths or user_inputs))
    modules: list[list[Any]] = [["", "", -1]]
    module_index: dict[str, int] = {"": 0}
    nodes: list[list[Any]] = []
    index: dict[str, int] = {}

    def module_of(node: torch.fx.Node) -> int:
        parent = 0
        for path, cls in (node.meta.get("nn_module_stack") or {}).values():
            name = (cls if isinstance(cls, str) else getattr(cls, "__qualname__", str(cls))).rsplit(".", 1)[-1]
            if path not in module_index:
                module_index[path] = len(modules)
                modules.append([path, name, parent])
            elif not modules[module_index[path]][1]:
                modules[module_index[path]][1] = name  # the root, named by its first op
            parent = module_index[path]
        return parent

    for node in program.graph.nodes:
        if node.op == "placeholder":
            if node.name in labels:
                index[node.name] = len(nodes)
                nodes.append([node.name, labels[node.name], 0, [], _shape_text(node.meta.get("val"), names), "input", ""])
        elif node.op == "call_function":
            args = [index[a.name] for a in node.all_input_nodes if a.name in index]
            index[node.name] = len(nodes)
            nodes.append([node.name, _short(node.target), module_of(node), args,
                          _shape_text(node.meta.get("val"), names), "op", str(node.target)])
        elif node.op == "output":
            outputs = node.args[0] if isinstance(node.args[0], (list, tuple)) else [node.args[0]]
            specs = signature.output_specs
            paths = iter(output_paths(program))
            for spec, value in zip(specs, outputs):
                if spec.kind is not OutputKind.USER_OUTPUT:
                    continue
                label = next(paths, "output")
                args = [index[value.name]] if isinstance(value, torch.fx.Node) and value.name in index else []
                val = value.meta.get("val") if isinstance(value, torch.fx.Node) else value
                nodes.append([f"output:{label}", label, 0, args, _shape_text(val, names), "output", ""])
    return {"modules": modules, "nodes": nodes}
