"""Transformers models that branch on tensor values, exported as the zoo does: each must
export with exporter (torch.export cannot), match eager on the example, and match eager on
an input the zoo makes that sends a cond the other way. A model no generated input takes to
another side fails, unless ``NO_OTHER_SIDE`` lists it with the reason. A change to branch
capture that loses one of these models fails here, not only in the next zoo run."""

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


NO_OTHER_SIDE = {
    "blt": "its decisions are torch.distributions' argument checks, whose other side raises: the program asserts "
    "them and holds no cond",
}
"""Models whose programs no input can take to another side, and why."""


@pytest.mark.parametrize(("model_type", "class_name"), MODELS, ids=[m for m, _ in MODELS])
def test_a_model_that_branches_on_values_exports_and_matches_eager_on_each_side(model_type, class_name):
    if model_type not in transformers.CONFIG_MAPPING:
        pytest.skip(f"this transformers has no {model_type}")
    zoo = load_script("zoo")
    zoo._quiet_libraries()
    built = zoo.builders("transformers").build(model_type, class_name)
    result = zoo.run_tool("exporter", built, {})
    assert result.outcome == "ok", result.error
    if model_type in NO_OTHER_SIDE:
        assert result.sides is None or "no generated input" in result.sides, result.sides
    else:
        assert result.sides is not None and "other side matches eager on" in result.sides, result.sides
