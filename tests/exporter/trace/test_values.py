"""Python asking for a traced value: a hashed data-dependent size and ``.numpy()`` are refused
with the user's line, or in a draft export given the example's value and checked at run time."""

import threading

import numpy as np
import pytest
import torch
from torch.export import Dim

import exporter
from exporter import AssumptionKind, Category, TraceError
from exporter.trace.patches import tracing_patches

HERE = __file__


def _line(text):
    with open(HERE) as f:
        return f"{HERE}:{next(i for i, line in enumerate(f, 1) if line.rstrip().endswith(text))}"


class DistinctLengths(torch.nn.Module):
    """Masks the attention only when the rows have different lengths."""

    def forward(self, x, mask):
        lengths = mask.sum(1).tolist()
        if len(set(lengths)) > 1:  # the set
            return x * 2
        return x + lengths[0]


class LengthTable(torch.nn.Module):
    def forward(self, x, n):
        scales = {4: 0.5, 8: 0.25}
        return x * scales[n.item()]  # the key


class CachedBySize(torch.nn.Module):
    """Caches on sizes as einops does, and goes on uncached when a size cannot be hashed."""

    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x, mask):
        n = mask.sum().item()
        try:
            scale = self.cache.setdefault((n,), 2.0)
        except TypeError:
            scale = 2.0
        return x[:n] * scale


class RowsPerGroup(torch.nn.Module):
    """A mixture of experts' token counts, computed in NumPy."""

    def forward(self, x, groups):
        ends = groups.bincount().numpy().cumsum(0)  # the numpy call
        out = []
        for i, end in enumerate(ends):
            start = 0 if i == 0 else ends[i - 1]
            out.append(x[start:end].sum(0) * (i + 1))
        return torch.stack(out)


class FloatsInNumpy(torch.nn.Module):
    def forward(self, x):
        values = x.numpy()  # the float numpy call
        return x * float(np.nansum(values))


class WritesThenNumpy(torch.nn.Module):
    def forward(self, x, groups):
        x.add_(1)
        counts = groups.bincount().numpy()
        return x * int(counts.max())


class TableInNumpy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.tensor([1.0, 2.0, 3.0])  # a plain attribute: real while tracing

    def forward(self, x):
        return x * float(self.table.numpy().sum())


MASK = torch.ones(2, 5, dtype=torch.bool)
GROUPS = torch.tensor([0, 0, 1, 2, 2, 2])


def test_a_hashed_data_dependent_size_is_refused_with_its_line():
    with pytest.raises(TraceError, match=r"hashes a size computed from tensor values \(`if len\(set\(lengths\)\)") as info:
        exporter.export(DistinctLengths(), (torch.randn(2, 4), MASK))
    assert info.value.category is Category.DATA_DEPENDENT_CONTROL_FLOW
    assert info.value.location == _line("# the set")
    assert "(lengths != lengths[0]).any()" in info.value.hint and "draft=True" in info.value.hint


def test_a_dict_lookup_by_a_data_dependent_size_is_refused_with_its_line():
    with pytest.raises(TraceError, match="hashes a size") as info:
        exporter.export(LengthTable(), (torch.randn(3), torch.tensor(4)))
    assert info.value.location == _line("# the key")


def test_code_that_catches_the_refusal_goes_on_without_hashing():
    x, mask = torch.randn(5, 3), torch.tensor([1, 1, 1, 0, 0])
    ep = exporter.export(CachedBySize(), (x, mask))
    torch.testing.assert_close(ep.module()(x, mask), CachedBySize()(x, mask))


def test_a_draft_export_hashes_the_example_values_and_checks_them():
    x = torch.randn(2, 4)
    ep = exporter.export(DistinctLengths(), (x, MASK), draft=True)
    assumptions = ep.draft_report.assumptions
    assert sorted(a.assumed for a in assumptions) == ["u0 == 5", "u1 == 5"]
    assert all(a.kind is AssumptionKind.DATA_DEPENDENT and a.checked for a in assumptions)
    assert {a.location for a in assumptions} == {_line("# the set")}
    torch.testing.assert_close(ep.module()(x, MASK), DistinctLengths()(x, MASK))
    shorter = MASK.clone()
    shorter[0, 0] = False
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        ep.module()(x, shorter)


def test_a_dynamic_size_is_not_hashed_even_in_a_draft_export():
    class HashesItsBatch(torch.nn.Module):
        def forward(self, x):
            try:
                hash(x.shape[0])
            except TypeError:  # torch's refusal, which einops relies on
                return x * 2
            return x * 3

    x = torch.randn(4, 3)
    for draft in (False, True):
        ep = exporter.export(HashesItsBatch(), (x,), dynamic_shapes={"x": {0: Dim("batch")}}, draft=draft)
        torch.testing.assert_close(ep.module()(torch.ones(6, 3)), torch.full((6, 3), 2.0))


