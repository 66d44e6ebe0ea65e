# Derived from PyTorch's test/export/test_export.py, Copyright (c) 2016- Facebook, Inc. and
# the PyTorch contributors, under the BSD 3-Clause License: see NOTICE at the repository root.
"""Example cases showing the format (ported from test/export/test_export.py in pytorch/pytorch)."""

import torch
from torch.export import Dim

from tests.parity.harness import case


@case("test_export_slice_maxsize", lambda: (torch.rand(10, 3, 4, 4), 0, 0, 2**63 - 1),
      dynamic_shapes=lambda: (({0: Dim("dim")}, None, None, None),),
      more_inputs=lambda: [(torch.rand(6, 3, 4, 4), 0, 0, 2**63 - 1)])
class SliceWithHugeEnd(torch.nn.Module):
    def forward(self, *args):
        return torch.ops.aten.slice.Tensor(*args)


@case("test_export_inline_constraints", lambda: (torch.tensor([3]),), more_inputs=lambda: [(torch.tensor([5]),)])
class FullFromItem(torch.nn.Module):
    def forward(self, x):
        n = x.item()
        torch._check_is_size(n)
        return torch.full((n, 1), 1)
