"""Failing models, at least one per failure category: what exporter says, and what torch.export does.

Each row is a model doing something export cannot express, written the way real models
write it.  For every row:

1. exporter raises the row's class with its category, the message saying what was found;
2. ``error.location`` is the line of this file marked ``# FAILS: <row id>``, or None where
   the message names an input, output, parameter or pass instead of a line;
3. the hint names the remedy;
4. ``torch.export.export(strict=False)`` on the same model fails too (its error matched),
   or it exports, and the difference from exporter's refusal is asserted.

A branch on a tensor's value (``if x.sum() > 0:``) exports by default, captured as
``torch.cond``; the rows of such branches export with ``branches="refuse"``, whose message
they test.  Loops as long as the data says, and branches whose sides cannot be one
program, fail in the default mode too.

Where exporter says something wrong or nothing, the aspect is a strict xfail with the
reason (``Row.wrong``), so the fix shows up as an unexpected pass.  PASS and VERIFICATION
are exporter bugs; their rows reach them the one legitimate way, a pass of the user's own
added to the pipeline.  Category INTERNAL (an exception outside the ExportError family)
has no row: no legitimate route to it was found (tracing, the pass runner and the program
builder each wrap what they raise in an ExportError).

A few rows also go through the command line, which must report the same category and
line.  It is given this module by name (``tests.e2e.test_failure_table:Gate``), so it
reuses the module pytest imported: importing the file a second time would register its
custom operators twice.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Callable
from typing import Any
from unittest import mock

import attrs
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim, ExportedProgram
from torch.testing._internal.two_tensor import TwoTensor

import exporter
from exporter import (
    Category,
    ConstraintError,
    ErrorInfo,
    ExportError,
    InputSpecError,
    PassError,
    TraceError,
    VerificationError,
)
from exporter._pipeline import VERIFY_EACH_PASS, run_passes
from exporter.cli.main import main as cli_main
from exporter.inputs import bind_inputs
from exporter.passes import DEFAULT_PASSES
from exporter.trace import trace

HERE = os.path.abspath(__file__)
with open(HERE) as _source:
    SOURCE = _source.read().splitlines()


def marked_line(row_id: str) -> str:
    """``file:line`` of the one line of this file ending in the row's marker comment."""
    marker = f"# FAILS: {row_id}"
    lines = [n for n, text in enumerate(SOURCE, 1) if text.rstrip().endswith(marker)]
    assert len(lines) == 1, f"{marker!r} marks {len(lines)} lines"
    return f"{HERE}:{lines[0]}"


# -- models --------------------------------------------------------------------------------


