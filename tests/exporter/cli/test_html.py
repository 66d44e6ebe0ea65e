"""The HTML report: self-contained, every section there, and drawn in a real browser.

The browser tests run headless Chromium (Debian: apt-get install -y chromium) on the page
and read back the DOM after the scripts ran, and the browser's console log for errors.
"""

import json
import os
import re
import shutil
import subprocess

import pytest

from exporter.cli.check import CheckResult
from exporter.cli.html import check_html, export_html, write_html
from exporter.cli.job import run_export
from exporter.cli.settings import ExportSettings

NESTED = """
import torch

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        return x + self.norm(self.proj(x)).relu()

class Tower(torch.nn.Module):
    def __init__(self, layers: int = 30):
        super().__init__()
        self.layers = torch.nn.ModuleList([Block() for _ in range(layers)])
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return {"logits": self.head(x)}

class Branchy(torch.nn.Module):
    def forward(self, x):
        for _ in range(x.gt(0).sum()):
            x = x * 0.5
        return x

class Pipeline(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = torch.nn.Linear(8, 8)
        self.gate = Branchy()

    def forward(self, x):
        return self.gate(self.pre(x))

example_inputs = (torch.randn(4, 8),)
"""

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install -y chromium)"
)


@pytest.fixture
def reports(tmp_path, monkeypatch):
    (tmp_path / "tower_models.py").write_text(NESTED)
    monkeypatch.chdir(tmp_path)
    ok = run_export(ExportSettings("tower_models.py:Tower", save=False, verify=True, dynamic=["x.0=batch:2..32"]))
    failed = run_export(ExportSettings("tower_models.py:Branchy", save=False))
    assert ok.ok and not failed.ok
    return ok, failed


def _browse(path, fragment: str = "") -> tuple[str, list[str]]:
    """The DOM after the page's scripts ran, and the console messages that are errors."""
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
         "--dump-dom", f"file://{os.path.abspath(path)}{fragment}"],
        capture_output=True, text=True, timeout=120,
    )
    console = [line for line in result.stderr.splitlines() if "CONSOLE" in line]
    errors = [line for line in console if re.search(r"Uncaught|Error|error", line)]
    return result.stdout, errors


def test_one_file_with_every_section_and_nothing_fetched(reports):
    ok, _ = reports
    page = export_html(ok)
    for expected in ("tower_models.py:Tower", "Signature", "<code>logits</code>", "[batch, 8]", "Dynamic sizes",
                     "layers.0-29", "Ops:", "Module tree", "Graph", "Program vs eager", "max batch=32", "Time"):
        assert expected in page, expected
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "no network: nothing loaded from elsewhere"
    assert "<script src" not in page and "<link" not in page
    graph = re.search(r'<script type="application/json" id="model-graph">(.*?)</script>', page, re.S)
    assert graph and '"relu"' in graph[1]


def test_a_failure_shows_its_source_line_and_hint(reports):
    _, failed = reports
    page = export_html(failed)
    assert "Failure:" in page and "tower_models.py:" in page and "hint:" in page
    assert "for _ in range(x.gt(0).sum()):" in page, "the user's own source line"
    assert ">Graph</h2>" not in page


def test_which_submodules_export_on_their_own(reports):
    report = run_export(ExportSettings("tower_models.py:Pipeline", save=False, report_submodules=True))
    page = export_html(report)
    assert "Submodules exported on their own" in page and "&larr; problem is here" in page
    assert "<code>gate</code> <span class='sub'>(Branchy)</span> <span class='bad'>failed</span>" in page
    assert "<code>pre</code> <span class='sub'>(Linear)</span> <span class='ok'>ok</span>" in page


def test_a_draft_export_lists_what_it_assumed(reports):
    report = run_export(ExportSettings("tower_models.py:Branchy", save=False, draft=True))
    page = export_html(report)
    assert "Draft export: 1 assumption(s) taken from the example inputs" in page
    assert "for _ in range(x.gt(0).sum()):" in page and "checked at run time" in page


def test_check_writes_one_page_linking_every_model(reports):
    ok, failed = reports
    page = check_html([CheckResult("tower_models.py:Tower", ok), CheckResult("tower_models.py:Branchy", failed)])
    assert "1/2 models passed" in page
    assert "href='#model-1'" in page and "href='#model-2'" in page
    assert 'id="model-1"' in page and 'id="model-2"' in page and 'id="model-1-graph"' in page


@pytest.mark.slow
@needs_chromium
def test_the_browser_draws_the_graph_without_console_errors(reports, tmp_path):
    ok, failed = reports
    write_html(tmp_path / "ok.html", export_html(ok))
    dom, errors = _browse(tmp_path / "ok.html")
    assert errors == []
    assert '<div class="graph-canvas"><svg' in dom and "layers.0 (Block)" in dom and "head (Linear)" in dom
    assert dom.count(">linear<") == 1, "the overview keeps a long stack of layers closed (only the head's op shows)"
    boxes = int(re.search(r'data-boxes="(\d+)"', dom)[1])
    status = re.search(r'class="graph-status">([^<]*)<', dom)[1]
    assert boxes > 3 and "edges; drawn in" in status

    opened, errors = _browse(tmp_path / "ok.html", "#open-all")
    assert errors == []
    assert int(re.search(r'data-boxes="(\d+)"', opened)[1]) > boxes, "opening every module shows more"
    assert opened.count(">linear<") == 31 and ">layer_norm<" in opened

    found, errors = _browse(tmp_path / "ok.html", "#find=layers.17.proj")
    assert errors == [] and "1 found;" in found
    assert re.search(r'<g class="mod open depth\d hit" data-mod="\d+"><title>layers.17.proj:', found), "marked, and open"
    assert found.count(">linear<") == 2, "the found module's op shows (and the head's): the other layers stay closed"
    ops, errors = _browse(tmp_path / "ok.html", "#find=layer_norm")
    assert errors == [] and "30 found;" in ops and ops.count('<g class="op op hit">') == 30

    write_html(tmp_path / "failed.html", export_html(failed))
    dom, errors = _browse(tmp_path / "failed.html")
    assert errors == [] and "for _ in range(x.gt(0).sum()):" in dom and 'class="graph-canvas"' not in dom


@needs_chromium
def test_the_console_check_catches_a_script_error(tmp_path):
    """The check above can fail: a page whose script throws is caught."""
    (tmp_path / "broken.html").write_text("<html><body><script>null.x;</script></body></html>")
    _, errors = _browse(tmp_path / "broken.html")
    assert errors and "Uncaught TypeError" in errors[0]


def test_names_cannot_break_out_of_the_page(reports):
    ok, _ = reports
    ok.graph["nodes"][0][1] = "</script><script>alert(1)</script>"
    ok.settings.model = "<b>m.py</b>:M"
    page = export_html(ok)
    assert "</script><script>alert(1)" not in page and "<b>m.py</b>" not in page
    data = re.search(r'id="model-graph">(.*?)</script>', page, re.S)[1]
    assert json.loads(data)["nodes"][0][1] == "</script><script>alert(1)</script>"
