"""Turn the grad-mode and autocast changes a training-IR trace recorded into regions, as
torch.export's training IR holds them: each region's ops moved into a subgraph called through
``wrap_with_set_grad_enabled`` or ``wrap_with_autocast``, its results read with ``getitem``
(ordered by first use, named after the value each reads)."""

from __future__ import annotations

import operator
from collections.abc import Callable

import torch

from exporter._errors import Category, TraceError
from exporter._ir import node_location
from exporter._state import ExportState
from exporter._torch_internals import ENTER_AUTOCAST, EXIT_AUTOCAST, SET_GRAD_ENABLED, take_name

__all__ = ["wrap_autograd_regions"]

_WRAP_GRAD = torch.ops.higher_order.wrap_with_set_grad_enabled
_WRAP_AUTOCAST = torch.ops.higher_order.wrap_with_autocast


def _calls(node: torch.fx.Node, target) -> bool:
    return node.op == "call_function" and node.target is target


class _Region:
    """A run of consecutive nodes to move into one body."""

    def __init__(self, hop, hop_args: tuple, start: torch.fx.Node) -> None:
        self.hop = hop
        self.hop_args = hop_args
        self.start = start
        """The grad-mode or autocast call that opened the region (an empty one sits there)."""
        self.nodes: list[torch.fx.Node] = []


def _grad_regions(graph: torch.fx.Graph, ambient: bool) -> tuple[list[_Region], list[torch.fx.Node]]:
    regions: list[_Region] = []
    markers: list[torch.fx.Node] = []
    current: _Region | None = None
    for node in graph.nodes:
        if _calls(node, SET_GRAD_ENABLED):
            markers.append(node)
            enabled = bool(node.args[0])
            current = _Region(_WRAP_GRAD, (enabled,), node) if enabled != ambient else None
            if current is not None:
                regions.append(current)
        elif node.op not in ("placeholder", "output") and current is not None:
            current.nodes.append(node)
    return regions, markers


def _autocast_regions(graph: torch.fx.Graph) -> tuple[list[_Region], list[torch.fx.Node]]:
    regions: list[_Region] = []
    markers: list[torch.fx.Node] = []
    current: _Region | None = None
    depth = 0
    for node in graph.nodes:
        if _calls(node, ENTER_AUTOCAST):
            depth += 1
            if depth == 1:
                markers.append(node)
                current = _Region(_WRAP_AUTOCAST, tuple(node.args), node)
                regions.append(current)
                continue
        elif _calls(node, EXIT_AUTOCAST):
            depth -= 1
            if depth < 0 or (depth == 0 and node.args[0] is not markers[-1]):
                raise _straddling(node)
            if depth == 0:
                markers.append(node)
                current = None
                continue
        if current is not None and node.op not in ("placeholder", "output"):
            current.nodes.append(node)
    if depth:
        raise _straddling(markers[-1])
    return regions, markers


def _straddling(node: torch.fx.Node) -> TraceError:
    return TraceError(
        "an autocast region and a grad-mode change overlap without nesting (autocast entered "
        "in one grad mode and left in another), which the training IR cannot express as regions",
        category=Category.UNSUPPORTED_OPERATOR,
        location=node_location(node),
        hint="nest them: put the torch.no_grad()/enable_grad() block wholly inside or wholly "
        "outside the torch.autocast block",
    )


def _common_stack(nodes: list[torch.fx.Node]) -> dict:
    stacks = [node.meta.get("nn_module_stack") or {} for node in nodes]
    if not stacks:
        return {}
    common = list(stacks[0].items())
    for stack in stacks[1:]:
        items = list(stack.items())
        n = 0
        while n < min(len(common), len(items)) and common[n] == items[n]:
            n += 1
        common = common[:n]
    return dict(common)


_Rename = Callable[[torch.fx.Node, torch.fx.Node], None]
"""Told each value the region now hands out through a ``getitem`` (old node, new node)."""


