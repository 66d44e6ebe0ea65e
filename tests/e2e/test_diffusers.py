"""diffusers transformers that ask Python for a traced value, tiny configurations.

Lumina2 hashes the caption lengths it read from the mask (``len(set(seq_lengths))``) and
HiDream's mixture of experts counts tokens per expert in NumPy (``.numpy().cumsum(0)``).
torch.export refuses both; exporter refuses both with the model's line and what to do, and a
draft export takes the example's values, checks them when the program runs and matches eager.
"""

from __future__ import annotations

import inspect

import pytest
import torch

import exporter
from exporter import AssumptionKind, Category, TraceError

diffusers = pytest.importorskip("diffusers")


def lumina2():
    torch.manual_seed(0)
    model = diffusers.Lumina2Transformer2DModel(
        sample_size=16, patch_size=2, in_channels=4, hidden_size=24, num_layers=2, num_refiner_layers=1,
        num_attention_heads=3, num_kv_heads=1, multiple_of=2, ffn_dim_multiplier=None, norm_eps=1e-5,
        scaling_factor=1.0, axes_dim_rope=(4, 2, 2), axes_lens=(128, 128, 128), cap_feat_dim=32,
    ).eval()
    inputs = {
        "hidden_states": torch.randn(2, 4, 16, 16),
        "encoder_hidden_states": torch.randn(2, 16, 32),
        "timestep": torch.rand(2),
        "encoder_attention_mask": torch.ones(2, 16, dtype=torch.bool),
    }
    return model, inputs


def hidream():
    """The configuration of diffusers' own tests for the model."""
    torch.manual_seed(0)
    model = diffusers.HiDreamImageTransformer2DModel(
        patch_size=2, in_channels=4, out_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=8,
        num_attention_heads=4, caption_channels=[8, 4], text_emb_dim=8, num_routed_experts=2,
        num_activated_experts=2, axes_dims_rope=(4, 2, 2), max_resolution=(32, 32), llama_layers=(0, 1),
        force_inference_output=True,
    ).eval()
    inputs = {
        "hidden_states": torch.randn(2, 4, 32, 32),
        "encoder_hidden_states_t5": torch.randn(2, 8, 8),
        "encoder_hidden_states_llama3": torch.randn(2, 2, 8, 4),
        "pooled_embeds": torch.randn(2, 8),
        "timesteps": torch.randint(0, 1000, (2,)),
    }
    return model, inputs


def _line_of(cls, text: str) -> str:
    lines, first = inspect.getsourcelines(cls)
    number = next(first + i for i, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(cls)}:{number}"


MODELS = {
    "lumina2": (lumina2, Category.DATA_DEPENDENT_CONTROL_FLOW, "hashes a size computed from tensor values",
                lambda: diffusers.Lumina2Transformer2DModel, "use_mask = len(set(seq_lengths)) > 1"),
    "hidream": (hidream, Category.DATA_LEAVES_GRAPH, r"values out of the graph with \.numpy\(\)",
                lambda: diffusers.models.transformers.transformer_hidream_image.MOEFeedForwardSwiGLU,
                ".bincount().cpu().numpy().cumsum(0)"),
}


@pytest.mark.parametrize("name", MODELS)
def test_the_export_is_refused_naming_the_models_line_and_the_way_on(name):
    build, category, match, owner, code = MODELS[name]
    model, inputs = build()
    with pytest.raises(TraceError, match=match) as info:
        exporter.export(model, (), inputs)
    assert info.value.category is category and "draft=True" in info.value.hint
    assert info.value.location == _line_of(owner(), code)


@pytest.mark.parametrize("name", MODELS)
def test_torch_export_refuses_the_same_models(name):
    model, inputs = MODELS[name][0]()
    with pytest.raises(Exception, match=r"unhashable type: non-nested SymInt|\.numpy\(\) is not supported"):
        torch.export.export(model, (), inputs, strict=False)


@pytest.mark.slow
def test_a_draft_export_of_lumina2_hashes_the_example_lengths_and_matches_eager():
    model, inputs = lumina2()
    ep = exporter.export(model, (), inputs, draft=True)
    assumptions = ep.draft_report.assumptions
    assert sorted(a.assumed for a in assumptions) == ["u0 + 64 == 80", "u1 + 64 == 80"]
    assert all(a.kind is AssumptionKind.DATA_DEPENDENT and a.checked for a in assumptions)
    assert {a.code for a in assumptions} == {"use_mask = len(set(seq_lengths)) > 1"}
    with torch.no_grad():
        torch.testing.assert_close(ep.module()(**inputs).sample, model(**inputs).sample, rtol=1e-4, atol=1e-5)
    shorter = {**inputs, "encoder_attention_mask": inputs["encoder_attention_mask"].clone()}
    shorter["encoder_attention_mask"][0, -4:] = False
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        ep.module()(**shorter)


@pytest.mark.slow
def test_a_draft_export_of_hidream_takes_the_expert_counts_and_matches_eager():
    model, inputs = hidream()
    ep = exporter.export(model, (), inputs, draft=True)
    taken = [a for a in ep.draft_report.assumptions if a.kind is AssumptionKind.TENSOR_VALUES]
    assert len(taken) == 2 and all(a.checked for a in taken)  # one per block's experts
    assert {a.code for a in taken} == {"tokens_per_expert = flat_expert_indices.bincount().cpu().numpy().cumsum(0)"}
    with torch.no_grad():
        torch.testing.assert_close(ep.module()(**inputs).sample, model(**inputs).sample, rtol=1e-4, atol=1e-5)
