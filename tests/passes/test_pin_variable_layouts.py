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


def test_t5_attention_gets_its_output_pinned_and_runs_in_both_modes():
    transformers = pytest.importorskip("transformers")
    config = transformers.T5Config(
        vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4, use_cache=False,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(config).eval()
    inputs = {"input_ids": torch.randint(0, 64, (2, 7)), "decoder_input_ids": torch.randint(0, 64, (2, 5))}
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
