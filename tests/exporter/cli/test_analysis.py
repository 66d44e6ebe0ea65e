"""Program analysis for reports: signature rows, op histogram, module tree counts, ranges, versions."""

import torch
from torch.export import Dim

import exporter
from exporter.cli.analysis import library_versions, module_op_counts, op_histogram, range_rows, signature_rows


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Block() for _ in range(11)])
        self.register_buffer("scale", torch.ones(()), persistent=False)

    def forward(self, x, flag=True):
        for layer in self.layers:
            x = layer(x)
        return x * self.scale


def _program():
    return exporter.export(Stack(), (torch.randn(2, 4), True), dynamic_shapes={"x": {0: Dim("b", max=8)}, "flag": None})


def test_signature_rows_give_kind_target_shape_dtype():
    rows = signature_rows(_program())
    scale = next(r for r in rows["inputs"] if r["target"] == "scale")
    assert scale == {"kind": "BUFFER", "name": "b_scale", "target": "scale", "persistent": False, "shape": [], "dtype": "float32"}
    user = [r for r in rows["inputs"] if r["kind"] == "USER_INPUT"]
    assert user[0]["name"] == "x" and isinstance(user[0]["shape"][0], str) and user[0]["shape"][1] == 4
    assert user[1] == {"kind": "USER_INPUT", "name": "flag", "target": None, "value": True, "shape": None, "dtype": "bool"}
    assert [r["kind"] for r in rows["outputs"]] == ["USER_OUTPUT"]


def test_op_counts_per_op_and_per_module_in_tree_order():
    program = _program()
    histogram = op_histogram(program)
    assert histogram["aten.linear.default"] == 11 and histogram["aten.relu.default"] == 11
    assert list(histogram)[:2] == ["aten.linear.default", "aten.relu.default"]  # most frequent first
    rows = module_op_counts(program)
    paths = [r["path"] for r in rows]
    assert paths[:3] == ["", "layers", "layers.0"] and paths.index("layers.2") < paths.index("layers.10")
    root = rows[0]
    assert root["class"] == "Stack" and root["total_ops"] == sum(histogram.values()) and root["ops"] >= 1
    assert next(r for r in rows if r["path"] == "layers.3.lin") == {"path": "layers.3.lin", "class": "Linear", "ops": 1, "total_ops": 1}


def test_ranges_and_versions():
    assert list(range_rows(_program()).values()) == [[0, 8]]
    versions = library_versions(Stack())
    assert versions["torch"] == torch.__version__ and versions["exporter"] == exporter.__version__
    assert set(versions) == {"python", "torch", "exporter"}  # the model is the test's own
