"""Tiny diffusers models for the zoo: a model class, a small config, example inputs.

``MODELS`` maps a model type (one configuration of one diffusers model class) to a
:class:`Spec`: the class, the constructor arguments that make it tiny, and the keyword
inputs its forward takes. Configs and input shapes are the ones diffusers' own model tests
use (``tests/models/`` in the diffusers repository), so every model here is one the library
itself runs at that size; the weights are random and nothing is downloaded.

``model_types()``, ``cases(model_type)`` and ``build(model_type, class_name)`` answer as
``zoo_models`` does for transformers, so ``zoo.py --family diffusers`` runs these models
the way it runs the transformers zoo; ``kind(model_type)`` groups them on the results page.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Callable

import attrs
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import diffusers  # noqa: E402
from zoo_models import Built, NotBuilt  # noqa: E402

Inputs = Callable[[torch.Generator], dict[str, Any]]


@attrs.frozen
class Spec:
    """One model type: the diffusers class, its tiny config, and how to make its inputs."""

    class_name: str
    config: dict[str, Any]
    inputs: Inputs
    note: str = ""
    """What this configuration exercises, when it is worth knowing."""
    requires: tuple[str, ...] = ()
    """Packages the model's forward imports beyond diffusers (left out of this project's extras)."""


def _randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=gen)


def _steps(gen: torch.Generator, batch: int) -> torch.Tensor:
    """Integer diffusion timesteps, one per sample, as a scheduler hands them out."""
    return torch.randint(0, 1000, (batch,), generator=gen)


# ------------------------------------------------------------------------------- UNets


def _unet_2d_condition(gen):
    return {"sample": _randn(gen, 4, 4, 16, 16), "timestep": torch.tensor([10]),
            "encoder_hidden_states": _randn(gen, 4, 4, 8)}


def _unet_2d(gen):
    return {"sample": _randn(gen, 4, 3, 32, 32), "timestep": torch.tensor([10])}


def _unet_2d_ncsnpp(gen):
    return {"sample": _randn(gen, 4, 3, 32, 32), "timestep": torch.full((4,), 10, dtype=torch.int32)}


def _unet_1d(gen):
    return {"sample": _randn(gen, 4, 14, 16), "timestep": torch.full((4,), 10)}


def _unet_3d_condition(gen):
    return {"sample": _randn(gen, 4, 4, 4, 16, 16), "timestep": torch.tensor([10]),
            "encoder_hidden_states": _randn(gen, 4, 4, 8)}


def _unet_spatiotemporal(gen):
    # fps, motion bucket id and noise augmentation strength, once per sample
    added_time_ids = torch.tensor([[6.0, 127.0, 0.02]]).repeat(2, 1)
    return {"sample": _randn(gen, 2, 2, 4, 32, 32), "timestep": torch.tensor([10]),
            "encoder_hidden_states": _randn(gen, 2, 1, 32), "added_time_ids": added_time_ids}


def _unet_motion(gen):
    # the text states once per frame (4 samples of 4 frames), as the AnimateDiff pipeline passes them
    return {"sample": _randn(gen, 4, 4, 4, 16, 16), "timestep": torch.tensor([10]),
            "encoder_hidden_states": _randn(gen, 4 * 4, 4, 16)}


# ------------------------------------------------------------------------- autoencoders


def _image(gen, batch=4):
    return {"sample": _randn(gen, batch, 3, 32, 32)}


def _video(frames: int, batch: int = 2) -> Inputs:
    return lambda gen: {"sample": _randn(gen, batch, 3, frames, 16, 16)}


def _temporal_decoder(gen):
    return {"sample": _randn(gen, 3, 3, 32, 32), "num_frames": 3}


def _oobleck(gen):
    return {"sample": _randn(gen, 4, 2, 24), "sample_posterior": False}


# ------------------------------------------------------------------------- transformers


def _dit(gen):
    return {"hidden_states": _randn(gen, 4, 4, 8, 8), "timestep": _steps(gen, 4),
            "class_labels": torch.randint(0, 4, (4,), generator=gen)}


def _pixart(gen):
    return {"hidden_states": _randn(gen, 4, 4, 8, 8), "timestep": _steps(gen, 4),
            "encoder_hidden_states": _randn(gen, 4, 8, 8),
            "added_cond_kwargs": {"aspect_ratio": None, "resolution": None}}


def _sd3(gen):
    return {"hidden_states": _randn(gen, 2, 4, 32, 32), "encoder_hidden_states": _randn(gen, 2, 154, 32),
            "pooled_projections": _randn(gen, 2, 64), "timestep": _steps(gen, 2)}


def _flux(gen):
    return {"hidden_states": _randn(gen, 1, 16, 4), "encoder_hidden_states": _randn(gen, 1, 48, 32),
            "pooled_projections": _randn(gen, 1, 32), "img_ids": _randn(gen, 16, 3),
            "txt_ids": _randn(gen, 48, 3), "timestep": torch.tensor([1.0])}


def _chroma(gen):
    inputs = _flux(gen)
    del inputs["pooled_projections"]
    return inputs


def _flux2(gen):
    # position ids (time, height, width, layer) of a 4x4 latent and of 48 text tokens
    image_ids = torch.cartesian_prod(torch.arange(1), torch.arange(4), torch.arange(4), torch.arange(1))
    text_ids = torch.cartesian_prod(torch.arange(1), torch.arange(1), torch.arange(1), torch.arange(48))
    return {"hidden_states": _randn(gen, 1, 16, 4), "encoder_hidden_states": _randn(gen, 1, 48, 32),
            "img_ids": image_ids.unsqueeze(0), "txt_ids": text_ids.unsqueeze(0),
            "timestep": torch.tensor([1.0]), "guidance": torch.tensor([1.0])}


def _aura_flow(gen):
    return {"hidden_states": _randn(gen, 2, 4, 32, 32), "encoder_hidden_states": _randn(gen, 2, 256, 32),
            "timestep": _steps(gen, 2)}


def _cogvideox(gen):
    return {"hidden_states": _randn(gen, 2, 1, 4, 8, 8), "encoder_hidden_states": _randn(gen, 2, 8, 8),
            "timestep": _steps(gen, 2)}


def _consisid(gen):
    return {**_cogvideox(gen), "id_vit_hidden": [torch.ones(2, 2, 2)], "id_cond": torch.ones(2, 2)}


def _cogview(gen):
    size = torch.tensor([[64, 64]]).repeat(2, 1)
    return {"hidden_states": _randn(gen, 2, 4, 8, 8), "encoder_hidden_states": _randn(gen, 2, 8, 8),
            "original_size": size, "target_size": size.clone(), "crop_coords": torch.zeros(2, 2, dtype=torch.long),
            "timestep": _steps(gen, 2)}


def _allegro(gen):
    return {"hidden_states": _randn(gen, 2, 4, 8, 8, 8), "encoder_hidden_states": _randn(gen, 2, 16, 8),
            "timestep": _steps(gen, 2)}


def _easyanimate(gen):
    return {"hidden_states": _randn(gen, 2, 4, 2, 16, 16), "timestep": _steps(gen, 2),
            "encoder_hidden_states": _randn(gen, 2, 16, 16)}


def _hunyuan_dit(gen):
    # original size, target size and crop corner, once per sample
    meta = torch.tensor([[1024.0, 1024.0, 16.0, 16.0, 0.0, 0.0]]).repeat(2, 1)
    return {"hidden_states": _randn(gen, 2, 4, 8, 8), "encoder_hidden_states": _randn(gen, 2, 4, 8),
            "text_embedding_mask": torch.ones(2, 4), "encoder_hidden_states_t5": _randn(gen, 2, 4, 8),
            "text_embedding_mask_t5": torch.ones(2, 4), "timestep": _steps(gen, 2).float(),
            "image_meta_size": meta, "style": torch.zeros(2, dtype=torch.long),
            "image_rotary_emb": [torch.ones(1, 8), torch.zeros(1, 8)]}


def _hunyuan_video(gen):
    return {"hidden_states": _randn(gen, 1, 4, 1, 16, 16), "timestep": _steps(gen, 1).float(),
            "encoder_hidden_states": _randn(gen, 1, 12, 16), "pooled_projections": _randn(gen, 1, 8),
            "encoder_attention_mask": torch.ones(1, 12), "guidance": _steps(gen, 1).float()}


def _latte(gen):
    return {"hidden_states": _randn(gen, 2, 4, 1, 8, 8), "encoder_hidden_states": _randn(gen, 2, 8, 8),
            "timestep": _steps(gen, 2), "enable_temporal_attentions": True}


def _ltx_video(gen):
    # the latent video (2 frames of 16x16) arrives already flattened into tokens
    return {"hidden_states": _randn(gen, 2, 2 * 16 * 16, 4), "encoder_hidden_states": _randn(gen, 2, 16, 16),
            "timestep": _steps(gen, 2), "encoder_attention_mask": torch.ones(2, 16, dtype=torch.bool),
            "num_frames": 2, "height": 16, "width": 16}


def _mochi(gen):
    return {"hidden_states": _randn(gen, 2, 4, 2, 16, 16), "encoder_hidden_states": _randn(gen, 2, 16, 16),
            "timestep": _steps(gen, 2), "encoder_attention_mask": torch.ones(2, 16, dtype=torch.bool)}


def _sana(gen):
    return {"hidden_states": _randn(gen, 2, 4, 32, 32), "encoder_hidden_states": _randn(gen, 2, 8, 8),
            "timestep": _steps(gen, 2)}


def _wan(gen):
    return {"hidden_states": _randn(gen, 1, 4, 2, 16, 16), "encoder_hidden_states": _randn(gen, 1, 12, 16),
            "timestep": _steps(gen, 1)}


def _qwenimage(gen):
    return {"hidden_states": _randn(gen, 1, 16, 16), "encoder_hidden_states": _randn(gen, 1, 8, 16),
            "encoder_hidden_states_mask": torch.ones(1, 8, dtype=torch.long), "timestep": torch.tensor([1.0]),
            "img_shapes": [(1, 4, 4)]}


def _omnigen(gen):
    # 24 text tokens, a time token and the 4x4 patches of one input image
    length = 24 + 1 + 16
    return {"hidden_states": _randn(gen, 2, 4, 8, 8), "timestep": torch.rand(2, generator=gen),
            "input_ids": torch.randint(0, 10, (2, 24), generator=gen),
            "input_img_latents": [_randn(gen, 1, 4, 8, 8)], "input_image_sizes": {0: [[0, 16]]},
            "attention_mask": torch.ones(2, length, length), "position_ids": torch.arange(length).repeat(2, 1)}


def _z_image(gen):
    return {"x": [_randn(gen, 16, 1, 16, 16)], "cap_feats": [_randn(gen, 16, 16)], "t": torch.tensor([0.0])}


def _lumina_next(gen):
    return {"hidden_states": _randn(gen, 2, 4, 16, 16), "encoder_hidden_states": _randn(gen, 2, 16, 32),
            "timestep": torch.rand(2, generator=gen), "encoder_mask": _randn(gen, 2, 16),
            "image_rotary_emb": _randn(gen, 384, 384, 4), "cross_attention_kwargs": {}}


def _lumina2(gen):
    return {"hidden_states": _randn(gen, 2, 4, 16, 16), "encoder_hidden_states": _randn(gen, 2, 16, 32),
            "timestep": torch.rand(2, generator=gen), "encoder_attention_mask": torch.ones(2, 16, dtype=torch.bool)}


def _hidream(gen):
    return {"hidden_states": _randn(gen, 2, 4, 32, 32), "encoder_hidden_states_t5": _randn(gen, 2, 8, 8),
            "encoder_hidden_states_llama3": _randn(gen, 2, 2, 8, 4), "pooled_embeds": _randn(gen, 2, 8),
            "timesteps": _steps(gen, 2)}


def _cosmos(gen):
    return {"hidden_states": _randn(gen, 1, 4, 1, 16, 16), "timestep": _steps(gen, 1),
            "encoder_hidden_states": _randn(gen, 1, 12, 16), "attention_mask": torch.ones(1, 12), "fps": 30,
            "padding_mask": torch.zeros(1, 1, 16, 16)}


def _prior(gen):
    return {"hidden_states": _randn(gen, 4, 8), "timestep": 2, "proj_embedding": _randn(gen, 4, 8),
            "encoder_hidden_states": _randn(gen, 4, 7, 8)}


def _temporal(gen):
    return {"hidden_states": _randn(gen, 2, 4, 32, 32), "timestep": _steps(gen, 2)}


_UNET_2D_CONDITION = dict(
    block_out_channels=(4, 8), norm_num_groups=4, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=8, attention_head_dim=2,
    out_channels=4, in_channels=4, layers_per_block=1, sample_size=16,
)
_SD3 = dict(
    sample_size=32, patch_size=1, in_channels=4, num_layers=4, attention_head_dim=8, num_attention_heads=4,
    caption_projection_dim=32, joint_attention_dim=32, pooled_projection_dim=64, out_channels=4,
    pos_embed_max_size=96,
)
_WAN = dict(
    patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4, out_channels=4,
    text_dim=16, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
    rope_max_seq_len=32,
)
_COGVIDEOX = dict(
    num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4, time_embed_dim=2, text_embed_dim=8,
    num_layers=1, sample_width=8, sample_height=8, sample_frames=8, patch_size=2, temporal_compression_ratio=4,
    max_text_seq_length=8,
)

MODELS: dict[str, Spec] = {
    # UNets
    "unet_2d_condition": Spec("UNet2DConditionModel", _UNET_2D_CONDITION, _unet_2d_condition),
    "unet_2d": Spec("UNet2DModel", dict(
        block_out_channels=(4, 8), norm_num_groups=2, down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"), attention_head_dim=3, out_channels=3, in_channels=3,
        layers_per_block=2, sample_size=32,
    ), _unet_2d),
    "unet_2d_ncsnpp": Spec("UNet2DModel", dict(
        block_out_channels=(32, 64, 64, 64), in_channels=3, layers_per_block=1, out_channels=3,
        time_embedding_type="fourier", norm_eps=1e-6, mid_block_scale_factor=2**0.5, norm_num_groups=None,
        down_block_types=("SkipDownBlock2D", "AttnSkipDownBlock2D", "SkipDownBlock2D", "SkipDownBlock2D"),
        up_block_types=("SkipUpBlock2D", "SkipUpBlock2D", "AttnSkipUpBlock2D", "SkipUpBlock2D"),
    ), _unet_2d_ncsnpp, note="NCSN++: Fourier time embedding, skip blocks"),
    "unet_1d": Spec("UNet1DModel", dict(
        block_out_channels=(8, 8, 16, 16), in_channels=14, out_channels=14, time_embedding_type="positional",
        use_timestep_embedding=True, flip_sin_to_cos=False, freq_shift=1.0, out_block_type="OutConv1DBlock",
        mid_block_type="MidResTemporalBlock1D", down_block_types=("DownResnetBlock1D",) * 4,
        up_block_types=("UpResnetBlock1D",) * 3, act_fn="swish",
    ), _unet_1d),
    "unet_1d_value_function": Spec("UNet1DModel", dict(
        in_channels=14, out_channels=14, down_block_types=("DownResnetBlock1D",) * 4, up_block_types=(),
        out_block_type="ValueFunction", mid_block_type="ValueFunctionMidBlock1D",
        block_out_channels=(32, 64, 128, 256), layers_per_block=1, downsample_each_block=True,
        use_timestep_embedding=True, freq_shift=1.0, flip_sin_to_cos=False, time_embedding_type="positional",
        act_fn="mish",
    ), _unet_1d, note="a value function: the down path and a scalar head"),
    "unet_3d_condition": Spec("UNet3DConditionModel", dict(
        _UNET_2D_CONDITION, down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
        up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"),
    ), _unet_3d_condition),
    "unet_spatiotemporal": Spec("UNetSpatioTemporalConditionModel", dict(
        block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"),
        up_block_types=("UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"), cross_attention_dim=32,
        num_attention_heads=8, out_channels=4, in_channels=4, layers_per_block=2, sample_size=32,
        projection_class_embeddings_input_dim=3 * 32, addition_time_embed_dim=32,
    ), _unet_spatiotemporal),
    "unet_motion": Spec("UNetMotionModel", dict(
        block_out_channels=(16, 32), norm_num_groups=16,
        down_block_types=("CrossAttnDownBlockMotion", "DownBlockMotion"),
        up_block_types=("UpBlockMotion", "CrossAttnUpBlockMotion"), cross_attention_dim=16, num_attention_heads=2,
        out_channels=4, in_channels=4, layers_per_block=1, sample_size=16,
    ), _unet_motion),
    # autoencoders
    "autoencoder_kl": Spec("AutoencoderKL", dict(
        block_out_channels=(2, 4), in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2, latent_channels=4, norm_num_groups=2,
    ), _image),
    "autoencoder_kl_temporal_decoder": Spec("AutoencoderKLTemporalDecoder", dict(
        block_out_channels=(32, 64), in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
        latent_channels=4, layers_per_block=2,
    ), _temporal_decoder),
    "autoencoder_tiny": Spec("AutoencoderTiny", dict(
        in_channels=3, out_channels=3, encoder_block_out_channels=(32, 32), decoder_block_out_channels=(32, 32),
        num_encoder_blocks=(1, 1), num_decoder_blocks=(1, 1),
    ), _image),
    "autoencoder_dc": Spec("AutoencoderDC", dict(
        in_channels=3, latent_channels=4, attention_head_dim=2, encoder_block_types=("ResBlock", "EfficientViTBlock"),
        decoder_block_types=("ResBlock", "EfficientViTBlock"), encoder_block_out_channels=(8, 8),
        decoder_block_out_channels=(8, 8), encoder_qkv_multiscales=((), (5,)), decoder_qkv_multiscales=((), (5,)),
        encoder_layers_per_block=(1, 1), decoder_layers_per_block=(1, 1), downsample_block_type="conv",
        upsample_block_type="interpolate", decoder_norm_types="rms_norm", decoder_act_fns="silu",
        scaling_factor=0.41407,
    ), _image),
    "autoencoder_oobleck": Spec("AutoencoderOobleck", dict(
        encoder_hidden_size=12, decoder_channels=12, decoder_input_channels=6, audio_channels=2,
        downsampling_ratios=[2, 4], channel_multiples=[1, 2],
    ), _oobleck),
    "vq": Spec("VQModel", dict(
        block_out_channels=(8, 16), norm_num_groups=8, in_channels=3, out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2, latent_channels=3,
    ), _image),
    "autoencoder_kl_cogvideox": Spec("AutoencoderKLCogVideoX", dict(
        in_channels=3, out_channels=3, down_block_types=("CogVideoXDownBlock3D",) * 4,
        up_block_types=("CogVideoXUpBlock3D",) * 4, block_out_channels=(8, 8, 8, 8), latent_channels=4,
        layers_per_block=1, norm_num_groups=2, temporal_compression_ratio=4,
    ), _video(8, batch=4)),
    "autoencoder_kl_hunyuan_video": Spec("AutoencoderKLHunyuanVideo", dict(
        in_channels=3, out_channels=3, latent_channels=4, down_block_types=("HunyuanVideoDownBlock3D",) * 4,
        up_block_types=("HunyuanVideoUpBlock3D",) * 4, block_out_channels=(8, 8, 8, 8), layers_per_block=1,
        act_fn="silu", norm_num_groups=4, scaling_factor=0.476986, spatial_compression_ratio=8,
        temporal_compression_ratio=4, mid_block_add_attention=True,
    ), _video(9)),
    "autoencoder_kl_ltx_video": Spec("AutoencoderKLLTXVideo", dict(
        in_channels=3, out_channels=3, latent_channels=8, block_out_channels=(8, 8, 8, 8),
        decoder_block_out_channels=(8, 8, 8, 8), layers_per_block=(1, 1, 1, 1, 1),
        decoder_layers_per_block=(1, 1, 1, 1, 1), spatio_temporal_scaling=(True, True, False, False),
        decoder_spatio_temporal_scaling=(True, True, False, False), decoder_inject_noise=(False,) * 5,
        upsample_residual=(False,) * 4, upsample_factor=(1, 1, 1, 1), timestep_conditioning=False, patch_size=1,
        patch_size_t=1, encoder_causal=True, decoder_causal=False,
    ), _video(9)),
    "autoencoder_kl_mochi": Spec("AutoencoderKLMochi", dict(
        in_channels=15, out_channels=3, latent_channels=4, encoder_block_out_channels=(32, 32, 32, 32),
        decoder_block_out_channels=(32, 32, 32, 32), layers_per_block=(1, 1, 1, 1, 1), act_fn="silu",
        scaling_factor=1,
    ), _video(7)),
    "autoencoder_kl_wan": Spec("AutoencoderKLWan", dict(
        base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1, temperal_downsample=[False, True, True],
    ), _video(9)),
    # transformers
    "dit": Spec("DiTTransformer2DModel", dict(
        in_channels=4, out_channels=8, activation_fn="gelu-approximate", num_attention_heads=2, attention_head_dim=4,
        attention_bias=True, num_layers=1, norm_type="ada_norm_zero", num_embeds_ada_norm=8, patch_size=2,
        sample_size=8,
    ), _dit),
    "pixart": Spec("PixArtTransformer2DModel", dict(
        sample_size=8, num_layers=1, patch_size=2, attention_head_dim=2, num_attention_heads=2, in_channels=4,
        cross_attention_dim=8, out_channels=8, attention_bias=True, activation_fn="gelu-approximate",
        num_embeds_ada_norm=8, norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6,
        use_additional_conditions=False, caption_channels=None,
    ), _pixart),
    "sd3": Spec("SD3Transformer2DModel", dict(_SD3, dual_attention_layers=(), qk_norm=None), _sd3),
    "sd35": Spec("SD3Transformer2DModel", dict(_SD3, dual_attention_layers=(0,), qk_norm="rms_norm"), _sd3,
                 note="SD3.5: a dual-attention layer and RMS query/key norms"),
    "flux": Spec("FluxTransformer2DModel", dict(
        patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16, num_attention_heads=2,
        joint_attention_dim=32, pooled_projection_dim=32, axes_dims_rope=(4, 4, 8),
    ), _flux),
    "flux2": Spec("Flux2Transformer2DModel", dict(
        patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16, num_attention_heads=2,
        joint_attention_dim=32, timestep_guidance_channels=256, axes_dims_rope=(4, 4, 4, 4),
    ), _flux2),
    "chroma": Spec("ChromaTransformer2DModel", dict(
        patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16, num_attention_heads=2,
        joint_attention_dim=32, axes_dims_rope=(4, 4, 8), approximator_hidden_dim=32, approximator_layers=1,
        approximator_num_channels=16,
    ), _chroma, note="the approximator of diffusers' pipeline tests: its default is 260M parameters"),
    "aura_flow": Spec("AuraFlowTransformer2DModel", dict(
        sample_size=32, patch_size=2, in_channels=4, num_mmdit_layers=1, num_single_dit_layers=1,
        attention_head_dim=8, num_attention_heads=4, caption_projection_dim=32, joint_attention_dim=32,
        out_channels=4, pos_embed_max_size=256,
    ), _aura_flow),
    "cogvideox": Spec("CogVideoXTransformer3DModel", _COGVIDEOX, _cogvideox),
    "consisid": Spec("ConsisIDTransformer3DModel", dict(
        _COGVIDEOX, cross_attn_interval=1, is_kps=False, is_train_face=True, cross_attn_dim_head=1,
        cross_attn_num_heads=1, LFE_id_dim=2, LFE_vit_dim=2, LFE_depth=5, LFE_dim_head=8, LFE_num_heads=2,
        LFE_num_id_token=1, LFE_num_querie=1, LFE_output_dim=10, LFE_ff_mult=1, LFE_num_scale=1,
    ), _consisid),
    "cogview3plus": Spec("CogView3PlusTransformer2DModel", dict(
        patch_size=2, in_channels=4, num_layers=2, attention_head_dim=4, num_attention_heads=2, out_channels=4,
        text_embed_dim=8, time_embed_dim=8, condition_dim=2, pos_embed_max_size=8, sample_size=8,
    ), _cogview),
    "cogview4": Spec("CogView4Transformer2DModel", dict(
        patch_size=2, in_channels=4, num_layers=2, attention_head_dim=4, num_attention_heads=4, out_channels=4,
        text_embed_dim=8, time_embed_dim=8, condition_dim=4,
    ), _cogview),
    "allegro": Spec("AllegroTransformer3DModel", dict(
        num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4, num_layers=1,
        cross_attention_dim=16, sample_width=8, sample_height=8, sample_frames=8, caption_channels=8,
    ), _allegro),
    "easyanimate": Spec("EasyAnimateTransformer3DModel", dict(
        attention_head_dim=16, num_attention_heads=2, in_channels=4, mmdit_layers=2, num_layers=2, out_channels=4,
        patch_size=2, sample_height=60, sample_width=90, text_embed_dim=16, time_embed_dim=8,
        time_position_encoding_type="3d_rope", timestep_activation_fn="silu",
    ), _easyanimate),
    "hunyuan_dit": Spec("HunyuanDiT2DModel", dict(
        sample_size=8, patch_size=2, in_channels=4, num_layers=1, attention_head_dim=8, num_attention_heads=2,
        cross_attention_dim=8, cross_attention_dim_t5=8, pooled_projection_dim=4, hidden_size=16, text_len=4,
        text_len_t5=4, activation_fn="gelu-approximate",
    ), _hunyuan_dit),
    "hunyuan_video": Spec("HunyuanVideoTransformer3DModel", dict(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=10, num_layers=1,
        num_single_layers=1, num_refiner_layers=1, patch_size=1, patch_size_t=1, guidance_embeds=True,
        text_embed_dim=16, pooled_projection_dim=8, rope_axes_dim=(2, 4, 4), image_condition_type=None,
    ), _hunyuan_video),
    "latte": Spec("LatteTransformer3DModel", dict(
        sample_size=8, num_layers=2, patch_size=2, attention_head_dim=4, num_attention_heads=2, caption_channels=8,
        in_channels=4, cross_attention_dim=8, out_channels=8, attention_bias=True, activation_fn="gelu-approximate",
        num_embeds_ada_norm=1000, norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6,
    ), _latte),
    "ltx_video": Spec("LTXVideoTransformer3DModel", dict(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=8, cross_attention_dim=16,
        num_layers=1, qk_norm="rms_norm_across_heads", caption_channels=16,
    ), _ltx_video),
    "mochi": Spec("MochiTransformer3DModel", dict(
        patch_size=2, num_attention_heads=2, attention_head_dim=8, num_layers=2, pooled_projection_dim=16,
        in_channels=4, out_channels=None, qk_norm="rms_norm", text_embed_dim=16, time_embed_dim=4,
        activation_fn="swiglu", max_sequence_length=16,
    ), _mochi),
    "sana": Spec("SanaTransformer2DModel", dict(
        patch_size=1, in_channels=4, out_channels=4, num_layers=1, attention_head_dim=4, num_attention_heads=2,
        num_cross_attention_heads=2, cross_attention_head_dim=4, cross_attention_dim=8, caption_channels=8,
        sample_size=32,
    ), _sana),
    "wan": Spec("WanTransformer3DModel", _WAN, _wan),
    "skyreels_v2": Spec("SkyReelsV2Transformer3DModel", _WAN, _wan),
    "qwenimage": Spec("QwenImageTransformer2DModel", dict(
        patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16, num_attention_heads=4,
        joint_attention_dim=16, guidance_embeds=False, axes_dims_rope=(8, 4, 4),
    ), _qwenimage),
    "omnigen": Spec("OmniGenTransformer2DModel", dict(
        hidden_size=16, num_attention_heads=4, num_key_value_heads=4, intermediate_size=32, num_layers=20,
        pad_token_id=0, vocab_size=1000, in_channels=4, time_step_dim=4,
        rope_scaling={"long_factor": [1, 2], "short_factor": [1, 2]},
    ), _omnigen),
    "z_image": Spec("ZImageTransformer2DModel", dict(
        all_patch_size=(2,), all_f_patch_size=(1,), in_channels=16, dim=16, n_layers=1, n_refiner_layers=1,
        n_heads=1, n_kv_heads=2, qk_norm=True, cap_feat_dim=16, rope_theta=256.0, t_scale=1000.0,
        axes_dims=(8, 4, 4), axes_lens=(256, 32, 32),
    ), _z_image),
    "lumina_next": Spec("LuminaNextDiT2DModel", dict(
        sample_size=16, patch_size=2, in_channels=4, hidden_size=24, num_layers=2, num_attention_heads=3,
        num_kv_heads=1, multiple_of=16, ffn_dim_multiplier=None, norm_eps=1e-5, learn_sigma=False, qk_norm=True,
        cross_attention_dim=32, scaling_factor=1.0,
    ), _lumina_next),
    "lumina2": Spec("Lumina2Transformer2DModel", dict(
        sample_size=16, patch_size=2, in_channels=4, hidden_size=24, num_layers=2, num_refiner_layers=1,
        num_attention_heads=3, num_kv_heads=1, multiple_of=2, ffn_dim_multiplier=None, norm_eps=1e-5,
        scaling_factor=1.0, axes_dim_rope=(4, 2, 2), axes_lens=(128, 128, 128), cap_feat_dim=32,
    ), _lumina2),
    "hidream": Spec("HiDreamImageTransformer2DModel", dict(
        patch_size=2, in_channels=4, out_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=8,
        num_attention_heads=4, caption_channels=(8, 4), text_emb_dim=8, num_routed_experts=2,
        num_activated_experts=2, axes_dims_rope=(4, 2, 2), max_resolution=(32, 32), llama_layers=(0, 1),
        force_inference_output=True,
    ), _hidream),
    "cosmos": Spec("CosmosTransformer3DModel", dict(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=12, num_layers=2, mlp_ratio=2,
        text_embed_dim=16, adaln_lora_dim=4, max_size=(4, 32, 32), patch_size=(1, 2, 2), rope_scale=(2.0, 1.0, 1.0),
        concat_padding_mask=True, extra_pos_embed_type="learnable",
    ), _cosmos, requires=("torchvision",)),
    "prior": Spec("PriorTransformer", dict(
        num_attention_heads=2, attention_head_dim=4, num_layers=2, embedding_dim=8, num_embeddings=7,
        additional_embeddings=4,
    ), _prior),
    "transformer_temporal": Spec("TransformerTemporalModel", dict(
        num_attention_heads=8, attention_head_dim=4, in_channels=4, num_layers=1, norm_num_groups=1,
    ), _temporal),
}


def model_types() -> list[str]:
    """Every model type of the diffusers zoo: UNets, then autoencoders, then transformers."""
    return list(MODELS)


def kind(model_type: str) -> str:
    """UNet, autoencoder or transformer: the kind of model ``model_type`` is, for grouping results."""
    class_name = MODELS[model_type].class_name
    if class_name.startswith("UNet"):
        return "UNet"
    if class_name.startswith(("Autoencoder", "VQ")):
        return "autoencoder"
    return "transformer"


def cases(model_type: str) -> list[str]:
    """The class to export for ``model_type``: one, as each type is one configuration."""
    return [MODELS[model_type].class_name]


def build(model_type: str, class_name: str, seed: int = 0) -> Built:
    """A tiny ``class_name`` model of ``model_type`` in eval mode and inputs its eager forward accepts."""
    spec = MODELS[model_type]
    missing = [name for name in spec.requires if importlib.util.find_spec(name) is None]
    if missing:
        raise NotBuilt(f"requires a package: {', '.join(missing)}")
    model_class = getattr(diffusers, class_name, None)
    if model_class is None:
        raise NotBuilt(f"requires a newer diffusers: {diffusers.__version__} has no {class_name}")
    torch.manual_seed(seed)
    try:
        model = model_class(**spec.config).eval()
    except Exception as e:
        raise NotBuilt(f"model init fails on the tiny config: {type(e).__name__}: {_headline(e)}") from e
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


__all__ = ["MODELS", "Spec", "build", "cases", "kind", "model_types"]
