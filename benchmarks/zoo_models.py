"""Tiny transformers models for the zoo: a shrunken config, a model class, example inputs.

``cases(model_type)`` lists the classes worth exporting for one entry of transformers'
``CONFIG_MAPPING``, the most servable head first; ``build(model_type, class_name)``
returns a :class:`Built` (model in eval mode, random weights, keyword inputs on which the
eager model runs) or raises :class:`NotBuilt` saying why it could not.

The config is the type's default config with every size-like attribute it has (widths,
layer, head and expert counts, vocabulary, image and audio sizes; nested sub-configs
too) shrunk by :func:`shrink`, then a few per-family fixes in ``OVERRIDES``. Inputs
come from the model's ``main_input_name`` and ``forward`` signature: a few input sets
are tried in order and the first one the eager model accepts is kept. Nothing is
downloaded: set ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
from typing import Any

import attrs
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import transformers  # noqa: E402
from transformers.models.auto import modeling_auto  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES  # noqa: E402

BATCH, SEQ = 2, 8
WIDTH, FFN, HEADS, KV_HEADS, HEAD_DIM, LAYERS = 32, 64, 4, 2, 8, 2
VOCAB, POSITIONS, IMAGE, PATCH, EXPERTS = 128, 128, 32, 4, 4

# Heads in the order a model type is served by, most servable first; the base model
# (MODEL_MAPPING_NAMES) follows. Each name is a MODEL_*_MAPPING_NAMES table.
HEAD_MAPPINGS = (
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_FOR_CTC_MAPPING_NAMES",
    "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES",
    "MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES",
    "MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES",
    "MODEL_FOR_TEXT_TO_SPECTROGRAM_MAPPING_NAMES",
    "MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES",
)
# Encoders that also register a causal-LM head (BERT's BertLMHeadModel) are served as
# classifiers: their causal head needs is_decoder=True and is rarely what is deployed.
ENCODER_MAPPING = "MODEL_FOR_MASKED_LM_MAPPING_NAMES"
# Any other head, for types that have neither a base model nor a head above.
FALLBACK_MAPPINGS = tuple(
    name
    for name in sorted(dir(modeling_auto))
    if name.startswith("MODEL_FOR_") and name.endswith("_MAPPING_NAMES") and name not in HEAD_MAPPINGS
)

# Config attributes by what they size, and the size they shrink to (never grown).
WIDTH_KEYS = frozenset({
    "hidden_size", "d_model", "n_embd", "embed_dim", "hidden_dim", "dim", "embedding_size",
    "encoder_hidden_size", "decoder_hidden_size", "text_hidden_size", "projection_dim",
    "out_hidden_size", "word_embed_proj_dim", "projector_hidden_size", "hidden_size_global",
    "vision_output_dim", "output_hidden_size", "fusion_hidden_size", "pooler_output_size",
    "downsample_hidden_size", "d_embed", "n_embed", "emb_dim", "embedding_dim", "mm_hidden_size",
    "encoder_hidden_dim", "decoder_hidden_dim", "hidden_size_per_layer_input", "d_inner_attn",
    "memory_attention_hidden_size", "memory_encoder_hidden_size", "fpn_hidden_size",
    "classifier_proj_size", "codevector_dim", "proj_codevector_dim", "xvector_output_dim",
    "iou_head_hidden_dim", "adapter_out_dim", "text_embed_dim", "vision_embed_dim",
    "output_dim", "latent_dim", "image_embedding_size", "projection_size", "d_latents",
    "audio_hidden_size", "condition_dim", "adapter_input_size",
    "neck_hidden_size", "mask_decoder_hidden_size", "pooler_hidden_size",
})
FFN_KEYS = frozenset({
    "intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner", "d_ff",
    "moe_intermediate_size", "shared_expert_intermediate_size", "mlp_dim", "d_inner",
    "decoder_intermediate_size", "memory_fuser_intermediate_dim", "ffn_hidden_size",
    "expert_intermediate_size", "dense_intermediate_size", "mlp_hidden_size", "encoder_ffn_size",
})
HEAD_COUNT_KEYS = frozenset({
    "num_attention_heads", "n_head", "num_heads", "encoder_attention_heads",
    "decoder_attention_heads", "attention_heads", "n_heads", "swa_num_attention_heads",
    "index_n_heads", "linear_num_value_heads", "resampler_n_heads", "num_decoder_attention_heads",
    "num_encoder_attention_heads", "encoder_num_attention_heads", "decoder_num_attention_heads",
    "mamba_n_heads",
})
KV_HEAD_KEYS = frozenset({
    "num_key_value_heads", "swa_num_key_value_heads", "linear_num_key_heads", "n_kv_heads",
    "num_kv_heads", "multi_query_group_num",
})
HEAD_DIM_KEYS = frozenset({
    "head_dim", "d_kv", "dim_head", "swa_head_dim", "v_head_dim", "qk_nope_head_dim",
    "qk_rope_head_dim", "linear_key_head_dim", "linear_value_head_dim", "index_head_dim",
    "resampler_head_dim", "linear_head_dim", "attention_head_dim", "kv_channels", "d_head",
})
LAYER_KEYS = frozenset({
    "num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
    "num_encoder_layers", "num_decoder_layers", "decoder_num_layers", "encoder_num_layers",
    "depth", "max_window_layers", "num_text_layers", "num_vision_layers", "text_layers",
    "vision_layers", "num_single_layers", "num_mlp_layers",
})
VOCAB_KEYS = frozenset({"vocab_size", "vocab_size_per_layer_input", "unpadded_vocab_size"})
POSITION_KEYS = frozenset({"max_position_embeddings", "n_positions", "max_target_positions", "n_ctx"})
EXPERT_KEYS = frozenset({"num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts"})
TOP_K_KEYS = frozenset({"num_experts_per_tok", "moe_topk", "top_k", "moe_k", "num_selected_experts"})
# Lists that name stages or outputs rather than hold one entry per layer.
KEEP_LISTS = LAYER_KEYS | {"stage_names", "out_features", "out_indices", "depths"}
SMALL_KEYS = {  # attribute: tiny value
    "kv_lora_rank": 16, "q_lora_rank": 16, "n_group": 1, "topk_group": 1, "n_shared_experts": 1,
    "num_shared_experts": 1, "first_k_dense_replace": 1, "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 2, "num_codevectors_per_group": 16, "max_source_positions": 32,
    "image_size": IMAGE, "patch_size": PATCH, "num_queries": 10, "decoder_n_points": 4,
    "index_topk": 8, "num_labels": 2, "conv_kernel_size": 3, "relative_attention_num_buckets": 8,
    "n_groups": 1, "index_kpool": 4, "mamba_d_state": 8, "state_size": 8, "d_state": 8, "time_step_rank": 8, "rotary_dim": 4,
}


class NotBuilt(Exception):
    """The model type could not be turned into a tiny model with inputs; the message says why."""


@attrs.frozen
class Built:
    """A tiny model ready to export, and the keyword inputs the eager model accepts."""

    model: torch.nn.Module
    kwargs: dict[str, Any]
    output: Any = None
    """The eager model's output on ``kwargs``."""
    note: str = ""
    """How the inputs were chosen when it is worth knowing (e.g. text-only inputs of a VLM)."""


