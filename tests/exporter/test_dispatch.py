"""Functional composite ops are recorded whole, and the dispatcher is left as it was."""

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses import fake_impls

import exporter
from exporter._dispatch import functional_composite_ops, keep_composites_whole


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


def test_dispatcher_tables_are_restored_also_after_an_error():
    op = torch.ops.aten.linear.default
    kernels_before = dict(op.py_kernels)
    fake_rules_before = dict(fake_impls.op_implementations_dict)
    with pytest.raises(RuntimeError, match="inside"):
        with keep_composites_whole():
            assert op.py_kernels != kernels_before
            raise RuntimeError("inside")
    assert op.py_kernels == kernels_before
    assert fake_impls.op_implementations_dict == fake_rules_before
    # eager linear still works and still decomposes normally afterwards
    torch.testing.assert_close(F.linear(torch.ones(1, 2), torch.ones(3, 2)), torch.full((1, 3), 2.0))


def test_eager_execution_inside_the_context_is_unchanged():
    x, w, b = torch.randn(2, 3), torch.randn(4, 3), torch.randn(4)
    expected = F.linear(x, w, b)
    with keep_composites_whole():
        torch.testing.assert_close(F.linear(x, w, b), expected)


def test_a_kernel_registered_during_the_patch_survives_it():
    op = torch.ops.aten.linear.default
    before = dict(op.py_kernels)
    marker = lambda *a, **k: NotImplemented  # noqa: E731
    key = torch._C.DispatchKey.AutocastCPU
    assert key not in before
    try:
        with keep_composites_whole((op,)):
            op.py_kernels[key] = marker
        assert op.py_kernels[key] is marker
        assert {k: v for k, v in op.py_kernels.items() if k != key} == before
    finally:
        op.py_kernels.pop(key, None)
        op._dispatch_cache.clear()


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


def test_exporting_leaves_no_trace_in_later_torch_exports():
    """Running exporter first must not change what torch.export itself produces afterwards."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import sys, torch, exporter
        from collections import Counter
        from tests.exporter.test_dispatch import TransposedAttention
        model, x = TransposedAttention(), torch.randn(2, 8, 32)
        if sys.argv[1] == "ours-first":
            exporter.export(model, (x,))
        ep = torch.export.export(model, (x,), strict=False).run_decompositions({})
        print(sorted(Counter(str(n.target) for n in ep.graph.nodes if n.op == "call_function").items()))
        """
    )
    outputs = [
        subprocess.run(
            [sys.executable, "-c", script, order], capture_output=True, text=True, check=True
        ).stdout.strip().splitlines()[-1]
        for order in ("oracle-alone", "ours-first")
    ]
    assert outputs[0] == outputs[1]
