"""ExecuTorch files made from exported programs, run in the ExecuTorch runtime against eager."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.export import Dim, ShapesCollection

import exporter
from exporter.cli.compare import compare_runner_with_eager
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.executorch
pytest.importorskip("executorch.exir")

from exporter.executorch import load_executorch  # noqa: E402 - only with ExecuTorch installed


def _assert_matches_eager(model, program, path, runs, method="forward", atol=1e-5):
    results = compare_runner_with_eager(model, load_executorch(path, program, method), runs, rtol=1e-4, atol=atol)
    assert all(r.ok for r in results), [line for r in results for line in r.failures()]
    assert all(r.seconds is not None for r in results)


class Counter(torch.nn.Module):
    """A buffer updated in place: the file must start from its value, each run afresh."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.register_buffer("steps", torch.full((), 5.0))

    def forward(self, x):
        self.steps.add_(1)
        return torch.topk(self.lin(x), 3).values * self.steps, self.steps


@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_a_dynamic_batch_and_a_buffer_update_run_as_eager(tmp_path, backend):
    model = Counter().eval()
    x = torch.randn(3, 8)
    ep = exporter.export(model, (x,), dynamic_shapes=({0: Dim("batch", max=32)},))
    written = exporter.to_executorch(ep, tmp_path / "counter.pte", backend=backend)
    assert os.path.getsize(written.path) == written.bytes
    runs = [("example", (x,), {}), ("fresh #1", (torch.randn(3, 8),), {}), ("batch=17", (torch.randn(17, 8),), {})]
    _assert_matches_eager(model, ep, written.path, runs)
    (method,) = written.methods
    assert "aten.topk.default" in method.outside_delegate  # XNNPACK has no top-k; portable takes everything
    assert (method.delegated > 0) == (backend == "xnnpack")


def _example(name):
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        return __import__(name)
    finally:
        sys.path.pop(0)


@pytest.mark.parametrize("name, cls", [("mlp", "MLP"), ("cnn", "SmallCNN"), ("tiny_transformer", "TinyTransformer")])
def test_the_examples(tmp_path, name, cls):
    module = _example(name)
    model_cls = getattr(module, cls)
    model = model_cls().eval()
    inputs = (getattr(model_cls, "example_inputs", None) or module.example_inputs)()
    args, kwargs = inputs if isinstance(inputs[-1], dict) else (inputs, {})
    ep = exporter.export(model, args, kwargs)
    written = exporter.to_executorch(ep, tmp_path / f"{name}.pte")
    _assert_matches_eager(model, ep, written.path, [("example", args, kwargs)])


def _transformer(kind):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if kind == "gpt2_sdpa":
        config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=64)
        config._attn_implementation = "sdpa"
        return transformers.GPT2LMHeadModel(config).eval()
    if kind == "bert":
        config = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=128, vocab_size=100, max_position_embeddings=64)
        return transformers.BertForMaskedLM(config).eval()
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=100)
    return transformers.LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("kind", ["gpt2_sdpa", "bert", "llama"])
def test_transformers_lower_and_run_as_eager(tmp_path, kind):
    model = _transformer(kind)
    ids = torch.randint(0, 100, (2, 8))
    seq = Dim("seq", min=2, max=32)
    ep = exporter.export(model, (ids,), {"use_cache": False} if kind != "bert" else {},
                         dynamic_shapes=({1: seq},) if kind == "bert" else {"input_ids": {1: seq}, "use_cache": None})
    written = exporter.to_executorch(ep, tmp_path / f"{kind}.pte")
    kwargs = {"use_cache": False} if kind != "bert" else {}
    runs = [("example", (ids,), kwargs), ("seq=13", (torch.randint(0, 100, (2, 13)),), kwargs)]
    _assert_matches_eager(model, ep, written.path, runs, atol=1e-4)


