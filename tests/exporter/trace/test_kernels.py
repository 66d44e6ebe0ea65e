"""Functional composite ops are recorded whole with their real kernels' outputs; conversions are checked."""

import collections
import json
import subprocess
import sys
import pathlib
import textwrap

import pytest
import torch
import torch.nn.functional as F

import exporter
from exporter._torch_internals import COMPOSITE_KEY, FakeTensorMode, make_fx
from exporter.trace.kernels import (
    AUTOGRAD_KEYS,
    checked_conversion,
    composite_kernels,
    functional_composite_ops,
)


ROOT = pathlib.Path(__file__).resolve().parents[3]


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        q = self.proj(x).view(1, 2, 4, 4)
        return F.scaled_dot_product_attention(q, q, q).reshape(4, 8)


def test_linear_and_attention_are_single_nodes():
    ep = exporter.export(Attention().eval(), (torch.randn(4, 8),))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.linear.default in targets
    assert torch.ops.aten.scaled_dot_product_attention.default in targets
    assert torch.ops.aten.addmm.default not in targets
    # and the program still computes the same thing
    x = torch.randn(4, 8)
    model = Attention().eval()
    model.load_state_dict(ep.state_dict)
    torch.testing.assert_close(ep.module()(x), model(x))


def test_only_functional_composites_are_kept():
    ops = set(functional_composite_ops())
    assert {torch.ops.aten.linear.default, torch.ops.aten.scaled_dot_product_attention.default} <= ops
    # aliasing or maybe-aliasing composites must expand so functionalization sees their parts
    for op in (torch.ops.aten.reshape.default, torch.ops.aten.contiguous.default, torch.ops.aten.flatten.using_ints):
        assert op not in ops


def _active():
    return True


def _inactive():
    return False


def test_the_kernel_table_keeps_the_op_whole_and_its_own_kernels():
    op = torch.ops.aten.linear.default
    table, fake_rule = composite_kernels(op, _active)
    assert table[COMPOSITE_KEY](torch.ones(1, 2), torch.ones(3, 2)) is NotImplemented
    assert all(key in table for key in AUTOGRAD_KEYS)
    assert all(table[key] is kernel for key, kernel in op.py_kernels.items() if key != COMPOSITE_KEY)
    # the backend kernel is the original composite: it computes what eager linear does
    x, w = torch.randn(2, 3), torch.randn(4, 3)
    torch.testing.assert_close(table[torch._C.DispatchKey.CPU](x, w), F.linear(x, w))
    assert composite_kernels(op, _active)[0] is table  # cached while the op's own table is unchanged


def test_inactive_kernels_expand_the_op_as_its_composite_does():
    # Another thread than the tracing one: the op must expand, with autograd, as without the table.
    op = torch.ops.aten.linear.default
    table, fake_rule = composite_kernels(op, _inactive)
    x, w = torch.randn(2, 3), torch.randn(4, 3, requires_grad=True)
    expanded = table[COMPOSITE_KEY](x, w)
    torch.testing.assert_close(expanded, F.linear(x, w))
    through_autograd = table[torch._C.DispatchKey.AutogradCPU](x, w)
    assert through_autograd.grad_fn is not None  # the expansion's parts record autograd
    torch.testing.assert_close(through_autograd, F.linear(x, w))
    with FakeTensorMode() as mode:
        fake = fake_rule(mode, op, mode.from_tensor(x), mode.from_tensor(w))
    assert fake.shape == (2, 4)
    conversion = checked_conversion(torch.ops.aten.to.dtype, _inactive)
    with torch._dispatch.python.enable_python_dispatcher():
        graph = make_fx(lambda t: conversion(t, torch.float64))(x).graph
    targets = [n.target for n in graph.nodes if n.op == "call_function"]
    assert torch.ops.aten._assert_tensor_metadata.default not in targets


def test_conversions_record_the_metadata_check():
    ep = exporter.export(Convert(), (torch.randn(2, 3),))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.aten._assert_tensor_metadata.default) == 2
    assert checked_conversion(torch.ops.aten.to.dtype, _active) is not None


class Convert(torch.nn.Module):
    def forward(self, x):
        return x.float() + x.to(torch.float64)


class TransposedAttention(torch.nn.Module):
    def forward(self, x):
        q = x.view(2, 8, 2, 16).transpose(1, 2)
        return F.scaled_dot_product_attention(q, q, q).transpose(1, 2).reshape(2, 8, 32)


def test_kept_composites_get_the_fake_outputs_eager_would_produce():
    # The kept op's fake result must come from its real composite kernel: on CPU the fused
    # attention returns a transposed layout, and that layout decides whether the reshape
    # after it is a view or a copy.
    x = torch.randn(2, 8, 32)
    ep = exporter.export(TransposedAttention(), (x,))
    sdpa = next(n for n in ep.graph.nodes if n.target is torch.ops.aten.scaled_dot_product_attention.default)
    q = x.view(2, 8, 2, 16).transpose(1, 2)
    assert sdpa.meta["val"].stride() == F.scaled_dot_product_attention(q, q, q).stride()


