"""A model that takes keyword inputs, as Hugging Face models do; give inputs on the command line:

    python -m exporter examples/keyword_inputs.py:Scorer \
        --example-inputs "f32[4,16] mask=b8[4,16] temperature=0.5"

or with the function below: --example-inputs :make_inputs
"""

import torch
from torch import nn


class Scorer(nn.Module):
    def __init__(self, dim: int = 16):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, features, mask=None, *, temperature: float = 1.0):
        scores = self.proj(features) / temperature
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return {"probs": scores.softmax(-1), "top": scores.argmax(-1)}


def make_inputs():
    features = torch.randn(4, 16)
    mask = torch.rand(4, 16) > 0.2
    mask[:, 0] = True
    return (features,), {"mask": mask, "temperature": 0.5}
