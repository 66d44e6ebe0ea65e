"""The zoo's tiny models (benchmarks/zoo_models.py): configs shrunk consistently, the class a
type offers found in its package, and inputs in the form each family takes. No export runs
here; the few models built are tiny parts that run in well under a second."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers")

ZOO_MODELS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "zoo_models.py"


@pytest.fixture(scope="module")
def zoo():
    if "zoo_models" in sys.modules and getattr(sys.modules["zoo_models"], "__file__", None) == str(ZOO_MODELS):
        return sys.modules["zoo_models"]
    spec = importlib.util.spec_from_file_location("zoo_models", ZOO_MODELS)
    module = importlib.util.module_from_spec(spec)
    sys.modules["zoo_models"] = module
    spec.loader.exec_module(module)
    return module


def test_sizes_that_follow_from_others_are_fitted_to_the_shrunk_ones(zoo):
    mamba = zoo.shrink({"hidden_size": 4096, "mamba_n_heads": 4, "mamba_expand": 2, "mamba_d_head": 64,
                        "mamba_d_ssm": 8192})
    assert mamba["mamba_d_ssm"] == 2 * mamba["hidden_size"]
    assert mamba["mamba_d_head"] * mamba["mamba_n_heads"] == mamba["mamba_d_ssm"]
    mla = zoo.shrink({"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "swa_head_dim": 192})
    assert mla["swa_head_dim"] == mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]


def test_an_input_channel_count_follows_the_size_that_feeds_it(zoo):
    vision = zoo.shrink({"hidden_size": 768, "output_channels": 256, "post_conv_in_channels": 256,
                         "post_conv_mid_channels": 512, "num_channels": 3})
    assert vision["post_conv_in_channels"] == vision["output_channels"] < 256
    assert vision["post_conv_mid_channels"] == 512 and vision["num_channels"] == 3
    unrelated = zoo.shrink({"hidden_size": 768, "in_channels": 3})
    assert unrelated["in_channels"] == 3
    conformer = zoo.shrink({"hidden_size": 1024, "depthwise_separable_out_channel": 1024, "ext_pw_out_channel": 1024})
    assert conformer["depthwise_separable_out_channel"] == conformer["ext_pw_out_channel"] == conformer["hidden_size"]


def test_a_backbones_stages_and_the_head_on_it_shrink_together(zoo):
    backbone = {"model_type": "hgnet_v2", "hidden_sizes": [256, 512, 1024, 2048], "stem_channels": [3, 32, 48],
                "stage_in_channels": [48, 128, 512, 1024], "stage_out_channels": [128, 512, 1024, 2048],
                "out_indices": [2, 3, 4]}
    config = zoo.shrink({"backbone_config": backbone, "encoder_in_channels": [512, 1024, 2048],
                         "encoder_hidden_dim": 256, "decoder_in_channels": [256, 256, 256]})
    stages = config["backbone_config"]
    assert stages["stem_channels"][0] == 3  # the image's channels
    assert stages["stem_channels"][-1] == stages["stage_in_channels"][0]
    assert stages["stage_in_channels"][1:] == stages["stage_out_channels"][:-1]
    assert config["encoder_in_channels"] == [stages["stage_out_channels"][i - 1] for i in (2, 3, 4)]
    assert config["decoder_in_channels"] == [config["encoder_hidden_dim"]] * 3


def test_a_dpt_neck_gets_a_backbone_with_an_output_per_stage(zoo):
    config = zoo.shrink({"backbone_config": {"model_type": "dinov2", "num_hidden_layers": 12, "hidden_size": 384,
                                             "out_indices": [9, 10, 11, 12]},
                         "neck_hidden_sizes": [48, 96, 192, 384], "reassemble_factors": [4, 2, 1, 0.5]})
    backbone = config["backbone_config"]
    assert len(backbone["out_indices"]) == 4
    assert max(backbone["out_indices"]) <= backbone["num_hidden_layers"]


def test_windowed_stages_get_an_image_every_stage_can_tile(zoo):
    config = zoo.shrink({"image_size": 224, "patch_size": 4, "depths": [2, 2, 6, 2], "window_size": 7})
    grid = config["image_size"] // config["patch_size"] // 2 ** (len(config["depths"]) - 1)
    assert grid >= config["window_size"]


def test_derived_attributes_are_derived_again_from_the_tiny_fields(zoo):
    config = zoo.tiny_config("bros")
    assert config.dim_bbox_projection == config.hidden_size // config.num_attention_heads


def test_a_part_no_auto_mapping_lists_gets_the_class_named_for_its_config(zoo):
    assert zoo.cases("sam2_mask_decoder")[0] == "Sam2MaskDecoder"
    assert zoo.cases("kosmos_2_text_model")[0] == "Kosmos2TextForCausalLM"
    decoder = zoo.model_class("sam2_mask_decoder", "Sam2MaskDecoder")
    assert decoder.__name__ == "Sam2MaskDecoder"


def test_a_wrapper_without_a_forward_is_replaced_by_its_sub_models(zoo):
    classes = zoo.cases("qwen2_5_omni")
    assert "Qwen2_5OmniForConditionalGeneration" not in classes
    assert classes[0] == "Qwen2_5OmniThinkerForConditionalGeneration"


def test_a_text_head_of_a_composite_type_is_built_from_the_text_config(zoo):
    built = zoo.build("qwen3_5", "Qwen3_5ForCausalLM")
    assert type(built.model.config).__name__ == "Qwen3_5TextConfig"


@pytest.mark.parametrize("model_type, names", [
    ("sam_mask_decoder", {"image_embeddings", "sparse_prompt_embeddings", "dense_prompt_embeddings"}),
    ("sam2_prompt_encoder", {"input_points", "input_labels"}),
    ("qwen2_vl_vision", {"hidden_states", "grid_thw"}),
    ("patchtst", {"past_values"}),
])
def test_each_family_is_fed_the_inputs_it_takes(zoo, model_type, names):
    built = zoo.build(model_type, zoo.cases(model_type)[0])
    assert names <= built.kwargs.keys()
    assert built.output is not None


def test_flattened_patches_and_their_grid_agree(zoo):
    built = zoo.build("qwen2_vl_vision", "Qwen2VisionTransformerPretrainedModel")
    grid, patches = built.kwargs["grid_thw"], built.kwargs["hidden_states"]
    assert int(grid.prod(-1).sum()) == patches.shape[0]
    merge = built.model.config.spatial_merge_size
    assert (grid[:, 1:] % merge == 0).all()


def test_a_timm_config_keeps_its_labels_through_the_shrinking(zoo):
    config = zoo.tiny_config("timm_wrapper")
    assert config.num_labels == 2


def test_a_timm_backbone_that_names_no_architecture_gets_the_timm_wrappers_default(zoo):
    config = zoo.shrink({"model_type": "timm_backbone", "backbone": None})
    assert config["backbone"] == zoo.CONFIG_MAPPING["timm_wrapper"].architecture


def test_a_timm_vit_is_shrunk_through_its_model_args(zoo):
    pytest.importorskip("timm")
    config = zoo.shrink({"model_type": "timm_wrapper", "architecture": "vit_pe_core_large_patch14_336",
                         "model_args": {"global_pool": ""}})
    args = config["model_args"]
    assert (args["embed_dim"], args["depth"], args["num_heads"]) == (zoo.WIDTH, zoo.LAYERS, zoo.HEADS)
    assert args["global_pool"] == ""
    cnn = zoo.shrink({"model_type": "timm_wrapper", "architecture": "resnet50", "model_args": None})
    assert cnn["model_args"] is None


def test_feature_map_sizes_follow_the_backbones_patch_grid(zoo):
    tracker = zoo.tiny_config("sam3_tracker").vision_config
    backbone = tracker.backbone_config
    assert tracker.backbone_feature_sizes[-1] == [backbone.image_size // backbone.patch_size] * 2
    sam2 = zoo.tiny_config("sam2")
    sizes, prompt = sam2.vision_config.backbone_feature_sizes, sam2.prompt_encoder_config
    hiera = sam2.vision_config.backbone_config
    assert sizes[0] == [hiera.image_size[0] // hiera.patch_stride[0]] * 2
    assert prompt.image_size // prompt.patch_size == sizes[-1][0]


def test_positional_frequencies_span_the_output_channels(zoo):
    vision = zoo.tiny_config("sam").vision_config
    assert 2 * vision.num_pos_feats == vision.output_channels


def test_a_model_that_takes_text_and_a_clip_is_given_both(zoo):
    import torch

    class TextAndClip(torch.nn.Module):
        main_input_name = "input_ids"

        def forward(self, input_ids, pixel_values_videos, attention_mask=None):
            return pixel_values_videos.mean() + input_ids.sum()

    config = zoo.CONFIG_MAPPING["vit"](image_size=16, num_frames=3)
    sets = zoo._input_sets(TextAndClip(), config, torch.Generator().manual_seed(0))
    clips = [inputs["pixel_values_videos"] for inputs, _ in sets if "pixel_values_videos" in inputs]
    assert clips and clips[0].shape == (zoo.BATCH, 3, 3, 16, 16)


def test_a_vq_vaes_image_fills_its_latent_grid(zoo):
    config = zoo.tiny_config("janus_vqgan")
    assert config.num_patches <= 4
    side = config.num_patches * 2 ** (len(config.channel_multiplier) - 1)
    assert zoo._image_shape(config)[1:] == (side, side)


def test_a_vq_vaes_attention_stays_as_wide_as_its_deepest_level(zoo):
    config = zoo.tiny_config("emu3_vqgan")
    assert config.hidden_size == config.base_channels * config.channel_multiplier[-1]
    assert config.base_channels <= zoo.WIDTH
    built = zoo.build("emu3_vqgan", "Emu3VQVAEDecoder")
    assert built.kwargs["quant_states"].shape[2] == config.embed_dim
    assert built.kwargs["hidden_states"].shape[2] == config.latent_channels


def test_an_audio_encoder_fed_packed_clips_gets_them_with_their_lengths(zoo):
    built = zoo.build("qwen2_5_omni_audio_encoder", "Qwen2_5OmniAudioEncoder")
    features, lengths = built.kwargs["input_features"], built.kwargs["feature_lens"]
    assert features.shape[0] == built.model.config.num_mel_bins
    assert lengths.shape == (zoo.BATCH,) and int(lengths.sum()) == features.shape[1]
    config = built.model.config
    assert config.max_source_positions >= config.n_window


def test_lengths_in_samples_follow_the_mel_frames_and_their_hop(zoo):
    built = zoo.build("dots3_note_audio_encoder", zoo.cases("dots3_note_audio_encoder")[0])
    features, samples = built.kwargs["input_features"], built.kwargs["chunk_sample_lengths"]
    assert (samples == features.shape[-1] * built.model.config.hop_length).all()


def test_a_count_of_leading_patch_tokens_fits_the_embedded_sequence(zoo):
    built = zoo.build("deepseek_ocr2_encoder", zoo.cases("deepseek_ocr2_encoder")[0])
    assert 0 < built.kwargs["num_patches"] < built.kwargs["inputs_embeds"].shape[1]


def test_a_packing_vision_tower_gets_its_images_patches_in_one_strip(zoo):
    built = zoo.build("minicpm_ocr_vision", zoo.cases("minicpm_ocr_vision")[0])
    strip, grids = built.kwargs["pixel_values"], built.kwargs["target_sizes"]
    patch = built.model.config.patch_size
    assert strip.shape[0] == 1 and strip.shape[2] == patch
    assert strip.shape[3] // patch == int(grids.prod(-1).sum())


def test_a_pixel_shuffling_adapter_takes_the_shuffled_width(zoo):
    config = zoo.tiny_config("llama4_vision_model")
    assert config.intermediate_size == int(config.hidden_size / config.pixel_shuffle_ratio**2)
    assert config.projector_input_dim <= zoo.WIDTH


@pytest.mark.parametrize("model_type, dims", [("kimi_k25_vision", 4), ("paddleocr_vl_vision", 5)])
def test_patches_embedded_as_small_images_keep_their_grid(zoo, model_type, dims):
    built = zoo.build(model_type, zoo.cases(model_type)[0])
    patches, grid = built.kwargs["pixel_values"], built.kwargs["grid_thw"]
    assert patches.dim() == dims
    assert patches.shape[-1] == patches.shape[-2] == built.model.config.patch_size
    assert int(grid.prod(-1).sum()) == patches.shape[-4]


def test_a_size_the_default_derived_is_derived_again_from_the_tiny_width(zoo):
    config = zoo.tiny_config("zamba")
    assert config.attention_hidden_size == 2 * config.hidden_size


def test_a_matting_backbones_patch_matches_its_detail_streams_depth(zoo):
    config = zoo.tiny_config("vitmatte")
    assert config.backbone_config.patch_size == 2 ** (len(config.convstream_hidden_sizes) + 1)


def test_a_codec_decoder_alone_takes_a_code_per_codebook(zoo):
    built = zoo.build("dia_decoder", zoo.cases("dia_decoder")[0])
    assert built.kwargs["input_ids"].shape[-1] == built.model.config.num_channels


def test_byte_models_parts_get_bytes_grouped_into_patches(zoo):
    encoder = zoo.build("blt_local_encoder", zoo.cases("blt_local_encoder")[0])
    assert int(encoder.kwargs["patch_ids"].max()) + 1 == encoder.kwargs["num_patches"]
    decoder = zoo.build("blt_local_decoder", zoo.cases("blt_local_decoder")[0])
    assert decoder.kwargs["patch_embeds"].shape[-1] == decoder.model.config.hidden_size_global


def test_detr_stages_get_fpn_maps_whose_coarsest_the_encoded_image_fills(zoo):
    decoder = zoo.build("sam3_mask_decoder", zoo.cases("sam3_mask_decoder")[0])
    maps = decoder.kwargs["backbone_features"]
    assert len(maps) == decoder.model.config.num_upsampling_stages
    assert [m.shape[-1] for m in maps] == sorted((m.shape[-1] for m in maps), reverse=True)
    coarsest = maps[-1].shape[-2] * maps[-1].shape[-1]
    assert decoder.kwargs["encoder_hidden_states"].shape[1] == coarsest
    encoder = zoo.build("sam3_detr_encoder", zoo.cases("sam3_detr_encoder")[0])
    assert len(encoder.kwargs["vision_features"]) == len(encoder.kwargs["vision_pos_embeds"]) == 1


def test_a_sam_neck_narrows_to_the_width_of_the_encoder_after_it(zoo):
    config = zoo.tiny_config("unlimited_ocr_vision")
    assert config.sam_config.downsample_channels[-1] == config.encoder_config.hidden_size


def test_clvp_heads_are_wide_enough_for_its_rotary_floor(zoo):
    config = zoo.tiny_config("clvp_encoder")
    assert config.hidden_size // config.num_attention_heads >= 32
