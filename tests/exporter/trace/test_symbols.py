"""Fake inputs: static state (tied weights share one fake), symbols only for declared-dynamic dims."""

import torch
import torch.utils._pytree as pytree
from torch.export import Dim

from exporter.inputs import bind_inputs, plan_dynamic_shapes
from exporter.trace.symbols import InputSource, fake_inputs, new_fake_mode, source_name


class Pair(torch.nn.Module):
    def forward(self, x, rest):
        return x + rest["y"]


def _fakes(spec):
    model = Pair()
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    bound = bind_inputs(model, (x, {"y": y}), {})
    plan = plan_dynamic_shapes(model, bound, spec) if spec is not None else None
    mode = new_fake_mode(model)
    weight = torch.randn(3)
    return mode, fake_inputs(mode, [weight, weight], bound, plan)


def test_a_static_export_has_no_symbols_and_tied_state_shares_one_fake():
    _, fakes = _fakes(None)
    weight, tied, x, y = fakes.inputs
    assert weight is tied
    assert all(isinstance(s, int) for t in (x, y) for s in t.shape)
    assert fakes.tracked == [] and fakes.equalities is None


def test_declared_dims_become_symbols_named_like_torch_exports():
    batch = Dim("batch", max=64)
    mode, fakes = _fakes({"x": {0: batch}, "rest": {"y": {0: batch, 1: Dim.AUTO}}})
    x, y = fakes.inputs[2:]
    assert isinstance(x.shape[0], torch.SymInt) and isinstance(x.shape[1], int)
    assert all(isinstance(s, torch.SymInt) for s in y.shape)
    assert [(t.leaf, t.source.name) for t in fakes.tracked] == [(0, "L['x']"), (1, "L['rest']['y']")]
    assert len(fakes.equalities.source_pairs) == 1  # x.shape[0] == y.shape[0]: one Dim
    vr = mode.shape_env.var_to_range[x.shape[0].node.expr]
    assert (int(vr.lower), int(vr.upper)) == (2, 64)


def test_a_tensor_passed_twice_is_one_fake_whose_sizes_both_inputs_name():
    model = Pair()
    x = torch.randn(4, 8)
    bound = bind_inputs(model, (x, {"y": x}), {})
    spec = {"x": {0: Dim("a", max=64)}, "rest": {"y": {0: Dim("b", max=32), 1: Dim.AUTO}}}
    mode = new_fake_mode(model)
    fakes = fake_inputs(mode, [], bound, plan_dynamic_shapes(model, bound, spec))
    fx, fy = fakes.inputs
    assert fx is fy and all(isinstance(s, torch.SymInt) for s in fx.shape)
    # Two Dims name one size: the spec reads as declaring them equal, within both ranges.
    assert [(a.name, b.name) for a, b in fakes.equalities.source_pairs] == [
        ("L['x'].size()[0]", "L['rest']['y'].size()[0]"),
        ("L['x'].size()[1]", "L['rest']['y'].size()[1]"),
    ]
    vr = mode.shape_env.var_to_range[fx.shape[0].node.expr]
    assert (int(vr.lower), int(vr.upper)) == (2, 32)
    assert fakes.tracked[0].context is fakes.tracked[1].context


def test_a_derived_dim_with_no_named_root_gets_a_phantom_root():
    half = Dim("half")
    _, fakes = _fakes({"x": {1: 2 * half}, "rest": {"y": None}})
    assert len(fakes.equalities.derived_equalities) == 1
    assert len(fakes.equalities.phantom_symbols) == 1


def test_sources_are_named_from_the_forward_path():
    key = pytree.MappingKey
    assert source_name((key("x"),)) == "L['x']"
    assert source_name((key("inputs"), key("a"), pytree.SequenceKey(0))) == "L['inputs']['a'][0]"
    assert source_name((key("inputs"), pytree.GetAttrKey("field"))) == "L['inputs'].field"
    assert InputSource("L['x']").name == "L['x']"


def test_a_model_without_a_source_file_gets_the_data_dependent_error():
    # Defined and exported from code with no file (python -c, a REPL, generated code): no
    # frame on the stack is a user file, so torch's assert-statement check must get its
    # frame elsewhere instead of failing with its own AssertionError.  A subprocess, because
    # under pytest the test runner's own frames would count as the user's.
    import subprocess
    import sys

    source = (
        "import torch, exporter\n"
        "class NoFile(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        if x.sum() > 0:\n"
        "            return x * 2\n"
        "        return x\n"
        "try:\n"
        "    exporter.export(NoFile(), (torch.ones(3),), branches='refuse')\n"
        "except exporter.ExportError as error:\n"
        "    print(error.category.value)\n"
        "    print('AssertionError' in str(error))\n"
    )
    result = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["data-dependent", "control", "flow", "False"], result.stderr[-2000:]


def test_a_dynamic_export_runs_fake_kernels_without_the_cache():
    from exporter.trace.symbols import new_fake_mode

    root = torch.nn.Linear(2, 2)
    assert new_fake_mode(root).cache_enabled  # static: the process-wide cache pays off
    assert not new_fake_mode(root, dynamic=True).cache_enabled
