"""The artifacts made from a program: core ATen, an AOTInductor package, an ONNX model, each
run like the model and compared with eager."""

import importlib
import types

import pytest
import torch

import exporter
from exporter import InputSpecError
from exporter.cli import artifacts
from exporter.cli.artifacts import aoti_path_beside, build_aoti, build_onnx, decompose, files_size, load_aoti, load_onnx, require_onnx
from exporter.cli.compare import compare_runner_with_eager


class Scorer(torch.nn.Module):
    """Keyword and constant inputs, a nested output: what flattening for ONNX must get right."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x, mask=None, scale=2.0):
        h = self.proj(x) * scale
        return {"scores": h.masked_fill(~mask, 0.0), "best": (h.argmax(-1),)}


def _scorer():
    model = Scorer().eval()
    args, kwargs = (torch.randn(3, 8),), {"mask": torch.rand(3, 8) > 0.5, "scale": 0.5}
    return model, args, kwargs, exporter.export(model, args, kwargs)


def test_decompose_core_lowers_linear_to_core_aten():
    model, args, kwargs, program = _scorer()
    core = decompose(program, "core")
    targets = {str(n.target) for n in core.graph.nodes if n.op == "call_function"}
    assert "aten.linear.default" not in targets and "aten.addmm.default" in targets
    torch.testing.assert_close(core.module()(*args, **kwargs), model(*args, **kwargs))
    with pytest.raises(InputSpecError, match="--decompose 'edge': unknown level"):
        decompose(program, "edge")


def test_the_aoti_package_goes_beside_the_program():
    assert aoti_path_beside("out/model.pt2") == "out/model.aoti.pt2"
    assert aoti_path_beside("model") == "model.aoti.pt2"


def test_an_artifact_size_counts_the_files_written_beside_it(tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"x" * 10)
    (tmp_path / "m.onnx.data").write_bytes(b"x" * 5)
    (tmp_path / "m.onnxother").write_bytes(b"x" * 100)
    assert files_size(str(tmp_path / "m.onnx")) == 15


def test_without_the_extra_onnx_says_how_to_install_it(monkeypatch):
    real = importlib.import_module

    def without_onnxruntime(name, *a, **k):
        if name == "onnxruntime":
            raise ImportError("No module named 'onnxruntime'")
        if name == "onnxscript":  # installed or not here: this test is about onnxruntime alone
            return types.ModuleType(name)
        return real(name, *a, **k)

    monkeypatch.setattr(artifacts.importlib, "import_module", without_onnxruntime)
    with pytest.raises(InputSpecError, match="--onnx needs onnxruntime, which is not installed") as info:
        require_onnx()
    assert "pip install 'torch-exporter[onnx]'" in info.value.hint


def test_the_onnx_model_runs_in_onnxruntime_like_the_model(tmp_path):
    pytest.importorskip("onnxscript")
    pytest.importorskip("onnxruntime")
    model, args, kwargs, program = _scorer()
    path = str(tmp_path / "scorer.onnx")
    build_onnx(program, args, kwargs, path)
    runner = load_onnx(path, program)
    fresh = ((torch.randn(3, 8),), {"mask": torch.rand(3, 8) > 0.5, "scale": 0.5})
    runs = compare_runner_with_eager(model, runner, [("example", args, kwargs), ("fresh", *fresh)])
    assert [c.ok for c in runs] == [True, True], [c.failures() for c in runs]
    assert [o.path for o in runs[0].outputs] == ["scores", "best[0]"]  # output paths as the reports write them
    wrong = compare_runner_with_eager(torch.nn.Identity(), lambda *a, **k: torch.zeros(3, 8), [("example", (torch.ones(3, 8),), {})])
    assert not wrong[0].ok  # the comparison can fail


@pytest.mark.slow
def test_the_aoti_package_runs_like_the_model(tmp_path):
    model, args, kwargs, program = _scorer()
    path = str(tmp_path / "scorer.aoti.pt2")
    build_aoti(program, path)
    runs = compare_runner_with_eager(model, load_aoti(path), [("example", args, kwargs)])
    assert runs[0].ok, runs[0].failures()
