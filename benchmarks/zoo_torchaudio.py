"""torchaudio's models for the zoo: the model factories of ``torchaudio.models``, random weights.

``MODELS`` maps a model type to a :class:`Spec`: a factory (``wav2vec2_base``, or a class with
the arguments torchaudio's documentation gives it) and its keyword inputs, in the shapes
torchaudio's docs and tests give them, at a batch of 2 and a fraction of a second of audio.
The weights are random and nothing is downloaded. A model used through another method than
``forward`` (Emformer's streaming ``infer``, Tacotron2's autoregressive ``infer``) is wrapped
in a module whose ``forward`` calls it, as a deployment would export it.

``model_types()``, ``kind(model_type)``, ``cases(model_type)`` and ``build(model_type,
class_name)`` answer as ``zoo_models`` does for transformers, so ``zoo.py --family
torchaudio`` runs these models the way it runs the transformers zoo.
"""

from __future__ import annotations

from typing import Any, Callable

import attrs
import torch
from torchaudio import models
from zoo_models import Built, NotBuilt

BATCH = 2
SOURCES = ["bass", "drums", "other", "vocals"]
"""The stems HDemucs separates music into (its pretrained bundles' sources)."""

Inputs = Callable[[torch.Generator], dict[str, Any]]


@attrs.frozen
class Spec:
    """One model type: what it is, how to make it, and its inputs."""

    kind: str
    class_name: str
    """The class the factory builds (the wrapper's, for a method other than ``forward``)."""
    factory: Callable[[], torch.nn.Module]
    inputs: Inputs
    note: str = ""


class EmformerStreaming(torch.nn.Module):
    """Emformer's streaming step, ``infer``, from empty state: one segment and its right context."""

    def __init__(self, emformer: torch.nn.Module):
        super().__init__()
        self.emformer = emformer

    def forward(self, input: torch.Tensor, lengths: torch.Tensor):
        return self.emformer.infer(input, lengths, None)


class Tacotron2Inference(torch.nn.Module):
    """Tacotron2's autoregressive ``infer``: decode mel frames until every stop token fires."""

    def __init__(self, tacotron2: torch.nn.Module):
        super().__init__()
        self.tacotron2 = tacotron2

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor):
        return self.tacotron2.infer(tokens, lengths)


