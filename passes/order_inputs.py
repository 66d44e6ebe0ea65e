"""Order the state inputs the way torch.export's ATen IR orders them."""

from __future__ import annotations

from torch.export.graph_signature import InputKind

from exporter._state import ExportState

__all__ = ["order_inputs"]


class _ModuleTree:
    """Module paths in creation order, as a module tree rebuilt from state FQNs would have them.

    torch.export's ATen IR numbers its state inputs by walking such a rebuilt tree:
    parameters registered first, then buffers, then constants (each creating the
    submodules on its path as needed), visited depth first, a module's own tensors
    before its children's.
    """

    def __init__(self) -> None:
        self.children: dict[tuple[str, ...], list[tuple[str, ...]]] = {(): []}
        self.own: dict[tuple[str, ...], list[int]] = {(): []}

    def register(self, fqn: str, index: int) -> None:
        *path, _ = fqn.split(".")
        node: tuple[str, ...] = ()
        for atom in path:
            child = (*node, atom)
            if child not in self.children:
                self.children[child] = []
                self.own[child] = []
                self.children[node].append(child)
            node = child
        self.own[node].append(index)

    def depth_first(self, keep) -> list[int]:
        order: list[int] = []
        stack = [()]
        while stack:
            node = stack.pop()
            order.extend(i for i in self.own[node] if keep(i))
            stack.extend(reversed(self.children[node]))
        return order


_CONSTANT_KINDS = (InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ)


def _in_module_order(specs: list, kind: InputKind, named) -> list[int]:
    """The indices of the ``kind`` inputs, in the order ``named`` (the module's
    ``named_parameters``/``named_buffers``) lists their targets."""
    rank: dict[str, int] = {}
    for name, _ in named:
        rank.setdefault(name, len(rank))
    indices = [i for i, s in enumerate(specs) if s.kind == kind]
    return sorted(indices, key=lambda i: rank.get(specs[i].target, len(rank)))


def order_inputs(state: ExportState) -> bool:
    """Inputs are: effect tokens, parameters, then buffers and constants, then user inputs.

    Parameters, and buffers with constants, each follow a depth-first walk of the module
    tree (a module's own tensors first, then its submodules in the order their first
    tensor was registered), so a module's buffers and constant attributes sit together,
    exactly as in ``torch.export.export(...).run_decompositions({})``.  User inputs keep
    forward()'s order.  Placeholders are moved to match.

    The training IR orders them as ``torch.export.export`` leaves them before any
    re-trace: parameters, then buffers, each as the module lists them
    (``named_parameters()``: a module's own, then its children's in registration order),
    then the constants in the order the trace first read them (as lifted), then user
    inputs; with no user input at all the constants come first, ahead of the parameters.
    """
    specs = state.input_specs
    users = [i for i, s in enumerate(specs) if s.kind == InputKind.USER_INPUT]
    tokens = [i for i, s in enumerate(specs) if s.kind == InputKind.TOKEN]
    constants = [i for i, s in enumerate(specs) if s.kind in _CONSTANT_KINDS]
    if state.training:
        parameters = _in_module_order(specs, InputKind.PARAMETER, state.root.named_parameters(remove_duplicate=False))
        buffers = _in_module_order(specs, InputKind.BUFFER, state.root.named_buffers(remove_duplicate=False))
        state_order = [*parameters, *buffers, *constants] if users else [*constants, *parameters, *buffers]
    else:
        tree = _ModuleTree()
        registration = [
            *(i for i, s in enumerate(specs) if s.kind == InputKind.PARAMETER),
            *(i for i, s in enumerate(specs) if s.kind == InputKind.BUFFER),
            *constants,
        ]
        for i in registration:
            tree.register(specs[i].target, i)
        state_order = [
            *tree.depth_first(lambda i: specs[i].kind == InputKind.PARAMETER),
            *tree.depth_first(lambda i: specs[i].kind != InputKind.PARAMETER),
        ]
    order = [*tokens, *state_order, *users]
    if order == list(range(len(specs))):
        return False

    graph = state.gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    anchor = next(n for n in graph.nodes if n.op != "placeholder")
    for i in order:
        anchor.prepend(placeholders[i])
    state.input_specs = [specs[i] for i in order]
    return True