class Gate(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # FAILS: gate
            return x.relu()
        return -x


class MaskedMeanPool(nn.Module):
    """Pooling that skips the masking work when nothing is padded."""

    def forward(self, hidden, padding_mask):
        if not padding_mask.any():  # FAILS: padding
            return hidden.mean(dim=1)
        keep = (~padding_mask).unsqueeze(-1).to(hidden.dtype)
        return (hidden * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1)


class GlobalLocalAttention(nn.Module):
    """Longformer's self-attention: a global-attention path taken when any token asks for it."""

    def forward(self, hidden, attention_mask):
        is_index_global_attn = attention_mask > 0
        is_global_attn = is_index_global_attn.flatten().any().item()
        scores = hidden @ hidden.transpose(-1, -2)
        if is_global_attn:  # FAILS: longformer
            scores = scores + is_index_global_attn[:, None, :].to(scores.dtype)
        return scores.softmax(dim=-1) @ hidden


class IterativeRefiner(nn.Module):
    """Refines its input a number of times given as a tensor."""

    def __init__(self):
        super().__init__()
        self.step = nn.Linear(8, 8)

    def forward(self, x, num_steps):
        for _ in range(num_steps):  # FAILS: item_loop
            x = x + torch.tanh(self.step(x))
        return x


class AdaptiveDepth(nn.Module):
    """Adaptive computation time: one more refinement step per token the halting unit has not
    stopped."""

    def __init__(self):
        super().__init__()
        self.step = nn.Linear(8, 8)
        self.halt = nn.Linear(8, 1)

    def forward(self, x):
        running = self.halt(x).sigmoid() < 0.5
        for _ in range(running.sum()):  # FAILS: count_loop
            x = x + torch.tanh(self.step(x))
        return x


class OverflowRouter(nn.Module):
    """A mixture-of-experts router that returns its overflow penalty only when an expert is over
    capacity."""

    capacity = 2.0

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(8, 4)

    def forward(self, x):
        load = self.gate(x).softmax(dim=-1).sum(dim=0)
        if load.max() > self.capacity:  # FAILS: branch_structure
            return x, load.max() - self.capacity
        return x


class SparseMoE(nn.Module):
    """The transformers Mixtral-style MoE block: a loop over the experts that got tokens."""

    def __init__(self, hidden=8, num_experts=4, top_k=2):
        super().__init__()
        self.num_experts, self.top_k = num_experts, top_k
        self.gate = nn.Linear(hidden, num_experts, bias=False)
        self.experts = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(num_experts))

    def forward(self, hidden_states):
        routing_weights = F.softmax(self.gate(hidden_states), dim=-1)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        final = torch.zeros_like(hidden_states)
        expert_mask = F.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            expert_idx = expert_idx[0]
            idx, top_x = torch.where(expert_mask[expert_idx])
            current = self.experts[expert_idx](hidden_states[top_x]) * routing_weights[top_x, idx, None]  # FAILS: moe
            final.index_add_(0, top_x, current)
        return final


class LengthChecked(nn.Module):
    """Validates sequence lengths given as a tensor before embedding positions."""

    max_positions = 16

    def __init__(self):
        super().__init__()
        self.positions = nn.Embedding(self.max_positions, 8)

    def forward(self, hidden, lengths):
        if max(lengths.tolist()) > self.max_positions:  # FAILS: tolist
            raise ValueError("a sequence is longer than the position table")
        return hidden + self.positions(torch.arange(hidden.shape[1]))


class PackedAttention(nn.Module):
    """Lumina-style packing: the attention mask is needed only when the rows differ in length."""

    def forward(self, hidden, padding_mask):
        lengths = padding_mask.sum(dim=1).tolist()
        use_mask = len(set(lengths)) > 1  # FAILS: hash
        scores = hidden @ hidden.transpose(-1, -2)
        if use_mask:
            scores = scores.masked_fill(~padding_mask[:, None, :], float("-inf"))
        return scores.softmax(dim=-1) @ hidden


class LabelSmoothing(nn.Module):
    """One-hot targets without num_classes: the class count is read from the labels."""

    def forward(self, logits, labels):
        targets = F.one_hot(labels).to(logits.dtype)  # FAILS: one_hot
        return -(targets * 0.9 + 0.025) @ logits.log_softmax(dim=-1).T


@torch.library.custom_op("failure_table::dequantize", mutates_args=())
def dequantize(q: torch.Tensor, scale: float) -> torch.Tensor:
    """An int8 -> float kernel written for CPU, with no fake kernel registered."""
    return q.float() * scale


class Int8Linear(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("q", torch.randint(-8, 8, (4, 8), dtype=torch.int8))

    def forward(self, x):
        weight = torch.ops.failure_table.dequantize(self.q, 0.1)  # FAILS: custom_op
        return x @ weight.T


# A kernel registered the pre-custom_op way: a schema and a CPU implementation, no Meta one.
_LIBRARY = torch.library.Library("failure_table_lib", "DEF")
_LIBRARY.define("rms_norm(Tensor x, float eps) -> Tensor")
_LIBRARY.impl("rms_norm", lambda x, eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), "CPU")


class FusedNorm(nn.Module):
    def forward(self, x):
        return torch.ops.failure_table_lib.rms_norm(x, 1e-6) * 2  # FAILS: library_op


class DebugPrint(nn.Module):
    def forward(self, x):
        torch.ops.aten._print("forward called")  # FAILS: effectful_op
        return x + 1


