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

import ast
import dataclasses
import functools
import importlib
import inspect
import math
import os
from collections.abc import Callable
from pathlib import Path
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
    "neck_hidden_size", "mask_decoder_hidden_size", "pooler_hidden_size", "codebook_dim", "adapter_in_dim",
    "vector_quantization_hidden_dimension", "reassemble_hidden_size", "bottleneck_features", "cross_hidden_size",
    "nemo_conv_channels", "output_channels",
    "descriptor_decoder_dim",
    "mit_hidden_size", "prompt_hidden_size",
})
FFN_KEYS = frozenset({
    "intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner", "d_ff",
    "moe_intermediate_size", "shared_expert_intermediate_size", "mlp_dim", "d_inner",
    "decoder_intermediate_size", "memory_fuser_intermediate_dim", "ffn_hidden_size",
    "expert_intermediate_size", "dense_intermediate_size", "mlp_hidden_size", "encoder_ffn_size",
    "mit_intermediate_size",
})
HEAD_COUNT_KEYS = frozenset({
    "num_attention_heads", "n_head", "num_heads", "encoder_attention_heads",
    "decoder_attention_heads", "attention_heads", "n_heads", "swa_num_attention_heads",
    "index_n_heads", "linear_num_value_heads", "resampler_n_heads", "num_decoder_attention_heads",
    "num_encoder_attention_heads", "encoder_num_attention_heads", "decoder_num_attention_heads",
    "mamba_n_heads", "mit_num_attention_heads", "prompt_num_attention_heads",
})
KV_HEAD_KEYS = frozenset({
    "num_key_value_heads", "swa_num_key_value_heads", "linear_num_key_heads", "n_kv_heads",
    "num_kv_heads", "multi_query_group_num", "encoder_num_key_value_heads", "decoder_num_key_value_heads",
})
HEAD_DIM_KEYS = frozenset({
    "head_dim", "d_kv", "dim_head", "swa_head_dim", "v_head_dim", "qk_nope_head_dim",
    "qk_rope_head_dim", "linear_key_head_dim", "linear_value_head_dim", "index_head_dim",
    "resampler_head_dim", "linear_head_dim", "attention_head_dim", "kv_channels", "d_head", "cross_head_dim",
})
LAYER_KEYS = frozenset({
    "num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
    "num_encoder_layers", "num_decoder_layers", "decoder_num_layers", "encoder_num_layers",
    "depth", "max_window_layers", "num_text_layers", "num_vision_layers", "text_layers",
    "vision_layers", "num_single_layers", "num_mlp_layers", "mit_num_hidden_layers", "prompt_layers",
})
VOCAB_KEYS = frozenset({"vocab_size", "vocab_size_per_layer_input", "unpadded_vocab_size"})
POSITION_KEYS = frozenset({"max_position_embeddings", "n_positions", "max_target_positions", "n_ctx"})
EXPERT_KEYS = frozenset({"num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts"})
TOP_K_KEYS = frozenset({"num_experts_per_tok", "moe_topk", "top_k", "moe_k", "num_selected_experts",
                        "num_experts_per_token", "top_k_experts"})
