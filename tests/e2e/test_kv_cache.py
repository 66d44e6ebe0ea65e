"""LLM serving programs: prefill and decode steps that take and return transformers' KV caches.

Each test feeds the program's own cache back into it for several decode steps and compares
every step with the eager model fed its own cache.  Where torch.export fails on the same
call, the test shows it.
"""

import contextlib
import copy
import os
import subprocess
import sys

import pytest
import torch
import torch.utils._pytree as pytree
from torch.export import Dim, ShapesCollection

import exporter
from exporter._torch_internals import at_least

transformers = pytest.importorskip("transformers")

STEPS = 3


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


def _gpt2():
    config = transformers.GPT2Config(
        n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=64, bos_token_id=0, eos_token_id=0
    )
    return transformers.GPT2LMHeadModel(config).eval()


def _llama_config():
    return transformers.LlamaConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
        intermediate_size=64, vocab_size=100, max_position_embeddings=64,
    )


def _cache_length_dynamic(cache_layers, name="cache_len"):
    shapes, length = ShapesCollection(), Dim(name, max=60)
    for layer in cache_layers:
        shapes[layer.keys] = {2: length}
        shapes[layer.values] = {2: length}
    return shapes


@contextlib.contextmanager
def _unregistered(*classes):
    """torch.export as a fresh process sees it: these classes are not pytree containers."""
    saved = {c: (pytree.SUPPORTED_NODES.pop(c), pytree.SUPPORTED_SERIALIZED_TYPES.pop(c)) for c in classes
             if c in pytree.SUPPORTED_NODES}
    try:
        yield
    finally:
        for cls, (node, serialized) in saved.items():
            pytree.SUPPORTED_NODES[cls] = node
            pytree.SUPPORTED_SERIALIZED_TYPES[cls] = serialized


def _decode_matches_eager(model, program, token, cache, **kwargs):
    """STEPS decode steps, each program step fed the program's cache, each eager step its own."""
    ours, theirs = cache, copy.deepcopy(cache)
    for step in range(STEPS):
        got = program.module()(token, cache=ours, use_cache=True, **kwargs)
        want = model(token, cache=theirs, use_cache=True, **kwargs)
        assert type(got.cache) is type(want.cache)
        torch.testing.assert_close(got.logits, want.logits, rtol=1e-4, atol=1e-5, msg=f"decode step {step}")
        for mine, eager in zip(pytree.tree_leaves(got.cache), pytree.tree_leaves(want.cache)):
            torch.testing.assert_close(mine, eager, rtol=1e-4, atol=1e-5)
        ours, theirs = got.cache, want.cache
        token = want.logits[:, -1:].argmax(-1)
    return ours


def test_gpt2_prefill_and_decode_with_a_growing_cache_where_torch_export_fails():
    model = _gpt2()
    ids = torch.randint(0, 100, (2, 5))
    with _unregistered(transformers.DynamicCache, transformers.DynamicLayer):
        with pytest.raises(RuntimeError, match="DynamicCache.*not a known type"):
            torch.export.export(model, (ids,), {"use_cache": True}, strict=False)

    prefill = exporter.export(model, (ids,), {"use_cache": True}, dynamic_shapes={"input_ids": {1: Dim("seq", max=32)}})
    longer = torch.randint(0, 100, (2, 9))
    out = prefill.module()(longer, use_cache=True)
    assert isinstance(out.cache, transformers.DynamicCache)
    torch.testing.assert_close(out.logits, model(longer, use_cache=True).logits, rtol=1e-4, atol=1e-5)

    token = torch.randint(0, 100, (2, 1))
    decode = exporter.export(
        model, (token,), {"cache": out.cache, "use_cache": True}, dynamic_shapes=_cache_length_dynamic(out.cache.layers)
    )
    assert decode.graph_signature.user_inputs[:3] == ("input_ids", "cache_layers_0_keys", "cache_layers_0_values")
    final = _decode_matches_eager(model, decode, token, out.cache)
    assert final.layers[0].keys.shape[2] == 9 + STEPS


def test_llama_decode_with_grouped_kv_heads_exports_where_the_solver_of_torch_export_refuses():
    """repeat_kv's reshape guards Min(8*L + 8, 16*L + 16) == 8*L + 8, true for every length:
    torch.export's solver refuses it before torch 2.14; from 2.14 both export it alike."""
    model = transformers.LlamaForCausalLM(_llama_config()).eval()
    cache = model(torch.randint(0, 100, (2, 6)), use_cache=True).cache
    token = torch.randint(0, 100, (2, 1))
    kwargs = {"cache": cache, "use_cache": True}
    shapes = _cache_length_dynamic(cache.layers)
    decode = exporter.export(model, (token,), kwargs, dynamic_shapes=shapes)
    _decode_matches_eager(model, decode, token, cache)
    if not at_least(2, 14):
        with pytest.raises(Exception, match="Constraints violated"):
            torch.export.export(model, (token,), kwargs, dynamic_shapes=shapes, strict=False)
        return
    oracle = torch.export.export(model, (token,), kwargs, dynamic_shapes=_cache_length_dynamic(cache.layers), strict=False)
    oracle = oracle.run_decompositions({})
    assert decode.graph_signature == oracle.graph_signature
    assert {str(r) for r in decode.range_constraints.values()} == {str(r) for r in oracle.range_constraints.values()}