class TopScoring(nn.Module):
    """Post-processing written with NumPy: keep the three best-scoring boxes."""

    def forward(self, boxes, scores):
        order = np.argsort(-scores.numpy())[:3]  # FAILS: numpy
        return boxes[torch.from_numpy(order)]


class RoutingLogged(nn.Module):
    """Logs its routing statistics as JSON from inside forward()."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(8, 4)
        self.log = []

    def forward(self, x):
        probs = self.gate(x).softmax(dim=-1)
        self.log.append(json.dumps(probs.mean(dim=0).tolist()))  # FAILS: json
        return probs


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 4)

    def forward(self, features):
        return self.head(features)  # FAILS: wrong_shape


class CheckedClassifier(Classifier):
    def forward(self, features):
        if features.shape[-1] != self.head.in_features:
            raise ValueError(f"expected {self.head.in_features} features")  # FAILS: raises
        return self.head(features)


class ScaleConfig:
    def __init__(self, scale: float):
        self.scale = scale


class Scaled(nn.Module):
    def forward(self, x, config):
        return x * config.scale


class Int8Weight(torch.Tensor):
    """A weight-only int8 tensor with its own __torch_dispatch__ that does not say what it holds
    (no __tensor_flatten__), as hand-written quantization subclasses often are."""

    @staticmethod
    def __new__(cls, data, scale):
        return torch.Tensor._make_wrapper_subclass(cls, data.shape, dtype=torch.float32)

    def __init__(self, data, scale):
        self.int_data, self.scale = data, scale

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def dequantized(t):
            return t.int_data.float() * t.scale

        args, kwargs = torch.utils._pytree.tree_map_only(Int8Weight, dequantized, (args, kwargs or {}))
        return func(*args, **kwargs)


class QuantizedLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("weight", Int8Weight(torch.randint(-8, 8, (4, 8), dtype=torch.int8), 0.1))

    def forward(self, x):
        return F.linear(x, self.weight)


class GrowingCache(nn.Module):
    """A KV cache kept in a buffer that grows by concatenation."""

    def __init__(self):
        super().__init__()
        self.register_buffer("keys", torch.zeros(2, 8))

    def forward(self, k):
        self.keys = torch.cat([self.keys, k])  # FAILS: kv_cache
        return self.keys.sum(dim=0)


class AddsBatchDim(nn.Module):
    def forward(self, x):
        if x.dim() == 2:
            x.unsqueeze_(0)  # FAILS: unsqueeze_
        return x * 2


class StepCounter(nn.Module):
    """A step counter kept in a plain tensor attribute instead of a buffer."""

    def __init__(self):
        super().__init__()
        self.steps = torch.zeros(())

    def forward(self, x):
        self.steps += 1  # FAILS: counter
        return x * self.steps


class DetachedTie(nn.Module):
    """Output weights tied to the embedding with .detach(): a tensor attribute sharing its memory."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.out_weight = self.embed.weight.detach()

    def forward(self, ids):
        return F.linear(self.embed(ids), self.out_weight)  # FAILS: detached_tie


class Detections:
    def __init__(self, boxes, scores):
        self.boxes, self.scores = boxes, scores


class Detector(nn.Module):
    def forward(self, boxes, scores):
        return Detections(boxes * 2, scores.sigmoid())


class PatchEmbed(nn.Module):
    """A ViT-style learned position embedding of fixed length."""

    def __init__(self):
        super().__init__()
        self.pos_embed = nn.Parameter(torch.zeros(1, 16, 8))

    def forward(self, x):
        return x + self.pos_embed  # FAILS: specialized


class LearnedPositions(nn.Module):
    """GPT-2-style position table of 16 rows, sliced to the sequence length."""

    def __init__(self):
        super().__init__()
        self.register_buffer("wpe", torch.randn(16, 8))

    def forward(self, x):
        return x + self.wpe[: x.shape[1]]  # FAILS: range


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 8)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


# -- a pass pipeline of the user's own ----------------------------------------------------


