"""One small failing model per failure category, for the "Reading failures" page.

The page shows each model and the message exporter gives for it, made when the site is
built (``hooks/failure_messages.py``), so the messages on the page are the ones the code
gives; the build fails when an example does not fail with its category.

An example is a model file (``model.py``) and how it is exported: from Python (the code
after the model, which calls ``exporter.export``), or with ``python -m exporter check``
for the categories of check's worker processes.  An example that needs an optional package
(``needs``) keeps the message it gave where the package was installed (``stored``): a build
without the package shows that message and says so, and ``tests/test_docs_failures.py``
holds it equal to what the example gives where the package is installed.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import textwrap

import attrs

__all__ = ["EXAMPLES", "PANEL_WIDTH", "Example", "available", "run_all"]

PANEL_WIDTH = 80
"""The terminal width ``check``'s panels are drawn at: what a page's code block shows whole."""


@attrs.frozen
class Example:
    category: str
    """``Category.value``."""
    what: str
    """When it happens, and what to do, in a sentence or two."""
    model: str
    """``model.py``: the model and, for a Python example, the lines that export it."""
    check: str = ""
    """For check's worker categories: the arguments of ``python -m exporter check``."""
    needs: str = ""
    """The optional package the example needs, as imported (``executorch``); empty for none."""
    stored: str = ""
    """For an example that ``needs`` a package: its message, as made where the package is installed."""


def available(example: Example) -> bool:
    """Whether the package the example needs (if any) is installed here."""
    return not example.needs or importlib.util.find_spec(example.needs) is not None


# What the lowering example gives where ExecuTorch is installed (tests/test_docs_failures.py
# holds it equal to a fresh run there).
_STORED_LOWERING = """\
LoweringError: lowering to ExecuTorch (xnnpack) failed at aten._linalg_svd.default: Operator torch._ops.aten._linalg_svd.default is not in Core ATen opset (https://pytorch.org/docs/stable/torch.compiler_ir.html#core-aten-ir)."
  at model.py:5
  hint: ExecuTorch has no kernel for aten._linalg_svd.default: replace the call on that line with ops in core ATen, or add a kernel for it to your ExecuTorch runtime"""

