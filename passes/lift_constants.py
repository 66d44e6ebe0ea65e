"""Lift tensor constants out of the graph module into CONSTANT_TENSOR inputs."""

from __future__ import annotations

import logging

import torch
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

from exporter._errors import Category, TraceError
from exporter._ir import node_frame, node_location
from exporter._state import ExportState
from exporter._torch_internals import FakeTensor, is_traceable_wrapper_subclass, own_buffers, own_parameters

__all__ = ["lift_constants"]

log = logging.getLogger(__name__)


def _tensor_attribute(gm: torch.fx.GraphModule, target: str):
    value = gm
    for atom in target.split("."):
        value = getattr(value, atom, None)
    return value if isinstance(value, torch.Tensor) else None


def _delete_attribute(gm: torch.fx.GraphModule, target: str) -> None:
    *path, name = target.split(".")
    owner = gm
    for atom in path:
        owner = getattr(owner, atom)
    if not hasattr(owner, name):
        return
    if name in own_buffers(owner):
        del own_buffers(owner)[name]
    elif name in own_parameters(owner):
        del own_parameters(owner)[name]
    else:
        delattr(owner, name)


def _untraced_tensor_error(state: ExportState, node: torch.fx.Node) -> TraceError:
    """A fake tensor the trace did not make reached an op: it was read as a constant."""
    user = next(iter(node.users), None)
    frame = node_frame(user) if user is not None else None
    where = f" (`{frame.line}`)" if frame is not None and frame.line else ""
    return TraceError(
        f"forward() computed with a tensor the trace did not see being made{where}: the value "
        "of `.data` (which torch makes without an op to record), a tensor subclass built in "
        "forward such as TwoTensor(a, b), or a tensor kept from an earlier trace",
        category=Category.CONSTANT,
        location=node_location(user) if user is not None else None,
        hint=(
            "use .detach() instead of .data; for a tensor subclass built in forward, the default IR "
            "(ir='inference') traces through it, or use torch.export.export, which keeps the subclass"
            if state.training
            else "use .detach() instead of .data; compute with plain tensors in forward(), or export "
            "with torch.export, which desugars tensor subclasses"
        ),
    )


def lift_constants(state: ExportState) -> bool:
    """The top-level graph reads no tensor through get_attr: each is a CONSTANT_TENSOR input.

    Tensor attributes of the user's modules that are neither parameters nor buffers are
    named after their FQN (``self.sub.scale`` lifts to target ``sub.scale``); tensors
    created in forward (``torch.tensor([...])``) are named ``lifted_tensor_N`` under the
    module whose forward made them (``sub.lifted_tensor_0``), N counting every such tensor
    of the program, as torch.export names them.  A tensor reached under several names or
    read by several get_attr nodes becomes one input; a
    constant that shares memory with a parameter or buffer is an error (the program would
    hold an independent copy of that state).  A constant made in forward is read through
    ``aten.clone``, as torch.export's IR reads it.
    The new inputs go after the parameters and buffers, before the user inputs.
    """
    gm = state.gm
    by_tensor: dict[int, torch.fx.Node] = {}
    lifted: list[tuple[torch.fx.Node, torch.Tensor, str]] = []
    taken = set(state.constants) | {s.target for s in state.input_specs if s.target}
    counter = 0
    inserter = _PlaceholderInserter(state)

    dropped = _drop_unused_fresh_constants(state)
    reads = [(n, _tensor_attribute(gm, n.target)) for n in gm.graph.nodes if n.op == "get_attr"]
    for node, value in reads:
        if value is None:
            continue
        if isinstance(value, FakeTensor):
            raise _untraced_tensor_error(state, node)
        placeholder = by_tensor.get(id(value))
        if placeholder is None:
            fqns = [f for f in state.constant_fqns.get(id(value), []) if f not in taken]
            if fqns:
                target = fqns[0]
                if len(state.constant_fqns[id(value)]) > 1:
                    log.info(
                        "constant tensor is reachable as %s; lifted once as %r",
                        ", ".join(state.constant_fqns[id(value)]),
                        target,
                    )
            else:
                owner = _module_path(node)
                while (target := f"{owner}.lifted_tensor_{counter}" if owner else f"lifted_tensor_{counter}") in taken:
                    counter += 1
                counter += 1
            _check_not_aliasing_state(state, value, target, node)
            taken.add(target)
            placeholder = inserter.add("c_" + target.replace(".", "_"), value)
            by_tensor[id(value)] = placeholder
            lifted.append((placeholder, value, target))
        state.replace_node(node, placeholder)
    for node, value in reads:
        if value is not None:
            _delete_attribute(gm, node.target)
    copies = False if state.training else _fresh_copies_as_clones(state)

    if not lifted:
        return copies or dropped
    first_user = _first_user_input_index(state)
    new_specs = [
        InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(p.name), target=target)
        for p, _, target in lifted
    ]
    state.input_specs[first_user:first_user] = new_specs
    for _, value, target in lifted:
        state.constants[target] = _held(value)
    return True


def _held(value: torch.Tensor) -> torch.Tensor:
    """The tensor the program holds for a constant.  A Parameter held outside the module's
    parameters (in a plain dict, say) is a constant like any other tensor: the program holds
    it as a plain tensor (sharing its memory), else ep.module() would try to restore it as a
    parameter; its placeholder's value does not require grad either, as torch.export's."""
    return value.detach() if isinstance(value, torch.nn.Parameter) else value


