import torch
from torch.export.graph_signature import InputKind

from exporter.passes import order_inputs
from tests.support import traced_state


class Leaf(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.ones(3))
        self.k = torch.ones(3)

    def forward(self, x):
        return x + self.buf


class Tree(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = Leaf()
        self.b = torch.nn.Linear(3, 3)
        self.b.register_buffer("bb", torch.ones(3))
        self.register_buffer("rootbuf", torch.ones(3), persistent=False)
        self.c = torch.nn.Sequential(Leaf(), torch.nn.Linear(3, 3))
        self.w = torch.nn.Parameter(torch.ones(3))
        self.rk = torch.ones(3)

    def forward(self, x):
        return (
            self.b(x) + self.a.buf + self.a.k + self.rootbuf + self.c(x)
            + self.c[0].buf + self.c[0].k + self.w + self.rk + self.b.bb
        )


def test_state_follows_the_rebuilt_module_tree_walk():
    state = traced_state(Tree(), (torch.randn(2, 3),), until=order_inputs)
    assert order_inputs(state) is True
    targets = [s.target for s in state.input_specs if s.kind != InputKind.USER_INPUT]
    # Parameters first, module-tree order; then buffers and constants together: the root's
    # own, then submodules in the order their first tensor (a parameter) created them.
    assert targets == [
        "w", "b.weight", "b.bias", "c.1.weight", "c.1.bias",
        "rootbuf", "rk", "b.bb", "c.0.buf", "c.0.k", "a.buf", "a.k",
    ]
    placeholders = [n.name for n in state.gm.graph.nodes if n.op == "placeholder"]
    assert placeholders == [s.arg.name for s in state.input_specs]
    assert state.input_specs[-1].kind == InputKind.USER_INPUT


def test_already_ordered_inputs_are_unchanged():
    state = traced_state(torch.nn.Linear(3, 3), (torch.randn(2, 3),), until=order_inputs)
    assert order_inputs(state) is False