# Lists that name stages or outputs rather than hold one entry per layer.
KEEP_LISTS = LAYER_KEYS | {"stage_names", "out_features", "out_indices", "depths"}
SMALL_KEYS = {  # attribute: tiny value
    "kv_lora_rank": 16, "q_lora_rank": 16, "n_group": 1, "topk_group": 1, "n_shared_experts": 1,
    "num_shared_experts": 1, "first_k_dense_replace": 1, "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 2, "num_codevectors_per_group": 16, "max_source_positions": 32,
    "image_size": IMAGE, "patch_size": PATCH, "num_queries": 10, "decoder_n_points": 4,
    "index_topk": 8, "num_labels": 2, "conv_kernel_size": 3, "relative_attention_num_buckets": 8,
    "n_groups": 1, "num_expert_group": 1, "index_kpool": 4, "num_frames": 4, "frames_per_clip": 4, "crop_size": IMAGE, "num_query_tokens": 4, "mamba_d_state": 8, "state_size": 8, "d_state": 8, "time_step_rank": 8, "rotary_dim": 4,
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
    weights: tuple[tuple[str, dict[str, torch.Tensor]], ...] = ()
    """Other weights that may send the program's decisions another way: what was changed (a
    detector's class scores lowered until it finds nothing) and the changed weights by name,
    the rest the model's own. Parameters are inputs of the program too."""


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
    if not ordered:
        ordered = _part_classes(model_type)
    ordered = [name for name in ordered if not _lacks_forward(model_type, name)]
    if not ordered:
        # A wrapper with no forward of its own (a generation pipeline of several models):
        # its sub-models, built from its sub-configs.
        subs = getattr(CONFIG_MAPPING[model_type], "sub_configs", {}) or {}
        names = {c.__name__ for c in subs.values() if isinstance(c, type)}
        ordered = [name for name in _part_classes(model_type, names) if not _lacks_forward(model_type, name)]
    return ordered


@attrs.frozen
class _SourceClass:
    """A class defined in a model's source, as read from its syntax tree."""

    name: str
    module: str
    bases: tuple[str, ...]
    own_config_class: str | None
    """The ``config_class`` its body names."""
    init_config: str | None
    """The annotation of ``__init__``'s ``config`` argument."""
    takes_config_only: bool | None
    """``__init__`` needs nothing but the config (None: it defines no ``__init__``)."""
    exported: bool
    """Named in the module's ``__all__``."""
    has_forward: bool
    """Its body defines ``forward``."""


def _model_sources(model_type: str) -> list[Path]:
    """The source files of the package that defines ``model_type``'s config (its modeling
    files first), found without importing them."""
    folder = Path(inspect.getfile(CONFIG_MAPPING[model_type])).parent
    skip = ("configuration_", "processing_", "image_processing_", "video_processing_", "feature_extraction_",
            "tokenization_", "modular_", "convert_", "__init__")
    keep = [f for f in sorted(folder.glob("*.py")) if not f.name.startswith(skip)]
    return sorted(keep, key=lambda f: not f.name.startswith("modeling_"))


@functools.cache
def _source_classes(model_type: str) -> dict[str, _SourceClass]:
    """Every class the type's package defines, by name."""
    found: dict[str, _SourceClass] = {}
    package = CONFIG_MAPPING[model_type].__module__.rsplit(".", 1)[0]
    for path in _model_sources(model_type):
        tree = ast.parse(path.read_text())
        exported: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                try:
                    exported = set(ast.literal_eval(node.value))
                except ValueError:
                    pass
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name not in found:
                found[node.name] = _read_class(node, f"{package}.{path.stem}", node.name in exported)
    return found


def _read_class(node: ast.ClassDef, module: str, exported: bool) -> _SourceClass:
    config_class = annotation = only_config = None
    for item in node.body:
        if isinstance(item, ast.Assign) and any(getattr(t, "id", None) == "config_class" for t in item.targets):
            config_class = getattr(item.value, "id", None)
        elif isinstance(item, ast.FunctionDef) and item.name == "__init__":
            args = item.args.args[1:]
            only_config = bool(args) and args[0].arg == "config" and len(args) - len(item.args.defaults) <= 1
            if args and args[0].arg == "config" and isinstance(args[0].annotation, ast.Name):
                annotation = args[0].annotation.id
    bases = tuple(b.id for b in node.bases if isinstance(b, ast.Name))
    has_forward = any(isinstance(item, ast.FunctionDef) and item.name == "forward" for item in node.body)
    return _SourceClass(node.name, module, bases, config_class, annotation, only_config, exported, has_forward)


def _lacks_forward(model_type: str, class_name: str) -> bool:
    """Whether a class of the type's package (a generation wrapper, a VQ-VAE used only
    through ``encode`` and ``decode``) defines no ``forward``, itself or through its bases."""
    classes = _source_classes(model_type)
    if class_name not in classes:
        return False
    queue, seen = [class_name], set()
    while queue:
        current = classes.get(queue.pop(0))
        if current is None or current.name in seen:
            continue
        if current.has_forward:
            return False
        seen.add(current.name)
        queue += current.bases
    return True


def _inherited(classes: dict[str, _SourceClass], name: str, field: str) -> Any:
    """A field of a class, or of the first of its bases (in its package) that sets it."""
    seen = set()
    queue = [name]
    while queue:
        current = classes.get(queue.pop(0))
        if current is None or current.name in seen:
            continue
        seen.add(current.name)
        if getattr(current, field) is not None:
            return getattr(current, field)
        queue += current.bases
    return None


def _is_pretrained(classes: dict[str, _SourceClass], name: str) -> bool:
    queue, seen = [name], set()
    while queue:
        current = queue.pop(0)
        if current == "PreTrainedModel":
            return True
        if current in classes and current not in seen:
            seen.add(current)
            queue += classes[current].bases
    return False


def _part_classes(model_type: str, config_names: set[str] | None = None) -> list[str]:
    """The classes of a type no auto mapping lists (a vision tower, a codec's decoder, a
    prompt encoder): those of its package built from its config alone. The class named
    for the config comes first, then exported ones, pretrained models, heads, and models
    before encoders."""
    config_names = config_names or {CONFIG_MAPPING_NAMES[model_type]}
    stems = {name.removesuffix("Config") for name in config_names}
    classes = _source_classes(model_type)
    candidates = []
    for c in classes.values():
        pretrained = _is_pretrained(classes, c.name)
        config = (_inherited(classes, c.name, "own_config_class") if pretrained else None) or \
            _inherited(classes, c.name, "init_config")
        only_config = _inherited(classes, c.name, "takes_config_only")
        if config in config_names and only_config is not False and not c.name.endswith("PreTrainedModel"):
            candidates.append((c, pretrained))
    suffixes = ("Model", "Transformer", "Encoder", "Decoder")

    def rank(item: tuple[_SourceClass, bool]) -> tuple[Any, ...]:
        c, pretrained = item
        head = "For" in c.name or "LMHead" in c.name
        suffix = next((i for i, end in enumerate(suffixes) if c.name.endswith(end)), len(suffixes))
        named = any(c.name in (stem, stem + "Model") for stem in stems)
        return (not head, not named, not c.exported, not pretrained, suffix)

    return [c.name for c, _ in sorted(candidates, key=rank)]


def model_class(model_type: str, class_name: str) -> type[torch.nn.Module]:
    """The class ``class_name`` of ``model_type``: transformers' own export, else the class
    of that name in the type's package (a part no auto mapping lists)."""
    if class_name in _exported_names():
        return getattr(transformers, class_name)
    found = _source_classes(model_type).get(class_name)
    if found is not None:
        return getattr(importlib.import_module(found.module), class_name)
    return getattr(transformers, class_name)


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
    if key == "tubelet_size" and len(value) == 3:
        return [value[0], min(value[1], PATCH), min(value[2], PATCH)]
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
    if config.get("model_type") == "timm_wrapper":
        return _shrink_timm(config)
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
    if isinstance(config.get("num_patches"), int) and isinstance(config.get("channel_multiplier"), (list, tuple)):
        # A VQ-VAE's latent grid (Janus): a few tokens a side.
        out["num_patches"] = min(config["num_patches"], 4)
    if "depths" in config:
        # Hierarchical models derive num_layers and stage names from depths, and their
        # attention windows must fit the tiny image's patch grid.
        for key in LAYER_KEYS & config.keys():
            out[key] = config[key]
        if isinstance(config.get("window_size"), int):
            out["window_size"] = min(config["window_size"], 2)
            # Every stage's patch grid (halved stage by stage) must hold a whole window.
            patch = out.get("patch_size")
            if isinstance(patch, int) and isinstance(out.get("image_size"), int) and isinstance(out["depths"], list):
                out["image_size"] = max(out["image_size"], patch * out["window_size"] * 2 ** (len(out["depths"]) - 1))
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
    _fill_unset_sizes(out)
    _fit_derived_sizes(out)
    _fit_vq_width(config, out)
    _follow_shrunk_channels(config, out)
    _fit_stage_channels(config, out)
    _fit_backbone(out)
    if isinstance(out.get("convstream_hidden_sizes"), list) and _is_config_dict(out.get("backbone_config")):
        # ViTMatte fuses the backbone's map, upsampled twice per stage of its detail stream
        # (each halving the image), with the image itself: the patch is 2 ** (stages + 1).
        out["backbone_config"]["patch_size"] = 2 ** (len(out["convstream_hidden_sizes"]) + 1)
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
    if out.get("model_type") == "timm_backbone" and out.get("backbone") is None:
        # A timm backbone names no architecture by default: take the timm wrapper's default.
        out["backbone"] = CONFIG_MAPPING["timm_wrapper"].architecture
    return out


# Sizes of a timm architecture's class, and their tiny values (a ViT's width, depth, heads).
TIMM_SIZES = {"embed_dim": WIDTH, "depth": LAYERS, "num_heads": HEADS, "attn_pool_num_heads": HEADS}


def _timm_model(architecture: str, model_args: dict[str, Any]) -> torch.nn.Module | None:
    """The timm model of ``architecture`` built on the meta device (None without timm, or
    when timm cannot build it with these arguments)."""
    try:
        import timm
    except ImportError:
        return None
    try:
        with torch.device("meta"):
            return timm.create_model(architecture, pretrained=False, **model_args)
    except Exception:
        return None


def _shrink_timm(config: dict[str, Any]) -> dict[str, Any]:
    """A timm model config (``timm_wrapper``) with the sizes its architecture's class takes as
    single integers (a ViT's width, depth and heads) made tiny through ``model_args``, which
    transformers passes on to ``timm.create_model``; architectures whose sizes are per stage
    (CNNs) stay as they are. Without timm the config is unchanged."""
    out = dict(config)
    args = dict(config.get("model_args") or {})
    model = _timm_model(config.get("architecture", ""), args)
    if model is None:
        return out
    accepted = inspect.signature(type(model).__init__).parameters
    tiny = {**{key: value for key, value in TIMM_SIZES.items()
               if key in accepted and isinstance(accepted[key].default, int) and key not in args}, **args}
    if tiny != args and _timm_model(config["architecture"], tiny) is not None:
        out["model_args"] = tiny
    return out


def _config_dicts(values: dict[str, Any]) -> list[dict[str, Any]]:
    """A config dict and every sub-config dict nested in it."""
    found = [values]
    for value in values.values():
        if _is_config_dict(value):
            found += _config_dicts(value)
    return found


def _paired_dicts(values: dict[str, Any], original: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each config dict of a tree with the one at the same place in the original tree."""
    pairs = [(values, original)]
    for key, value in values.items():
        if _is_config_dict(value) and _is_config_dict(original.get(key)):
            pairs += _paired_dicts(value, original[key])
    return pairs


def _image_sizes(original: dict[str, Any], shrunk: dict[str, Any]) -> list[tuple[int, int]]:
    """Every ``image_size`` of a config tree, as it was and as it is now."""
    pairs = []
    old, new = original.get("image_size"), shrunk.get("image_size")
    if old is not None and new is not None and not isinstance(old, bool):
        pairs.append((max(_pair(old)), max(_pair(new))))
    for key, value in shrunk.items():
        if _is_config_dict(value) and _is_config_dict(original.get(key)):
            pairs += _image_sizes(original[key], value)
    return pairs


def _grid_side(config: dict[str, Any]) -> float | None:
    """Patches a side of a vision backbone config's image (None when it names no image size
    and patch size or stride)."""
    image, patch = config.get("image_size"), config.get("patch_size") or config.get("patch_stride")
    if image is None or patch is None or isinstance(image, bool):
        return None
    return max(_pair(image)) / max(_pair(patch))


def _fit_feature_sizes(original: dict[str, Any], config: dict[str, Any]) -> None:
    """Feature map sizes a config lists (SAM 2's ``backbone_feature_sizes``, for its
    1024-pixel images) shrunk by the factor its backbone's patch grid shrank by, in place;
    a backbone that names no grid (a timm model) goes by the factor the config tree's
    ``image_size`` shrank by (when the tree has one factor)."""
    ratios = {old / new for old, new in _image_sizes(original, config) if new}
    tree_ratio = ratios.pop() if len(ratios) == 1 else None
    for sub, before in _paired_dicts(config, original):
        sizes = sub.get("backbone_feature_sizes")
        if not (isinstance(sizes, list) and sizes and all(isinstance(size, list) for size in sizes)):
            continue
        ratio = tree_ratio
        old, new = before.get("backbone_config"), sub.get("backbone_config")
        if _is_config_dict(old) and _is_config_dict(new) and _grid_side(old) and _grid_side(new):
            ratio = _grid_side(old) / _grid_side(new)
        if ratio:
            sub["backbone_feature_sizes"] = [[max(1, round(v / ratio)) for v in size] for size in sizes]
        # A config whose patch grid is the coarsest feature map (SAM 2's prompt encoder)
        # keeps it so: its patch is the image over that map.
        for other, before_other in _paired_dicts(config, original):
            side, old_side = _grid_side(other), _grid_side(before_other)
            if side and old_side == max(sizes[-1]) and isinstance(other.get("patch_size"), int):
                other["patch_size"] = max(1, max(_pair(other["image_size"])) // max(sub["backbone_feature_sizes"][-1]))


def _fit_neck_channels(original: dict[str, Any], config: dict[str, Any]) -> None:
    """A SAM neck's ``downsample_channels`` that end at the width of the encoder its tokens go
    through (Unlimited-OCR's CLIP encoder after its SAM encoder) rescaled to end at that
    width as it shrank, in place."""
    pairs = _paired_dicts(config, original)
    widths = {before["hidden_size"]: sub["hidden_size"] for sub, before in pairs
              if _is_size(before.get("hidden_size")) and _is_size(sub.get("hidden_size"))
              and sub["hidden_size"] < before["hidden_size"]}
    for sub, before in pairs:
        channels = sub.get("downsample_channels")
        if not (isinstance(channels, list) and channels == before.get("downsample_channels")
                and all(_is_size(v) for v in channels) and channels[-1] in widths):
            continue
        width = widths[channels[-1]]
        sub["downsample_channels"] = [max(8, round(v * width / channels[-1])) for v in channels[:-1]] + [width]


def _fit_timm_backbone(config: dict[str, Any]) -> None:
    """A neck on a timm backbone (EdgeTAM's FPN) takes the channels that backbone puts out at
    each feature level, deepest first, in place."""
    backbone = config.get("backbone_config")
    if not (_is_config_dict(backbone) and backbone["model_type"] == "timm_wrapper"
            and isinstance(config.get("backbone_channel_list"), list)):
        return
    model = _timm_model(backbone.get("architecture", ""), backbone.get("model_args") or {})
    info = getattr(model, "feature_info", None)
    if info is not None and hasattr(info, "channels"):
        config["backbone_channel_list"] = list(info.channels())[::-1]


STAGE_CHANNEL_KEYS = ("stem_channels", "stage_in_channels", "stage_mid_channels", "stage_out_channels")


def _fit_stage_channels(original: dict[str, Any], config: dict[str, Any]) -> None:
    """Shrink HGNet-style per-stage channel lists by the scale ``hidden_sizes`` shrank by, in
    place, so each stage's input still matches the previous stage's output (the image's
    three channels stay three)."""
    hidden, old = config.get("hidden_sizes"), original.get("hidden_sizes")
    if not (isinstance(hidden, list) and isinstance(old, list) and hidden and hidden[0]):
        return
    scale = max(1, old[0] // hidden[0])
    for key in STAGE_CHANNEL_KEYS:
        if isinstance(config.get(key), list) and all(isinstance(v, int) for v in config[key]):
            config[key] = [v // scale if v >= 16 else v for v in config[key]]


def _backbone_channels(backbone: dict[str, Any]) -> list[int] | None:
    """The channels each stage of a (shrunk) backbone config puts out."""
    for key in ("stage_out_channels", "hidden_sizes"):
        if isinstance(backbone.get(key), list) and backbone[key]:
            return backbone[key]
    return None


def _fit_backbone(config: dict[str, Any]) -> None:
    """Keep a detection or depth head consistent with its shrunk backbone, in place: the
    encoder's input channels are the backbone's at its output stages, the decoder's the
    encoder's width; a DPT-style neck that fuses one map per neck stage gets a backbone
    deep enough to put out that many."""
    backbone = config.get("backbone_config")
    if not _is_config_dict(backbone):
        backbone = None
    channels = _backbone_channels(backbone) if backbone else None
    indices = backbone.get("out_indices") if backbone else None
    encoder_in = config.get("encoder_in_channels")
    if channels and isinstance(encoder_in, list) and isinstance(indices, list) and len(indices) == len(encoder_in):
        config["encoder_in_channels"] = [channels[i - 1] for i in indices]
    if isinstance(config.get("decoder_in_channels"), list) and isinstance(config.get("encoder_hidden_dim"), int):
        config["decoder_in_channels"] = [config["encoder_hidden_dim"]] * len(config["decoder_in_channels"])
    neck = config.get("neck_hidden_sizes") or config.get("reassemble_factors")
    if not isinstance(neck, list):
        return
    stages = len(neck)
    if backbone is not None and "num_hidden_layers" in backbone and not backbone.get("hidden_sizes"):
        backbone["num_hidden_layers"] = max(backbone["num_hidden_layers"], stages)
        backbone["out_indices"] = list(range(backbone["num_hidden_layers"] - stages + 1,
                                             backbone["num_hidden_layers"] + 1))
        backbone.pop("out_features", None)
        backbone.pop("stage_names", None)
    elif isinstance(config.get("backbone_out_indices"), list) and isinstance(config.get("num_hidden_layers"), int):
        config["num_hidden_layers"] = max(config["num_hidden_layers"], stages)
        config["backbone_out_indices"] = list(range(config["num_hidden_layers"] - stages, config["num_hidden_layers"]))


def _fit_derived_sizes(config: dict[str, Any]) -> None:
    """Sizes a config requires to follow from others, fitted to the shrunk ones in place:
    Mamba heads that span the expanded width (Bamba, Falcon-H1), a sliding-window head as
    wide as the MLA query head (dots3), a quantizer as wide as the codec it sits in."""
    width = config.get("hidden_size")
    if isinstance(width, int) and isinstance(config.get("mamba_n_heads"), int) and "mamba_d_head" in config:
        inner = (config.get("mamba_expand") or 2) * width
        if isinstance(config.get("mamba_d_ssm"), int):
            config["mamba_d_ssm"] = inner
        config["mamba_d_head"] = inner // config["mamba_n_heads"]
    if isinstance(config.get("swa_head_dim"), int) and isinstance(config.get("qk_nope_head_dim"), int):
        config["swa_head_dim"] = config["qk_nope_head_dim"] + config.get("qk_rope_head_dim", 0)
    if isinstance(config.get("upsample_groups"), int) and isinstance(width, int):
        config["upsample_groups"] = min(config["upsample_groups"], width)
    ratio = config.get("pixel_shuffle_ratio")
    if isinstance(ratio, float) and isinstance(config.get("projector_input_dim"), int) and isinstance(width, int):
        # Llama 4's vision adapter takes the pixel-shuffled patches: the width over the ratio
        # squared, which is the MLP's intermediate size.
        config["intermediate_size"] = int(width / ratio**2)
        config["projector_input_dim"] = config["projector_output_dim"] = min(config["projector_input_dim"], WIDTH)
    window = config.get("n_window")
    if isinstance(window, int) and isinstance(config.get("max_source_positions"), int) and "num_mel_bins" in config:
        # A chunked audio encoder's chunk (2 * n_window frames, halved at least once by its
        # convolutions; some hard-code the lengths a chunk gives) must fit its positions.
        config["max_source_positions"] = max(config["max_source_positions"], window)
    channels = config.get("output_channels")
    if isinstance(config.get("num_pos_feats"), int) and isinstance(channels, int):
        # Sine and cosine of each positional frequency span the output channels (SAM).
        config["num_pos_feats"] = min(config["num_pos_feats"], channels // 2)


def _fit_vq_width(original: dict[str, Any], config: dict[str, Any]) -> None:
    """A VQ-VAE whose attention runs at its deepest level's width (Emu3: ``hidden_size`` is
    ``base_channels`` times the last ``channel_multiplier``) keeps it so, in place, with a base
    of at most ``WIDTH`` channels (group norms of 32 groups need that many)."""
    base, levels, width = original.get("base_channels"), original.get("channel_multiplier"), original.get("hidden_size")
    if not (isinstance(base, int) and isinstance(levels, (list, tuple)) and levels and isinstance(width, int)):
        return
    if width == base * levels[-1]:
        config["base_channels"] = min(base, WIDTH)
        config["hidden_size"] = config["base_channels"] * levels[-1]


def _follow_shrunk_channels(original: dict[str, Any], config: dict[str, Any]) -> None:
    """An input channel count (``post_conv_in_channels``), or a convolution's output channel
    count that feeds a block of the model's width (``depthwise_separable_out_channel``), that
    the shrinking left as it was but that equals the original of a size that shrank
    (``output_channels``, ``hidden_size``) takes that size's new value, in place. Channel
    sizes are preferred as the source."""
    shrunk = {key: value for key, value in config.items()
              if isinstance(value, int) and not isinstance(value, bool) and original.get(key) != value
              and isinstance(original.get(key), int)}
    for key, value in list(config.items()):
        follows = key.endswith(("in_channels", "_out_channel"))  # Phi-4's conformer: depthwise_separable_out_channel
        if not follows or not isinstance(value, int) or key in shrunk or original.get(key) != value:
            continue
        sources = sorted((k for k in shrunk if original[k] == value), key=lambda k: "channels" not in k)
        if sources:
            config[key] = shrunk[sources[0]]


def _fill_unset_sizes(config: dict[str, Any]) -> None:
    """Give sizes a default config leaves unset (a checkpoint's config sets them) their
    derived value, in place: ``head_dim`` the width over the heads, key-value heads the
    heads, the vocabulary the tiny one."""
    width = next((config[k] for k in ("hidden_size", "d_model", "n_embd") if isinstance(config.get(k), int)), None)
    heads = next((config[k] for k in sorted(HEAD_COUNT_KEYS) if isinstance(config.get(k), int)), None)
    if "head_dim" in config and config["head_dim"] is None and width and heads:
        config["head_dim"] = width // heads
    for key in KV_HEAD_KEYS & config.keys():
        if config[key] is None and heads and key == "num_key_value_heads":
            config[key] = heads
    if "vocab_size" in config and config["vocab_size"] is None:
        config["vocab_size"] = VOCAB


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
SAM2_HIERA = {"embed_dim_per_stage": [WIDTH, 2 * WIDTH, 4 * WIDTH, 8 * WIDTH], "blocks_per_stage": [1, 1, 1, 2],
              "global_attention_blocks": [4], "window_size_per_stage": [2, 2, 2, 2]}
SAM2_HIERA_OUT = SAM2_HIERA["embed_dim_per_stage"][::-1]
# Gemma 3n's later layers share the KV caches of earlier ones of the same kind.
GEMMA3N_TEXT = {"num_hidden_layers": 4, "num_kv_shared_layers": 2, "intermediate_size": [FFN] * 4,
                "activation_sparsity_pattern": [0.95, 0.0, 0.0, 0.0],
                "layer_types": ["sliding_attention", "full_attention"] * 2}
OVERRIDES: dict[str, dict[str, Any]] = {
    "audio-spectrogram-transformer": {"max_length": 64},
    # hidden_size * expand must equal num_heads * head_dim.
    "mamba2": {"head_dim": 16},
    # Sizes the default config leaves unset, as a checkpoint's config sets them.
    "autoformer": {"prediction_length": 4, "context_length": 8, "label_length": 4},
    "informer": {"prediction_length": 4, "context_length": 8},
    "time_series_transformer": {"prediction_length": 4, "context_length": 8},
    "dots1": {"n_routed_experts": EXPERTS, "num_experts_per_tok": 2, "n_shared_experts": 1},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    "deepseek_ocr2": {"text_config": {"mlp_layer_types": ["dense", "sparse"]}},
    "deepseek_ocr2_text": {"mlp_layer_types": ["dense", "sparse"]},
    # CLVP's rotary embedding rotates at least 32 channels of a head: one head of the width.
    "clvp_encoder": {"num_attention_heads": 1},
    "clvp": {"text_config": {"num_attention_heads": 1}, "speech_config": {"num_attention_heads": 1}},
    # The SAM neck narrows down to the width of the encoder its tokens go through.
    "deepseek_ocr2_vision": {"sam_config": {"downsample_channels": [WIDTH, WIDTH]}},
    "esm": {"pad_token_id": 1},
    "chameleon": {"vocabulary_map": {"<image>": VOCAB - 1}},
    "cohere_compass": {"text_config": {"rope_parameters": {"full_attention": {"rope_type": "default",
                                                                              "rope_theta": 10000.0}}}},
    "cohere_compass_text": {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
    "moonshine_streaming": {"num_key_value_heads": HEADS},
    "pix2struct_text_model": {"initializer_range": 0.02},
    "qwen3_omni_moe_talker_text": {"shared_expert_intermediate_size": FFN},
    "t5gemma2_encoder": {"text_config": {"dropout_rate": 0.0}},
    "t5gemma2_text": {"dropout_rate": 0.0},
    "t5gemma2_decoder": {"dropout_rate": 0.0},
    "blip-2": {"image_token_index": VOCAB - 1},
    "instructblip": {"image_token_index": VOCAB - 1},
    "instructblipvideo": {"video_token_index": VOCAB - 1},
    # The audio Swin's width doubles over its four stages up to hidden_size.
    "clap": {"audio_config": {"spec_size": 64, "patch_embeds_hidden_size": 8, "hidden_size": 64}},
    "clap_audio_model": {"spec_size": 64, "patch_embeds_hidden_size": 8, "hidden_size": 64},
    # The quantizer is as wide as the acoustic and semantic features it joins.
    "xcodec": {"codebook_dim": None},
    "neucodec": {"quantization_dim": 2 * WIDTH},
    "xcodec2": {"quantization_dim": 2 * WIDTH},
    # Patch embeddings whose padding the position embeddings are sized for: Hiera's 7-pixel
    # patches at stride 4, ViTPose's 8-pixel ones, LeViT's 16-pixel stem.
    "hiera": {"patch_size": [7, 7]},
    "vitpose": {"backbone_config": {"patch_size": [8, 8]}},
    "vitpose_backbone": {"patch_size": [8, 8]},
    "levit": {"patch_size": 16, "image_size": 64},
    # Five stride-2 stages leave a 2 x 2 map of a 64-pixel image for the last unfolding.
    "mobilevitv2": {"image_size": 64},
    # EfficientNet's head widens to a fixed 1280 channels times the width coefficient.
    "efficientnet": {"hidden_dim": 2560},
    "textnet": {"stem_out_channels": 32},
    "tvp": {"max_img_size": 2 * IMAGE, "visual_prompt_size": PATCH},
    # Layers whose outputs a head taps, renumbered for the two tiny layers.
    "mllama_vision_model": {"intermediate_layers_indices": [0, 1]},
    "depth_pro": {"intermediate_hook_ids": [1, 0]},
    "udop": {"relative_attention_num_buckets": 32},
    # Each layer reads the KV cache of itself or of an earlier layer.
    "mistral_large4_text": {"kv_source_layers": [0, 1]},
    "mistral_large4": {"text_config": {"kv_source_layers": [0, 1]}},
    # Window attention over a grid of 2 x 2 windows of the tiny image.
    "lw_detr_vit": {"num_windows": 4, "num_windows_side": 2},
    # The default config projects no backbone level (its checkpoints project one).
    "lw_detr": {"backbone_config": {"num_windows": 4, "num_windows_side": 2}, "projector_scale_factors": [1.0]},
    # A head wide enough for M-RoPE's two axes to rotate whole pairs of frequencies.
    "neomme": {"head_dim": 16},
    # The adaptor narrows the text width by four; the layer split sums to the layer count.
    "fun_asr_nano": {"adaptor_config": {"intermediate_size": WIDTH // 4}},
    "dory": {"n_input_layers": 1, "n_recurrent_layers": 0, "n_output_layers": 1},
    "molmo2": {"adapter_config": {"vision_feature_layer": [-1, -2]}},
    "pp_doclayout_v2": {"class_thresholds": [0.5, 0.5], "class_order": [0, 1]},
    "sapiens2": {"num_key_value_heads_per_layer": [KV_HEADS, KV_HEADS], "num_key_value_attention_heads": KV_HEADS,
                 "head_config": {"upsample_out_channels": [WIDTH, WIDTH], "conv_out_channels": [WIDTH]}},
    "granite4_vision": {"deepstack_layer_map": [[-1, 0]], "spatial_target_layers": [0, 1],
                        "qformer_config": {"num_attention_heads": HEADS}},
    # SAM 2's Hiera: stage widths from the tiny width, one block a stage (the last global),
    # windows that tile the tiny image's stage grids.
    "sam2_hiera_det_model": SAM2_HIERA,
    "sam2_vision_model": {"backbone_config": SAM2_HIERA, "backbone_channel_list": SAM2_HIERA_OUT},
    # EdgeTAM's RepViT backbone (its default config misspells the architecture's key and so
    # gets timm's default ResNet).
    "edgetam": {"vision_config": {"backbone_config": {"architecture": "repvit_m1"}}},
    "edgetam_vision_model": {"backbone_config": {"architecture": "repvit_m1"}},
    # The last num_blocks layers see the queries: one of the two tiny layers.
    "eomt": {"num_blocks": LAYERS - 1},
    "eomt_dinov3": {"num_blocks": LAYERS - 1},
    "sam2": {"vision_config": {"backbone_config": SAM2_HIERA, "backbone_channel_list": SAM2_HIERA_OUT}},
    "step3p5": {"sliding_window": 4},
    "step3p7": {"text_config": {"sliding_window": 4}},
    # Group norms of 32 groups over the tiny stages' 8 channels.
    "bit": {"num_groups": 8},
    # One attention head per 64 channels.
    "bridgetower": {"vision_config": {"hidden_size": 64}},
    "bridgetower_vision_model": {"hidden_size": 64},
    # The spatial embeddings (four coordinates and two sides) add up to the width.
    "layoutlmv3": {"coordinate_size": 6, "shape_size": 4},
    "lilt": {"hidden_size": 48, "channel_shrink_ratio": 4},
    # A sinusoid per box coordinate needs a width of 8 coordinates x 2 x 4.
    "bros": {"hidden_size": 64},
    "reformer": {"axial_pos_embds_dim": [16, 16], "axial_pos_shape": [4, 2]},
    # MPNet's relative position buckets are fixed at 32.
    "mpnet": {"relative_attention_num_buckets": 32},
    # Mamba heads span the expanded width; attention runs on the doubled width.
    "zamba2": {"mamba_headdim": 8},
    # Two hybrid layers share one transformer, and later layers share earlier KV caches.
    "zamba": {"num_hidden_layers": 4, "layers_block_type": ["mamba", "hybrid"] * 2,
              "layer_types": ["mamba", "hybrid"] * 2, "attn_layer_period": 2, "attn_layer_offset": 1},
    "gemma3n_text": GEMMA3N_TEXT,
    "gemma3n": {"text_config": GEMMA3N_TEXT},
    "dbrx": {"attn_config": {"rope_theta": 10000.0, "clip_qkv": 8.0}},
    "diffusion_gemma": {"text_config": {"num_experts": EXPERTS, "top_k_experts": 2, "moe_intermediate_size": FFN}},
    "diffusion_gemma_text": {"num_experts": EXPERTS, "top_k_experts": 2, "moe_intermediate_size": FFN},
    "qwen3_omni_moe": {"talker_config": {"spatial_merge_size": 2,
                                         "text_config": {"shared_expert_intermediate_size": FFN}}},
    # Perception LM's projector pools the patch tokens of a Perception Encoder ViT, as its
    # checkpoints have (the default config names a ResNet).
    "perception_lm": {"vision_config": {"architecture": "vit_pe_core_large_patch14_336",
                                        "model_args": {**TIMM_SIZES, "global_pool": ""}}},
    "qwen4_exp": {"text_config": {"indexer_budget": 8, "indexer_compress_ratio": 2, "indexer_n_heads": 2,
                                  "indexer_kv_heads": 1, "indexer_head_dim": HEAD_DIM}},
    "qwen4_exp_text": {"indexer_budget": 8, "indexer_compress_ratio": 2, "indexer_n_heads": 2,
                       "indexer_kv_heads": 1, "indexer_head_dim": HEAD_DIM},
}


# Keys a config's dict holds that are no dataclass field but that its ``from_dict`` reads:
# timm's configs carry their labels as ``num_classes`` and ``label_names``.
KEPT_UNDECLARED = frozenset({"model_type", "_name_or_path", "output_attentions", "num_classes", "label_names"})


def _drop_derived(values: dict[str, Any], config_class: type, original: dict[str, Any] | None = None) -> None:
    """Remove, in place, the attributes a config derives from its fields in ``__post_init__``
    (BROS's bbox embedding sizes, Zamba2's hybrid layer ids): ``to_dict`` lists them with the
    default's values, and passed back they would override what the tiny fields derive. A
    size field that defaults to None and that the shrinking left at the default's derived
    value (Zamba's ``attention_hidden_size``, twice the width) is unset again, to be derived
    anew from the tiny fields."""
    try:
        fields = {field.name: field for field in dataclasses.fields(config_class)}
    except TypeError:
        return
    original = original or {}
    layers = next((values[k] for k in sorted(LAYER_KEYS) if isinstance(values.get(k), int)), None)
    for key in list(values):
        per_layer = isinstance(values[key], list) and len(values[key]) == layers  # cut to the layers by shrink
        if key not in fields and key not in KEPT_UNDECLARED and not per_layer:
            del values[key]
        elif key in fields and fields[key].default is None and _is_size(values[key]) and \
                values[key] == original.get(key) and key.endswith(DERIVED_SIZE_SUFFIXES):
            values[key] = None
    for key, sub_class in (getattr(config_class, "sub_configs", None) or {}).items():
        if _is_config_dict(values.get(key)) and isinstance(sub_class, type) and \
                getattr(sub_class, "model_type", None) == values[key]["model_type"]:
            _drop_derived(values[key], sub_class, original.get(key) if _is_config_dict(original.get(key)) else None)


# Names of sizes a config may derive from its width when left unset.
DERIVED_SIZE_SUFFIXES = ("_hidden_size", "_dim")


def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _merge(values: dict[str, Any], override: dict[str, Any]) -> None:
    """Apply an ``OVERRIDES`` entry in place: a dict updates the sub-config of that name."""
    for key, value in override.items():
        if isinstance(value, dict) and _is_config_dict(values.get(key)):
            _merge(values[key], value)
        else:
            values[key] = value


def tiny_config(model_type: str) -> transformers.PreTrainedConfig:
    """The default config of ``model_type`` shrunk to a tiny model."""
    config_class = CONFIG_MAPPING[model_type]
    try:
        default = config_class()
    except Exception as e:
        raise NotBuilt(f"config not tinyfiable: default {config_class.__name__}() fails: {_headline(e)}") from e
    original = default.to_dict()
    values = shrink(original)
    _drop_derived(values, config_class, original)
    _merge(values, OVERRIDES.get(model_type, {}))
    for sub in _config_dicts(values):
        _fit_timm_backbone(sub)
    _fit_feature_sizes(original, values)
    _fit_neck_channels(original, values)
    _remap_special_ids(values)
    values.pop("transformers_version", None)
    try:
        config = config_class.from_dict(values)
    except Exception as e:
        raise NotBuilt(f"config not tinyfiable: shrunk {config_class.__name__} rejected: {_headline(e)}") from e
    _fit_mrope(config)
    return config


MROPE_TYPES = frozenset({"paddleocr_vl_text"})


def _all_configs(config: Any) -> list[Any]:
    """The config and every sub-config nested in it, breadth first."""
    found, queue = [], [config]
    while queue:
        current = queue.pop(0)
        if any(current is seen for seen in found):
            continue
        found.append(current)
        queue += [v for v in vars(current).values() if isinstance(v, transformers.PreTrainedConfig)]
    return found


def _fit_mrope(config: Any) -> None:
    """Give M-RoPE configs sections that fit the tiny head, in place.

    Qwen2-VL-like models fall back to sections sized for their real head (``[16, 24, 24]``)
    when the config names none; their config classes declare that they take
    ``mrope_section`` by exempting it from RoPE validation (PaddleOCR-VL's text model, whose
    class does not, is in ``MROPE_TYPES``). Sub-configs at any depth are fitted.
    """
    for sub in _all_configs(config):
        rope = getattr(sub, "rope_parameters", None)
        exempt = getattr(type(sub), "ignore_keys_at_rope_validation", None) or ()
        takes = "mrope_section" in exempt or getattr(sub, "model_type", None) in MROPE_TYPES
        if not takes or not isinstance(rope, dict) or "rope_type" not in rope:
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


def _first(configs: list[Any], *names: str, default: Any = None) -> Any:
    """The first of ``names`` set on any of ``configs`` (sub-config before parent)."""
    for config in configs:
        for name in names:
            value = getattr(config, name, None)
            if value is not None and not isinstance(value, bool):
                return value
    return default


def _vision(config: Any) -> list[Any]:
    return [_sub(config, "vision_config", "backbone_config", "encoder", "image_config"), config]


def _pair(value: Any) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)[-2:]


def _timm_input_size(config: Any) -> tuple[int, int] | None:
    """The image size a timm model in the config is built for: its ``img_size`` argument,
    else its architecture's pretrained input size (None without timm or a timm model)."""
    for sub in _all_configs(config) if isinstance(config, transformers.PreTrainedConfig) else []:
        if getattr(sub, "model_type", None) != "timm_wrapper":
            continue
        size = (sub.model_args or {}).get("img_size")
        if size is not None:
            return _pair(size)
        try:
            import timm
        except ImportError:
            return None
        pretrained = timm.get_pretrained_cfg(sub.architecture, allow_unregistered=True)
        if pretrained is not None and pretrained.input_size:
            return tuple(pretrained.input_size)[-2:]
    return None


def _vq_image_size(config: Any) -> int | None:
    """The image a VQ-VAE encodes to its latent grid of ``num_patches`` a side: each level of
    its ``channel_multiplier`` but the last halves the image."""
    patches, levels = getattr(config, "num_patches", None), getattr(config, "channel_multiplier", None)
    if isinstance(patches, int) and isinstance(levels, (list, tuple)) and levels:
        return patches * 2 ** (len(levels) - 1)
    return None


def _image_shape(config: Any) -> tuple[int, int, int]:
    vision = _vision(config)
    channels = _first(vision, "num_channels", "in_channels", "input_channels", default=3)
    # A vision config may leave the size to its backbone, or to the prompt encoder that
    # places points on the image (SAM 2).
    sized = [*vision, _sub(vision[0], "backbone_config"), _sub(config, "prompt_encoder_config")]
    size = _first(sized, "image_size", "crop_size", "input_size") or _timm_input_size(config) or \
        _vq_image_size(config) or 2 * IMAGE
    h, w = _pair(size)
    return channels, h, w


def _pixel_values(config: Any, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(BATCH, *_image_shape(config), generator=gen)


def _frames(config: Any) -> int | None:
    """The clip length a video model is sized for (None for an image model)."""
    return _first(_vision(config), "num_frames", "frames_per_clip")


def _video(config: Any, gen: torch.Generator, channels_first: bool = False) -> torch.Tensor:
    """A clip [B, frames, C, H, W] (or [B, C, frames, H, W]) of the configured length."""
    frames = _frames(config) or 4
    channels, h, w = _image_shape(config)
    shape = (BATCH, channels, frames, h, w) if channels_first else (BATCH, frames, channels, h, w)
    return torch.randn(*shape, generator=gen)


def _patch_grid(config: Any) -> tuple[int, int]:
    """A patch grid (height, width) for flattened-patch vision towers: four merged patches
    a side, the merge size taken from the config."""
    merge = _first(_vision(config), "spatial_merge_size", "merge_size", "merge_kernel_size", default=1)
    merge = max(_pair(merge))
    return 2 * merge, 2 * merge


def _flat_patches(config: Any, gen: torch.Generator, temporal: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Qwen2-VL-style vision input: every patch of one image flattened to
    ``channels * temporal * patch * patch`` values, and its ``[t, h, w]`` grid."""
    vision = _vision(config)
    channels = _first(vision, "in_channels", "num_channels", default=3)
    patch = max(_pair(_first(vision, "patch_size", default=PATCH)))
    h, w = _patch_grid(config)
    grid = torch.tensor([[1, h, w]] * BATCH)
    features = channels * (temporal or 1) * patch * patch
    return torch.randn(BATCH * h * w, features, generator=gen), grid


def _text(config: Any, gen: torch.Generator, *, mask: bool = True, prefix: str = "") -> dict[str, torch.Tensor]:
    inputs = {f"{prefix}input_ids": _token_ids(config, (BATCH, SEQ), gen)}
    if mask:
        inputs[f"{prefix}attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
    return inputs


def _width(config: Any) -> int:
    return _first([config, _sub(config, "text_config")], "hidden_size", "d_model", "embed_dim", "dim", default=WIDTH)


def _audio_features(config: Any, gen: torch.Generator) -> list[torch.Tensor]:
    """input_features candidates: [B, mel, frames] (Whisper) then [B, frames, features]."""
    audio = [_sub(config, "audio_config", "encoder_config", "encoder", "asr_config", "decoder_config"), config]
    mel = _first(audio, "num_mel_bins", "n_mels", "num_mel_filters", "input_feat_size")
    source = _first(audio, "max_source_positions")
    per_channel = _first(audio, "input_feat_per_channel")
    channels = _first(audio, "input_channels", default=1)
    feature = _first(audio, "feature_size", "input_dim", "num_input_features", "input_feature_size")
    stacked = _first(audio, "num_stacked_frames", "subsampling_factor")
    window = _first(audio, "n_window")
    frames = 2 * source if source else 32
    if window:  # chunked encoders take whole windows of frames
        frames = 2 * window * math.ceil(frames / (2 * window))
    candidates = []
    if mel:
        candidates.append(torch.randn(BATCH, mel, frames, generator=gen))
    widths = (per_channel and per_channel * channels, feature, _first(audio, "feature_projection_input_dim"),
              mel and stacked and mel * stacked, mel, 80, 128, mel and 4 * mel)
    for width in dict.fromkeys(w for w in widths if w):
        candidates.append(torch.randn(BATCH, frames, width, generator=gen))
    if feature and not mel:  # channels first: [B, features, frames]
        candidates.append(torch.randn(BATCH, feature, frames, generator=gen))
    return candidates


def _hop(config: Any) -> int | None:
    """Samples per frame of an audio codec: its hop length, or its downsampling strides' product."""
    configs = [config, *(_all_configs(config) if isinstance(config, transformers.PreTrainedConfig) else [])]
    ratios = _first(configs, "downsampling_ratios", "ratios", "upsampling_ratios", "strides")
    if isinstance(ratios, list) and ratios and all(isinstance(r, int) for r in ratios):
        return math.prod(ratios)
    hop = _first(configs, "hop_length")
    return hop if isinstance(hop, int) else None


def _forward_parameters(model: torch.nn.Module) -> dict[str, inspect.Parameter]:
    """forward's named parameters (no ``self``, ``*args`` or ``**kwargs``)."""
    params = inspect.signature(model.forward).parameters
    return {name: p for name, p in params.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _required(params: dict[str, inspect.Parameter]) -> list[str]:
    return [name for name, p in params.items() if p.default is inspect.Parameter.empty]


def main_input(model: torch.nn.Module) -> str:
    """The input the model is fed by: its ``main_input_name`` when forward takes it, else
    forward's first required argument (a part's ``hidden_states``), else its first."""
    params = _forward_parameters(model)
    main = getattr(model, "main_input_name", None)
    if isinstance(main, str) and main in params:
        return main
    required = _required(params)
    return required[0] if required else next(iter(params), "input_ids")


@attrs.define
class Inputs:
    """What an input recipe works from: the model, its config, forward's parameters, and a
    seeded generator."""

    model: torch.nn.Module
    config: Any
    params: dict[str, inspect.Parameter]
    gen: torch.Generator

    def ids(self, *shape: int, config: Any = None) -> torch.Tensor:
        return _token_ids(config or self.config, shape or (BATCH, SEQ), self.gen)

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=self.gen)

    def randint(self, high: int, *shape: int) -> torch.Tensor:
        return torch.randint(0, high, shape, generator=self.gen)

    def text(self, mask: bool = True, prefix: str = "") -> dict[str, torch.Tensor]:
        return _text(self.config, self.gen, mask=mask, prefix=prefix)

    def image(self, config: Any = None) -> torch.Tensor:
        return _pixel_values(config or self.config, self.gen)

    def width(self, config: Any = None) -> int:
        return _width(config or self.config)


Recipe = Callable[[Inputs], list[tuple[dict[str, Any], str]]]


def _flat_patch_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Vision towers fed flattened patches and their grid (Qwen2-VL's and its kin)."""
    main = "hidden_states" if "hidden_states" in h.params else "pixel_values"
    grid_name = next(n for n in ("grid_thw", "image_grid_thw") if n in h.params)
    temporal = _first(_vision(h.config), "temporal_patch_size", "patch_temporal", "temporal_merge_size")
    sets = []
    for t in dict.fromkeys((temporal, 1)):
        patches, grid = _flat_patches(h.config, h.gen, t)
        inputs = {main: patches, grid_name: grid}
        if "merge_sizes" in h.params:
            inputs["merge_sizes"] = torch.tensor([max(1, grid[0, 1].item() // 2)] * BATCH)
        sets.append((inputs, "flattened patches and their grid"))
    # Towers that embed each patch as a small image: the same patches unflattened, as images
    # [N, C, p, p] (Kimi K2.5) or one sequence of them [1, N, C, p, p] (PaddleOCR-VL).
    patches, grid = _flat_patches(h.config, h.gen, 1)
    channels = _first(_vision(h.config), "in_channels", "num_channels", default=3)
    patch = max(_pair(_first(_vision(h.config), "patch_size", default=PATCH)))
    images = patches.view(-1, channels, patch, patch)
    sets.append(({main: images, grid_name: grid}, "patches as images, and their grid"))
    sets.append(({main: images.unsqueeze(0), grid_name: grid}, "patches as one sequence of images, and their grid"))
    return sets


def _generic_sets(h: Inputs, main: str) -> list[tuple[dict[str, Any], str]]:
    """Inputs for the model's main input, from the config's sizes."""
    config, gen, params = h.config, h.gen, h.params
    sets: list[tuple[dict[str, Any], str]] = []
    if main == "input_ids":
        sets.append((_text(config, gen), ""))
        if "pixel_values" in params:
            sets.append(({**_text(config, gen), "pixel_values": _pixel_values(config, gen)}, "text and image"))
        sets.append((_text(config, gen, mask=False), "no attention_mask"))
    elif main in ("pixel_values", "pixel_values_videos") and ("grid_thw" in params or "image_grid_thw" in params):
        sets += _flat_patch_sets(h)
    elif main in ("pixel_values", "pixel_values_videos") and (main == "pixel_values_videos" or _frames(config)):
        sets.append(({main: _video(config, gen)}, "video"))
        sets.append(({main: _video(config, gen, channels_first=True)}, "video, channels first"))
        if "input_ids" in params:
            sets.append(({**_text(config, gen), main: _video(config, gen)}, "video and text"))
        frames = _frames(config) or 4
        sets.append(({main: torch.randn(BATCH * frames, *_image_shape(config), generator=gen)}, "frames in the batch"))
    elif main in ("pixel_values", "pixel_values_videos"):
        sets.append(({main: _pixel_values(config, gen)}, ""))
        if "input_ids" in params:
            sets.append(({**_text(config, gen), main: _pixel_values(config, gen)}, "image and text"))
    elif main == "input_features" and "feature_lens" in params:
        # Qwen-Omni's audio encoder: every clip's mel frames packed into one [mel, frames]
        # sequence, and each clip's frame count.
        for features in _audio_features(config, gen)[:1]:
            frames = features.shape[-1]
            packed = features.permute(1, 0, 2).reshape(features.shape[1], -1)
            sets.append(({"input_features": packed, "feature_lens": torch.tensor([frames] * BATCH)},
                         "clips packed into one sequence, and their lengths"))
    elif main == "input_features":
        sets += [({"input_features": features}, "") for features in _audio_features(config, gen)]
    elif main == "input_values":
        mel = getattr(config, "num_mel_bins", None)
        length = getattr(config, "max_length", None)
        if mel and isinstance(length, int):
            sets.append(({"input_values": torch.randn(BATCH, length, mel, generator=gen)}, "spectrogram"))
        sets.append(({"input_values": torch.randn(BATCH, 1600, generator=gen)}, ""))
        sets.append(({"input_values": torch.randn(BATCH, 1, 1600, generator=gen)}, "mono channel dim"))
        hop = _hop(config)
        if hop:  # a codec takes whole frames of samples
            length = 4 * hop
            for shape in ((BATCH, length), (BATCH, 1, length)):
                inputs = {"input_values": torch.randn(*shape, generator=gen)}
                if "input_features" in params:
                    width = _first(_all_configs(config), "feature_projection_input_dim", "num_mel_bins", default=80)
                    inputs["input_features"] = torch.randn(BATCH, length // hop, width, generator=gen)
                sets.append((inputs, "whole codec frames"))
        if "pixel_values_videos" in params:  # an audio-video encoder: each waveform with a clip
            sets += [({**inputs, "pixel_values_videos": _video(config, gen)}, f"{note or 'waveform'} and video")
                     for inputs, note in list(sets)]
    elif main == "hidden_states" and ("grid_thw" in params or "image_grid_thw" in params):
        sets += _flat_patch_sets(h)
    elif main == "hidden_states" and _hop(config):  # a codec's encoder or decoder
        channels = _first([config], "channels", "audio_channels", default=1)
        latent = _first([config], "vae_dim", "hidden_size", default=WIDTH)
        sets.append(({main: h.randn(BATCH, channels, 4 * _hop(config))}, "whole codec frames"))
        sets.append(({main: h.randn(BATCH, latent, 4)}, "latent frames"))
    elif main in ("spectrogram", "mel_spectrogram"):
        bins = _first([config], "model_in_dim", "mel_dim", "num_mel_bins", default=80)
        sets.append(({main: h.randn(BATCH, 16, bins)}, "spectrogram"))
        sets.append(({main: h.randn(BATCH, bins, 16)}, "spectrogram, bins first"))
    elif main == "latents":
        sets.append(({main: h.randn(BATCH, h.width(), 16)}, "latents"))
    elif main == "image":
        sets.append(({main: _pixel_values(config, gen)}, ""))
    elif main in ("inputs_embeds", "hidden_states"):
        sets.append(({main: h.randn(BATCH, SEQ, h.width())}, "embeddings"))
    if main == "input_ids" and "pixel_values" in params and _frames(config):
        sets.append(({**_text(config, gen), "pixel_values": _video(config, gen)}, "text and video"))
    if main == "input_ids" and "pixel_values_videos" in params:
        sets.append(({**_text(config, gen), "pixel_values_videos": _video(config, gen)}, "text and video"))
    if main == "input_ids" and "input_values" in params and _hop(config):
        sets.append(({**_text(config, gen), "input_values": h.randn(BATCH, 1, 4 * _hop(config))}, "text and audio"))
    if main == "input_ids" and "input_features" in params:
        sets += [({**_text(config, gen), "input_features": f}, "text and audio") for f in _audio_features(config, gen)]
    if main == "input_ids" and "encoder_hidden_states" in params:
        sets.append(({**_text(config, gen), "encoder_hidden_states": h.randn(BATCH, SEQ, h.width())},
                     "text and encoder states"))
    if main == "input_ids" and "inputs_embeds" in params:
        sets.append(({"inputs_embeds": h.randn(BATCH, SEQ, h.width())}, "embeddings"))
    return sets


def _series_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Time-series models: a history of values (with the lags the config looks back
    over), its time features and observed mask, and the horizon to forecast."""
    c = h.config
    channels = _first([c], "input_size", "num_input_channels", default=1)
    context = _first([c], "context_length", default=32)
    horizon = _first([c], "prediction_length", "horizon_length", default=4)
    lags = max(getattr(c, "lags_sequence", None) or [0])
    past = context + lags
    if "past_values_padding" in h.params:  # TimesFM: a history in whole patches, a frequency id
        length = 2 * _first([c], "patch_length", default=32)
        return [({"past_values": h.randn(BATCH, length), "past_values_padding": torch.zeros(BATCH, length),
                  "freq": torch.zeros(BATCH, 1, dtype=torch.long)}, "history in whole patches")]
    shape = (BATCH, past) if channels == 1 and "past_time_features" in h.params else (BATCH, past, channels)
    time_features = _first([c], "num_time_features", default=0)
    inputs = {"past_values": h.randn(*shape), "past_observed_mask": torch.ones(*shape)}
    if "past_time_features" in h.params:
        inputs["past_time_features"] = h.randn(BATCH, past, time_features)
        inputs["future_time_features"] = h.randn(BATCH, horizon, time_features)
        future = (BATCH, horizon) if len(shape) == 2 else (BATCH, horizon, channels)
        inputs["future_values"] = h.randn(*future)
    categorical = _first([c], "num_static_categorical_features", default=0)
    if categorical and "static_categorical_features" in h.params:
        inputs["static_categorical_features"] = torch.zeros(BATCH, categorical, dtype=torch.long)
    real = _first([c], "num_static_real_features", default=0)
    if real and "static_real_features" in h.params:
        inputs["static_real_features"] = h.randn(BATCH, real)
    return [(inputs, "history and horizon")]


def _mask_decoder_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """SAM-style mask decoders: image embeddings on a 4 x 4 grid, their positional
    embeddings, one point prompt's sparse embeddings (two tokens) and dense embeddings,
    and the higher-resolution features the SAM 2 family adds."""
    width, grid = h.config.hidden_size, 4
    dense = (BATCH, width, grid, grid)
    inputs: dict[str, Any] = {
        "image_embeddings": h.randn(*dense), "image_positional_embeddings": h.randn(*dense),
        "sparse_prompt_embeddings": h.randn(BATCH, 1, 2, width), "dense_prompt_embeddings": h.randn(*dense),
        "multimask_output": False,
    }
    if "high_resolution_features" in h.params:
        inputs["high_resolution_features"] = [h.randn(BATCH, width // 8, 4 * grid, 4 * grid),
                                              h.randn(BATCH, width // 4, 2 * grid, 2 * grid)]
    if "hq_token_only" in h.params:
        inputs["hq_token_only"] = False
        vit = getattr(h.config, "vit_dim", None) or width
        inputs["intermediate_embeddings"] = [h.randn(BATCH, grid, grid, vit)]
    return [(inputs, "image and prompt embeddings")]


def _prompt_encoder_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """SAM-style prompt encoders: one labelled point per image, in pixels."""
    size = max(_pair(_first([h.config], "image_size", default=IMAGE)))
    points = torch.rand(BATCH, 1, 1, 2, generator=h.gen) * size
    inputs = {"input_points": points, "input_labels": torch.ones(BATCH, 1, 1, dtype=torch.long),
              "input_boxes": None, "input_masks": None}
    return [(inputs, "a point prompt")]


def _mask_embedding_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """SAM's mask prompt embedding: a low-resolution mask, four times the embedding grid."""
    side = 4 * 4 * 4
    return [({"masks": h.randn(BATCH, 1, side, side)}, "a mask prompt")]


def _recipe(h: Inputs, model_type: str) -> list[tuple[dict[str, Any], str]]:
    """Inputs a family of models is fed by, known from its forward's arguments."""
    params = h.params
    if model_type in RECIPES:
        return RECIPES[model_type](h)
    if "past_values" in params:
        return _series_sets(h)
    if "image_embeddings" in params and "sparse_prompt_embeddings" in params:
        return _mask_decoder_sets(h)
    if "input_points" in params and "input_labels" in params and "pixel_values" not in params:
        return _prompt_encoder_sets(h)
    if list(params) == ["masks"]:
        return _mask_embedding_sets(h)
    if _required(params) == ["hidden_states", "quant_states"]:
        return _vq_decoder_sets(h)
    if {"vision_features", "vision_pos_embeds", "text_features"} <= params.keys() \
            or {"box_embeddings", "img_feats"} <= params.keys() \
            or {"decoder_queries", "backbone_features"} <= params.keys():
        return _detr_stage_sets(h)
    return []


def _detr_stage_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """SAM 3's DETR stages alone, fed as SAM 3 feeds them: FPN maps of the config's width
    (coarsest a 4 x 4 grid, each finer level twice the side; as many as the pixel decoder
    upsamples through) with their position encodings, the prompt's features and mask, box
    prompts (centre and size, labelled positive), and the decoder's queries."""
    width, grid, params = h.width(), 4, h.params
    levels = _first([h.config], "num_upsampling_stages", default=3)
    maps = [h.randn(BATCH, width, grid * 2 ** i, grid * 2 ** i) for i in reversed(range(levels))]
    positions = [h.randn(*m.shape) for m in maps]
    prompt, prompt_mask = h.randn(BATCH, SEQ, width), torch.ones(BATCH, SEQ, dtype=torch.bool)
    if "vision_features" in params:  # the DETR encoder: the coarsest map and the prompt
        inputs = {"vision_features": maps[-1:], "vision_pos_embeds": positions[-1:], "text_features": prompt,
                  "text_mask": prompt_mask}
        return [(inputs, "the coarsest FPN map and the prompt's features")]
    if "box_embeddings" in params:  # the geometry encoder: boxes over the FPN maps
        boxes = 2
        inputs = {"box_embeddings": torch.rand(BATCH, boxes, 4, generator=h.gen) * 0.5 + 0.25,
                  "box_mask": torch.ones(BATCH, boxes, dtype=torch.bool),
                  "box_labels": torch.ones(BATCH, boxes, dtype=torch.long),
                  "img_feats": tuple(maps), "img_pos_embeds": tuple(positions)}
        return [(inputs, "box prompts over the FPN maps")]
    queries = _first([h.config], "num_queries", default=SEQ)
    inputs = {"decoder_queries": h.randn(BATCH, queries, width), "backbone_features": maps,
              "encoder_hidden_states": h.randn(BATCH, grid * grid, width), "prompt_features": prompt,
              "prompt_mask": prompt_mask}
    return [(inputs, "queries, FPN maps, encoded image and prompt")]


def _vq_decoder_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """A video VQ-VAE's decoder (Emu3): the quantized latents of a few frames on a 4 x 4 grid
    [B, frames, embed_dim, 4, 4], and those latents through the post-quantization conv
    (``latent_channels`` wide), as the VQ-VAE's ``decode`` feeds it."""
    c, frames = h.config, 2
    quant = h.randn(BATCH, frames, c.embed_dim, 4, 4)
    return [({"hidden_states": h.randn(BATCH, frames, c.latent_channels, 4, 4), "quant_states": quant},
             "quantized latents of a few frames")]


def _boxes(h: Inputs, length: int = SEQ) -> torch.Tensor:
    """Layout boxes (x0, y0, x1, y1) on a 0-1000 page, one per token, corners in order; as
    four corners on a unit page for models that take quadrilaterals (BROS's ``dim_bbox`` 8)."""
    corners = torch.randint(0, 500, (BATCH, length, 2), generator=h.gen)
    sizes = torch.randint(1, 500, (BATCH, length, 2), generator=h.gen)
    x0, y0 = corners.unbind(-1)
    x1, y1 = (corners + sizes).unbind(-1)
    if getattr(h.config, "dim_bbox", 4) == 8:
        return torch.stack([x0, y0, x1, y0, x1, y1, x0, y1], dim=-1) / 1000.0
    return torch.stack([x0, y0, x1, y1], dim=-1)


# Optional arguments a model needs all the same (it raises without them): a layout
# model's boxes, X-MOD's language, an audio encoder's feature mask.
NEEDED = ("bbox", "lang_ids", "input_features_mask", "qformer_input_ids")


def _complete(h: Inputs, inputs: dict[str, Any], optional: bool = False) -> None:
    """Add the required arguments an input set lacks whose form their name tells, in place
    (with ``optional``, the ``NEEDED`` ones too): a Q-Former's prompt, a language id,
    layout boxes, masks over the features given."""
    names = _required(h.params) + ([n for n in NEEDED if n in h.params] if optional else [])
    required = [name for name in dict.fromkeys(names) if name not in inputs]
    ids = inputs.get("input_ids")
    length = ids.shape[-1] if isinstance(ids, torch.Tensor) else SEQ
    for name in required:
        if name == "qformer_input_ids":
            inputs.update(_text(h.config, h.gen, prefix="qformer_"))
        elif name == "lang_ids":
            inputs[name] = torch.zeros(BATCH, dtype=torch.long)
        elif name == "bbox":
            inputs[name] = _boxes(h, length)
        elif name in ("token_type_ids",):
            inputs[name] = torch.zeros(BATCH, length, dtype=torch.long)
        elif name == "num_patches" and isinstance(inputs.get("inputs_embeds"), torch.Tensor):
            # How many image patch tokens open the embedded sequence (DeepSeek-OCR 2's
            # encoder: image patches, then queries): half of it.
            inputs[name] = inputs["inputs_embeds"].shape[1] // 2
        elif name.endswith("sample_lengths") and "input_features" in inputs and _first([h.config], "hop_length"):
            # Waveform samples behind each example's mel frames (Dots3 Note's audio chunks).
            features = inputs["input_features"]
            frames = features.shape[-1] if features.shape[1] == _first([h.config], "num_mel_bins", "feature_size") \
                else features.shape[1]
            inputs[name] = torch.full((features.shape[0],), frames * h.config.hop_length, dtype=torch.long)
        elif name in ("input_features_mask", "feature_attention_mask") and "input_features" in inputs:
            features = inputs["input_features"]
            frames = features.shape[-1] if features.shape[1] == _first(
                [_sub(h.config, "audio_config"), h.config], "num_mel_bins", default=-1) else features.shape[1]
            inputs[name] = torch.ones(features.shape[0], frames, dtype=torch.long)


def _image_token_prompt(h: Inputs, count: int) -> torch.Tensor:
    """A prompt that opens with ``count`` image placeholder tokens, as a processor writes it."""
    token = _first([h.config], "image_token_index", "image_token_id", "video_token_index", "video_token_id")
    ids = h.ids(BATCH, count + SEQ)
    ids[:, :count] = token
    return ids


def _blip_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """BLIP-2 and InstructBLIP: the Q-Former's query tokens stand in the prompt as image tokens
    (once per frame of a video)."""
    video = "Video" in type(h.model).__name__
    count = h.config.num_query_tokens * ((_frames(h.config) or 4) if video else 1)
    ids = _image_token_prompt(h, count)
    pixels = _video(h.config, h.gen) if video else h.image()
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "pixel_values": pixels}
    if "qformer_input_ids" in h.params:
        inputs.update(_text(h.config, h.gen, prefix="qformer_"))
    return [(inputs, "image tokens, image and prompt")]


def _kosmos2_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Kosmos-2: the image's latent queries fill the prompt's first positions."""
    count = h.config.latent_query_num
    ids = h.ids(BATCH, count + SEQ)
    where = torch.zeros_like(ids)
    where[:, 1:count + 1] = 1
    return [({"input_ids": ids, "attention_mask": torch.ones_like(ids), "pixel_values": h.image(),
              "image_embeds_position_mask": where}, "image, prompt and where the image goes")]


def _idefics_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """IDEFICS: one image per prompt ([B, images, C, H, W]) that every token attends to."""
    ids = h.ids()
    return [({"input_ids": ids, "attention_mask": torch.ones_like(ids), "pixel_values": h.image().unsqueeze(1),
              "image_attention_mask": torch.ones(BATCH, SEQ, 1, dtype=torch.long)}, "image and prompt")]


def _clap_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """CLAP: a log-mel spectrogram image [B, 1, frames, mel] of the spectrogram's size."""
    audio = _sub(h.config, "audio_config")
    mel = audio.num_mel_bins
    frames = audio.spec_size * (audio.spec_size // mel)
    features = h.randn(BATCH, 1, frames, mel)
    if main_input(h.model) == "input_ids":
        return [({**h.text(), "input_features": features}, "text and spectrogram")]
    return [({"input_features": features}, "spectrogram")]


def _patch_grid_side(h: Inputs) -> tuple[int, int, int]:
    """Channels, patch side and patches per image side of a vision tower fed patches."""
    vision = _vision(h.config)
    channels = _first(vision, "num_channels", "in_channels", default=3)
    patch = max(_pair(_first(vision, "patch_size", default=PATCH)))
    return channels, patch, 4


def _naflex_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """SigLIP 2 (NaFlex): an image cut into flattened patches, their mask and grid shape."""
    channels, patch, side = _patch_grid_side(h)
    count = side * side
    inputs = {"pixel_values": h.randn(BATCH, count, channels * patch * patch),
              "pixel_attention_mask": torch.ones(BATCH, count, dtype=torch.long),
              "spatial_shapes": torch.tensor([[side, side]] * BATCH)}
    return [(inputs, "flattened patches, their mask and grid")]


def _positioned_patch_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Gemma 4's vision tower: flattened patches with their (x, y) positions, a grid that
    the pooling kernel tiles."""
    channels, patch, _ = _patch_grid_side(h)
    side = 2 * (_first(_vision(h.config), "pooling_kernel_size", default=1))
    ys, xs = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    positions = torch.stack([xs.flatten(), ys.flatten()], dim=-1).expand(BATCH, -1, -1).contiguous()
    return [({"pixel_values": h.randn(BATCH, side * side, channels * patch * patch),
              "pixel_position_ids": positions}, "flattened patches and their positions")]


def _target_size_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """MiniCPM-V's vision tower: every image's patches packed side by side into one strip
    [1, C, patch, patches * patch], as its processor packs them, and each image's patch grid."""
    channels, patch, side = _patch_grid_side(h)
    strip = h.randn(1, channels, patch, BATCH * side * side * patch)
    grid = torch.tensor([[side, side]] * BATCH, dtype=torch.int32)
    name = "target_sizes" if "target_sizes" in h.params else "tgt_sizes"
    return [({"pixel_values": strip, name: grid}, "images' patches packed in a strip, and their grids")]


def _tiled_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Mllama's vision tower: one image of one tile per prompt, and its aspect ratio."""
    tiles = _first(_vision(h.config), "max_num_tiles", default=4)
    image = torch.stack([h.image() for _ in range(tiles)], dim=1).unsqueeze(1)
    return [({"pixel_values": image, "aspect_ratio_ids": torch.ones(BATCH, 1, dtype=torch.long),
              "aspect_ratio_mask": torch.ones(BATCH, 1, tiles, dtype=torch.long)}, "an image's tiles and their layout")]


def _flattened_patch_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Pix2Struct and Kosmos-2.5: patches of a 4 x 4 grid, each its (row, column), 1-based,
    then its pixels."""
    vision = _vision(h.config)
    width = _first(vision, "patch_embed_hidden_size")
    side = 4
    rows, cols = torch.meshgrid(torch.arange(1, side + 1), torch.arange(1, side + 1), indexing="ij")
    where = torch.stack([rows.flatten(), cols.flatten()], dim=-1).float().expand(BATCH, -1, -1)
    patches = torch.cat([where, h.randn(BATCH, side * side, width)], dim=-1)
    inputs = {"flattened_patches": patches, "attention_mask": torch.ones(BATCH, side * side)}
    if "decoder_input_ids" in h.params:
        inputs["decoder_input_ids"] = h.ids()
    return [(inputs, "flattened patches")]


def _pair_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Keypoint matchers: pairs of images [B, 2, C, H, W]."""
    detector = _sub(h.config, "keypoint_detector_config")
    image = torch.randn(BATCH, 2, 3, 2 * IMAGE, 2 * IMAGE, generator=h.gen)
    del detector
    return [({"pixel_values": image}, "image pairs")]


def _seggpt_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """SegGPT: an image, a prompt image and the prompt's mask, each half the model's input
    (the two are stacked into one canvas)."""
    height, width = _pair(h.config.image_size)
    shape = (BATCH, h.config.num_channels, height // 2, width)
    return [({"pixel_values": h.randn(*shape), "prompt_pixel_values": h.randn(*shape),
              "prompt_masks": h.randn(*shape)}, "image, prompt image and mask")]


def _oneformer_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """OneFormer: an image and its task prompt ("the task is semantic"), tokenised."""
    length = _first([h.config], "task_seq_len", default=SEQ)
    return [({"pixel_values": h.image(), "task_inputs": h.ids(BATCH, length)}, "image and task prompt")]


def _lxmert_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """LXMERT: a question and the detector's region features with their boxes."""
    regions = 4
    boxes = torch.rand(BATCH, regions, h.config.visual_pos_dim, generator=h.gen)
    return [({**h.text(), "visual_feats": h.randn(BATCH, regions, h.config.visual_feat_dim),
              "visual_pos": boxes}, "question and region features")]


def _trajectory_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Decision Transformer: a trajectory of states, actions, rewards, returns to go and steps."""
    c = h.config
    return [({"states": h.randn(BATCH, SEQ, c.state_dim), "actions": h.randn(BATCH, SEQ, c.act_dim),
              "rewards": h.randn(BATCH, SEQ, 1), "returns_to_go": h.randn(BATCH, SEQ, 1),
              "timesteps": torch.arange(SEQ).expand(BATCH, -1).contiguous(),
              "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long)}, "a trajectory")]


def _perceiver_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Perceiver's text classifier: UTF-8 byte ids through its text preprocessor."""
    ids = h.ids()
    return [({"inputs": ids, "attention_mask": torch.ones_like(ids)}, "byte ids")]


def _dia_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Dia: a text prompt and the decoder's audio codes, one per channel (codebook)."""
    decoder = _sub(h.config, "decoder_config")
    codes = torch.randint(0, decoder.vocab_size, (BATCH, SEQ, decoder.num_channels), generator=h.gen)
    return [({**h.text(), "decoder_input_ids": codes}, "text and audio codes")]


def _dia_decoder_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Dia's decoder alone: audio codes, one per channel (codebook), attending to the text
    encoder's states."""
    c = h.config
    codes = torch.randint(0, c.vocab_size, (BATCH, SEQ, c.num_channels), generator=h.gen)
    width = _first([c], "cross_hidden_size", "encoder_hidden_size", default=h.width())
    return [({"input_ids": codes, "encoder_hidden_states": h.randn(BATCH, SEQ, width)}, "audio codes and text states"),
            ({"input_ids": codes}, "audio codes")]


def _byte_patch_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """BLT's local models, each alone: the encoder reads bytes grouped into patches of two
    (``patch_ids`` name each byte's patch), the decoder byte embeddings and the global
    model's patch states (``hidden_size_global`` wide)."""
    c, patches = h.config, SEQ // 2
    if "patch_ids" in h.params:
        ids = torch.arange(SEQ).div(2, rounding_mode="floor").expand(BATCH, -1).contiguous()
        return [({"input_ids": h.ids(), "num_patches": patches, "patch_ids": ids}, "bytes and their patches")]
    return [({"inputs_embeds": h.randn(BATCH, SEQ, c.hidden_size),
              "patch_embeds": h.randn(BATCH, patches, c.hidden_size_global)}, "byte embeddings and patch states")]


def _whole_token_audio_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Muse Spark's audio encoder: a waveform of whole output tokens of samples."""
    return [({"input_values": h.randn(BATCH, 2 * h.config.samples_per_token)}, "whole output tokens of samples")]


def _resampler_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Idefics2's perceiver: the vision tower's features to resample, and their mask."""
    return [({"context": h.randn(BATCH, SEQ, h.width()), "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long)},
             "image features to resample")]


def _qformer_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """BLIP-2's Q-Former alone: its query embeddings attending to the vision tower's features."""
    width = _first([h.config], "encoder_hidden_size", default=h.width())
    return [({"query_embeds": h.randn(BATCH, 4, h.width()), "encoder_hidden_states": h.randn(BATCH, SEQ, width)},
             "queries and image features")]


def _drafter_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Muse Glimmer's assistant: noised embeddings to denoise, and the target model's states
    at each layer it reads, concatenated."""
    context = len(h.config.target_layer_ids) * h.width()
    return [({"noise_embeds": h.randn(BATCH, SEQ, h.width()), "context_hidden_states": h.randn(BATCH, SEQ, context)},
             "noised embeddings and context states")]


def _feature_map_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """A vision encoder fed another tower's feature map [B, width, 4, 4] as its patch embeddings."""
    return [({"patch_embeds": h.randn(BATCH, h.width(), 4, 4)}, "a feature map")]


def _mel_mask_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Gemma 3n's audio encoder: a log-mel spectrogram [B, frames, bins] and its padding mask."""
    bins = _first([h.config], "input_feat_size", default=128)
    return [({"audio_mel": h.randn(BATCH, 32, bins), "audio_mel_mask": torch.zeros(BATCH, 32, dtype=torch.bool)},
             "spectrogram and padding mask")]


def _conformer_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Phi-4-multimodal's audio encoder: log-mel features [B, frames, bins], no streaming mask."""
    bins = _first([h.config], "input_size", default=80)
    return [({"hidden_states": h.randn(BATCH, 32, bins), "mask": None}, "spectrogram")]


def _speech_encoder_decoder_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """A speech encoder-decoder: the encoder's waveform (or features) and the decoder's prompt."""
    return [({"inputs": h.randn(BATCH, 1600), "decoder_input_ids": h.ids(config=_sub(h.config, "decoder"))},
             "waveform and prompt"),
            ({"inputs": h.randn(BATCH, 32, 80), "decoder_input_ids": h.ids(config=_sub(h.config, "decoder"))},
             "features and prompt")]


def _bark_fine_sets(h: Inputs) -> list[tuple[dict[str, Any], str]]:
    """Bark's fine model: every codebook's codes, predicting codebook ``codebook_idx``."""
    c = h.config
    codes = torch.randint(0, c.input_vocab_size, (BATCH, SEQ, c.n_codes_total), generator=h.gen)
    return [({"codebook_idx": c.n_codes_given, "input_ids": codes}, "codes of every codebook")]


# Per-type recipes, tried before the generic inputs.
RECIPES: dict[str, Recipe] = {
    "siglip2": _naflex_sets, "siglip2_vision_model": _naflex_sets, "gemma4_vision": _positioned_patch_sets,
    "minicpm_ocr_vision": _target_size_sets, "minicpmv4_7_vision": _target_size_sets,
    "minicpmv4_6_vision": _target_size_sets, "mllama_vision_model": _tiled_sets,
    "pix2struct": _flattened_patch_sets, "pix2struct_vision_model": _flattened_patch_sets,
    "kosmos_2_5_vision_model": _flattened_patch_sets, "superglue": _pair_sets, "lightglue": _pair_sets,
    "seggpt": _seggpt_sets, "oneformer": _oneformer_sets, "lxmert": _lxmert_sets,
    "decision_transformer": _trajectory_sets, "perceiver": _perceiver_sets, "bark": _bark_fine_sets,
    "muse_spark_audio": _whole_token_audio_sets,
    "idefics2_perceiver": _resampler_sets, "blip_2_qformer": _qformer_sets,
    "muse_glimmer_assistant": _drafter_sets, "unlimited_ocr_vision_encoder": _feature_map_sets,
    "gemma3n_audio": _mel_mask_sets, "phi4_multimodal_audio": _conformer_sets,
    "speech-encoder-decoder": _speech_encoder_decoder_sets,
    "dia": _dia_sets, "dia_decoder": _dia_decoder_sets,
    "blt_local_encoder": _byte_patch_sets, "blt_local_decoder": _byte_patch_sets,
    "blip-2": _blip_sets, "instructblip": _blip_sets, "instructblipvideo": _blip_sets,
    "kosmos-2": _kosmos2_sets, "idefics": _idefics_sets, "clap": _clap_sets, "clap_audio_model": _clap_sets,
}


def _is_id_name(name: str) -> bool:
    return name.endswith(("_ids", "ids", "codes", "code", "tokens"))


def _feature_sets(h: Inputs, main: str) -> list[tuple[dict[str, Any], str]]:
    """A part fed by another part (a detector's encoder, a mask decoder, an adapter, a
    codec's decoder): its main input and every other required one no recipe knows, as
    token ids where the name says ids or codes, else as float features of the config's
    width, laid out as a sequence, a feature map, or one vector per example."""
    width = h.width()
    names = [main, *(name for name in _required(h.params) if name != main)]
    layouts = (
        ("a sequence", lambda: h.randn(BATCH, SEQ, width)),
        ("a feature map", lambda: h.randn(BATCH, width, 8, 8)),
        ("a vector each", lambda: h.randn(BATCH, width)),
    )
    sets = []
    for label, features in layouts:
        inputs = {name: h.ids() if _is_id_name(name) else features() for name in names}
        sets.append((inputs, f"{', '.join(names)} as {label} of width {width}"))
    return sets


def _input_sets(model: torch.nn.Module, config: Any, gen: torch.Generator,
                model_type: str = "") -> list[tuple[dict[str, Any], str]]:
    """Candidate keyword inputs, most natural first, each with a note for the report."""
    params = _forward_parameters(model)
    main = main_input(model)
    h = Inputs(model, config, params, gen)
    sets = _recipe(h, model_type)
    sets += _generic_sets(h, main)
    if not sets:
        sets = _feature_sets(h, main)
    completed = []
    for inputs, note in sets:
        fuller = {k: v for k, v in inputs.items() if k in params}
        _complete(h, fuller, optional=True)
        if fuller.keys() != inputs.keys() & params.keys():
            completed.append((fuller, f"{note}, with {', '.join(sorted(fuller.keys() - inputs.keys()))}".lstrip(", ")))
    out = []
    for inputs, note in sets + completed:
        inputs = {k: v for k, v in inputs.items() if k in params}
        _complete(h, inputs)
        if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params and \
                "decoder_input_ids" not in inputs and "decoder_inputs_embeds" not in inputs:
            inputs["decoder_input_ids"] = _token_ids(config, (BATCH, SEQ), gen)
        out.append((inputs, note))
    return out


def _run(model: torch.nn.Module, kwargs: dict[str, Any]) -> Any:
    with torch.no_grad():
        return model(**kwargs)


def _config_for(cls: type, config: transformers.PreTrainedConfig) -> transformers.PreTrainedConfig:
    """The config ``cls`` is built from: the type's own, or the sub-config of the class
    ``cls`` declares (a composite type's text model takes its ``text_config``)."""
    wanted = getattr(cls, "config_class", None)
    if not isinstance(wanted, type) or isinstance(config, wanted):
        return config
    queue = [config]
    while queue:
        current = queue.pop(0)
        if isinstance(current, wanted):
            return current
        queue += [v for v in vars(current).values() if isinstance(v, transformers.PreTrainedConfig)]
    return config


def build(model_type: str, class_name: str, seed: int = 0) -> Built:
    """A tiny ``class_name`` model of ``model_type`` and inputs its eager forward accepts."""
    try:
        cls = model_class(model_type, class_name)
    except (ImportError, AttributeError, RuntimeError) as e:
        raise NotBuilt(f"requires a package: {_headline(e)}") from e
    config = _config_for(cls, tiny_config(model_type))
    if hasattr(config, "use_cache"):
        config.use_cache = False
    torch.manual_seed(seed)
    try:
        model = cls(config).eval()
    except ImportError as e:
        raise NotBuilt(f"requires a package: {_headline(e)}") from e
    except OSError as e:
        raise NotBuilt(f"needs a download: {_headline(e)}") from e
    except Exception as e:
        raise NotBuilt(f"model init fails on the tiny config: {type(e).__name__}: {_headline(e)}") from e
    gen = torch.Generator().manual_seed(seed)
    errors: list[Exception] = []
    sets = _input_sets(model, config, gen, model_type)
    for kwargs, note in sets:
        try:
            output = _run(model, kwargs)
        except Exception as e:
            errors.append(e)
            continue
        return Built(model, kwargs, output, note)
    # The error worth reading is the fullest input set's (the first of those as full).
    sizes = [len(kwargs) for kwargs, _ in sets]
    error = errors[sizes.index(max(sizes))] if errors else NotBuilt("no input set")
    raise NotBuilt(f"eager forward fails on generated inputs: {type(error).__name__}: {_headline(error)}") from error


def _headline(error: BaseException) -> str:
    """The error's text on one line; validation errors put the cause on their second line."""
    text = " ".join(str(error).split())
    return text[:300] if text else type(error).__name__


__all__ = ["Built", "NotBuilt", "build", "cases", "model_class", "model_types", "shrink", "tiny_config"]