def test_numpy_on_a_traced_tensor_is_refused_with_its_line():
    with pytest.raises(TraceError, match=r"out of the graph with \.numpy\(\) \(`ends = groups") as info:
        exporter.export(RowsPerGroup(), (torch.randn(6, 3), GROUPS))
    assert info.value.category is Category.DATA_LEAVES_GRAPH
    assert info.value.location == _line("# the numpy call")
    assert "torch ops" in info.value.hint and "draft=True" in info.value.hint


def test_a_draft_export_takes_the_example_values_and_checks_them_when_the_program_runs():
    x = torch.randn(6, 3)
    ep = exporter.export(RowsPerGroup(), (x, GROUPS), draft=True)
    (taken,) = ep.draft_report.assumptions
    assert taken.kind is AssumptionKind.TENSOR_VALUES and taken.checked
    assert taken.assumed == "values == [2, 1, 3] (int64[3])"
    assert taken.location == _line("# the numpy call") and taken.code.startswith("ends = groups.bincount()")
    torch.testing.assert_close(ep.module()(x, GROUPS), RowsPerGroup()(x, GROUPS))
    torch.testing.assert_close(ep.module()(x * 2, GROUPS), RowsPerGroup()(x * 2, GROUPS))
    with pytest.raises(RuntimeError, match="draft export assumed the example's values for .numpy"):
        ep.module()(x, torch.tensor([0, 1, 1, 2, 2, 2]))
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        ep.module()(x, torch.tensor([0, 0, 1, 1, 1, 1]))  # two groups, not three


def test_the_values_check_treats_nan_as_equal_to_itself():
    x = torch.tensor([1.0, float("nan"), 2.0])
    ep = exporter.export(FloatsInNumpy(), (x,), draft=True)
    (taken,) = ep.draft_report.assumptions
    assert taken.assumed == "values == [1.0, nan, 2.0] (float32[3])" and taken.checked
    torch.testing.assert_close(ep.module()(x), FloatsInNumpy()(x), equal_nan=True)


def test_a_functionalized_draft_trace_takes_the_values_too():
    x = torch.randn(6)
    ep = exporter.export(WritesThenNumpy(), (x.clone(), GROUPS), draft=True)
    assert [a.kind for a in ep.draft_report.assumptions] == [AssumptionKind.TENSOR_VALUES]
    torch.testing.assert_close(ep.module()(x.clone(), GROUPS), WritesThenNumpy()(x.clone(), GROUPS))


def test_numpy_on_a_real_tensor_runs_as_in_eager():
    x = torch.randn(3)
    ep = exporter.export(TableInNumpy(), (x,))
    torch.testing.assert_close(ep.module()(x), x * 6.0)


def test_the_replacements_act_in_the_tracing_thread_only_and_are_undone():
    hash_before, numpy_before = torch.SymInt.__dict__["__hash__"], torch.Tensor.__dict__.get("numpy")
    seen = {}
    with tracing_patches():
        seen["here"] = (torch.SymInt.__hash__ is not hash_before, torch.ones(2).numpy().tolist())

        def elsewhere():
            seen["elsewhere"] = torch.ones(2).numpy().tolist()

        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()
    assert seen == {"here": (True, [1.0, 1.0]), "elsewhere": [1.0, 1.0]}
    assert torch.SymInt.__dict__["__hash__"] is hash_before and torch.Tensor.__dict__.get("numpy") is numpy_before


def test_a_hash_torch_itself_asks_for_keeps_torchs_refusal():
    import os

    # code whose file is in torch's directory, as torch's own callers are
    asked_by_torch = compile("hash(n)", os.path.join(os.path.dirname(torch.__file__), "caching.py"), "eval")

    class HashedByTorch(torch.nn.Module):
        def forward(self, x, mask):
            n = mask.sum().item()
            try:
                eval(asked_by_torch, {"n": n})
            except TypeError as e:
                assert "non-nested SymInt" in str(e)
                return x * 2
            return x * 3

    x, mask = torch.randn(3), torch.tensor([1, 1, 0])
    for draft in (False, True):
        ep = exporter.export(HashedByTorch(), (x, mask), draft=draft)
        torch.testing.assert_close(ep.module()(x, mask), x * 2)
        assert draft is False or ep.draft_report.sound


def test_numpy_on_a_tensor_that_requires_grad_fails_as_it_does_eagerly():
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.tensor([2.0]))

        def forward(self, x):
            return x * float((self.scale * 1).numpy()[0])

    with pytest.raises(TraceError, match="Can't call numpy\\(\\) on Tensor that requires grad") as info:
        exporter.export(Scaled(), (torch.randn(3),), draft=True)
    assert info.value.category is Category.MODEL_ERROR
    with pytest.raises(RuntimeError, match="requires grad"):
        Scaled()(torch.randn(3))  # eager, with grad on as the trace has it
