"""Stack traces name the user's forward frames, formatted like the traceback module."""

import sys
import traceback

import torch

import exporter
from exporter.trace.stacks import user_stack_trace


class Inner(torch.nn.Module):
    def forward(self, x):
        return x.relu()  # the op's own line


class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x) + 1


def test_nodes_point_at_the_users_lines_outermost_first():
    ep = exporter.export(Outer(), (torch.randn(2),))
    relu = next(n for n in ep.graph.nodes if n.target is torch.ops.aten.relu.default)
    lines = relu.meta["stack_trace"].splitlines()
    assert lines[0].startswith(f'File "{__file__}"') and lines[0].endswith("in forward")
    assert lines[1].strip() == "return self.inner(x) + 1"
    assert lines[-1].strip() == "return x.relu()  # the op's own line"


def forward():
    return user_stack_trace(sys._getframe())


def test_the_text_is_the_traceback_modules_without_leading_space():
    text = forward()
    line = forward.__code__.co_firstlineno + 1
    frame = traceback.FrameSummary(__file__, line, "forward")
    assert text == traceback.format_list([frame])[0].strip()


def test_repeated_frames_are_folded():
    def forward(n):  # recursion repeats the same frame
        return user_stack_trace(sys._getframe()) if n == 0 else forward(n - 1)

    text = forward(6)
    assert "[Previous line repeated 4 more times]" in text
