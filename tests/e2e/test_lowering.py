"""Every program of the corpora lowers where eager runs it: to core ATen
(``run_decompositions()``) and, with ExecuTorch installed, to its edge dialect; the lowered
program still matches eager.

The transformers models of the fast zoo subset (benchmarks/zoo.py) are lowered too.
"""

from __future__ import annotations

import copy
import importlib.util
import pathlib
import sys

import pytest
import torch

import exporter

from . import harness
from .cases import CASES, TRANSFORMER_CASES

ZOO_MODELS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "zoo_models.py"
FAST_ZOO_TYPES = ("bert", "gpt2", "llama", "t5", "vit", "wav2vec2")


def _core(model, args, kwargs):
    return exporter.export(model, args, kwargs).run_decompositions()


def _edge(model, args, kwargs):
    from executorch.exir import to_edge

    return to_edge(exporter.export(model, args, kwargs)).exported_program()


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_corpus_lowers_to_core_aten(case):
    harness.check_matches_eager(case, _core, seeds=(0, 1))


@pytest.mark.slow
@pytest.mark.parametrize("case", TRANSFORMER_CASES, ids=lambda c: c.name)
def test_transformers_lower_to_core_aten(case):
    harness.check_matches_eager(case, _core, seeds=(0, 1))


@pytest.mark.executorch
@pytest.mark.parametrize("case", [*CASES, *TRANSFORMER_CASES], ids=lambda c: c.name)
def test_the_corpus_lowers_to_the_edge_dialect(case):
    """The edge program's outputs match eager's (its state differs by design: the edge
    dialect keeps scalar constants as buffers)."""
    pytest.importorskip("executorch.exir")
    model = case.make_model()
    if model.training:
        pytest.skip("a model in train mode: ExecuTorch runs inference programs (train-mode batch norm has no edge op)")
    eager = copy.deepcopy(model)
    program = _edge(model, *harness.clone_inputs(case.make_inputs(0)))
    args, kwargs = harness.clone_inputs(case.make_inputs(0))
    ref_args, ref_kwargs = harness.clone_inputs(case.make_inputs(0))
    harness._assert_trees_close(program.module()(*args, **kwargs), eager(*ref_args, **ref_kwargs), case, "edge output")


def _zoo_models():
    pytest.importorskip("transformers")
    spec = importlib.util.spec_from_file_location("zoo_models", ZOO_MODELS)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("zoo_models", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("lower", ["core", pytest.param("edge", marks=pytest.mark.executorch)])
@pytest.mark.parametrize("model_type", FAST_ZOO_TYPES)
def test_the_fast_zoo_lowers(model_type, lower):
    if lower == "edge":
        pytest.importorskip("executorch.exir")
    zoo = _zoo_models()
    built = zoo.build(model_type, zoo.cases(model_type)[0])
    program = (_core if lower == "core" else _edge)(built.model, (), built.kwargs)
    with torch.no_grad():
        got = program.module()(**built.kwargs)
    expected_leaves = [t for t in torch.utils._pytree.tree_leaves(built.output) if isinstance(t, torch.Tensor)]
    got_leaves = [t for t in torch.utils._pytree.tree_leaves(got) if isinstance(t, torch.Tensor)]
    assert len(got_leaves) == len(expected_leaves)
    for ours, ref in zip(got_leaves, expected_leaves):
        torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4)
