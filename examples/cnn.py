"""A small CNN with BatchNorm; its example inputs are a static method on the class."""

import torch
from torch import nn


class SmallCNN(nn.Module):
    def __init__(self, channels: int = 8, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1),
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(channels, 2 * channels, 3, padding=1),
            nn.BatchNorm2d(2 * channels),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(2 * channels, classes)

    def forward(self, images):
        return self.head(self.features(images).flatten(1))

    @staticmethod
    def example_inputs():
        return (torch.randn(2, 3, 32, 32),)
