"""Models that take ``int()`` of a value only the data decides, as torchaudio's Conformer and
Emformer do to size their padding masks.  Kept apart from the tests: the export gives this
module's ``int`` the symbolic meaning while it traces."""

from __future__ import annotations

import torch
from torch import nn


def padding_mask(lengths: torch.Tensor, read: str) -> torch.Tensor:
    """True past each sequence's length, as wide as the longest sequence."""
    longest = torch.max(lengths)
    max_length = int(longest.item()) if read == "item" else int(longest)
    return torch.arange(max_length, dtype=lengths.dtype).expand(lengths.shape[0], max_length) >= lengths[:, None]


class MaskedAttention(nn.Module):
    """Self-attention over padded sequences, the mask sized by the longest length: the
    attention checks that the mask is as wide as the input, and raises where it is not."""

    def __init__(self, read: str = "item") -> None:
        super().__init__()
        self.read = read
        self.attention = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        mask = padding_mask(lengths, self.read)
        out, _ = self.attention(x, x, x, key_padding_mask=mask, need_weights=False)
        return out.masked_fill(mask[..., None], 0.0)


class Rescaled(nn.Module):
    """``int()`` of a float the data decides: the number of leading steps kept."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep = int(x.abs().max() * 2)
        return x.cumsum(0)[:keep]
