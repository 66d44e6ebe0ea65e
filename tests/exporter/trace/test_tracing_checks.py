"""A model whose library skips work in eager that it keeps while traced: by default the program
holds the traced path, as torch.export's does; with tracing_checks="eager" the library's
check answers as in eager, its value test becomes a torch.cond, and the program equals eager
on inputs that take either side. Verification names the check when it explains a mismatch."""

from __future__ import annotations

import sys
import types

import pytest
import torch

import exporter
from exporter._errors import InputSpecError
from exporter.cli.compare import VerificationMismatch, compare_with_eager, require_match
from exporter.trace import tracing_checks
from torch._subclasses.fake_tensor import FakeTensor

LIBRARY = "skippinglib.utils"


def _is_tracing(tensor=None):
    """What transformers' is_tracing asks of a tensor: whether it is fake."""
    return isinstance(tensor, FakeTensor)


@pytest.fixture
def library(monkeypatch):
    module = types.ModuleType(LIBRARY)
    module.is_tracing = _is_tracing
    monkeypatch.setitem(sys.modules, LIBRARY, module)
    monkeypatch.setattr(tracing_checks, "KNOWN", ((LIBRARY, "is_tracing"),))
    return module


is_tracing = _is_tracing  # the model's own module binds the check again, as `from lib import f` does


class SkipsAnAllOnesMask(torch.nn.Module):
    """In eager an all-ones mask is dropped and the other path runs, which computes something
    else (as transformers' sdpa skip runs a bidirectional encoder's attention as causal)."""

    def forward(self, x, mask):
        if not is_tracing(mask) and mask.all():
            return x.cumsum(-1)
        return x * mask + 1


def _inputs(all_ones: bool):
    mask = torch.ones(2, 4)
    if not all_ones:
        mask[0, 1] = 0
    return torch.randn(2, 4), mask


def test_by_default_the_program_holds_the_traced_path(library):
    model = SkipsAnAllOnesMask()
    x, mask = _inputs(all_ones=True)
    program = exporter.export(model, (x, mask))
    torch.testing.assert_close(program.module()(x, mask), x * mask + 1)
    assert not torch.allclose(program.module()(x, mask), model(x, mask))


@pytest.mark.parametrize("example_all_ones", [True, False], ids=["example-all-ones", "example-with-padding"])
def test_answered_as_eager_the_program_equals_eager_on_either_side(library, example_all_ones):
    model = SkipsAnAllOnesMask()
    program = exporter.export(model, _inputs(example_all_ones), tracing_checks="eager")
    assert any("cond" in str(node.target) for node in program.graph.nodes)
    for all_ones in (True, False):
        x, mask = _inputs(all_ones)
        torch.testing.assert_close(program.module()(x, mask), model(x, mask))
    assert library.is_tracing is _is_tracing and is_tracing is _is_tracing, "every binding is restored"
    assert not torch.compiler.is_exporting()


def test_verification_names_the_library_check_and_the_way_out(library):
    model = SkipsAnAllOnesMask()
    inputs = _inputs(all_ones=True)
    results = compare_with_eager(model, exporter.export(model, inputs), [("example", inputs, {})])
    named = "skippinglib's tracing checks (is_tracing())"
    assert not results[0].ok and (results[0].flag, results[0].model) == (named, "SkipsAnAllOnesMask")
    with pytest.raises(VerificationMismatch) as info:
        require_match(results, rtol=1e-4, atol=1e-5)
    assert info.value.hint.startswith(f"SkipsAnAllOnesMask takes a different path under {named}")
    assert "tracing_checks='eager'" in info.value.hint and "--tracing-checks eager" in info.value.hint
    assert is_tracing is _is_tracing


def test_other_threads_ask_as_before(library):
    """The replacement answers in the tracing thread only."""
    import threading

    seen = []

    class AsksElsewhere(torch.nn.Module):
        def forward(self, x):
            thread = threading.Thread(target=lambda: seen.append(is_tracing(torch.zeros(1))))
            thread.start()
            thread.join()
            return x + 1

    exporter.export(AsksElsewhere(), (torch.randn(2),), tracing_checks="eager")
    assert seen == [False]


def test_an_unknown_answer_is_refused_naming_the_choices():
    with pytest.raises(InputSpecError, match="tracing_checks='sometimes'") as info:
        exporter.export(torch.nn.ReLU(), (torch.randn(2),), tracing_checks="sometimes")
    assert "'traced'" in info.value.hint and "'eager'" in info.value.hint
