"""diffusers' video VAE with a dynamic batch of frames.

``AutoencoderKLTemporalDecoder`` takes ``videos * num_frames`` images as one batch and, in
every temporal layer of its decoder, views that batch as ``(videos, num_frames)`` and back.
Its dynamic export keeps the batch's expression as the model writes it (a view's sizes are
the ones asked for) and matches eager on other numbers of videos.
"""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import exporter

diffusers = pytest.importorskip("diffusers")


def _vae() -> torch.nn.Module:
    torch.manual_seed(0)
    return diffusers.AutoencoderKLTemporalDecoder(
        block_out_channels=[32, 64], in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 2,
        latent_channels=4, layers_per_block=2,
    ).eval()


@pytest.mark.slow
def test_the_video_vae_exports_with_a_dynamic_batch_of_frames_and_matches_eager():
    model = _vae()
    spec = {"sample": {0: Dim.AUTO}, "num_frames": None}
    ep = exporter.export(model, (), {"sample": torch.randn(6, 3, 32, 32), "num_frames": 3}, dynamic_shapes=spec)
    (batch,) = ep.range_constraints.values()
    # two videos or more (the trace took the batch for more than one video of 3 frames), and
    # under 64 images, where the decoder's upsampler takes another branch
    assert (batch.lower, batch.upper) == (6, 63)
    for videos in (3, 5):
        sample = torch.randn(videos * 3, 3, 32, 32)
        with torch.no_grad():
            expected = model(sample=sample, num_frames=3).sample
        torch.testing.assert_close(ep.module()(sample=sample, num_frames=3).sample, expected)
