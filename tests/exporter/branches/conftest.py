"""Every branch test starts from the same random state: a model's weights decide which side
an input takes, and a test asserts that its inputs take every side."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)