def fuse_linear_relu(state) -> bool:
    """A user's fusion pass with a bug: it looks up the next node by a name that is not there."""
    names = {node.name: node for node in state.gm.graph.nodes}
    for node in state.gm.graph.nodes:
        if node.target is torch.ops.aten.linear.default:
            names[node.name + "_relu"].replace_all_uses_with(node)
    return True


def relu_in_place(state) -> bool:
    """A user's memory-saving pass: relu becomes relu_, which export IR does not allow."""
    for node in state.gm.graph.nodes:
        if node.target is torch.ops.aten.relu.default:
            node.target = torch.ops.aten.relu_.default
    return True


def export_with_pass(extra_pass: Callable, *, verify_each: bool = False) -> Callable:
    """Trace, then run the default passes followed by ``extra_pass``."""

    def run(model, args, dynamic_shapes):
        state = trace(model, bind_inputs(model, args, None))
        with mock.patch.dict(os.environ, {VERIFY_EACH_PASS: "1" if verify_each else "0"}):
            run_passes(state, [*DEFAULT_PASSES, extra_pass])

    return run


def export(model, args, dynamic_shapes):
    return exporter.export(model, args, dynamic_shapes=dynamic_shapes)


def export_refusing_branches(model, args, dynamic_shapes):
    """Export failing at a branch on a tensor's value rather than capturing it as torch.cond."""
    return exporter.export(model, args, dynamic_shapes=dynamic_shapes, branches="refuse")


# -- what torch.export does with the same model ---------------------------------------------


@attrs.frozen
class Refuses:
    """torch.export.export(strict=False) fails too, with a message matching ``match``."""

    match: str


@attrs.frozen
class Accepts:
    """torch.export.export(strict=False) exports; ``check`` asserts what its program does
    that makes the difference."""

    difference: str
    check: Callable[[ExportedProgram, nn.Module, tuple], None]
    """Called with the program, the model as torch.export left it, and fresh example inputs."""


def runs_like_eager(program, model, args):
    torch.testing.assert_close(program.module()(*args), model(*args))


def fails_to_run(error: type[BaseException], match: str) -> Callable:
    def check(program, model, args):
        with pytest.raises(error, match=match):
            program.module()(*args)

    return check


def cannot_be_lowered(match: str) -> Callable:
    def check(program, model, args):
        with pytest.raises(Exception, match=match):
            program.run_decompositions({})

    return check


def threads_an_effect_token(program, model, args):
    lowered = program.run_decompositions({})
    assert any(n.target is torch.ops.higher_order.with_effects for n in lowered.graph.nodes)


def goes_stale_after_save_and_load(program, model, args):
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer).module()
    with torch.no_grad():
        loaded.embed.weight.add_(1)
        model.embed.weight.add_(1)
    assert not torch.allclose(loaded(*args), model(*args))


def keeps_the_subclass_input(program, model, args):
    out = program.module()(*args)
    assert isinstance(out, TwoTensor)
    torch.testing.assert_close(out.a, model(*args).a)


def keeps_the_opaque_buffer(program, model, args):
    assert isinstance(program.state_dict["weight"], Int8Weight)
    runs_like_eager(program, model, args)


# -- the table -----------------------------------------------------------------------------


@attrs.frozen
class Row:
    id: str
    build: Callable[[], nn.Module]
    args: Callable[[], tuple]
    error: type[ExportError]
    category: Category
    match: str
    """A regex the message must match: what was found."""
    hint: tuple[str, ...]
    """Words of the remedy the hint must contain."""
    oracle: Refuses | Accepts
    at_line: bool = True
    """Whether the location is the marked line; otherwise the message names the input,
    output, state or pass at fault, and the location is None."""
    dynamic_shapes: Callable[[], Any] | None = None
    run: Callable = export
    wrong: dict[str, str] = attrs.field(factory=dict)
    """Aspect (one of ``ASPECTS``, a test below) -> what exporter says wrongly there."""

    def make(self) -> tuple[nn.Module, tuple]:
        """A fresh model and its example inputs, the same on every call."""
        torch.manual_seed(0)
        return self.build(), self.args()


