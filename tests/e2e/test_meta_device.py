"""Models on the meta device (shapes, no weights) export; the program runs on meta inputs,
saves and loads, and the command line checks shapes and dtypes only."""

import json
import os
import subprocess
import sys

import pytest
import torch
from torch.export import Dim

import exporter

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def _meta_llama():
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        config = transformers.LlamaConfig(
            vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
            use_cache=False,
        )
        return transformers.LlamaForCausalLM(config).eval()


@pytest.mark.slow
def test_a_meta_model_exports_like_the_oracle_and_runs_on_meta_inputs(tmp_path):
    model = _meta_llama()
    ids = torch.randint(0, 128, (2, 8), device="meta")
    spec = {"input_ids": {1: Dim("seq", max=64)}}
    ep = exporter.export(model, (ids,), dynamic_shapes=spec)
    oracle = torch.export.export(model, (ids,), dynamic_shapes=spec, strict=False).run_decompositions({})
    assert [s.target for s in ep.graph_signature.input_specs] == [s.target for s in oracle.graph_signature.input_specs]
    assert all(t.device.type == "meta" for t in ep.state_dict.values())
    assert ep.module()(torch.randint(0, 128, (2, 17), device="meta")).logits.shape == (2, 17, 128)
    torch.export.save(ep, tmp_path / "meta.pt2")
    loaded = torch.export.load(tmp_path / "meta.pt2")
    assert loaded.module()(ids).logits.shape == (2, 8, 128)


@pytest.mark.slow
def test_the_command_line_exports_a_meta_skeleton_and_checks_shapes(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "exporter", os.path.join(EXAMPLES, "meta_skeleton.py:Skeleton"),
         "--init-args", '{"width": 64, "depth": 2}', "--verify", "--json", "r.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    runs = json.loads((tmp_path / "r.json").read_text())["verification"]["runs"]
    assert {out["note"] for run in runs for out in run["outputs"]} == {"meta device: shape and dtype only"}
    assert (tmp_path / "Skeleton.pt2").exists()
