"""How long the HTML report of a 32-layer LLaMA takes (the aim: under a second).

    python benchmarks/bench_html.py            # needs transformers; chromium for the in-page figures

Prints the Python side (graph extraction, page) and, when headless Chromium is installed,
the drawing's own layout-and-draw time inside the page (``data-render-ms``) for the first
view and with every module opened (``#open-all``). Chromium's start-up is printed apart: it
is the browser's, not the report's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import torch

LAYERS = 32


class Llama(torch.nn.Module):
    """A small-width LLaMA with 32 layers: the graph of a 7B model, not its weights."""

    def __init__(self, layers: int = LAYERS):
        super().__init__()
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        config = LlamaConfig(
            vocab_size=128, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=64, max_position_embeddings=512, use_cache=False, attn_implementation="sdpa",
        )
        self.model = LlamaForCausalLM(config).eval()

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask)


example_inputs = (torch.randint(0, 128, (2, 16)), torch.ones(2, 16, dtype=torch.long))


def _in_page(chromium: str, path: str, fragment: str) -> tuple[str, str, float]:
    started = time.perf_counter()
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", f"file://{path}{fragment}"],
        capture_output=True, text=True, timeout=120,
    ).stdout
    return re.search(r'data-render-ms="([^"]*)"', dom)[1], re.search(r'data-boxes="([^"]*)"', dom)[1], time.perf_counter() - started


def main() -> None:
    from exporter.cli.graph_data import graph_data
    from exporter.cli.html import export_html, write_html
    from exporter.cli.job import run_export
    from exporter.cli.settings import ExportSettings

    flags = ["input_ids.0=batch:1..16", "input_ids.1=seq:..512", "attention_mask.0=batch", "attention_mask.1=seq"]
    report = run_export(ExportSettings(f"{os.path.abspath(__file__)}:Llama", save=False, dynamic=flags))
    if not report.ok:
        sys.exit(report.error.to_text())
    started = time.perf_counter()
    report.graph = graph_data(report.program)
    extracted = time.perf_counter()
    page = export_html(report)
    written = time.perf_counter()
    print(f"{LAYERS}-layer LLaMA, {sum(report.ops.values()):,} ops: graph data {1000 * (extracted - started):.0f} ms, "
          f"page {1000 * (written - extracted):.0f} ms, {len(page) / 1024:.0f} KB")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium: the in-page figures need apt-get install -y chromium")
        return
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "llama.html")
        write_html(path, page)
        for label, fragment in (("first view", ""), ("every module open", "#open-all")):
            ms, boxes, wall = _in_page(chromium, path, fragment)
            print(f"{label}: {boxes} boxes laid out and drawn in {ms} ms in the page (chromium run {wall:.1f} s)")


if __name__ == "__main__":
    main()