ROWS = [
    # data-dependent control flow
    Row("gate", Gate, lambda: (torch.randn(4, 8),),
        TraceError, Category.DATA_DEPENDENT_CONTROL_FLOW, r"needs the value of a tensor .*`if x\.sum\(\) > 0:",
        ("torch.cond", "torch.where", "torch._check"), Refuses("Could not guard on data-dependent expression"),
        run=export_refusing_branches),
    Row("padding", MaskedMeanPool, lambda: (torch.randn(2, 5, 8), torch.zeros(2, 5, dtype=torch.bool)),
        TraceError, Category.DATA_DEPENDENT_CONTROL_FLOW, r"`if not padding_mask\.any\(\):",
        ("torch.cond", "torch.where"), Refuses("Could not guard on data-dependent expression"),
        run=export_refusing_branches),
    Row("longformer", GlobalLocalAttention,
        lambda: (torch.randn(2, 5, 8), torch.randint(0, 2, (2, 5))),
        TraceError, Category.DATA_DEPENDENT_CONTROL_FLOW, r"`if is_global_attn:",
        ("torch.cond", "torch.where"), Refuses("Could not guard on data-dependent expression"),
        run=export_refusing_branches),
    Row("count_loop", AdaptiveDepth, lambda: (torch.randn(4, 8),),
        TraceError, Category.DATA_DEPENDENT_CONTROL_FLOW, r"needs the value of a tensor .*`for _ in range\(running\.sum\(\)\):",
        ("fixed number of times", "Python int"),
        Refuses("Could not extract specialized integer from data-dependent expression")),
    Row("item_loop", IterativeRefiner, lambda: (torch.randn(2, 8), torch.tensor(3)),
        TraceError, Category.DATA_DEPENDENT_CONTROL_FLOW, r"`for _ in range\(num_steps\):",
        ("fixed number of times", "Python int"),
        Refuses("Could not extract specialized integer from data-dependent expression")),
    Row("moe", SparseMoE, lambda: (torch.randn(6, 8),),
        TraceError, Category.DATA_DEPENDENT_CONTROL_FLOW, r"picks a submodule by a tensor's value .*`current = self\.experts\[expert_idx\]",
        ("stacked in one tensor", "experts_implementation"), Refuses("Could not guard on data-dependent expression")),
    Row("hash", PackedAttention, lambda: (torch.randn(2, 5, 8), torch.ones(2, 5, dtype=torch.bool)),
        TraceError, Category.DATA_DEPENDENT_CONTROL_FLOW, r"hashes a size computed from tensor values .*`use_mask = len\(set",
        ("(lengths != lengths[0]).any()", "draft=True"), Refuses("unhashable type: non-nested SymInt")),
    Row("tolist", LengthChecked, lambda: (torch.randn(2, 5, 8), torch.tensor([5, 3])),
        TraceError, Category.DATA_DEPENDENT_CONTROL_FLOW, r"`if max\(lengths\.tolist\(\)\) > self\.max_positions:",
        ("torch._check",), Refuses("Could not guard on data-dependent expression"), run=export_refusing_branches),
    # a branch on a value whose two sides cannot be one torch.cond
    Row("branch_structure", OverflowRouter, lambda: (torch.randn(6, 8),),
        TraceError, Category.BRANCH_CAPTURE,
        r"returns different structures on the two sides of a branch on a tensor's value "
        r"\(`if load\.max\(\) > self\.capacity:.*`\): (a tuple of 2 on one, one value|one value on one, a tuple of 2) on the other",
        ("same structure", "branches='draft'"), Refuses("Could not guard on data-dependent expression")),
    # data-dependent output shape
    Row("one_hot", LabelSmoothing, lambda: (torch.randn(4, 3), torch.tensor([0, 2, 1, 2])),
        TraceError, Category.DATA_DEPENDENT_OUTPUT_SHAPE, r"one_hot",
        ("num_classes",), Refuses("Could not extract specialized integer from data-dependent expression")),
    # unsupported operator
    Row("custom_op", Int8Linear, lambda: (torch.randn(2, 8),),
        TraceError, Category.UNSUPPORTED_OPERATOR, r"no fake impl registered for .*failure_table::dequantize",
        ("register_fake",), Refuses("no fake impl registered")),
    Row("library_op", FusedNorm, lambda: (torch.randn(2, 8),),
        TraceError, Category.UNSUPPORTED_OPERATOR, r"failure_table_lib\.rms_norm\.default has no fake-tensor",
        ("register_fake",), Refuses("failure_table_lib.rms_norm.default")),
    Row("effectful_op", DebugPrint, lambda: (torch.randn(2, 8),),
        TraceError, Category.UNSUPPORTED_OPERATOR, r"side-effectful operator \(aten\._print\.default\)",
        ("out of forward()",),
        Accepts("torch.export threads an effect token through the program", threads_an_effect_token)),
    # a tensor's values handed to NumPy
    Row("numpy", TopScoring, lambda: (torch.randn(5, 4), torch.randn(5)),
        TraceError, Category.DATA_LEAVES_GRAPH, r"values out of the graph with \.numpy\(\) \(`order = np\.argsort",
        ("torch ops", "draft=True"), Refuses(r"\.numpy\(\) is not supported")),
    # the model raised under fake tensors, though it runs eagerly
    Row("json", RoutingLogged, lambda: (torch.randn(3, 8),),
        TraceError, Category.MODEL_ERROR, r"raised TypeError while running on fake tensors .*SymFloat is not JSON",
        (".tolist()", "runs eagerly"), Refuses("SymFloat is not JSON serializable")),
    # the inputs (or the model) are wrong: it fails eagerly too, or they do not fit forward()
    Row("wrong_shape", Classifier, lambda: (torch.randn(4, 8),),
        InputSpecError, Category.INPUT, r"fails on the example inputs even when run eagerly.*4x8 and 16x4",
        ("shapes",), Refuses("same reduction dim|cannot be multiplied")),
    Row("wrong_count", Classifier, lambda: (torch.randn(4, 16), torch.randn(4, 16)),
        InputSpecError, Category.INPUT, r"do not fit Classifier\.forward\(features\): too many positional",
        ("one example value per forward() argument",), Refuses("too many positional arguments"), at_line=False),
    Row("raises", CheckedClassifier, lambda: (torch.randn(4, 8),),
        InputSpecError, Category.INPUT, r"even when run eagerly.*ValueError: expected 16 features",
        ("example inputs",), Refuses("expected 16 features")),
    Row("object_input", Scaled, lambda: (torch.randn(2, 8), ScaleConfig(0.5)),
        InputSpecError, Category.INPUT, r"args\[1\] is a .*ScaleConfig",
        ("inputs of their own",), Refuses("Unsupported input type"), at_line=False),
    # tensor subclasses
    Row("subclass_input", Classifier, lambda: (TwoTensor(torch.randn(2, 16), torch.randn(2, 16)),),
        TraceError, Category.UNSUPPORTED_TENSOR_SUBCLASS, r"args\[0\] is a tensor subclass TwoTensor",
        ("plain torch.Tensor",),
        Accepts("torch.export takes the subclass input and its program returns a TwoTensor", keeps_the_subclass_input),
        at_line=False),
    Row("opaque_buffer", QuantizedLinear, lambda: (torch.randn(2, 8),),
        TraceError, Category.UNSUPPORTED_TENSOR_SUBCLASS, r"buffer 'weight' is a Int8Weight.*no __tensor_flatten__",
        ("__tensor_flatten__",),
        Accepts("torch.export keeps the subclass buffer opaque: it runs only with the Python class present",
                keeps_the_opaque_buffer),
        at_line=False),
    # mutations a program cannot express
    Row("kv_cache", GrowingCache, lambda: (torch.randn(4, 8),),
        TraceError, Category.UNSUPPORTED_MUTATION, r"replaced buffer 'keys' \(\(2, 8\) .*\) with \(6, 8\)",
        ("shape",),
        Accepts("torch.export writes the grown cache back into the buffer, so its program fails",
                fails_to_run(RuntimeError, "must match the size"))),
    Row("unsqueeze_", AddsBatchDim, lambda: (torch.randn(4, 8),),
        TraceError, Category.UNSUPPORTED_MUTATION, r"changed the shape, strides or storage of args\[0\] in place",
        ("out-of-place",),
        Refuses("list index out of range")),  # torch's guard code indexes the input's old dims
    Row("counter", StepCounter, lambda: (torch.randn(2, 8),),
        TraceError, Category.UNSUPPORTED_MUTATION, r"changes the tensor attribute self\.steps in place",
        ("register_buffer",),
        Accepts("torch.export keeps add_ on the constant (after bumping the model's counter while "
                "exporting); the functional program cannot be had", cannot_be_lowered("Constant steps is mutated"))),
    # constants
    Row("detached_tie", DetachedTie, lambda: (torch.tensor([[1, 2, 3]]),),
        TraceError, Category.CONSTANT, r"constant tensor 'out_weight' shares memory with 'embed\.weight'",
        ("as a buffer", "inside forward()"),
        Accepts("torch.export lifts it as a constant sharing the parameter's memory until saved: "
                "loaded, it is a stale copy", goes_stale_after_save_and_load)),
    # outputs a program cannot return
    Row("returns_object", Detector, lambda: (torch.randn(3, 4), torch.randn(3)),
        TraceError, Category.TRACE, r"returns a .*Detections at the output, which is not a pytree container",
        ("register_container",), Refuses("not a known type"), at_line=False),
    # the model does not fit dynamic_shapes
    Row("specialized", PatchEmbed, lambda: (torch.randn(2, 16, 8),),
        ConstraintError, Category.DYNAMIC_SHAPE_CONSTRAINT,
        r"(?s)x\.shape\[1\] is declared dynamic .* only works when it is 16.*fix: \"x\": \{1: None\}",
        ("dynamic_shapes",), Refuses(r"Constraints violated \(seq\)"),
        dynamic_shapes=lambda: {"x": {1: Dim("seq")}}),
    Row("range", LearnedPositions, lambda: (torch.randn(2, 8, 8),),
        ConstraintError, Category.DYNAMIC_SHAPE_CONSTRAINT,
        r"(?s)needs x\.shape\[1\] <= 16.*fix: seq = Dim\(\"seq\", max=16\)",
        ("dynamic_shapes", "NAME:MIN..MAX"), Refuses(r"Constraints violated \(seq\)"),
        dynamic_shapes=lambda: {"x": {1: Dim("seq", max=32)}}),
    # exporter bugs, reached through a pass pipeline of the user's own
    Row("pass", MLP, lambda: (torch.randn(2, 8),),
        PassError, Category.PASS, r"pass fuse_linear_relu failed \(after remove_state_copies, .*normalize_module_stack\)",
        ("bug in exporter",), Accepts("the model exports: the added pass fails", runs_like_eager),
        at_line=False, run=export_with_pass(fuse_linear_relu)),
    Row("verification", MLP, lambda: (torch.randn(2, 8),),
        VerificationError, Category.VERIFICATION, r"after pass relu_in_place: node relu calls aten\.relu_\.default",
        ("bug in exporter",), Accepts("the model exports: the added pass breaks the IR", runs_like_eager),
        at_line=False, run=export_with_pass(relu_in_place, verify_each=True)),
]

