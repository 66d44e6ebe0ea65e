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


def test_a_roomy_stack_call_returns_what_the_function_returns_above_a_large_frame():
    from exporter.trace.stacks import on_roomy_stack

    def callee(a, b):
        return a + b, sys._getframe(1).f_code.co_nlocals

    total, caller_slots = on_roomy_stack(callee, 2, 3)
    assert total == 5
    assert caller_slots >= 8000  # the frame that makes CPython open a large chunk


def _page_faults_of_calls_at_each_depth(call) -> list[int]:
    import resource
    import types

    # A leaf with a 1 KiB frame: at some depth it does not fit the current chunk.
    code = (lambda: None).__code__
    leaf = types.FunctionType(code.replace(co_varnames=tuple(f"v{i}" for i in range(128)), co_nlocals=128), {})

    def hammer(depth):
        if depth:
            return hammer(depth - 1)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(1000):
            leaf()
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    return [call(hammer, depth) for depth in range(400)]


def test_calls_above_the_roomy_frame_do_not_map_a_chunk_each():
    from exporter.trace.stacks import on_roomy_stack

    # Without it, the calls made right at a chunk boundary fault a page each.
    assert max(_page_faults_of_calls_at_each_depth(lambda fn, *args: fn(*args))) >= 900
    assert max(_page_faults_of_calls_at_each_depth(on_roomy_stack)) < 100


def test_a_frame_seen_before_lends_its_callers_and_is_let_go_after_the_trace():
    import sys

    from exporter.trace import stacks

    def forward():  # a kept frame: its callers' part is remembered while it runs
        here = sys._getframe()
        texts = []
        for _ in range(2):  # the second walk stops here, from the memo: the same text
            texts.append(stacks.user_stack_trace(here))
            assert any(entry[0] is here for entry in stacks._CALLERS.values())
        return texts

    first, second = stacks.on_roomy_stack(forward)
    assert first == second and 'in forward' in first
    assert not stacks._CALLERS, "frames must not outlive the trace"