def test_a_conversion_of_a_python_number_inside_vmap():
    from torch.export import Dim

    class PerSample(torch.nn.Module):
        def forward(self, x, y):
            return torch.vmap(lambda a, b: (a * b + 1).sum(dim=0))(x, y).sum(dim=0)

    x, y = torch.randn(3), torch.randn(3)
    ep = exporter.export(PerSample(), (x, y), dynamic_shapes={"x": {0: Dim.DYNAMIC}, "y": {0: Dim.DYNAMIC}})
    x, y = torch.randn(5), torch.randn(5)
    torch.testing.assert_close(ep.module()(x, y), PerSample()(x, y))


class MaskFromData(torch.nn.Module):
    """An attention mask whose length comes from tensor values (sam3's relative-position
    bias over a feature map whose size is held in a tensor)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, grid, q, k):
        height, width = grid[0].item(), grid[1].item()
        rows = torch.arange(height, dtype=torch.float32).view(-1, 1) / height
        cols = torch.arange(width, dtype=torch.float32).view(1, -1) / width
        mask = (rows + cols).flatten().expand(q.shape[0], q.shape[1], q.shape[2], -1)
        return F.scaled_dot_product_attention(self.proj(q), k, k, attn_mask=mask)


def test_a_mask_with_data_dependent_length_becomes_a_runtime_check():
    model = MaskFromData().eval()
    args = (torch.tensor([8, 8]), torch.randn(2, 4, 11, 8), torch.randn(2, 4, 64, 8))
    ep = exporter.export(model, args)  # torch.export 2.13 stops here on the fused kernel's size check
    assert [n.target for n in ep.graph.nodes].count(torch.ops.aten.scaled_dot_product_attention.default) == 1
    torch.testing.assert_close(ep.module()(*args), model(*args))
    fresh = (torch.tensor([4, 16]), torch.randn(2, 4, 11, 8), torch.randn(2, 4, 64, 8))
    torch.testing.assert_close(ep.module()(*fresh), model(*fresh))
    # a grid that does not cover the keys fails the recorded check, as eager fails
    wrong = (torch.tensor([4, 8]), *args[1:])
    with pytest.raises(RuntimeError, match=r"u0\*u1, 64"):
        ep.module()(*wrong)
    with pytest.raises(RuntimeError):
        model(*wrong)


def test_kept_whole_composites_expand_autograd_visible_and_return_no_history():
    """A linear over an expanded dynamic slice exports (fuzz finding 002): its fake value is
    computed as torch.export computes it, and the value below autograd has no grad_fn."""

    class Lin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(5, 5)

        def forward(self, x):
            return self.lin(x[:, :, :1].expand(-1, -1, 5, -1))

    model = Lin()
    x = torch.randn(3, 3, 4, 5)
    ep = exporter.export(model, (x,), dynamic_shapes={"x": {2: torch.export.Dim("s", min=2)}})
    linear = next(n for n in ep.graph.nodes if n.target is torch.ops.aten.linear.default)
    assert linear.meta["val"].grad_fn is None and not linear.meta["val"].requires_grad
    for size in (2, 5, 9):  # 5: the size the guard used to exclude
        y = torch.randn(3, 3, size, 5)
        torch.testing.assert_close(ep.module()(y), model(y))


class AsksAutograd(torch.nn.Module):
    """Reads the autograd state of values computed by kept-whole composites (linear,
    attention) and acts on it, as models do for hooks and gradient-only paths."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.frozen = torch.nn.Linear(4, 4).requires_grad_(False)

    def forward(self, x):
        h = self.lin(x)
        a = F.scaled_dot_product_attention(h[None], h[None], h[None])[0]
        cold = self.frozen(x)
        if h.requires_grad and h.grad_fn is not None and not a.is_leaf:
            h.register_hook(lambda grad: grad)  # refused on a value that requires no grad
            h = h * 10
        if cold.requires_grad:
            cold = cold - 100
        h.add_(1)  # refused on a leaf that requires grad
        return h + a + cold, h.requires_grad, cold.requires_grad, a.grad_fn is None