ROWS_BY_ID = {row.id: row for row in ROWS}


ASPECTS = ("message", "location", "hint", "oracle")


# Categories of a worker process, not of an export: check's isolated workers report a model
# whose process crashed, ran out of time or of memory (tests/exporter/cli/test_check_isolation.py).
WORKER_CATEGORIES = {Category.CRASH, Category.TIMEOUT, Category.MEMORY}
# Categories of an artifact made from an exported program, not of the export: lowering to
# ExecuTorch has its own failing model (tests/exporter/test_executorch.py, -m executorch).
ARTIFACT_CATEGORIES = {Category.LOWERING}


def test_the_table_covers_every_category_but_internal():
    assert {row.category for row in ROWS} == set(Category) - {Category.INTERNAL} - WORKER_CATEGORIES - ARTIFACT_CATEGORIES
    assert len(ROWS) >= 12 and len(ROWS_BY_ID) == len(ROWS)
    assert all(set(row.wrong) <= set(ASPECTS) for row in ROWS)


def _rows(aspect: str) -> list:
    return [
        pytest.param(row, id=row.id, marks=pytest.mark.xfail(strict=True, reason=row.wrong[aspect]))
        if aspect in row.wrong
        else pytest.param(row, id=row.id)
        for row in ROWS
    ]


