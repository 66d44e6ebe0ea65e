"""Program analysis for reports: signature rows, op histogram, module tree counts, ranges, versions."""

import torch
import torch.utils._pytree as pytree
from torch.export import Dim

import exporter
from exporter.cli.analysis import (
    dim_rows,
    input_names,
    leaf_path,
    library_versions,
    module_op_counts,
    module_tree,
    op_histogram,
    output_path,
    output_paths,
    range_rows,
    signature_rows,
    state_groups,
)
from exporter._dims import dim_names


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
    assert scale == {"kind": "BUFFER", "name": "b_scale", "target": "scale", "persistent": False, "shape": [], "dtype": "float32",
                     "numel": 1, "bytes": 4}
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


class Pair(torch.nn.Module):
    def forward(self, x, y):
        return {"joined": torch.cat([x, x], 1) + y, "first": [x[:, :1]]}


def _pair():
    """A program with a shared Dim (batch), a derived one (2*seq), and nested outputs; its plan."""
    from exporter.inputs import bind_inputs, plan_dynamic_shapes

    model = Pair()
    args = (torch.randn(2, 3), torch.randn(2, 6))
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=2, max=32)
    spec = {"x": {0: batch, 1: seq}, "y": {0: batch, 1: 2 * seq}}
    bound = bind_inputs(model, args, {})
    return exporter.export(model, args, dynamic_shapes=spec), plan_dynamic_shapes(model, bound, spec), bound


def test_sizes_are_written_in_the_users_dim_names_and_io_by_pytree_path():
    program, plan, bound = _pair()
    names = dim_names(program, plan)
    assert sorted(names.values()) == ["batch", "seq"]
    rows = signature_rows(program, names, [leaf_path(p) for p in bound.paths])
    assert [(r["path"], r["shape"]) for r in rows["inputs"]] == [("x", ["batch", "seq"]), ("y", ["batch", "2*seq"])]
    assert [(r["path"], r["shape"]) for r in rows["outputs"]] == [("joined", ["batch", "2*seq"]), ("first[0]", ["batch", 1])]
    assert output_paths(program) == ["joined", "first[0]"]


def test_leaf_paths_read_as_the_user_writes_them():
    keys = (pytree.MappingKey("past_key_values"), pytree.SequenceKey(0), pytree.GetAttrKey("key"))
    assert leaf_path(keys) == "past_key_values[0].key"
    assert leaf_path((pytree.MappingKey("inputs"), pytree.MappingKey("mask"))) == "inputs['mask']"
    assert output_path((pytree.SequenceKey(1),)) == "output[1]" and output_path(()) == "output"


def test_the_range_table_names_each_size_where_it_appears_and_what_was_declared():
    program, plan, bound = _pair()
    rows = dim_rows(program, dim_names(program, plan), plan, [leaf_path(p) for p in bound.paths])
    by_name = {r["name"]: r for r in rows}
    assert by_name["batch"]["kind"] == "named" and (by_name["batch"]["min"], by_name["batch"]["max"]) == (1, 8)
    assert by_name["batch"]["declared"] == [1, 8] and by_name["batch"]["note"] == ""
    assert by_name["batch"]["inputs"] == ["x.shape[0]", "y.shape[0]"]
    assert by_name["seq"]["inputs"] == ["x.shape[1]"] and (by_name["seq"]["min"], by_name["seq"]["max"]) == (2, 32)
    assert by_name["2*seq"]["inputs"] == ["y.shape[1]"] and by_name["2*seq"]["kind"] == "derived"
    assert rows[0]["name"] == "batch", "in the order the inputs use them"


def test_an_auto_size_the_model_narrows_says_so():
    class Window(torch.nn.Module):
        def forward(self, x):
            torch._check(x.shape[0] <= 20)
            return x * 2

    from exporter.inputs import bind_inputs, plan_dynamic_shapes

    model, args = Window(), (torch.randn(4),)
    spec = {"x": {0: Dim.AUTO}}
    program = exporter.export(model, args, dynamic_shapes=spec)
    plan = plan_dynamic_shapes(model, bind_inputs(model, args, {}), spec)
    (row,) = dim_rows(program, dim_names(program, plan), plan, ["x"])
    assert row["kind"] == "auto" and row["max"] == 20 and "max lowered to 20" in row["note"]
    assert row["min"] == 2 and row["declared"] == [None, None] and "min 2: torch traces sizes 0 and 1" in row["note"]
    assert row["name"] == row["symbol"], "an unnamed size keeps torch's symbol"


def test_parameters_are_summed_per_module_and_a_stack_of_layers_is_one_group():
    groups = state_groups(signature_rows(_program()), limit=5)
    assert [g["group"] for g in groups] == ["layers.0-10", "(root)"]
    layers = groups[0]
    assert layers["kinds"] == {"parameter": 22} and layers["elements"] == 11 * 20 and layers["bytes"] == 11 * 80
    assert groups[1]["kinds"] == {"buffer": 1} and layers["dtypes"] == ["float32"]
    few = state_groups(signature_rows(exporter.export(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU(), torch.nn.Linear(2, 3)), (torch.randn(1, 2),))))
    assert [g["group"] for g in few] == ["0", "2"], "modules on their own while they fit"


def test_the_module_tree_shows_a_stack_of_identical_layers_once():
    root = module_tree(module_op_counts(_program()), "Stack")
    assert (root["name"], root["class"], root["count"]) == ("Stack", "Stack", 1)
    (layers,) = [c for c in root["children"] if c["path"] == "layers"]
    (stack,) = layers["children"]
    assert (stack["name"], stack["class"], stack["count"], stack["total_ops"]) == ("0-10", "Block", 11, 2)
    assert [c["name"] for c in stack["children"]] == ["lin"], "the first layer's children stand for all"

    rows = module_op_counts(_program())
    rows[rows.index(next(r for r in rows if r["path"] == "layers.5"))] |= {"ops": 7}
    runs = [c["name"] for c in module_tree(rows)["children"][0]["children"]]
    assert runs == ["0-4", "5", "6-10"], "a layer that differs breaks the run"


def test_example_inputs_are_named_by_the_forward_parameter_they_bind_to():
    inputs = [{"path": "args[0]", "kind": "tensor"}, {"path": "kwargs['mask']", "kind": "tensor"}]
    signature = {"inputs": [{"kind": "PARAMETER", "target": "w"}, {"kind": "USER_INPUT", "path": "x"},
                            {"kind": "USER_INPUT", "path": "mask"}]}
    assert input_names(signature, inputs) == ["x", "mask"]
    assert input_names(None, inputs) == ["args[0]", "kwargs['mask']"], "a failed export has no signature"


def test_human_bytes():
    from exporter.cli.analysis import human_bytes

    assert [human_bytes(n) for n in (0, 1023, 2662, 3 * 1024**2, 5 * 1024**4)] == [
        "0 B", "1023 B", "2.6 KB", "3.0 MB", "5120.0 GB",
    ]
