"""Python on sizes and tensors (max, min, math.pow, indexing, torch.tensor) means the same with
and without dynamic_shapes, and keeps symbolic sizes symbolic."""

import builtins
import math

import pytest
import torch
from torch.export import Dim

import exporter
from exporter import ConstraintError
from exporter.trace.python_ops import SymbolicInt, builtin_len, builtin_max, builtin_min, int_shadows_safely, power
from tests.exporter.trace import int_models
from tests.exporter.constraints.test_violations import View16


class PadTo(torch.nn.Module):
    def forward(self, x):
        n = max(x.shape[0], 4)  # plain Python max/min on a symbolic size
        m = min([x.shape[0], 6, 9])
        last = x[x.shape[0] - 1]  # indexing with a symbolic int
        return torch.zeros(n) + last, x * m * torch.tensor(x.shape[0])


def test_builtin_max_min_and_symbolic_indexing_stay_symbolic():
    spec = {"x": {0: Dim("n")}}
    ep = exporter.export(PadTo(), (torch.randn(6),), dynamic_shapes=spec)
    oracle = torch.export.export(PadTo(), (torch.randn(6),), dynamic_shapes=spec)
    assert {str(k): (v.lower, v.upper) for k, v in ep.range_constraints.items()} == {
        str(k): (v.lower, v.upper) for k, v in oracle.range_constraints.items()
    }
    for n in (2, 3, 5, 6, 7, 12):
        x = torch.randn(n)
        torch.testing.assert_close(ep.module()(x), PadTo()(x))
    assert max(3, 4) == 4 and min([5, 2]) == 2 and max.__module__ == "builtins"  # restored


def test_builtins_are_restored_when_an_export_fails():
    with pytest.raises(ConstraintError):
        exporter.export(View16(), (torch.randn(4, 16),), dynamic_shapes={"x": {1: Dim("features")}})
    assert builtins.max.__module__ == "builtins" and builtins.min.__module__ == "builtins"
    assert math.pow.__module__ == "math"
    assert not torch.overrides._get_current_function_mode_stack()


class TensorMinMax(torch.nn.Module):
    def forward(self, t, u, x):
        floor = max(t, 0.5)  # a one-element tensor and a number: clamp
        low = min(t, u)  # two one-element tensors: minimum
        n = max(x.shape[0], 3)  # sizes
        return floor * x + low, torch.full((n,), 2.0), math.pow(x.shape[0], 2) * x


@pytest.mark.parametrize("spec", [None, {"t": None, "u": None, "x": {0: Dim("n")}}], ids=["static", "dynamic"])
def test_max_min_and_pow_behave_the_same_with_and_without_dynamic_shapes(spec):
    args = (torch.tensor([0.25]), torch.tensor([0.75]), torch.randn(4))
    ep = exporter.export(TensorMinMax(), args, dynamic_shapes=spec)
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert {"aten.clamp.default", "aten.minimum.default"} <= targets
    for t, u in [(0.25, 0.75), (0.9, 0.1)]:
        inputs = (torch.tensor([t]), torch.tensor([u]), torch.randn(4))
        for got, want in zip(ep.module()(*inputs), TensorMinMax()(*inputs)):
            torch.testing.assert_close(got, want)
    # torch.export takes max(tensor, 0.5) as clamp too, with or without dynamic shapes
    oracle = torch.export.export(TensorMinMax(), args, dynamic_shapes=spec, strict=False)
    assert {"aten.clamp.default", "aten.minimum.default"} <= {str(n.target) for n in oracle.graph.nodes}


def test_the_replacements_fall_back_to_the_builtins_on_plain_values():
    real_max, real_min, real_pow = max, min, math.pow
    assert builtin_max(real_max)(3, 7, 5) == 7 and builtin_min(real_min)([4, 2, 9]) == 2
    assert builtin_max(real_max)(["b", "a"], key=len) == "b"
    assert power(real_pow)(2, 3) == 8.0 and isinstance(power(real_pow)(2, 3), float)
    with pytest.raises(ValueError):
        builtin_max(real_max)([])


class AverageOfSelectedRows(torch.nn.Module):
    """``len()`` of a selection only the data sizes: torchvision's ``len(rois)``, longformer's
    count of global tokens."""

    def forward(self, x):
        rows = x[x[:, 0] > 0]
        n = len(rows)
        table = x.new_zeros(n, x.shape[1] + 1)
        table[:, 1:] = rows
        return table.sum(0) / max(n, 1), torch.tensor(0.0) + n


def test_len_of_a_data_sized_tensor_is_its_symbolic_size():
    model = AverageOfSelectedRows()
    x = torch.randn(6, 3)
    x[:, 0] = torch.tensor([1.0, -1.0, 2.0, -1.0, 3.0, -1.0])
    program = exporter.export(model, (x,))
    with pytest.raises(Exception, match="data-dependent expression u0"):
        torch.export.export(model, (x,), strict=False)  # the oracle needs the count's value
    for rows_selected in (x, -x.abs(), x.abs()):  # three rows, none, all six
        for got, want in zip(program.module()(rows_selected), model(rows_selected)):
            torch.testing.assert_close(got, want)
    assert builtins.len.__module__ == "builtins"  # put back


class KeepValidColumns(torch.nn.Module):
    """blt's patches: a slice whose end is a 0-d tensor the data decides, read by Python's
    ``__index__`` in eager."""

    def forward(self, x):
        valid = (x > 0).sum(dim=1).max()
        return x[:, :valid] * 2, x[:, valid:].sum()