_FAILURES: dict[str, BaseException | None] = {}


def failure(row: Row) -> BaseException | None:
    """What exporter raised for the row (None if it exported), computed once per process."""
    if row.id not in _FAILURES:
        dynamic_shapes = row.dynamic_shapes() if row.dynamic_shapes else None
        try:
            row.run(*row.make(), dynamic_shapes)
            _FAILURES[row.id] = None
        except Exception as e:  # noqa: BLE001 - the failure is what the tests look at
            _FAILURES[row.id] = e
    return _FAILURES[row.id]


@pytest.mark.parametrize("row", _rows("message"))
def test_category_and_message(row):
    error = failure(row)
    with pytest.raises(row.error, match=row.match) as info:
        if error is not None:
            raise error
    assert ErrorInfo.from_exception(info.value).category is row.category


@pytest.mark.parametrize("row", _rows("location"))
def test_location_is_the_users_line(row):
    error = failure(row)
    assert isinstance(error, ExportError), error
    assert error.location == (marked_line(row.id) if row.at_line else None)


@pytest.mark.parametrize("row", _rows("hint"))
def test_hint_names_the_remedy(row):
    error = failure(row)
    assert isinstance(error, ExportError), error
    missing = [word for word in row.hint if word not in (error.hint or "")]
    assert not missing, f"hint {error.hint!r} lacks {missing}"


