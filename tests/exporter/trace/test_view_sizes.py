"""A view's fake result has the sizes it was asked for, with no guard more than torch's kernel
records, and a model that folds frames into the batch keeps its sizes and guards the same
however deep it is."""

import pytest
import torch
from torch.export import Dim

import exporter
from exporter._torch_internals import (
    DimDynamic,
    FakeTensorMode,
    ShapeEnv,
    StatelessSymbolicContext,
    constant_source,
    fake_impls,
)
from exporter.trace.view_sizes import asked_sizes, sized_as_asked

VIEW = torch.ops.aten.view.default


def _folded(kernel, monkeypatch, *, columns=4, inner=(4,)):
    """``x[None].view(batch // 3, 3, *inner)`` of an ``x`` whose batch (6) is symbolic, its
    first ``columns`` columns sliced off a wider tensor, through the fake ``kernel``: the
    result, the batch, and the guards recorded."""
    monkeypatch.setitem(fake_impls.op_implementations_dict, VIEW, kernel)
    shape_env = ShapeEnv()
    mode = FakeTensorMode(shape_env=shape_env)
    context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC])
    wide = mode.from_tensor(torch.randn(6, 8), source=constant_source("x"), symbolic_context=context)
    with mode:
        x = wide[:, :columns]
        batch = x.shape[0]
        out = VIEW(x[None], [batch // 3, 3, *inner])
    return out, batch, [str(guard.expr) for guard in shape_env.guards]


TORCH_VIEW = fake_impls.op_implementations_dict[VIEW]


def test_a_view_gets_the_sizes_asked_for_and_no_guard_more(monkeypatch):
    made, _, torch_guards = _folded(TORCH_VIEW, monkeypatch, columns=8, inner=(8,))
    out, batch, guards = _folded(sized_as_asked(TORCH_VIEW, lambda: True), monkeypatch, columns=8, inner=(8,))
    # torch's kernel splits the batch and makes the 3 it was asked for as batch // (batch // 3)
    assert isinstance(made.shape[1], torch.SymInt)
    assert out.shape[0].node.expr == (batch // 3).node.expr
    assert out.shape[1:] == (3, 8) and out.stride() == (24, 8, 1) and out.storage_offset() == 0
    assert guards == torch_guards


def test_a_view_of_a_strided_tensor_keeps_the_strides_it_does_not_split(monkeypatch):
    # The rows of x are 8 apart in memory; the last dimension is split in two.
    out, _, _ = _folded(sized_as_asked(TORCH_VIEW, lambda: True), monkeypatch, inner=(2, 2))
    assert out.shape[1:] == (3, 2, 2) and out.stride() == (24, 8, 2, 1)


def test_an_inactive_kernel_gives_torchs_result(monkeypatch):
    made, _, _ = _folded(TORCH_VIEW, monkeypatch)
    out, _, _ = _folded(sized_as_asked(TORCH_VIEW, lambda: False), monkeypatch)
    assert [str(s) for s in out.shape] == [str(s) for s in made.shape]
    assert isinstance(out.shape[1], torch.SymInt)


def test_sizes_that_are_already_the_asked_ones_or_constant_stay():
    assert asked_sizes([2, 3, 4], [2, 3, 4]) is None
    assert asked_sizes([6, 4], [-1, 4]) is None
    assert asked_sizes([6], [6, 1]) is None


class FramesInBatch(torch.nn.Module):
    """Layers that fold 3 frames out of the batch and back: (v * 3, c, h, w) <-> (v, c, 3, h, w)."""

    def __init__(self, layers: int):
        super().__init__()
        self.convs = torch.nn.ModuleList(torch.nn.Conv3d(4, 4, (3, 1, 1), padding=(1, 0, 0)) for _ in range(layers))

    def forward(self, x):
        for conv in self.convs:
            frames_batch, c, h, w = x.shape
            videos = x[None].reshape(frames_batch // 3, 3, c, h, w).permute(0, 2, 1, 3, 4)
            x = conv(videos).permute(0, 2, 1, 3, 4).reshape(frames_batch, c, h, w)
        return x


def _sizes_and_guards(layers: int) -> tuple[int, int]:
    """The longest size or stride expression in the program's values, and the guards of its trace."""
    torch.manual_seed(0)
    model = FramesInBatch(layers).eval()
    ep = exporter.export(model, (torch.randn(6, 4, 2, 2),), dynamic_shapes={"x": {0: Dim.AUTO}})
    x = torch.randn(12, 4, 2, 2)
    torch.testing.assert_close(ep.module()(x), model(x))
    values = [n.meta["val"] for n in ep.graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)]
    longest = max(len(str(s)) for v in values for s in (*v.shape, *v.stride()))
    batch = next(s for v in values for s in v.shape if isinstance(s, torch.SymInt))
    return longest, len(batch.node.shape_env.guards)


@pytest.mark.parametrize("layers", [2, 4])
def test_folding_frames_in_and_out_of_the_batch_keeps_sizes_and_guards_bounded(layers):
    # torch's view kernel nests the batch's expression once more in every layer: the sizes,
    # and the guards asked about them, would grow with depth.
    assert _sizes_and_guards(layers) == _sizes_and_guards(1)
