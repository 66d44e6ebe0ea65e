"""The declared dynamic dims as the trace left them: one record per dim that stayed symbolic."""

import torch
from torch.export import Dim

from exporter.constraints.declared import declared_dims, source_code, source_location
from exporter.inputs import bind_inputs, plan_dynamic_shapes
from exporter.trace import trace


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def test_each_declared_dim_has_its_symbol_and_example():
    model = Add()
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    bound = bind_inputs(model, (x, y), {})
    plan = plan_dynamic_shapes(model, bound, {"x": {0: Dim("b"), 1: None}, "y": {0: Dim("b"), 1: Dim.AUTO}})
    state = trace(model, bound, plan)
    dims = declared_dims(state)
    assert [(d.leaf, d.index, d.request.input_dim, d.example, d.label) for d in dims] == [
        (0, 0, "x.shape[0]", 4, "b"),
        (1, 0, "y.shape[0]", 4, "b"),
        (1, 1, "y.shape[1]", 3, "y.shape[1]"),
    ]
    assert all(isinstance(d.symbol, __import__("sympy").Symbol) for d in dims)


def test_source_locations_come_from_the_frame():
    class Frame:
        filename, lineno, line = "m.py", 7, "  x[:8]  "

    class Sloc:
        framework_loc = Frame()

    assert source_location(Sloc()) == "m.py:7" and source_code(Sloc()) == "x[:8]"
    assert source_location(None) is None and source_code(None) is None
