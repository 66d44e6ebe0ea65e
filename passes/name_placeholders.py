"""Give placeholders the names torch.export gives them, and keep every other name unique."""

from __future__ import annotations

import re
from collections import defaultdict

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind

from exporter._ir import PLACEHOLDER_PREFIXES
from exporter._state import ExportState
from exporter._torch_internals import HigherOrderOperator, higher_order_name

__all__ = ["name_placeholders", "user_input_name"]

_NON_WORD = re.compile(r"[^a-zA-Z0-9]")
_NUMBERED = re.compile(r"(.*)_(\d+)")


class _Names:
    """Assigns names without collisions, numbering repeats the way torch.export does.

    A repeated name gets ``_N`` with N one past the highest number already used for its
    stem; graph nodes (not placeholders) named like ``add_3`` count as stem ``add``.
    """

    def __init__(self) -> None:
        self.new: dict[str, str] = {}
        self.highest: dict[str, int] = defaultdict(int)
        self.used: set[str] = set()

    def assign(self, old: str, wanted: str, *, placeholder: bool = False) -> str:
        stem = wanted
        match = _NUMBERED.match(wanted)
        if match and not placeholder:
            stem = match.group(1)
        name = wanted
        if name in self.used:
            name = f"{stem}_{self.highest[stem] + 1}"
        match = _NUMBERED.match(name)
        if match:
            self.highest[match.group(1)] = max(self.highest[match.group(1)], int(match.group(2)))
        self.new[old] = name
        self.used.add(name)
        return name


def _key_name(key) -> str:
    if isinstance(key, pytree.MappingKey):
        return _NON_WORD.sub("_", str(key.key))
    if isinstance(key, pytree.SequenceKey):
        return str(key.idx)
    if isinstance(key, pytree.GetAttrKey):
        return key.name
    return _NON_WORD.sub("_", str(key))


def _target_name(target: str) -> str:
    for prefix in ("L__self___", "self_"):
        if target.startswith(prefix):
            target = target[len(prefix) :]
            break
    return _NON_WORD.sub("_", target).lower()


def user_input_name(path: pytree.KeyPath) -> str:
    """Placeholder name of a user input leaf: its forward() path, lower-cased, joined by '_'."""
    return "_".join(_key_name(k).lower() for k in path)


def name_placeholders(state: ExportState) -> bool:
    """Placeholders are named as torch.export names them, and no two nodes share a name.

    * user inputs follow forward()'s signature: ``x``; nested leaves join their path
      (``inputs_a``, ``inputs_b_0``); ``*args`` become ``args_0``, ``args_1``;
    * parameters, buffers and constants are ``p_``, ``b_``, ``c_`` plus their FQN with
      dots as underscores (``p_encoder_layer_0_weight``); custom objects ``obj_``; effect
      tokens ``token``, ``token_1``;
    * other nodes keep their names unless one collides with a placeholder's, in which
      case the other node is renumbered;
    * higher-order-op subgraphs call their inputs by the names of the operands passed in.
    """
    gm = state.gm
    names = _Names()
    user_specs = [s for s in state.input_specs if s.kind == InputKind.USER_INPUT]
    for spec, path in zip(user_specs, state.user_input_paths):
        names.assign(spec.arg.name, PLACEHOLDER_PREFIXES[InputKind.USER_INPUT] + user_input_name(path), placeholder=True)
    for spec in state.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            continue
        base = "" if spec.kind == InputKind.TOKEN else _target_name(spec.target)
        names.assign(spec.arg.name, PLACEHOLDER_PREFIXES[spec.kind] + base, placeholder=True)
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            names.assign(node.name, node.name)

    changed = False
    for node in gm.graph.nodes:
        new = names.new.get(node.name, node.name)
        if new != node.name:
            changed = True
            node.name = new
        if node.op == "placeholder":
            node.target = node.name
    for spec in state.input_specs:
        spec.arg.name = names.new.get(spec.arg.name, spec.arg.name)
    for spec in state.output_specs:
        if hasattr(spec.arg, "name") and spec.arg.name in names.new:
            spec.arg.name = names.new[spec.arg.name]
        if spec.kind == OutputKind.USER_INPUT_MUTATION:
            spec.target = names.new.get(spec.target, spec.target)
    if _name_subgraph_inputs(gm):
        changed = True
    return changed


def _subgraph_operands(gm: torch.fx.GraphModule, node: torch.fx.Node):
    """(subgraph, operand nodes) pairs of a higher-order op, for the ops whose layout is known."""
    name = higher_order_name(node.target)
    args = node.args
    if name == "cond":
        _, true_graph, false_graph, operands = args
        return [(getattr(gm, true_graph.target), list(operands)), (getattr(gm, false_graph.target), list(operands))]
    if name == "map_impl":
        body, xs, extra = args
        return [(getattr(gm, body.target), [*xs, *extra])]
    if name == "wrap_with_set_grad_enabled":
        return [(getattr(gm, args[1].target), list(args[2:]))]
    return []


def _name_subgraph_inputs(gm: torch.fx.GraphModule) -> bool:
    changed = False
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, HigherOrderOperator):
            continue
        for subgraph, operands in _subgraph_operands(gm, node):
            names = _Names()
            sub_nodes = list(subgraph.graph.nodes)
            sub_placeholders = [n for n in sub_nodes if n.op == "placeholder"]
            for ph, operand in zip(sub_placeholders, operands):
                if isinstance(operand, torch.fx.Node):
                    names.assign(ph.name, operand.name, placeholder=True)
                else:
                    names.assign(ph.name, ph.name, placeholder=True)
            for n in sub_nodes:
                if n.op != "placeholder" or n.name not in names.new:
                    names.assign(n.name, n.name)
            for n in sub_nodes:
                new = names.new[n.name]
                if new != n.name:
                    changed = True
                    n.name = new
                if n.op == "placeholder":
                    n.target = n.name
            subgraph.recompile()
            changed |= _name_subgraph_inputs(subgraph)
    return changed