_LIFTS = (torch.ops.aten.lift_fresh.default, torch.ops.aten.lift_fresh_copy.default)
_DETACHES = (torch.ops.aten.detach.default, torch.ops.aten.detach_.default)


def _drop_unused_fresh_constants(state: ExportState) -> bool:
    """A tensor made in forward and never used (``unused = torch.tensor(3)``) leaves a read of
    the constant, its ``lift_fresh_copy`` and (from ``torch.tensor``) an in-place
    ``detach_``, which dead-code removal keeps as a write.  torch.export drops such a chain
    before lifting, and with it the constant input; so does this pass.  A chain whose last
    node has users, or whose read or copy has several, is kept."""
    graph = state.gm.graph
    dropped = []
    for read in [n for n in graph.nodes if n.op == "get_attr"]:
        if len(read.users) != 1:
            continue
        lift = next(iter(read.users))
        if lift.op != "call_function" or lift.target not in _LIFTS or len(lift.users) > 1:
            continue
        chain = [lift, read]
        if lift.users:
            detach = next(iter(lift.users))
            if detach.op != "call_function" or detach.target not in _DETACHES or detach.users:
                continue
            chain.insert(0, detach)
        for node in chain:
            graph.erase_node(node)
        dropped.append(read.target)
    still_read = {n.target for n in graph.nodes if n.op == "get_attr"}
    for target in dropped:
        if target not in still_read:
            _delete_attribute(state.gm, target)
    return bool(dropped)


def _fresh_copies_as_clones(state: ExportState) -> bool:
    """``torch.tensor(...)`` made in forward is recorded as ``lift_fresh_copy`` of the
    constant (which lets fake tensors fold its value, as in ``torch.tensor(5).item()``);
    torch.export's IR reads such a constant through ``aten.clone`` (its training IR keeps
    ``lift_fresh_copy``)."""
    graph = state.gm.graph
    copies = [n for n in graph.nodes if n.op == "call_function" and n.target is torch.ops.aten.lift_fresh_copy.default]
    for node in copies:
        with graph.inserting_before(node):
            clone = graph.call_function(torch.ops.aten.clone.default, node.args, node.kwargs)
        clone.meta.update(node.meta)
        state.replace_node(node, clone)
    return bool(copies)


def _storages(tensor: torch.Tensor) -> list[int]:
    """Addresses of the memory ``tensor`` holds; a wrapper subclass holds its inner tensors'."""
    if is_traceable_wrapper_subclass(tensor):
        names, _ = tensor.__tensor_flatten__()
        return [ptr for name in names for ptr in _storages(getattr(tensor, name))]
    if tensor.device.type == "meta" or tensor.numel() == 0:
        return []
    return [tensor.untyped_storage().data_ptr()]


def _state_storages(root: torch.nn.Module) -> dict[int, str]:
    found: dict[int, str] = {}
    for name, tensor in [*root.named_parameters(), *root.named_buffers()]:
        for ptr in _storages(tensor):
            found.setdefault(ptr, name)
    return found


def _check_not_aliasing_state(state: ExportState, value: torch.Tensor, target: str, read: torch.fx.Node) -> None:
    # A constant sharing memory with a parameter or buffer would be saved as a separate
    # copy: the program would silently keep the old values once the state is updated.
    state_storages = _state_storages(state.root)
    owner = next((state_storages[ptr] for ptr in _storages(value) if ptr in state_storages), None)
    if owner is not None:
        raise TraceError(
            f"constant tensor {target!r} shares memory with {owner!r}: the program would "
            "store a second, independent copy of that state",
            category=Category.CONSTANT,
            location=_first_use(read),
            hint=f"register {target!r} as a buffer, or compute it from {owner!r} inside forward()",
        )


def _module_path(read: torch.fx.Node) -> str:
    """The path of the innermost module whose forward made the constant ``read`` reads ("" for
    the root), from its module stack."""
    stack = read.meta.get("nn_module_stack") or {}
    return next(reversed(stack.values()))[0] if stack else ""


def _first_use(read: torch.fx.Node) -> str | None:
    """The user's line of the first node that uses the tensor ``read`` (a get_attr) reads."""
    order = {node: i for i, node in enumerate(read.graph.nodes)}
    for user in sorted(read.users, key=order.__getitem__):
        location = node_location(user)
        if location is not None:
            return location
    return None


def _first_user_input_index(state: ExportState) -> int:
    for i, spec in enumerate(state.input_specs):
        if spec.kind == InputKind.USER_INPUT:
            return i
    return len(state.input_specs)


class _PlaceholderInserter:
    """Adds placeholders in order, after the non-user inputs and before the first user input."""

    def __init__(self, state: ExportState) -> None:
        self.graph = state.gm.graph
        self.fake_mode = state.fake_mode
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        first_user = _first_user_input_index(state)
        self.anchor = placeholders[first_user] if first_user < len(placeholders) else None
        self.last = placeholders[-1] if placeholders else None

    def add(self, name: str, value: torch.Tensor) -> torch.fx.Node:
        if self.anchor is not None:
            ctx = self.graph.inserting_before(self.anchor)
        elif self.last is not None:
            ctx = self.graph.inserting_after(self.last)
        else:
            ctx = self.graph.inserting_before(next(iter(self.graph.nodes)))
        with ctx:
            node = self.graph.placeholder(name)
        node.meta["val"] = self.fake_mode.from_tensor(_held(value), static_shapes=True)
        self.last = node
        return node