@functools.cache
def _exported_names() -> frozenset[str]:
    """Names transformers exports, read without importing any modeling module."""
    return frozenset(dir(transformers))


def model_types() -> list[str]:
    """Every model type transformers registers a config for, in its registry order."""
    return list(CONFIG_MAPPING_NAMES)


def _mapping(name: str) -> dict[str, Any]:
    return getattr(modeling_auto, name, {}) or {}


def _class_names(mapping: str, model_type: str) -> list[str]:
    names = _mapping(mapping).get(model_type)
    if names is None:
        return []
    return [names] if isinstance(names, str) else list(names)


def cases(model_type: str) -> list[str]:
    """Class names to export for ``model_type``: the most servable head first, then the base model.

    A type no auto mapping lists (the text or vision half of a composite model) gets the
    class its config names: ``Aimv2TextConfig`` -> ``Aimv2TextModel``, where that exists.
    """
    heads = [m for m in HEAD_MAPPINGS if _class_names(m, model_type)]
    if ENCODER_MAPPING in heads and "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES" in heads:
        heads.remove("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES")
    ordered: list[str] = []
    for mapping in (*heads[:1], "MODEL_MAPPING_NAMES"):
        ordered += [c for c in _class_names(mapping, model_type) if c not in ordered]
    if not ordered:
        for mapping in FALLBACK_MAPPINGS:
            ordered += [c for c in _class_names(mapping, model_type) if c not in ordered]
    if not ordered:
        guess = CONFIG_MAPPING_NAMES[model_type].removesuffix("Config") + "Model"
        if guess in _exported_names():
            ordered.append(guess)
    return ordered


