"""Transformers models that branch on tensor values, exported as the zoo does: each must
export with exporter (torch.export cannot) and match eager on the example, and where the
zoo finds an input that sends a cond the other way, there too. A change to branch capture
that loses one of these models fails here, not only in the next zoo run."""

from __future__ import annotations

import os

import pytest

from tests.benchmarks.scripts import load_script

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow

MODELS = [
    # the helper's region hands on a frame count, and a buffer is replaced by a longer table
    ("fastspeech2_conformer", "FastSpeech2ConformerModel"),
    # torch.distributions' argument check, a slice ended by a 0-d tensor
    ("blt", "BltForCausalLM"),
    ("fsmt", "FSMTForConditionalGeneration"),  # a padding mask dropped when nothing is padded
    ("longformer", "LongformerForSequenceClassification"),  # one flag tested in every layer
]


@pytest.mark.parametrize(("model_type", "class_name"), MODELS, ids=[m for m, _ in MODELS])
def test_a_model_that_branches_on_values_exports_and_matches_eager_on_each_side(model_type, class_name):
    if model_type not in transformers.CONFIG_MAPPING:
        pytest.skip(f"this transformers has no {model_type}")
    zoo = load_script("zoo")
    zoo._quiet_libraries()
    built = zoo.builders("transformers").build(model_type, class_name)
    result = zoo.run_tool("exporter", built, {})
    assert result.outcome == "ok", result.error
    assert result.sides is None or "no generated input" in result.sides or "matches eager" in result.sides, result.sides
