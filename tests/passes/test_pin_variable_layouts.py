import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.symbolic_shapes import ShapeEnv

import exporter
from exporter.passes import pin_variable_layouts
from passes.pin_variable_layouts import _hint
from tests.support import call_targets, traced_state


class LearnedBiasAttention(torch.nn.Module):
    """Attention whose mask is a learned relative-position bias, as in T5, or a given mask."""

    def __init__(self, learned_bias: bool = True):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(32, 32) for _ in range(3))
        self.emb = torch.nn.Embedding(16, 4) if learned_bias else None

    def forward(self, x, mask):
        if self.emb is not None:
            pos = torch.arange(7)
            mask = mask + self.emb(pos[:, None] - pos[None, :] + 7).permute(2, 0, 1).unsqueeze(0)

        def heads(t):
            return t.view(2, 7, 4, 8).transpose(1, 2)

        out = F.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)), attn_mask=mask, scale=1.0)
        # .contiguous() is a no-op for the fused kernel's layout: the view is valid for that layout only
        return out.transpose(1, 2).contiguous().view(2, 7, 32)


def _inputs():
    return torch.randn(2, 7, 32), torch.zeros(2, 4, 7, 7)


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_a_learned_mask_runs_in_both_grad_modes(grad):
    model = LearnedBiasAttention().eval()
    ep = exporter.export(model, _inputs())
    x, mask = _inputs()
    with torch.set_grad_enabled(grad):
        torch.testing.assert_close(ep.module()(x, mask), model(x, mask))


def test_the_oracle_program_fails_in_grad_mode():
    model = LearnedBiasAttention().eval()
    oracle = torch.export.export(model, _inputs(), strict=False).run_decompositions({})
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        oracle.module()(*_inputs())  # the mask requires grad: the math kernel's layout


@pytest.mark.parametrize("trace_grad", [False, True], ids=["traced_no_grad", "traced_grad"])
def test_t5_attention_gets_its_output_pinned_and_runs_in_both_modes(trace_grad):
    """T5's attention returns the fused kernel's layout in the trace, as in torch.export's
    (which lowers the program under no_grad), whatever grad mode the export runs in; its
    ``.contiguous().view`` relies on that layout, so it is pinned and the program also runs
    in grad mode (the math kernel's layout)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.T5Config(
        vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4, use_cache=False,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(config).eval()
    inputs = {"input_ids": torch.randint(0, 64, (2, 7)), "decoder_input_ids": torch.randint(0, 64, (2, 5))}
    with torch.set_grad_enabled(trace_grad):
        state = traced_state(model, (), inputs, until=pin_variable_layouts)
        assert pin_variable_layouts(state) is True
        ep = exporter.export(model, (), inputs)
    assert call_targets(ep.graph_module).count(torch.ops.aten.permute.default) >= 2
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            torch.testing.assert_close(ep.module()(**inputs).logits, model(**inputs).logits)


class ProjectedAttention(torch.nn.Module):
    """Attention whose output goes straight into a matmul, which takes any layout."""

    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(32, 32)
        self.out = torch.nn.Parameter(torch.randn(8, 8))

    def forward(self, x, mask):
        q = self.q(x).view(2, 7, 4, 8).transpose(1, 2)
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask) @ self.out


def test_an_output_any_layout_serves_keeps_the_program_as_traced():
    state = traced_state(ProjectedAttention().eval(), _inputs(), until=pin_variable_layouts)
    assert pin_variable_layouts(state) is False
    assert torch.ops.aten.permute.default not in call_targets(state.gm)


class TokenMajorAttention(torch.nn.Module):
    """GPT-2's attention output path: heads merged, then batch and sequence flattened into
    tokens for the projection (``Conv1D`` views its input as ``(-1, hidden)``)."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)

    def forward(self, x):
        q, k, v = (t.view(2, 7, 4, 8).transpose(1, 2) for t in self.qkv(x).split(32, dim=2))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return out.transpose(1, 2).contiguous().reshape(2, 7, 32).view(-1, 32)


def _lowerings(ep):
    """``run_decompositions()``, and the two passes of ExecuTorch with a partitioner: one
    that keeps the composite (deciding each ``reshape`` on the kernel's layout), then one
    that decomposes it."""
    return {"core": lambda: ep.run_decompositions(), "two passes": lambda: ep.run_decompositions({}).run_decompositions()}


def test_a_view_the_decomposed_layout_refuses_is_pinned_so_the_program_lowers():
    model = TokenMajorAttention().eval()
    x = torch.randn(2, 7, 32)
    state = traced_state(model, (x,), until=pin_variable_layouts)
    assert pin_variable_layouts(state) is True
    ep = exporter.export(model, (x,))
    for name, lower in _lowerings(ep).items():
        lowered = lower()
        assert torch.ops.aten.scaled_dot_product_attention.default not in call_targets(lowered.graph_module), name
        torch.testing.assert_close(lowered.module()(x), model(x), msg=name)


def test_the_oracle_program_fails_to_lower():
    x = torch.randn(2, 7, 32)
    oracle = torch.export.export(TokenMajorAttention().eval(), (x,), strict=False)
    for lower in _lowerings(oracle).values():
        with pytest.raises(Exception, match="[Vv]iew"):
            lower()


@pytest.mark.parametrize("learned_bias", [False, True], ids=["given_mask", "learned_mask"])
def test_attention_with_a_mask_lowers(learned_bias):
    model = LearnedBiasAttention(learned_bias=learned_bias).eval()
    ep = exporter.export(model, _inputs())
    x, mask = _inputs()
    for name, lower in _lowerings(ep).items():
        torch.testing.assert_close(lower().module()(x, mask), model(x, mask), msg=name)


class DataDependentLengthBias(torch.nn.Module):
    """A learned bias over a data-dependent number of positions (mimi's encoder: the
    sequence length comes out of a tensor), so the attention's sizes have no example value."""

    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(8, 8)
        self.bias = torch.nn.Parameter(torch.randn(1, 2, 1, 1))

    def forward(self, x, length):
        n = length.item()
        torch._check(n <= x.shape[1])
        torch._check(n > 1)
        x = x[:, :n]
        q = self.q(x).view(1, n, 2, 4).transpose(1, 2)
        mask = self.bias.expand(1, 2, n, n)
        out = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
        return out.transpose(1, 2).contiguous().view(1, n, 8)


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_attention_over_a_data_dependent_length_is_pinned_without_an_example_size(grad):
    model = DataDependentLengthBias().eval()
    x = torch.randn(1, 12, 8)
    ep = exporter.export(model, (x, torch.tensor(6)))
    for length in (6, 3, 12):
        with torch.set_grad_enabled(grad):
            torch.testing.assert_close(ep.module()(x, torch.tensor(length)), model(x, torch.tensor(length)))


def test_a_data_dependent_size_without_bounds_gets_a_stand_in_inside_its_range():
    """A lowering's layout is computed on example sizes; a data-dependent size unbounded on
    either side (the ShapeEnv's integer infinity calls itself finite) still gets one."""
    shape_env = ShapeEnv()
    unbounded = shape_env.create_unbacked_symint()
    assert _hint(unbounded) == 8
    at_least_ten = shape_env.create_unbacked_symint()
    torch._check(at_least_ten >= 10)
    assert _hint(at_least_ten) == 10 and _hint(at_least_ten * 2) == 20