# ---------------------------------------------------------------------------- configs


def _shrink_int(key: str, value: int, original: dict[str, Any]) -> int:
    if key in WIDTH_KEYS:
        return min(value, WIDTH)
    if key in FFN_KEYS:
        return min(value, FFN)
    if key in HEAD_COUNT_KEYS:
        return min(value, HEADS)
    if key in KV_HEAD_KEYS:
        heads = next((original[k] for k in HEAD_COUNT_KEYS if isinstance(original.get(k), int)), None)
        return min(value, HEADS if heads is None or value >= heads else KV_HEADS)
    if key in HEAD_DIM_KEYS:
        return min(value, HEAD_DIM)
    if key in LAYER_KEYS:
        return min(value, LAYERS)
    if key in VOCAB_KEYS:
        return min(value, VOCAB)
    if key in POSITION_KEYS:
        return min(value, POSITIONS)
    if key in EXPERT_KEYS:
        return min(value, EXPERTS)
    if key in TOP_K_KEYS:
        return min(value, 2)
    if key in SMALL_KEYS:
        return min(value, SMALL_KEYS[key])
    return value


def _shrink_list(key: str, value: list[Any]) -> list[Any]:
    """Per-stage sizes (hierarchical vision models, audio conv stacks) shrink stage by stage."""
    if not value or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    if key in {"depths", "encoder_depths", "decoder_depths", "stage_depths", "num_layers_per_stage", "blocks"}:
        return [min(v, 1) for v in value]
    if key in {"num_heads", "num_attention_heads", "encoder_attention_heads", "heads"}:
        base = math.gcd(*value) or 1
        return [max(1, v // base) for v in value]
    if key in {"hidden_sizes", "embed_dim", "embed_dims", "dims", "channels", "hidden_dims",
               "encoder_hidden_sizes", "decoder_hidden_sizes", "stage_channels", "widths",
               "out_channels", "neck_hidden_sizes"}:
        # 32 channels at least: group norms with 32 groups are common in conv stacks.
        scale = max(1, value[0] // 32)
        return [max(8, v // scale) for v in value]
    if key in {"conv_dim", "tdnn_dim"}:
        return [min(v, WIDTH) for v in value]
    if key == "image_size":
        return [min(v, IMAGE) for v in value]
    if key == "patch_size":
        return [min(v, PATCH) for v in value]
    return value


def _is_config_dict(value: Any) -> bool:
    return isinstance(value, dict) and "model_type" in value


def _resnet_backbone() -> dict[str, Any]:
    """A ResNet backbone config with the four stages a timm ResNet-50 backbone gives."""
    return CONFIG_MAPPING["resnet"](out_indices=[1, 2, 3, 4]).to_dict()


def _cut_per_layer(values: list[Any], layers: int) -> list[Any]:
    """The first ``layers`` entries of a per-layer list, keeping one of each kind it had.

    ``[sliding] * 5 + [full]`` cut to two layers is ``[sliding, full]``: the tiny model
    still has every kind of layer (and configs that demand a full-attention layer accept it).
    """
    cut = values[:layers]
    try:
        kinds = list(dict.fromkeys(values))
    except TypeError:
        return cut
    missing = [kind for kind in kinds if kind not in cut][: layers - 1]
    for i, kind in enumerate(missing):
        cut[layers - 1 - i] = kind
    return cut


def _split(total: int, sections: list[int]) -> list[int]:
    """``sections`` rescaled to sum to ``total`` (M-RoPE's time/height/width frequencies)."""
    scaled = [round(v * total / sum(sections)) for v in sections]
    scaled[scaled.index(max(scaled))] += total - sum(scaled)
    return scaled


def shrink(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of a config dict with every known size shrunk, sub-configs included.

    Per-layer lists (``layer_types`` and the like) whose length is a layer count that
    shrank are cut to the new count, so a config stays consistent with itself. A timm
    backbone (timm is not a dependency) becomes the equivalent transformers ResNet.
    """
    out: dict[str, Any] = {}
    for key, value in config.items():
        if _is_config_dict(value) and value["model_type"] == "timm_backbone":
            out[key] = shrink(_resnet_backbone())
        elif _is_config_dict(value):
            out[key] = shrink(value)
        elif isinstance(value, bool) or value is None:
            out[key] = value
        elif isinstance(value, int):
            out[key] = _shrink_int(key, value, config)
        elif isinstance(value, (list, tuple)):
            out[key] = _shrink_list(key, list(value))
        else:
            out[key] = value
    if "depths" in config:
        # Hierarchical models derive num_layers and stage names from depths, and their
        # attention windows must fit the tiny image's patch grid.
        for key in LAYER_KEYS & config.keys():
            out[key] = config[key]
        if isinstance(config.get("window_size"), int):
            out["window_size"] = min(config["window_size"], 2)
    for key in LAYER_KEYS:
        old, new = config.get(key), out.get(key)
        if not isinstance(old, int) or not isinstance(new, int) or old == new:
            continue
        for list_key, value in out.items():
            if isinstance(value, list) and len(value) == old and list_key not in KEEP_LISTS:
                out[list_key] = _cut_per_layer(value, new)
        if isinstance(out.get("per_layer_config"), dict):
            out["per_layer_config"] = {k: v for k, v in out["per_layer_config"].items() if int(k) < new}
        # Backbone outputs name stages by layer: let the config name them anew.
        for list_key in ("stage_names", "out_features", "out_indices"):
            out.pop(list_key, None)
    if isinstance(out.get("qk_nope_head_dim"), int) and isinstance(out.get("qk_rope_head_dim"), int):
        if "qk_head_dim" in out:
            out["qk_head_dim"] = out["qk_nope_head_dim"] + out["qk_rope_head_dim"]
    if "use_cache" in out:
        out["use_cache"] = False
    if any(isinstance(out.get(k), int) for k in EXPERT_KEYS):
        # Some defaults leave the router's top-k unset and would not run at all.
        for key in TOP_K_KEYS & out.keys():
            if out[key] is None:
                out[key] = 2
    if out.get("rope_parameters") == {}:
        out.pop("rope_parameters")
    for key in ("rope_parameters", "rope_scaling"):
        if isinstance(out.get(key), dict) and isinstance(out[key].get("mrope_section"), list):
            out[key] = {**out[key], "mrope_section": _split(HEAD_DIM // 2, out[key]["mrope_section"])}
    for key in ("use_pretrained_backbone", "use_timm_backbone"):
        if out.get(key):
            out[key] = False
    return out


def _remap_special_ids(config: dict[str, Any], vocab: int | None = None) -> None:
    """Move special token ids the vocabulary no longer holds to its top, in place."""
    vocab = config.get("vocab_size", vocab)
    taken: dict[int, int] = {}

    def remap(token: int) -> int:
        if vocab is None or not isinstance(token, int) or token < vocab:
            return token
        if token not in taken:
            taken[token] = vocab - 1 - len(taken)
        return taken[token]

    for key, value in config.items():
        if _is_config_dict(value):
            _remap_special_ids(value, vocab)
        elif key.endswith(("_token_id", "_token_index", "_token_ids", "_id")):
            if isinstance(value, list):
                config[key] = [remap(v) for v in value]
            else:
                config[key] = remap(value)


# Per-family fixes the generic shrinker cannot know: {model_type: {attribute: value}};
# a dict value updates the sub-config of that name.
OVERRIDES: dict[str, dict[str, Any]] = {
    "audio-spectrogram-transformer": {"max_length": 64},
    # hidden_size * expand must equal num_heads * head_dim.
    "mamba2": {"head_dim": 16},
}


def tiny_config(model_type: str) -> transformers.PreTrainedConfig:
    """The default config of ``model_type`` shrunk to a tiny model."""
    config_class = CONFIG_MAPPING[model_type]
    try:
        default = config_class()
    except Exception as e:
        raise NotBuilt(f"config not tinyfiable: default {config_class.__name__}() fails: {_headline(e)}") from e
    values = shrink(default.to_dict())
    for key, value in OVERRIDES.get(model_type, {}).items():
        if isinstance(value, dict) and isinstance(values.get(key), dict):
            values[key].update(value)
        else:
            values[key] = value
    _remap_special_ids(values)
    values.pop("transformers_version", None)
    try:
        config = config_class.from_dict(values)
    except Exception as e:
        raise NotBuilt(f"config not tinyfiable: shrunk {config_class.__name__} rejected: {_headline(e)}") from e
    _fit_mrope(config)
    return config


def _fit_mrope(config: Any) -> None:
    """Give M-RoPE configs sections that fit the tiny head, in place.

    Qwen2-VL-like models fall back to sections sized for their real head (``[16, 24, 24]``)
    when the config names none; their config classes declare that they take
    ``mrope_section`` by exempting it from RoPE validation.
    """
    for sub in [config, *(v for v in vars(config).values() if isinstance(v, transformers.PreTrainedConfig))]:
        rope = getattr(sub, "rope_parameters", None)
        exempt = getattr(type(sub), "ignore_keys_at_rope_validation", None) or ()
        if "mrope_section" not in exempt or not isinstance(rope, dict) or "rope_type" not in rope:
            continue
        heads = getattr(sub, "num_attention_heads", None) or HEADS
        head_dim = getattr(sub, "head_dim", None) or sub.hidden_size // heads
        rotary = int(head_dim * rope.get("partial_rotary_factor", getattr(sub, "partial_rotary_factor", 1.0) or 1.0))
        rope["mrope_section"] = _split(rotary // 2, rope.get("mrope_section") or [16, 24, 24])


# ----------------------------------------------------------------------------- inputs


def _sub(config: Any, *names: str) -> Any:
    """The first sub-config among ``names`` that the config has, else the config itself."""
    for name in names:
        sub = getattr(config, name, None)
        if sub is not None and hasattr(sub, "to_dict"):
            return sub
    return config


def _special_ids(config: Any) -> set[int]:
    ids: set[int] = set()
    for key, value in config.to_dict().items() if hasattr(config, "to_dict") else config.items():
        if _is_config_dict(value):
            ids |= _special_ids(value)
        elif isinstance(key, str) and key.endswith(("_token_id", "_token_index", "_token_ids", "_id")):
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, int) and not isinstance(v, bool):
                    ids.add(v)
    return ids


def _token_ids(config: Any, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """Random token ids inside the text vocabulary that avoid every special token id."""
    text = _sub(config, "text_config", "decoder", "text_encoder")
    vocab = getattr(text, "vocab_size", None) or getattr(config, "vocab_size", None) or VOCAB
    allowed = torch.tensor([i for i in range(vocab) if i not in _special_ids(config)] or [0])
    return allowed[torch.randint(0, len(allowed), shape, generator=gen)]


def _image_shape(config: Any) -> tuple[int, int, int]:
    vision = _sub(config, "vision_config", "backbone_config", "encoder")
    channels = getattr(vision, "num_channels", None) or getattr(config, "num_channels", None) or 3
    size = getattr(vision, "image_size", None) or getattr(config, "image_size", None) or 2 * IMAGE
    h, w = (size, size) if isinstance(size, int) else tuple(size)[:2]
    return channels, h, w


def _pixel_values(config: Any, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(BATCH, *_image_shape(config), generator=gen)


def _text(config: Any, gen: torch.Generator, *, mask: bool = True) -> dict[str, torch.Tensor]:
    inputs = {"input_ids": _token_ids(config, (BATCH, SEQ), gen)}
    if mask:
        inputs["attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
    return inputs


def _audio_features(config: Any, gen: torch.Generator) -> list[torch.Tensor]:
    """input_features candidates: [B, mel, frames] (Whisper) then [B, frames, features]."""
    audio = _sub(config, "audio_config", "encoder_config", "encoder")
    mel = getattr(audio, "num_mel_bins", None) or getattr(config, "num_mel_bins", None)
    source = getattr(audio, "max_source_positions", None) or getattr(config, "max_source_positions", None)
    per_channel = getattr(audio, "input_feat_per_channel", None) or getattr(config, "input_feat_per_channel", None)
    channels = getattr(audio, "input_channels", None) or getattr(config, "input_channels", None) or 1
    feature = getattr(audio, "feature_size", None) or getattr(config, "feature_size", None)
    frames = 2 * source if source else 32
    candidates = []
    if mel:
        candidates.append(torch.randn(BATCH, mel, frames, generator=gen))
    for width in (per_channel and per_channel * channels, feature, mel, 80):
        if width:
            candidates.append(torch.randn(BATCH, frames, width, generator=gen))
    return candidates


def _input_sets(model: torch.nn.Module, gen: torch.Generator) -> list[tuple[dict[str, Any], str]]:
    """Candidate keyword inputs, most natural first, each with a note for the report."""
    config = model.config
    params = inspect.signature(model.forward).parameters
    main = getattr(model, "main_input_name", "input_ids")
    sets: list[tuple[dict[str, Any], str]] = []

    def add(inputs: dict[str, Any], note: str = "") -> None:
        inputs = {k: v for k, v in inputs.items() if k in params}
        if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
            inputs["decoder_input_ids"] = _token_ids(config, (BATCH, SEQ), gen)
        sets.append((inputs, note))

    if main == "input_ids":
        add(_text(config, gen))
        if "pixel_values" in params:
            add({**_text(config, gen), "pixel_values": _pixel_values(config, gen)}, "text and image")
        add(_text(config, gen, mask=False), "no attention_mask")
    elif main in ("pixel_values", "pixel_values_videos"):
        add({main: _pixel_values(config, gen)})
        if "input_ids" in params:
            add({**_text(config, gen), main: _pixel_values(config, gen)}, "image and text")
    elif main == "input_features":
        for features in _audio_features(config, gen):
            add({"input_features": features})
    elif main == "input_values":
        mel = getattr(config, "num_mel_bins", None)
        length = getattr(config, "max_length", None)
        if mel and isinstance(length, int):
            add({"input_values": torch.randn(BATCH, length, mel, generator=gen)}, "spectrogram")
        add({"input_values": torch.randn(BATCH, 1600, generator=gen)})
        add({"input_values": torch.randn(BATCH, 1, 1600, generator=gen)}, "mono channel dim")
    else:
        raise NotBuilt(f"inputs unknown: main input {main!r} is not text, image or audio")
    return sets


def _run(model: torch.nn.Module, kwargs: dict[str, Any]) -> Any:
    with torch.no_grad():
        return model(**kwargs)


def build(model_type: str, class_name: str, seed: int = 0) -> Built:
    """A tiny ``class_name`` model of ``model_type`` and inputs its eager forward accepts."""
    try:
        model_class = getattr(transformers, class_name)
    except (ImportError, AttributeError, RuntimeError) as e:
        raise NotBuilt(f"requires a package: {_headline(e)}") from e
    config = tiny_config(model_type)
    if hasattr(config, "use_cache"):
        config.use_cache = False
    torch.manual_seed(seed)
    try:
        model = model_class(config).eval()
    except ImportError as e:
        raise NotBuilt(f"requires a package: {_headline(e)}") from e
    except OSError as e:
        raise NotBuilt(f"needs a download: {_headline(e)}") from e
    except Exception as e:
        raise NotBuilt(f"model init fails on the tiny config: {type(e).__name__}: {_headline(e)}") from e
    gen = torch.Generator().manual_seed(seed)
    errors = []
    for kwargs, note in _input_sets(model, gen):
        try:
            output = _run(model, kwargs)
        except Exception as e:
            errors.append(f"{type(e).__name__}: {_headline(e)}")
            continue
        return Built(model, kwargs, output, note)
    # The last input set is the fullest, so its error is the one worth reading.
    raise NotBuilt(f"eager forward fails on generated inputs: {errors[-1] if errors else 'no input set'}")


def _headline(error: BaseException) -> str:
    """The error's text on one line; validation errors put the cause on their second line."""
    text = " ".join(str(error).split())
    return text[:300] if text else type(error).__name__


__all__ = ["Built", "NotBuilt", "build", "cases", "model_types", "shrink", "tiny_config"]
