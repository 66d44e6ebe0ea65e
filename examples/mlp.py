"""A small MLP: the model file the README's first command exports."""

import torch


class MLP(torch.nn.Module):
    def __init__(self, d_in: int = 16, hidden: int = 32, d_out: int = 4):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(d_in, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, d_out),
        )

    def forward(self, x):
        return self.net(x).softmax(dim=-1)


def example_inputs():
    return (torch.randn(8, 16),)
