"""benchmarks/zoo_torchaudio.py: torchaudio's model factories as zoo model types, with the
inputs torchaudio's docs and tests give them, and zoo.py running the family.  Nothing is
exported here."""

from __future__ import annotations


import pytest
import torch

from tests.benchmarks.scripts import load_script

pytest.importorskip("torchaudio")

SMALL = ("conformer", "wav2letter", "wav2letter_mfcc")
"""Model types that build in a moment (the speech encoders take seconds each)."""


@pytest.fixture(scope="module")
def family():
    return load_script("zoo_torchaudio")


def test_the_model_types_cover_torchaudios_factories(family):
    types = family.model_types()
    for name in ("wav2vec2_base", "hubert_base", "wavlm_base", "conformer", "emformer", "tacotron2", "wavernn",
                 "conv_tasnet", "deepspeech", "wav2letter", "hdemucs_low", "squim_objective", "squim_subjective",
                 "emformer_rnnt"):
        assert name in types
    assert {family.kind(t) for t in types} == {"speech encoder", "speech recognition", "speech synthesis",
                                              "source separation", "speech quality"}


@pytest.mark.parametrize("model_type", SMALL)
def test_a_model_is_built_in_eval_mode_as_its_class_with_a_batch_of_two(family, model_type):
    built = family.build(model_type, family.cases(model_type)[0])
    assert not built.model.training
    assert family.cases(model_type) == [type(built.model).__name__]
    assert all(value.shape[0] == family.BATCH for value in built.kwargs.values())
    assert built.output is not None


def test_a_method_other_than_forward_is_wrapped(family):
    from torchaudio import models

    streaming = family.EmformerStreaming(models.Emformer(16, 2, 32, 2, 4, right_context_length=1)).eval()
    output, lengths, states = streaming(torch.rand(family.BATCH, 5, 16), torch.tensor([5, 5]))
    assert output.shape == (family.BATCH, 4, 16)  # the segment, without its right context
    assert len(states) == 2


def test_inputs_the_eager_model_rejects_are_not_built(family, monkeypatch):
    spec = family.MODELS["wav2letter"]
    wrong = family.Spec(spec.kind, spec.class_name, spec.factory, lambda gen: {"x": torch.rand(2, 3, 100)})
    monkeypatch.setitem(family.MODELS, "wav2letter", wrong)
    with pytest.raises(family.NotBuilt, match="eager forward fails on the inputs: RuntimeError"):
        family.build("wav2letter", "Wav2Letter")


def test_the_zoo_runs_the_family():
    zoo = load_script("zoo")
    release = zoo.results.release_suffix()
    args = zoo.parse_args(["--family", "torchaudio", "--dynamic"])
    assert zoo.selected_types(args)[:2] == ["wav2vec2_base", "hubert_base"]
    assert zoo.results_name(args) == f"zoo-torchaudio-dynamic-{release}"
    assert zoo.model_kind("squim_objective", "torchaudio") == "speech quality"
    with pytest.raises(SystemExit):
        zoo.parse_args(["--family", "torchaudio", "--only", "resnet18"])