@pytest.mark.parametrize("ir", ["inference", "training"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_values_of_kept_whole_composites_carry_autograd_state_as_in_eager(ir, dynamic, grad):
    """Below autograd a kept-whole composite's result had no history, so the model saw
    ``requires_grad`` False, ``grad_fn`` None and a leaf where eager and torch.export show
    the opposite, and traced the other branch (silently wrong numbers)."""
    model, x = AsksAutograd(), torch.randn(3, 4)
    shapes = {"x": {0: torch.export.Dim("n", min=2)}} if dynamic else None
    with torch.set_grad_enabled(grad):
        expected = model(x)
        ep = exporter.export(model, (x,), dynamic_shapes=shapes, ir=ir)
        oracle = torch.export.export(model, (x,), dynamic_shapes=shapes, strict=False)
    assert expected[1:] == (grad, False, not grad)
    got = ep.module()(x)
    assert got[1:] == oracle.module()(x)[1:] == expected[1:]
    torch.testing.assert_close(got[0], expected[0])
    if dynamic:
        y = torch.randn(5, 4)
        with torch.set_grad_enabled(grad):
            torch.testing.assert_close(ep.module()(y)[0], model(y)[0])
    ops = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.linear.default in ops and torch.ops.aten.addmm.default not in ops


class Autocasts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = self.lin(x)  # autocast casts x, weight and bias: no check of its own
            z = y.to(torch.float32)  # the model's conversion, inside the region: checked
            with torch.autocast("cpu", enabled=False):
                w = self.lin(z.double().float())  # converted by the model: checked
        return y.float(), z, w


def _op_counts(ep):
    return collections.Counter(n.target for n in ep.graph.nodes if n.op == "call_function")


def test_autocast_casts_are_unchecked_and_the_models_own_conversions_checked():
    """The conversion check is torch.export's for each conversion the model makes; an
    autocast kernel's casts of its op's inputs sit below torch.export's trace and were
    each given a check of their own."""
    model, x = Autocasts(), torch.randn(4, 8)
    set_autocast = torch.set_autocast_enabled
    ep = exporter.export(model, (x,))
    oracle = torch.export.export(model, (x,), strict=False)
    assert _op_counts(ep) == _op_counts(oracle.run_decompositions({}))
    assert _op_counts(ep) == _op_counts(exporter.export(model, (x,), ir="training").run_decompositions({}))
    assert _op_counts(ep)[torch.ops.aten._assert_tensor_metadata.default] == 4
    torch.testing.assert_close(ep.module()(x), model(x))
    assert not torch.is_autocast_enabled("cpu")
    assert torch.set_autocast_enabled is set_autocast  # put back after the trace


class EinsumThenWrite(torch.nn.Module):
    """LongT5's local attention: an einsum's scores, written in place."""

    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(8, 8)

    def forward(self, x, bias):
        q = self.q(x).view(x.shape[0], x.shape[1], 2, 4)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, q)  # a permute of bmm's result
        scores += bias
        return scores.softmax(-1), scores.requires_grad


@pytest.mark.parametrize("ir", ["inference", "training"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_kept_whole_composites_result_is_written_in_place_in_grad_mode(ir, dynamic):
    """einsum's expansion ends in a view of its own intermediate; given the autograd history
    of a custom Function, that view could not be written in place ("Output 0 of _KeptWhole
    is a view and is being modified inplace")."""
    model, x, bias = EinsumThenWrite(), torch.randn(2, 5, 8), torch.randn(2, 5, 5)
    shapes = ({1: torch.export.Dim("n", min=2)}, {1: torch.export.Dim("n", min=2), 2: torch.export.Dim("n", min=2)})
    ep = exporter.export(model, (x, bias), dynamic_shapes=shapes if dynamic else None, ir=ir)
    assert ep.module()(x, bias)[1] is True
    torch.testing.assert_close(ep.module()(x, bias)[0], model(x, bias)[0])
    assert _op_counts(ep) == _op_counts(
        torch.export.export(model, (x, bias), dynamic_shapes=shapes if dynamic else None, strict=False)
        if ir == "training" else
        torch.export.export(model, (x, bias), dynamic_shapes=shapes if dynamic else None, strict=False).run_decompositions({}))
    if dynamic:
        y, b = torch.randn(2, 7, 8), torch.randn(2, 7, 7)
        torch.testing.assert_close(ep.module()(y, b)[0], model(y, b)[0])


class Bilinear(torch.nn.Module):
    def forward(self, x, w):
        return F.bilinear(x, x, w).sum(-1) + F.pairwise_distance(x, x)


@pytest.mark.slow
def test_a_composite_first_met_in_the_trace_is_kept_whole():
    # A fresh process has made no composite op's Python object yet: each op's table goes
    # in as the dispatcher first meets it, before it chooses the op's kernel.
    code = textwrap.dedent(
        """
        import json
        import torch
        import exporter
        from tests.exporter.trace.test_kernels import Bilinear

        ep = exporter.export(Bilinear(), (torch.randn(2, 3), torch.randn(4, 3, 3)))
        print(json.dumps(sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function"})))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    oracle = torch.export.export(Bilinear(), (torch.randn(2, 3), torch.randn(4, 3, 3))).run_decompositions({})
    expected = sorted({str(n.target) for n in oracle.graph.nodes if n.op == "call_function"})
    assert json.loads(out.splitlines()[-1]) == expected
    assert "aten.bilinear.default" in expected


def test_a_composite_whose_kernel_choice_is_cached_is_kept_whole():
    # The Python dispatcher caches the kernel it chose for each key; an op it chose one for
    # outside a trace never misses in the trace, so its table goes in at once.
    x, w = torch.randn(2, 3), torch.randn(4, 3)
    with torch._dispatch.python.enable_python_dispatcher():
        F.linear(x, w)
    assert torch.ops.aten.linear.default._dispatch_cache
    test_linear_and_attention_are_single_nodes()