def _rand(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.rand(shape, generator=gen)


def _waveforms(samples: int, *, lengths: bool = True) -> Inputs:
    """A batch of mono waveforms, the second shorter than the first when ``lengths`` are given."""

    def make(gen):
        given = {"waveforms": _rand(gen, BATCH, samples)}
        if lengths:
            given["lengths"] = torch.tensor([samples, samples * 3 // 4])
        return given

    return make


def _frames(frames: int, features: int, valid: int) -> Inputs:
    """Feature frames (B, T, D) and each sample's valid length (the second ``valid``)."""
    return lambda gen: {"input": _rand(gen, BATCH, frames, features), "lengths": torch.tensor([frames, valid])}


def _emformer() -> torch.nn.Module:
    return models.Emformer(512, 8, 2048, 20, 4, right_context_length=1)


def _tacotron2(gen):
    return {"tokens": torch.randint(1, 148, (BATCH, 20), generator=gen), "token_lengths": torch.tensor([20, 15]),
            "mel_specgram": _rand(gen, BATCH, 80, 30), "mel_specgram_lengths": torch.tensor([30, 25])}


def _tacotron2_inference() -> torch.nn.Module:
    tacotron2 = models.Tacotron2()
    tacotron2.decoder.decoder_max_step = 50  # random weights never emit the stop token
    return Tacotron2Inference(tacotron2)


def _wavernn(gen):
    # torchaudio's docs: waveform (B, 1, (n_time - kernel_size + 1) * hop_length), specgram (B, 1, n_freq, n_time)
    n_time, kernel_size, hop_length = 10, 5, 200
    return {"waveform": _rand(gen, BATCH, 1, (n_time - kernel_size + 1) * hop_length),
            "specgram": _rand(gen, BATCH, 1, 128, n_time)}


def _rnnt(gen):
    # 84 frames: after the transcriber's 4x time reduction, a 16-frame segment and its 4-frame right context
    return {"sources": _rand(gen, BATCH, 84, 80), "source_lengths": torch.tensor([84, 60]),
            "targets": torch.randint(0, 4097, (BATCH, 10), generator=gen), "target_lengths": torch.tensor([10, 7])}


_ENCODER, _ASR, _TTS, _SEPARATION, _QUALITY = (
    "speech encoder", "speech recognition", "speech synthesis", "source separation", "speech quality")

MODELS: dict[str, Spec] = {
    "wav2vec2_base": Spec(_ENCODER, "Wav2Vec2Model", models.wav2vec2_base, _waveforms(8000)),
    "hubert_base": Spec(_ENCODER, "Wav2Vec2Model", models.hubert_base, _waveforms(8000)),
    "wavlm_base": Spec(_ENCODER, "Wav2Vec2Model", models.wavlm_base, _waveforms(8000, lengths=False),
                       note="waveforms only: WavLM's attention takes no padding mask"),
    "wav2vec2_large": Spec(_ENCODER, "Wav2Vec2Model", models.wav2vec2_large, _waveforms(8000)),
    "wav2vec2_large_lv60k": Spec(_ENCODER, "Wav2Vec2Model", models.wav2vec2_large_lv60k, _waveforms(8000)),
    "wav2vec2_xlsr_300m": Spec(_ENCODER, "Wav2Vec2Model", models.wav2vec2_xlsr_300m, _waveforms(8000)),
    "hubert_large": Spec(_ENCODER, "Wav2Vec2Model", models.hubert_large, _waveforms(8000)),
    "wavlm_large": Spec(_ENCODER, "Wav2Vec2Model", models.wavlm_large, _waveforms(8000, lengths=False),
                        note="waveforms only: WavLM's attention takes no padding mask"),
    "conformer": Spec(_ENCODER, "Conformer", lambda: models.Conformer(
        input_dim=80, num_heads=4, ffn_dim=128, num_layers=4, depthwise_conv_kernel_size=31), _frames(50, 80, 40)),
    "emformer": Spec(_ENCODER, "Emformer", _emformer, _frames(41, 512, 30),
                     note="40 frames in 4-frame segments, then 1 frame of right context"),
    "emformer_streaming": Spec(_ENCODER, "EmformerStreaming", lambda: EmformerStreaming(_emformer()), _frames(5, 512, 5),
                               note="Emformer.infer from empty state: one 4-frame segment and its right context"),
    "emformer_rnnt": Spec(_ASR, "RNNT", lambda: models.emformer_rnnt_base(num_symbols=4097), _rnnt),
    "deepspeech": Spec(_ASR, "DeepSpeech", lambda: models.DeepSpeech(n_feature=80, n_class=40),
                       lambda gen: {"x": _rand(gen, BATCH, 1, 50, 80)}),
    "wav2letter": Spec(_ASR, "Wav2Letter", lambda: models.Wav2Letter(num_classes=40),
                       lambda gen: {"x": _rand(gen, BATCH, 1, 8000)}),
    "wav2letter_mfcc": Spec(_ASR, "Wav2Letter", lambda: models.Wav2Letter(num_classes=40, input_type="mfcc", num_features=13),
                            lambda gen: {"x": _rand(gen, BATCH, 13, 100)}),
    "tacotron2": Spec(_TTS, "Tacotron2", models.Tacotron2, _tacotron2, note="teacher-forced: the training-time forward"),
    "tacotron2_infer": Spec(_TTS, "Tacotron2Inference", _tacotron2_inference,
                            lambda gen: {"tokens": torch.randint(1, 148, (BATCH, 20), generator=gen),
                                         "lengths": torch.tensor([20, 15])},
                            note="Tacotron2.infer, at most 50 decoder steps"),
    "wavernn": Spec(_TTS, "WaveRNN", lambda: models.WaveRNN(upsample_scales=[5, 5, 8], n_classes=512, hop_length=200), _wavernn),
    "conv_tasnet": Spec(_SEPARATION, "ConvTasNet", lambda: models.conv_tasnet_base(num_sources=2),
                        lambda gen: {"input": _rand(gen, BATCH, 1, 8000)}),
    "hdemucs_low": Spec(_SEPARATION, "HDemucs", lambda: models.hdemucs_low(sources=SOURCES),
                        lambda gen: {"input": _rand(gen, BATCH, 2, 44100)}),
    "hdemucs_high": Spec(_SEPARATION, "HDemucs", lambda: models.hdemucs_high(sources=SOURCES),
                         lambda gen: {"input": _rand(gen, BATCH, 2, 44100)}),
    "squim_objective": Spec(_QUALITY, "SquimObjective", models.squim_objective_base, lambda gen: {"x": _rand(gen, BATCH, 16000)}),
    "squim_subjective": Spec(_QUALITY, "SquimSubjective", models.squim_subjective_base,
                             lambda gen: {"waveform": _rand(gen, BATCH, 16000), "reference": _rand(gen, BATCH, 16000)}),
}


def model_types() -> list[str]:
    """Every model type: speech encoders, recognisers, synthesisers, separators, quality models."""
    return list(MODELS)


def kind(model_type: str) -> str:
    """speech encoder, speech recognition, speech synthesis, source separation or speech quality."""
    return MODELS[model_type].kind


def cases(model_type: str) -> list[str]:
    """The class the model type builds: one case each."""
    return [MODELS[model_type].class_name]


def build(model_type: str, class_name: str, seed: int = 0) -> Built:
    """``model_type`` with random weights in eval mode, and inputs its eager forward accepts."""
    spec = MODELS[model_type]
    torch.manual_seed(seed)
    try:
        model = spec.factory().eval()
    except Exception as e:
        raise NotBuilt(f"model init fails: {type(e).__name__}: {_headline(e)}") from e
    kwargs = spec.inputs(torch.Generator().manual_seed(seed))
    try:
        with torch.no_grad():
            output = model(**kwargs)
    except Exception as e:
        raise NotBuilt(f"eager forward fails on the inputs: {type(e).__name__}: {_headline(e)}") from e
    return Built(model, kwargs, output, spec.note)


def _headline(error: BaseException) -> str:
    """The error's text on one line."""
    text = " ".join(str(error).split())
    return text[:300] if text else type(error).__name__


__all__ = ["MODELS", "Built", "NotBuilt", "Spec", "build", "cases", "kind", "model_types"]