def test_prefill_and_decode_in_one_file(tmp_path):
    model = _transformer("llama")
    prompt = torch.randint(0, 100, (1, 6))
    prefill = exporter.export(model, (prompt,), {"use_cache": True})
    with torch.no_grad():
        out = model(prompt, use_cache=True)
    cache, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
    length, shapes = Dim("cache_len", max=60), ShapesCollection()
    for layer in cache.layers:
        shapes[layer.keys] = shapes[layer.values] = {2: length}
    decode = exporter.export(model, (token,), {"past_key_values": cache, "use_cache": True}, dynamic_shapes=shapes)
    written = exporter.to_executorch({"prefill": prefill, "decode": decode}, tmp_path / "llama.pte")
    assert [m.name for m in written.methods] == ["prefill", "decode"]

    got = load_executorch(written.path, prefill, "prefill")(prompt, use_cache=True)
    torch.testing.assert_close(got.logits, out.logits, rtol=1e-4, atol=1e-4)
    step = load_executorch(written.path, decode, "decode")
    cache, expected_cache = got.past_key_values, out.past_key_values
    for _ in range(3):  # the file's cache goes back into the file, as eager's does
        with torch.no_grad():
            expected = model(token, past_key_values=expected_cache, use_cache=True)
        got = step(token, past_key_values=cache, use_cache=True)
        torch.testing.assert_close(got.logits, expected.logits, rtol=1e-4, atol=1e-4)
        cache, expected_cache = got.past_key_values, expected.past_key_values
        token = expected.logits[:, -1:].argmax(-1)
    assert cache.get_seq_length() == 9


class Singular(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.svd(x).S  # no kernel in ExecuTorch


def test_a_lowering_failure_names_the_op_the_line_and_what_to_do(tmp_path):
    ep = exporter.export(Singular(), (torch.randn(3, 4),))
    with pytest.raises(exporter.LoweringError) as caught:
        exporter.to_executorch(ep, tmp_path / "s.pte")
    error = caught.value
    assert error.category is exporter.Category.LOWERING
    assert "aten._linalg_svd.default" in error.message
    assert error.location == f"{__file__}:{Singular.forward.__code__.co_firstlineno + 1}"
    assert "core ATen" in error.hint
    assert not (tmp_path / "s.pte").exists()


def test_the_command_line_writes_verifies_and_tables_the_file(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "exporter", str(ROOT / "examples" / "tiny_transformer.py:TinyTransformer"), "--verify",
         "--executorch", "tt.pte", "--dynamic", "input_ids.0=batch:1..8", "--dynamic", "attention_mask.0=batch",
         "--json", "r.json"],
        cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "COLUMNS": "120"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ExecuTorch" in result.stdout and "outside the delegate" in result.stdout
    import json

    (pte,) = [a for a in json.loads((tmp_path / "r.json").read_text())["artifacts"] if a["kind"] == "executorch"]
    assert pte["verification"]["passed"] and set(pte["verification"]["max_abs_error"]) == {"example", "fresh", "sizes"}
    assert pte["lowering"][0]["delegated"] > 0 and (tmp_path / "tt.pte").stat().st_size == pte["bytes"]


class Gate(torch.nn.Module):
    """A branch on a value: the program holds a torch.cond that ExecuTorch must run."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        if h.mean() > 0:
            return torch.relu(h) * 2
        return h - 1


@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_a_captured_branch_runs_each_side_as_eager(tmp_path, backend):
    torch.manual_seed(0)
    model = Gate().eval()
    x = torch.randn(4, 8)
    ep = exporter.export(model, (x,))
    assert any(n.target is torch.ops.higher_order.cond for n in ep.graph.nodes)
    written = exporter.to_executorch(ep, tmp_path / "gate.pte", backend=backend)
    sides = [torch.full((4, 8), 3.0), torch.full((4, 8), -3.0)]
    assert {bool(model.lin(s).mean() > 0) for s in sides} == {True, False}
    runs = [("example", (x,), {})] + [(f"side {i}", (s,), {}) for i, s in enumerate(sides)]
    _assert_matches_eager(model, ep, written.path, runs)


class RunningSum(torch.nn.Module):
    """A loop over the values a mask picks: its count only the data knows."""

    def forward(self, scores):
        total = scores.new_zeros(())
        for s in scores[scores > 0]:
            total = total * 0.5 + s
        return total


@pytest.mark.parametrize("max_iterations", [None, 4])
def test_a_loop_over_a_data_sized_tensor_is_refused_with_what_executorch_cannot_take(tmp_path, max_iterations):
    # ExecuTorch's passes trace each cond and while_loop again and refuse operands whose size
    # only the data decides, the loop's own items among them: as one loop or as bounded steps
    ep = exporter.export(RunningSum(), (torch.tensor([0.5, -1.0, 2.0]),), max_iterations=max_iterations)
    with pytest.raises(exporter.LoweringError) as refused:
        exporter.to_executorch(ep, tmp_path / "loop.pte", backend="portable")
    form = "higher_order.while_loop" if max_iterations is None else "higher_order.cond"
    assert f"failed at {form}" in str(refused.value)
    assert "refuse one whose operands have a size only the data decides" in refused.value.hint
