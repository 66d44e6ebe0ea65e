import torch

from exporter.passes import normalize_module_stack
from tests.support import traced_state


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x).relu()


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        x.add_(1)
        return self.block(self.block(x))


def test_stacks_are_rooted_keyed_like_torch_export_and_absent_on_io():
    state = traced_state(Model(), (torch.randn(2),), until=normalize_module_stack)
    normalize_module_stack(state)
    root = ("", f"{Model.__module__}.{Model.__qualname__}")
    for node in state.gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            assert "nn_module_stack" not in node.meta and "stack_trace" not in node.meta
            continue
        stack = node.meta["nn_module_stack"]
        assert type(stack) is dict
        assert next(iter(stack.items())) == ("L__self__", root)
        assert all(isinstance(v, tuple) and all(isinstance(p, str) for p in v) for v in stack.values())

    linears = [n for n in state.gm.graph.nodes if n.target is torch.ops.aten.linear.default]
    first, second = (n.meta["nn_module_stack"] for n in linears)
    assert list(first) == ["L__self__", "L__self__block", "L__self__block.lin"]
    # a module called a second time gets torch.export's @N key, same path
    assert list(second) == ["L__self__", "L__self__block@1", "L__self__block.lin@1"]
    assert second["L__self__block.lin@1"] == ("block.lin", "torch.nn.modules.linear.Linear")


def test_is_idempotent():
    state = traced_state(Model(), (torch.randn(2),), until=normalize_module_stack)
    assert normalize_module_stack(state) is True
    assert normalize_module_stack(state) is False
