"""--verify at other sizes: each dynamic size at its min, its max and random sizes in between,
consistent across inputs that share a Dim and with derived Dims."""

import torch
from torch.export import Dim

import exporter
from exporter._dims import dim_names
from exporter.cli.sizes import SizeDraw, inputs_at, size_draws
from exporter.inputs import bind_inputs, plan_dynamic_shapes


class Pair(torch.nn.Module):
    def forward(self, x, y, ids):
        return torch.cat([x, x], 1) + y, ids


def _export(spec, args):
    model = Pair()
    program = exporter.export(model, args, dynamic_shapes=spec)
    bound = bind_inputs(model, args, {})
    return program, bound, dim_names(program, plan_dynamic_shapes(model, bound, spec) if spec else None)


def _args():
    return (torch.randn(2, 3), torch.randn(2, 6), torch.randint(5, 9, (2, 4)))


def test_sizes_at_the_edges_and_inside_shared_and_derived_dims_follow():
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=2, max=32)
    spec = {"x": {0: batch, 1: seq}, "y": {0: batch, 1: 2 * seq}, "ids": {0: batch}}
    program, bound, names = _export(spec, _args())
    draws = size_draws(program, bound.flat, randoms=2, seed=1)
    assert [d.label for d in draws] == ["min", "max", "random #1", "random #2"]
    by_label = {d.label: {names[s]: v for s, v in d.values.items()} for d in draws}
    assert by_label["min"] == {"batch": 1, "seq": 2} and by_label["max"] == {"batch": 8, "seq": 32}
    for draw in draws:
        args, kwargs = inputs_at(program, bound.flat, bound.in_spec, draw, seed=3)
        sizes = {names[s]: v for s, v in draw.values.items()}
        assert args[0].shape == (sizes["batch"], sizes["seq"]) and args[1].shape == (sizes["batch"], 2 * sizes["seq"])
        assert args[2].shape == (sizes["batch"], 4) and kwargs == {}
        assert args[2].min() >= 5 and args[2].max() <= 8, "values stay in the example's range"
        program.module()(*args)  # the program accepts every draw
    assert draws[0].text(names) == "min batch=1 seq=2"


def test_a_derived_sizes_range_limits_its_root():
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=2, max=32)
    spec = {"x": {0: batch, 1: seq}, "y": {0: batch, 1: 2 * seq}, "ids": {0: batch}}
    program, bound, names = _export(spec, _args())
    for expr, vr in list(program.range_constraints.items()):
        if len(expr.free_symbols) == 1 and not expr.is_Symbol:  # as if the model held 2*seq to 4..40
            program.range_constraints[expr] = type(vr)(4, 40)
    draws = {d.label: {names[s]: v for s, v in d.values.items()} for d in size_draws(program, bound.flat)}
    assert draws["max"]["seq"] == 20, "2*seq may not pass 40"


def test_unbounded_sizes_go_to_a_few_times_the_example_and_static_programs_draw_nothing():
    program, bound, names = _export({"x": {0: Dim("b")}, "y": {0: Dim("b")}, "ids": {0: Dim("b")}}, _args())
    draws = {d.label: d for d in size_draws(program, bound.flat)}
    assert {names[s]: v for s, v in draws["max"].values.items()} == {"b": 8}
    static, bound, _ = _export(None, _args())
    assert size_draws(static, bound.flat) == []
    assert SizeDraw("max", {}).text({}) == "max "


def test_a_max_too_large_to_run_is_replaced_by_a_large_size_and_said_so():
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=2, max=131072)
    spec = {"x": {0: batch, 1: seq}, "y": {0: batch, 1: 2 * seq}, "ids": {0: batch}}
    program, bound, names = _export(spec, _args())
    draws = {d.label: d for d in size_draws(program, bound.flat)}
    assert "max" not in draws
    large = draws["large"]
    assert {names[s]: v for s, v in large.values.items()} == {"batch": 8, "seq": 512}
    assert large.text(names) == "large batch=8 seq=512 (max seq 131072 not run)"
    assert all(v <= 512 for d in draws.values() for v in d.values.values()), "random sizes stay runnable too"