def test_a_slice_ended_by_a_data_decided_0d_tensor_keeps_its_value_symbolic():
    model = KeepValidColumns()
    x = torch.randn(3, 6)
    program = exporter.export(model, (x,))
    oracle = torch.export.export(model, (x,), strict=False)
    assert [str(s) for s in program.graph_signature.input_specs] == [str(s) for s in oracle.graph_signature.input_specs]
    for fresh in (x, x.abs(), -x.abs(), torch.randn(3, 6)):  # some, all and no columns kept
        for got, want in zip(program.module()(fresh), model(fresh)):
            torch.testing.assert_close(got, want)


def test_len_stays_pythons_wherever_no_size_is_data_sized():
    real_len = builtins.len
    length = builtin_len(real_len)
    assert length([1, 2, 3]) == 3 and length(torch.zeros(4, 2)) == 4 and type(length(torch.zeros(4))) is int
    with pytest.raises(TypeError):
        length(torch.tensor(1.0))  # a 0-d tensor has no len(), as in Python
    seen = []
    real = builtins.len

    class Counts(torch.nn.Module):
        def forward(self, x):
            seen.append(builtins.len is real)
            return x[: len(x) // 2]

    exporter.export(Counts(), (torch.randn(6, 2),))
    assert seen == [True]  # no size needed a value: Python's own len()


def test_symbolic_int_is_pythons_int_on_plain_values():
    assert isinstance(3, SymbolicInt) and isinstance(True, SymbolicInt) and not isinstance(3.0, SymbolicInt)
    assert issubclass(bool, SymbolicInt) and not issubclass(float, SymbolicInt)
    for args, want in (((), 0), (("12", 16), 18), ((2.7,), 2), ((-2.7,), -2), ((torch.tensor(5),), 5), ((torch.tensor([3.9]),), 3)):
        got = SymbolicInt(*args)
        assert got == want and type(got) is builtins.int, args


@pytest.mark.parametrize(
    "source, safe",
    [
        ("n = int(x)", True),
        ("def f(x: int = 3) -> int:\n    return isinstance(x, (int, float))", True),
        ("def f(x: List[int], y: Optional[int]): pass", True),
        ("size: int = 3", True),
        ("y = np.int", True),
        ("if type(x) is int: pass", False),
        ("t = type(x) in (int, float)", False),
        ("a = torch.zeros(3, dtype=int)", False),
        ("kinds = {'count': int}", False),
        ("convert = int", False),
    ],
)
def test_a_module_takes_the_symbolic_int_only_where_it_calls_int_and_tests_against_it(source, safe):
    assert int_shadows_safely(source) is safe


@pytest.mark.parametrize("read", ["item", "tensor"])
def test_int_of_a_data_decided_value_stays_symbolic_in_the_module_that_takes_it(read):
    """torchaudio's Conformer: a padding mask as wide as ``int(lengths.max())``; attention then
    needs it as wide as the input, which the program asserts where eager raises."""
    model = int_models.MaskedAttention(read).eval()
    x = torch.randn(2, 5, 8)
    program = exporter.export(model, (x, torch.tensor([5, 3])))
    assert "int" not in vars(int_models)  # the module's own name is back
    with torch.no_grad():
        for lengths in ([5, 3], [2, 5], [5, 5], [1, 5]):
            torch.testing.assert_close(program.module()(x, torch.tensor(lengths)), model(x, torch.tensor(lengths)))
    with pytest.raises(AssertionError):
        model(x, torch.tensor([4, 3]))
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        program.module()(x, torch.tensor([4, 3]))


def test_int_of_a_data_decided_float_truncates_as_python_does():
    model = int_models.Rescaled()
    x = torch.tensor([0.5, -1.0, 0.25, 2.0, 0.1])
    program = exporter.export(model, (x,))
    for fresh in (x, x * 0.3, x * 0.01, -x, x * 100):  # 4, 1, 0, 4 and all 5 steps kept
        torch.testing.assert_close(program.module()(fresh), model(fresh))


def test_a_module_that_tests_against_int_keeps_its_own_and_the_export_names_the_line(tmp_path, monkeypatch):
    (tmp_path / "typed_counts.py").write_text(
        "import torch\n\n"
        "class Counted(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        n = int(x.max().long())\n"
        "        assert type(n) is int\n"
        "        return x[:n]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import typed_counts

    with pytest.raises(exporter.TraceError, match="needs the value of a tensor") as refused:
        exporter.export(typed_counts.Counted(), (torch.tensor([1.0, 3.0, 2.0]),))
    assert refused.value.location == f"{tmp_path / 'typed_counts.py'}:5"
    assert "int" not in vars(typed_counts)


class WriteAtArgmax(torch.nn.Module):
    """Writes at positions the data decides, as eager indexes with a 0-d tensor: a row, part
    of a row, a column added to, and two positions side by side."""

    def forward(self, x):
        out = torch.zeros(5, 4)
        out[x.sum(1).argmax(), 1:] = x[0, :3]
        out[:, x[0].argmin()] += 1.0
        out[x[:, 0].argmax(), x[1].argmax()] = -2
        out[..., x[2].argmin()] = x[:, 3]
        out[x[3].argmax() + 1] = x[:1]  # leading ones dropped, as eager drops them
        return out


def test_a_write_at_a_data_decided_0d_tensor_is_an_index_put_matching_eager():
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(5, 4, generator=g) for _ in range(6)]
    ep = exporter.export(WriteAtArgmax(), (inputs[0],))
    assert any(n.target is torch.ops.aten.index_put.default for n in ep.graph.nodes)
    for x in inputs:
        torch.testing.assert_close(ep.module()(x), WriteAtArgmax()(x))
    assert torch.Tensor.__setitem__ is torch._C.TensorBase.__setitem__  # restored
