"""Make in-place ops on tensors computed from constants functional, as functionalization
makes them on everything computed from the program's inputs."""

from __future__ import annotations

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from exporter._errors import Category, TraceError
from exporter._ir import node_location
from exporter._state import ExportState
from exporter._torch_internals import OpOverload, overload_name, schema_of

__all__ = ["functionalize_constant_writes"]


def _functional_variant(op: OpOverload) -> OpOverload | None:
    """``aten.sub.Tensor`` for ``aten.sub_.Tensor``; None for ops without one (``out=``)."""
    name = schema_of(op).name.split("::")[-1]
    if not name.endswith("_") or name.startswith("_"):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    return getattr(packet, overload_name(op), None) if packet is not None else None


def _writes_first_argument_only(op: OpOverload) -> bool:
    arguments = schema_of(op).arguments
    written = [a for a in arguments if a.alias_info is not None and a.alias_info.is_write]
    return len(written) == 1 and written[0] is arguments[0]


def _storage(node: torch.fx.Node) -> StorageWeakRef | None:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor) and val.layout == torch.strided:
        return StorageWeakRef(val.untyped_storage())
    return None


def functionalize_constant_writes(state: ExportState) -> bool:
    """No in-place op is left in the top-level graph on a tensor no input depends on.

    Tracing functionalizes everything computed from the program's inputs; a tensor computed
    only from constants (``self.table + 2``) is not, so ``sub_`` on it would stay.  Such a
    write becomes its functional variant, and later readers of the written tensor read the
    result.  A write to a constant attribute itself is the user's error (the program cannot
    keep a changed constant between calls); writes to a tensor that other values alias are
    left for the verifier to report.
    """
    graph = state.gm.graph
    writes = [
        node for node in graph.nodes
        if node.op == "call_function" and isinstance(node.target, OpOverload) and schema_of(node.target).is_mutable
    ]
    if not writes:
        return False
    order = {node: i for i, node in enumerate(graph.nodes)}
    storages = {node: _storage(node) for node in graph.nodes}
    changed = False
    for node in writes:
        op = node.target
        if not node.args or not isinstance(node.args[0], torch.fx.Node) or not _writes_first_argument_only(op):
            continue
        written = node.args[0]
        storage = storages.get(written)
        sharing = [n for n, s in storages.items() if s is not None and s == storage and n is not node]
        constant = next((n for n in sharing if n.op == "get_attr"), None)
        if constant is not None:
            fqns = state.constant_fqns.get(id(getattr(state.gm, constant.target, None)), [constant.target])
            raise TraceError(
                f"forward() changes the tensor attribute self.{fqns[0]} in place ({op}); "
                "a constant cannot carry a change from one call to the next",
                category=Category.UNSUPPORTED_MUTATION,
                location=node_location(node),
                hint="register the tensor as a buffer (self.register_buffer(name, tensor)) so the program updates it",
            )
        functional = _functional_variant(op)
        if functional is None or sharing != [written]:
            continue
        with graph.inserting_before(node):
            replacement = graph.call_function(functional, node.args, node.kwargs)
        replacement.meta.update(node.meta)
        for user in list(written.users):
            if user is not node and order.get(user, -1) > order[node]:
                user.replace_input_with(written, replacement)
        state.replace_node(node, replacement)
        changed = True
    return changed