@pytest.mark.parametrize("row", _rows("oracle"))
def test_torch_export_on_the_same_model(row):
    assert isinstance(failure(row), ExportError)
    model, args = row.make()
    dynamic_shapes = row.dynamic_shapes() if row.dynamic_shapes else None
    if isinstance(row.oracle, Refuses):
        with pytest.raises(Exception, match=row.oracle.match):
            torch.export.export(model, args, dynamic_shapes=dynamic_shapes, strict=False)
        return
    program = torch.export.export(model, args, dynamic_shapes=dynamic_shapes, strict=False)
    row.oracle.check(program, model, row.make()[1])


# -- the command line says the same ---------------------------------------------------------


@pytest.mark.parametrize(
    "row_id, flags, exit_code, match",
    [
        ("count_loop", ["--example-inputs", "f32[4,8]"], 1, None),
        ("gate", ["--example-inputs", "f32[4,8]", "--branches", "refuse"], 1, None),
        ("wrong_shape", ["--example-inputs", "f32[4,8]"], 2, None),
        # the same violation, its fix written as the flag to change (not a dynamic_shapes entry)
        ("range", ["--example-inputs", "f32[2,8,8]", "--dynamic", "x.1=seq:..32"], 1,
         r"(?s)needs x\.shape\[1\] <= 16.*fix: --dynamic x\.1=seq:\.\.16  \(for --dynamic x\.1=seq:\.\.32\)"),
    ],
)
def test_the_command_line_reports_the_same_category_and_line(row_id, flags, exit_code, match, tmp_path, capsys):
    row = ROWS_BY_ID[row_id]
    report = tmp_path / "report.json"
    model = f"{__name__}:{row.build.__name__}"
    argv = [model, *flags, "--json", str(report), "-o", str(tmp_path / "out.pt2"), "-q"]
    assert cli_main(argv) == exit_code
    error = json.loads(report.read_text())["error"]
    assert (error["category"], error["location"]) == (row.category.value, marked_line(row_id))
    assert re.search(match or row.match, error["message"]), error["message"]
    assert f"[{row.category.value}]" in capsys.readouterr().out
    assert not (tmp_path / "out.pt2").exists()
