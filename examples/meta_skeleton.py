"""A model built on the meta device: shapes and code, no weights.

Checks that a large model exports (and that its graph has not drifted) without the
memory or the weights: `python -m exporter examples/meta_skeleton.py:Skeleton`.
"""

import torch


class Block(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Skeleton(torch.nn.Module):
    """A deep, wide stack: 32 blocks of width 4096, about 4.3 billion parameters, and no memory."""

    def __init__(self, width: int = 4096, depth: int = 32):
        super().__init__()
        with torch.device("meta"):
            self.blocks = torch.nn.Sequential(*(Block(width) for _ in range(depth)))
        self.width = width

    def forward(self, x):
        return self.blocks(x)

    def example_inputs(self):
        return (torch.empty(2, 16, self.width, device="meta"),)