def test_a_nested_dict_spec_names_the_cache_tensors_by_attribute():
    model = transformers.LlamaForCausalLM(_llama_config()).eval()
    cache = model(torch.randint(0, 100, (1, 4)), use_cache=True).cache
    token = torch.randint(0, 100, (1, 1))
    length = Dim("length", max=60)
    spec = {"input_ids": None, "cache": {"layers": [{"keys": {2: length}, "values": {2: length}}] * 2}, "use_cache": None}
    decode = exporter.export(model, (token,), {"cache": cache, "use_cache": True}, dynamic_shapes=spec)
    assert len(decode.range_constraints) == 1  # one length for all four tensors
    _decode_matches_eager(model, decode, token, cache)


def test_a_static_cache_is_updated_in_place_by_the_program():
    config = _llama_config()
    model = transformers.LlamaForCausalLM(config).eval()
    prompt = torch.randint(0, 100, (1, 5))
    ours = transformers.StaticCache(config=config, max_cache_len=16)
    theirs = transformers.StaticCache(config=config, max_cache_len=16)
    model(prompt, cache=ours, use_cache=True)
    model(prompt, cache=theirs, use_cache=True)
    token, position = torch.randint(0, 100, (1, 1)), torch.tensor([5])
    decode = exporter.export(model, (token,), {"cache": ours, "use_cache": True, "cache_position": position})
    mutated = [s.target for s in decode.graph_signature.output_specs if s.kind.name == "USER_INPUT_MUTATION"]
    assert "cache_layers_0_keys" in mutated and "cache_layers_1_values" in mutated
    assert int(ours.layers[0].cumulative_length) == 5  # exporting did not write to the example cache
    for step in range(STEPS):
        got = decode.module()(token, cache=ours, use_cache=True, cache_position=position)
        want = model(token, cache=theirs, use_cache=True, cache_position=position)
        torch.testing.assert_close(got.logits, want.logits, rtol=1e-4, atol=1e-5, msg=f"step {step}")
        torch.testing.assert_close(ours.layers[1].keys, theirs.layers[1].keys)
        token, position = want.logits[:, -1:].argmax(-1), position + 1


def test_a_seq2seq_decoder_step_takes_and_returns_an_encoder_decoder_cache():
    config = transformers.BartConfig(
        vocab_size=100, d_model=32, encoder_layers=1, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
    )
    model = transformers.BartForConditionalGeneration(config).eval()
    first = model(input_ids=torch.randint(3, 100, (2, 7)), decoder_input_ids=torch.randint(3, 100, (2, 3)), use_cache=True)
    cache, encoded = first.cache, (first.encoder_last_hidden_state,)
    token = torch.randint(3, 100, (2, 1))
    decode = exporter.export(
        model, (), {"encoder_outputs": encoded, "decoder_input_ids": token, "cache": cache, "use_cache": True},
        dynamic_shapes=_cache_length_dynamic(cache.self_attention_cache.layers),
    )
    ours, theirs = cache, copy.deepcopy(cache)
    for step in range(STEPS):
        got = decode.module()(encoder_outputs=encoded, decoder_input_ids=token, cache=ours, use_cache=True)
        want = model(encoder_outputs=encoded, decoder_input_ids=token, cache=theirs, use_cache=True)
        assert isinstance(got.cache, transformers.EncoderDecoderCache)
        torch.testing.assert_close(got.logits, want.logits, rtol=1e-4, atol=1e-5, msg=f"step {step}")
        ours, theirs, token = got.cache, want.cache, want.logits[:, -1:].argmax(-1)


_LOAD_AND_RUN = """
import sys, torch, exporter
exporter.register_known_containers()
program = torch.export.load(sys.argv[1])
data = torch.load(sys.argv[2], weights_only=False)
out = program.module()(data["token"], cache=data["cache"], use_cache=True)
torch.testing.assert_close(out.logits, data["want"], rtol=1e-4, atol=1e-5)
print(type(out.cache).__name__, tuple(out.cache.layers[0].keys.shape))
"""


@pytest.mark.slow
def test_a_saved_decode_program_loads_and_runs_in_a_fresh_process(tmp_path):
    model = _gpt2()
    cache = model(torch.randint(0, 100, (2, 5)), use_cache=True).cache
    token = torch.randint(0, 100, (2, 1))
    decode = exporter.export(model, (token,), {"cache": cache, "use_cache": True},
                             dynamic_shapes=_cache_length_dynamic(cache.layers))
    torch.export.save(decode, tmp_path / "decode.pt2")
    want = model(token, cache=copy.deepcopy(cache), use_cache=True).logits
    torch.save({"token": token, "cache": cache, "want": want}, tmp_path / "data.pt")
    result = subprocess.run(
        [sys.executable, "-c", _LOAD_AND_RUN, str(tmp_path / "decode.pt2"), str(tmp_path / "data.pt")],
        capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "DynamicCache (2, 2, 6, 16)"
    assert "Weights only load failed" not in result.stderr