EXAMPLES = [
    Example(
        "input",
        "The example inputs do not fit `forward()`, or the model fails on them even when run "
        "eagerly: the inputs (or the model) are wrong, not the export. Exit code 2 on the command line.",
        """
        import torch, exporter

        class Classifier(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.head = torch.nn.Linear(16, 4)

            def forward(self, features):
                return self.head(features)

        exporter.export(Classifier(), (torch.randn(4, 8),))
        """,
    ),
    Example(
        "trace",
        "Tracing met something a program cannot hold that has no category of its own, such as an "
        "output that is not a tensor, a number or a container of them.",
        """
        import torch, exporter

        class Detections:
            def __init__(self, boxes, scores):
                self.boxes, self.scores = boxes, scores

        class Detector(torch.nn.Module):
            def forward(self, boxes, scores):
                return Detections(boxes * 2, scores.sigmoid())

        exporter.export(Detector(), (torch.randn(3, 4), torch.randn(3)))
        """,
    ),
    Example(
        "model error",
        "The model raised while running on fake tensors, though it runs eagerly: it needs real "
        "data where export has only shapes (`.tolist()` into plain Python code, printing a tensor).",
        """
        import json
        import torch, exporter

        class Router(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.gate = torch.nn.Linear(8, 4)
                self.log = []

            def forward(self, x):
                probs = self.gate(x).softmax(dim=-1)
                self.log.append(json.dumps(probs.mean(dim=0).tolist()))
                return probs

        exporter.export(Router(), (torch.randn(3, 8),))
        """,
    ),
    Example(
        "data-dependent control flow",
        "A loop that runs as many times as a tensor's value says, where Python needs the count "
        "itself (here `range` of a tensor), or a size read from a tensor and hashed "
        "(`set(lengths.tolist())`, a dict key). `range(len(boxes))` of a selection and "
        "`range(int(count.item()))` are captured loops instead (see "
        "[Branches on tensor values](branches.md#loops-over-a-tensor-the-data-sizes)). Loop a "
        "fixed number of times and mask the steps you do not need, pass the count as a Python "
        "int, or let [draft mode](draft-mode.md) take the example's count. A branch on a "
        "tensor's value is no failure: it is captured as `torch.cond` by default, and fails here "
        "only with `branches=\"refuse\"` (`--branches refuse`); see "
        "[Branches on tensor values](branches.md).",
        """
        import torch, exporter

        class Halve(torch.nn.Module):
            def forward(self, x):
                for _ in range(x.gt(0).sum()):
                    x = x * 0.5
                return x

        exporter.export(Halve(), (torch.randn(4, 8),))
        """,
    ),
    Example(
        "branch capture",
        "A branch on a tensor's value whose two sides cannot be one `torch.cond`: they return "
        "different structures, or tensors of different rank or dtype, or the model makes more "
        "decisions than `max_branch_runs` runs of forward can capture. Return the same structure "
        "on both sides, or let [draft mode](draft-mode.md) follow the example's side; see "
        "[Branches on tensor values](branches.md).",
        """
        import torch, exporter

        class Screen(torch.nn.Module):
            def forward(self, boxes, scores):
                if (scores > 0.5).any():
                    return boxes, scores.max()
                return boxes

        exporter.export(Screen(), (torch.randn(5, 4), torch.rand(5)))
        """,
    ),
    Example(
        "data-dependent output shape",
        "An output's size depends on the values (`one_hot` without `num_classes`, `nonzero`, "
        "`unique`) where a later step needs it fixed. Give the size, or mark it with `torch._check`.",
        """
        import torch, exporter
        import torch.nn.functional as F

        class LabelSmoothing(torch.nn.Module):
            def forward(self, logits, labels):
                targets = F.one_hot(labels).to(logits.dtype)
                return -(targets * 0.9 + 0.025) @ logits.log_softmax(dim=-1).T

        exporter.export(LabelSmoothing(), (torch.randn(4, 3), torch.tensor([0, 2, 1, 2])))
        """,
    ),
    Example(
        "data leaves the graph",
        "`.numpy()` hands a tensor's values to NumPy, where export cannot follow them. Compute "
        "with torch ops instead, or let [draft mode](draft-mode.md) take the example's values "
        "(the program checks them when it runs).",
        """
        import numpy as np
        import torch, exporter

        class TopScoring(torch.nn.Module):
            def forward(self, boxes, scores):
                order = np.argsort(-scores.numpy())[:3]
                return boxes[torch.from_numpy(order)]

        exporter.export(TopScoring(), (torch.randn(5, 4), torch.randn(5)))
        """,
    ),
    Example(
        "unsupported operator",
        "An operator without a fake-tensor kernel (a custom op with no `register_fake`), or one "
        "with side effects a functional program cannot keep in order.",
        """
        import torch, exporter

        @torch.library.custom_op("docs_example::dequantize", mutates_args=())
        def dequantize(q: torch.Tensor, scale: float) -> torch.Tensor:
            return q.float() * scale

        class Int8Linear(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("q", torch.randint(-8, 8, (4, 8), dtype=torch.int8))

            def forward(self, x):
                return x @ torch.ops.docs_example.dequantize(self.q, 0.1).T

        exporter.export(Int8Linear(), (torch.randn(2, 8),))
        """,
    ),
    Example(
        "unsupported mutation",
        "A write a program cannot express: an input resized or restrided in place, a buffer "
        "replaced by a larger one made from itself (a cache that grows), a tensor attribute changed "
        "in place. A buffer rebuilt with another shape from other values is computed and not "
        "written back (the program's notes say so).",
        """
        import torch, exporter

        class AddsBatchDim(torch.nn.Module):
            def forward(self, x):
                x.unsqueeze_(0)
                return x * 2

        exporter.export(AddsBatchDim(), (torch.randn(4, 8),))
        """,
    ),
    Example(
        "unsupported tensor subclass",
        "A tensor subclass exporter cannot take apart: an input that is a subclass, or state "
        "without `__tensor_flatten__`.",
        """
        import torch, exporter
        from torch.testing._internal.two_tensor import TwoTensor

        class Scale(torch.nn.Module):
            def forward(self, x):
                return x * 2

        exporter.export(Scale(), (TwoTensor(torch.randn(2, 4), torch.randn(2, 4)),))
        """,
    ),
    Example(
        "constant",
        "A tensor the program would hold as a constant that cannot be one: it shares memory with "
        "a parameter (a tie made with `.detach()`), or the trace did not see it being made (`.data`).",
        """
        import torch, exporter
        import torch.nn.functional as F

        class DetachedTie(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = torch.nn.Embedding(10, 8)
                self.out_weight = self.embed.weight.detach()

            def forward(self, ids):
                return F.linear(self.embed(ids), self.out_weight)

        exporter.export(DetachedTie(), (torch.tensor([[1, 2, 3]]),))
        """,
    ),
    Example(
        "dynamic shape constraint",
        "The model does not fit `dynamic_shapes`: a dimension declared dynamic only works at one "
        "size, or in a narrower range. The message gives the fix to paste; see "
        "[dynamic shapes](dynamic-shapes.md).",
        """
        import torch, exporter
        from torch.export import Dim

        class PatchEmbed(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.pos_embed = torch.nn.Parameter(torch.zeros(1, 16, 8))

            def forward(self, x):
                return x + self.pos_embed

        exporter.export(PatchEmbed(), (torch.randn(2, 16, 8),), dynamic_shapes={"x": {1: Dim("seq")}})
        """,
    ),
    Example(
        "pass",
        "A pass failed: a bug in exporter (please report it with the model), or in a pass of your "
        "own run in the pipeline, as here. The message names the pass and the passes before it.",
        """
        import torch
        from exporter._pipeline import run_passes
        from exporter.inputs import bind_inputs
        from exporter.passes import DEFAULT_PASSES
        from exporter.trace import trace

        def fuse_linear_relu(state):
            names = {node.name: node for node in state.gm.graph.nodes}
            for node in state.gm.graph.nodes:
                if node.target is torch.ops.aten.linear.default:
                    names[node.name + "_relu"].replace_all_uses_with(node)
            return True

        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
        state = trace(model, bind_inputs(model, (torch.randn(2, 8),), None))
        run_passes(state, [*DEFAULT_PASSES, fuse_linear_relu])
        """,
    ),
    Example(
        "verification",
        "The program broke a rule of export IR (here a pass of your own made an op in-place), or "
        "torch rejected it: a bug in exporter. `EXPORTER_VERIFY_EACH_PASS=1` checks after every pass.",
        """
        import os
        import torch
        from exporter._pipeline import run_passes
        from exporter.inputs import bind_inputs
        from exporter.passes import DEFAULT_PASSES
        from exporter.trace import trace

        def relu_in_place(state):
            for node in state.gm.graph.nodes:
                if node.target is torch.ops.aten.relu.default:
                    node.target = torch.ops.aten.relu_.default
            return True

        os.environ["EXPORTER_VERIFY_EACH_PASS"] = "1"
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
        state = trace(model, bind_inputs(model, (torch.randn(2, 8),), None))
        run_passes(state, [*DEFAULT_PASSES, relu_in_place])
        """,
    ),
    Example(
        "lowering",
        "The program could not be lowered to ExecuTorch (`--executorch`, `exporter.to_executorch`): "
        "the message names the op and the model's line it came from. Here ExecuTorch has no kernel "
        "for the op; replace the call with core ATen ops, or add the kernel to your runtime.",
        """
        import torch, exporter

        class Spectrum(torch.nn.Module):
            def forward(self, x):
                return torch.linalg.svd(x).S

        program = exporter.export(Spectrum(), (torch.randn(3, 4),))
        exporter.to_executorch(program, "spectrum.pte")
        """,
        needs="executorch",
        stored=_STORED_LOWERING,
    ),
    Example(
        "timeout",
        "`check` stopped a model's worker process after `--timeout` seconds; the other models go on.",
        """
        import time, torch

        class Slow(torch.nn.Module):
            def forward(self, x):
                time.sleep(60)
                return x

        example_inputs = (torch.randn(2),)
        """,
        check="model.py:Slow --timeout 3",
    ),
    Example(
        "crash",
        "A model's worker process died (a segmentation fault in an extension, `os.abort()`); `check` "
        "names the line the process was running, and the other models go on.",
        """
        import os, torch

        class Crashes(torch.nn.Module):
            def forward(self, x):
                os.abort()

        example_inputs = (torch.randn(2),)
        """,
        check="model.py:Crashes",
    ),
    Example(
        "memory",
        "A model's worker process held more memory than `--max-memory`; `check` stopped it and "
        "the other models go on.",
        """
        import torch

        class Hungry(torch.nn.Module):
            def forward(self, x):
                return x + torch.ones(1)

        example_inputs = (torch.randn(2),)
        """,
        check="model.py:Hungry --max-memory 64M",
    ),
    Example(
        "internal",
        "An exception from outside exporter's error family reached a report: a bug wherever it "
        "came from. Reports, JUnit and `ErrorInfo` give it this category with the exception's type.",
        """
        # any exception from outside exporter's error family, raised by exporter or by code it
        # runs; ErrorInfo.from_exception(error) reports it with this category
        raise KeyError("layers.3")
        """,
    ),
]