def _wrap(gm: torch.fx.GraphModule, region: _Region, name: str, rename: _Rename) -> torch.fx.GraphModule:
    """Move ``region``'s nodes into a body attribute ``name`` of ``gm``, called via its op."""
    graph = gm.graph
    inside = set(region.nodes)
    inputs: list[torch.fx.Node] = []
    for node in region.nodes:
        for used in node.all_input_nodes:
            if used not in inside and used not in inputs:
                if _calls(used, ENTER_AUTOCAST):
                    raise _straddling(used)
                inputs.append(used)
    outputs = _outputs_by_first_use(graph, region.nodes, inside)

    body_graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for value in inputs:
        placeholder = body_graph.placeholder(value.name)
        placeholder.meta = {key: value.meta[key] for key in ("val", "tensor_meta") if key in value.meta}
        env[value] = placeholder
    for node in region.nodes:
        env[node] = body_graph.node_copy(node, lambda n: env[n])
    body_graph.output(tuple(env[node] for node in outputs))
    body = torch.fx.GraphModule(gm, body_graph)
    gm.add_submodule(name, body)

    stack = _common_stack(region.nodes) or dict(list((region.start.meta.get("nn_module_stack") or {}).items())[:1])
    with graph.inserting_before(region.nodes[0] if region.nodes else region.start):
        attr = graph.get_attr(name)
        attr.meta["nn_module_stack"] = dict(stack)
        call = graph.call_function(region.hop, (*region.hop_args, attr, *inputs))
        call.meta["nn_module_stack"] = dict(stack)
        call.meta["val"] = tuple(node.meta.get("val") for node in outputs)
        items = []
        for i, node in enumerate(outputs):
            item = graph.call_function(operator.getitem, (call, i))
            item.meta = dict(node.meta)
            node.replace_all_uses_with(item, delete_user_cb=lambda user: user not in inside)
            items.append(item)
    names = [node.name for node in outputs]
    for node in reversed(region.nodes):
        graph.erase_node(node)
    # torch.export's names: each getitem is named as the value it reads; a region with one
    # output gives its name to the call instead (its getitem keeps an FX name).
    if len(items) == 1:
        take_name(call, names[0])
    else:
        for item, name in zip(items, names):
            take_name(item, name)
    for node, item in zip(outputs, items):
        rename(node, item)
    return body


def _outputs_by_first_use(graph: torch.fx.Graph, nodes: list[torch.fx.Node], inside: set[torch.fx.Node]) -> list[torch.fx.Node]:
    """The region's values used after it, in the order of their first use there (each
    node's arguments in order), as torch.export's split of the graph orders them."""
    outputs: dict[torch.fx.Node, None] = {}
    wanted = {node for node in nodes if any(user not in inside for user in node.users)}
    for node in graph.nodes:
        if node in inside or not wanted:
            continue
        for used in node.all_input_nodes:  # (in argument order)
            if used in wanted:
                outputs[used] = None
                wanted.discard(used)
    return list(outputs)


def _free_name(gm: torch.fx.GraphModule) -> str:
    i = 0
    while hasattr(gm, f"submod_{i}"):
        i += 1
    return f"submod_{i}"


def _wrap_all(
    gm: torch.fx.GraphModule, find: Callable[[torch.fx.Graph], tuple[list[_Region], list[torch.fx.Node]]], rename: _Rename
) -> list[torch.fx.GraphModule]:
    """Wrap every region ``find`` sees in ``gm``'s graph; drop the grad/autocast calls."""
    regions, markers = find(gm.graph)
    bodies = [_wrap(gm, region, _free_name(gm), rename) for region in regions]
    for marker in reversed(markers):
        if marker.users:
            raise _straddling(marker)
        gm.graph.erase_node(marker)
    return bodies


def _ignore(old: torch.fx.Node, new: torch.fx.Node) -> None:
    pass


def _wrap_autocast(gm: torch.fx.GraphModule, rename: _Rename) -> None:
    for body in _wrap_all(gm, _autocast_regions, rename):
        _wrap_autocast(body, _ignore)
        body.recompile()


def wrap_autograd_regions(state: ExportState) -> bool:
    """Grad-mode and autocast regions become ``wrap_with_set_grad_enabled`` and
    ``wrap_with_autocast`` calls of subgraphs, as in torch.export's training IR (see module doc)."""
    gm = state.gm
    if not any(_calls(node, SET_GRAD_ENABLED) or _calls(node, ENTER_AUTOCAST) for node in gm.graph.nodes):
        return False

    # A region's output the program returns, or a preserved call names, is now a getitem.
    ambient = torch.is_grad_enabled()
    for body in _wrap_all(gm, lambda graph: _grad_regions(graph, ambient), state.rename_value):
        _wrap_autocast(body, _ignore)
        body.recompile()
    _wrap_autocast(gm, state.rename_value)
    gm.recompile()
    return True
