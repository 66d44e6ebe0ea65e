import operator

import pytest
import torch

import exporter
from exporter._torch_internals import ENTER_AUTOCAST, EXIT_AUTOCAST, SET_GRAD_ENABLED
from exporter.passes import wrap_autograd_regions
from tests.support import call_targets, traced_state

WRAP_GRAD = torch.ops.higher_order.wrap_with_set_grad_enabled
WRAP_AUTOCAST = torch.ops.higher_order.wrap_with_autocast


class NoGradThenAutocast(torch.nn.Module):
    def forward(self, x):
        with torch.no_grad():
            y = x * 2
        with torch.autocast("cpu", dtype=torch.bfloat16):
            z = torch.mm(x, x.t())
        return x + y, z


def _bodies(state):
    return {name: m for name, m in state.gm.named_children() if isinstance(m, torch.fx.GraphModule)}


def test_each_block_becomes_a_region_called_through_its_op():
    state = traced_state(NoGradThenAutocast(), (torch.randn(3, 4),), until=wrap_autograd_regions, training=True)
    before = set(call_targets(state.gm))
    assert {SET_GRAD_ENABLED, ENTER_AUTOCAST, EXIT_AUTOCAST} <= before

    assert wrap_autograd_regions(state) is True

    targets = call_targets(state.gm)
    assert targets.count(WRAP_GRAD) == 1 and targets.count(WRAP_AUTOCAST) == 1
    assert not {SET_GRAD_ENABLED, ENTER_AUTOCAST, EXIT_AUTOCAST} & set(targets)
    grad = next(n for n in state.gm.graph.nodes if n.target is WRAP_GRAD)
    assert grad.args[0] is False
    body = getattr(state.gm, grad.args[1].target)
    assert call_targets(body) == [torch.ops.aten.mul.Tensor]
    autocast = next(n for n in state.gm.graph.nodes if n.target is WRAP_AUTOCAST)
    assert autocast.args[:4] == ("cpu", torch.bfloat16, True, False)
    assert torch.ops.aten.mm.default in call_targets(getattr(state.gm, autocast.args[4].target))
    # the region's results are read with getitem, and the signature names the reader
    output_names = [spec.arg.name for spec in state.output_specs]
    readers = [n for n in state.gm.graph.nodes if n.target is operator.getitem]
    assert {r.args[0].target for r in readers} == {WRAP_GRAD, WRAP_AUTOCAST}
    assert any(r.name in output_names for r in readers)
    state.gm.graph.lint()


class Nested(torch.nn.Module):
    def forward(self, x):
        with torch.no_grad():
            a = x + 1
            with torch.enable_grad():
                b = a * 3
            with torch.autocast("cpu", dtype=torch.bfloat16):
                c = torch.mm(b, b.t())
                with torch.autocast("cpu", enabled=False):
                    d = torch.mm(b, b.t())
        return c, d


def test_blocks_in_the_ambient_mode_are_inlined_and_nested_autocast_is_wrapped_inside():
    state = traced_state(Nested(), (torch.randn(2, 2),), training=True)
    top = call_targets(state.gm)
    # no_grad -> enable_grad (ambient: inlined) -> no_grad again: two grad regions
    assert top.count(WRAP_GRAD) == 2
    assert torch.ops.aten.mul.Tensor in top
    second = [n for n in state.gm.graph.nodes if n.target is WRAP_GRAD][1]
    body = getattr(state.gm, second.args[1].target)
    outer = [n for n in body.graph.nodes if n.target is WRAP_AUTOCAST]
    assert len(outer) == 1
    inner_body = getattr(body, outer[0].args[4].target)
    inner = [n for n in inner_body.graph.nodes if n.target is WRAP_AUTOCAST]
    assert len(inner) == 1 and inner[0].args[2] is False


def test_grad_mode_the_export_runs_in_is_the_ambient_one():
    with torch.no_grad():
        state = traced_state(NoGradThenAutocast(), (torch.randn(3, 4),), training=True)
    # exported under no_grad, the no_grad block changes nothing: only autocast is a region
    assert WRAP_GRAD not in call_targets(state.gm)
    assert WRAP_AUTOCAST in call_targets(state.gm)


def test_a_graph_without_blocks_is_left_alone():
    state = traced_state(torch.nn.Linear(2, 2), (torch.randn(1, 2),), until=wrap_autograd_regions, training=True)
    assert wrap_autograd_regions(state) is False


class Straddling(torch.nn.Module):
    def forward(self, x):
        ctx = torch.autocast("cpu", dtype=torch.bfloat16)
        with torch.no_grad():
            ctx.__enter__()
            y = torch.mm(x, x)
        z = torch.mm(y, y)
        ctx.__exit__(None, None, None)
        return z


def test_an_autocast_block_straddling_a_grad_change_is_a_clear_error():
    with pytest.raises(exporter.TraceError, match="overlap without nesting") as info:
        exporter.export(Straddling(), (torch.randn(2, 2),), ir="training")
    assert "nest them" in info.value.hint


class RegionValuesReturned(torch.nn.Module):
    """Region results returned as they are, in an order other than they were made."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            a = self.lin(x)
            with torch.autocast("cpu", enabled=False):
                b = self.lin(x.float())
            c = torch.matmul(a, b.t())
        with torch.no_grad():
            d = x * 2
            e = d + 1
        with torch.no_grad():
            f = x - 1
        return a.float(), b, c, e, d, f


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_region_results_are_ordered_and_named_as_torch_export_has_them(dynamic):
    """torch.export orders a region's results by their first use after it and names each
    getitem as the value it reads (a one-result region names its call instead); exporter
    had them in the order made, as getitem_N, so the signature's output names differed."""
    model, x = RegionValuesReturned(), torch.randn(3, 4)
    shapes = {"x": {0: torch.export.Dim("n", min=2)}} if dynamic else None
    ep = exporter.export(model, (x,), dynamic_shapes=shapes, ir="training")
    oracle = torch.export.export(model, (x,), dynamic_shapes=shapes, strict=False)
    assert ep.graph_signature.input_specs == oracle.graph_signature.input_specs
    mine, theirs = ([s.arg.name for s in p.graph_signature.output_specs] for p in (ep, oracle))
    # ``d + 1`` and ``d`` come out of their region as add, mul (first use), matmul and
    # linear_1 out of the autocast one; the one-result region's getitem has an FX name,
    # numbered by torch's graph splits (getitem_8) and by ours (getitem_2)
    assert mine[:5] == theirs[:5] == ["to_1", "linear_1", "matmul", "add", "mul"]
    assert mine[5].startswith("getitem") and theirs[5].startswith("getitem")
    getitems = [[n.name for n in p.graph.nodes if n.target is operator.getitem] for p in (ep, oracle)]
    assert getitems[0][:-1] == getitems[1][:-1] == ["to", "linear", "linear_1", "matmul", "add", "mul"]
    torch.testing.assert_close(ep.module()(x), oracle.module()(x))
