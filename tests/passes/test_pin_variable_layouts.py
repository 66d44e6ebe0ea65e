import pytest
import torch
import torch.nn.functional as F

import exporter
from exporter.passes import pin_variable_layouts
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


def test_a_given_mask_keeps_one_layout_and_nothing_changes():
    state = traced_state(LearnedBiasAttention(learned_bias=False).eval(), _inputs(), until=pin_variable_layouts)
    assert pin_variable_layouts(state) is False
    assert torch.ops.aten.permute.default not in call_targets(state.gm)


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