def _clean(text: str, directory: str) -> str:
    """``text`` with the example's directory left out of its paths, and a panel's lines that
    held one padded again to the panel's width."""
    text = text.replace(os.path.realpath(directory) + os.sep, "").replace(directory + os.sep, "")
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    lines, width = [], None
    for line in text.rstrip().splitlines():
        if line.startswith("╭"):
            width = len(line)
        elif line.startswith("│") and line.endswith("│") and width:
            line = line[:-1].rstrip().ljust(width - 1) + "│"
        lines.append(line)
    return "\n".join(lines)


_RUNNER = """
import importlib.util, json, sys, exporter
results = []
for directory in json.loads(sys.argv[1]):
    sys.path.insert(0, directory)
    try:
        spec = importlib.util.spec_from_file_location("model", directory + "/model.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["model"] = module
        spec.loader.exec_module(module)
        results.append(["none", "no error"])
    except Exception as error:
        info = exporter.ErrorInfo.from_exception(error)
        results.append([info.category.value, f"{type(error).__name__}: {error}"])
    finally:
        sys.modules.pop("model", None)
        sys.path.remove(directory)
print(json.dumps(results))
"""


def _check(example: Example, directory: str) -> tuple[str, str]:
    command = [sys.executable, "-m", "exporter", "check", *example.check.split()]
    env = {**os.environ, "COLUMNS": str(PANEL_WIDTH)}
    done = subprocess.run(command, cwd=directory, capture_output=True, text=True, env=env, timeout=300)
    output = _clean(done.stdout + done.stderr, directory)
    found = re.search(r": (timeout|crash|memory) ─", output)
    return (found.group(1) if found else "none"), output


def run_all(examples: list[Example] = EXAMPLES) -> list[tuple[str, str]]:
    """(category found, message) of each example, each run in a directory of its own: the
    error's ``str`` for a Python example (all of them in one process), what ``check`` printed
    for a worker example (those in parallel)."""
    with tempfile.TemporaryDirectory() as root:
        directories = []
        for i, example in enumerate(examples):
            directory = os.path.join(root, str(i))
            os.mkdir(directory)
            pathlib.Path(directory, "model.py").write_text(textwrap.dedent(example.model).strip() + "\n")
            directories.append(directory)
        python = [i for i, e in enumerate(examples) if not e.check]
        with concurrent.futures.ThreadPoolExecutor() as pool:
            checks = {i: pool.submit(_check, examples[i], directories[i]) for i, e in enumerate(examples) if e.check}
            command = [sys.executable, "-c", _RUNNER, json.dumps([directories[i] for i in python])]
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise RuntimeError(f"the failure examples did not run:\n{done.stderr[-3000:]}")
            found = dict(zip(python, json.loads(done.stdout.strip().splitlines()[-1])))
            found.update({i: future.result() for i, future in checks.items()})
        return [(found[i][0], _clean(found[i][1], directories[i])) for i in range(len(examples))]
