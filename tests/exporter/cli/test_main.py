"""The command line, run as a subprocess the way users and CI run it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

from tests.exporter.cli.conftest import MODELS

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples")
EXAMPLES = os.path.abspath(EXAMPLES)

INPUTS = textwrap.dedent(
    """
    import torch

    def pair():
        return (torch.randn(2, 16),), {}
    """
)


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "inputs.py").write_text(INPUTS)
    (tmp_path / "bad_syntax.py").write_text("import torch\nclass Net(torch.nn.Module)\n    pass\n")
    (tmp_path / "bad_import.py").write_text("import torch\nimport not_a_real_package_xyz\n")
    (tmp_path / "bare.py").write_text("import torch\n\nclass NoInputs(torch.nn.Module):\n    def forward(self, x):\n        return x\n")
    return tmp_path


def run(*args: str, cwd) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "exporter", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=300
    )


def out(result: subprocess.CompletedProcess) -> str:
    return result.stdout + result.stderr


def flat(result: subprocess.CompletedProcess) -> str:
    """Output without panel borders, whitespace runs collapsed: for matching messages."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", out(result)).split())


# -- each way of giving the model and its inputs -----------------------------------------------


@pytest.mark.slow
def test_inputs_from_a_function_in_the_model_file_and_the_program_matches_eager(workdir):
    result = run(os.path.join(EXAMPLES, "mlp.py:MLP"), "--verify", cwd=workdir)
    assert result.returncode == 0, out(result)
    text = out(result)
    for expected in ("signature", "net.0 ", "aten.linear.default", "program vs eager", "fresh #2", "saved"):
        assert expected in text
    assert "Traceback" not in text and "exporting..." not in text, "no traceback, no live status off a terminal"

    program = torch.export.load(workdir / "MLP.pt2")
    sys.path.insert(0, EXAMPLES)
    try:
        from mlp import MLP
    finally:
        sys.path.remove(EXAMPLES)
    model = MLP().eval()
    model.load_state_dict(program.state_dict)
    x = torch.randn(8, 16)
    torch.testing.assert_close(program.module()(x), model(x))


@pytest.mark.parametrize(
    "args, expected",
    [
        (["examples/cnn.py:SmallCNN", "--init-args", '{"channels": 4}'], "staticmethod on the class"),
        (["examples/tiny_transformer.py:TinyTransformer"], "classmethod on the class"),
        (["examples/keyword_inputs.py:Scorer", "--example-inputs", "f32[4,16] mask=b8[4,16] temperature=0.5"], "shorthand"),
        (["examples/keyword_inputs.py:Scorer", "--example-inputs", ":make_inputs"], "function in the model file"),
        (["models.py:Net", "--example-inputs", "inputs.py:pair"], "function in another file"),
        (["models.py:Net"], "module-level value"),
        (["models.py:make_net"], "factory function"),
        (["models.py:instance"], "module instance"),
        (["torch.nn:Linear", "--init-args", '{"in_features": 4, "out_features": 2}', "--example-inputs", "f32[3,4]"], "package.module:Name"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
@pytest.mark.slow
def test_every_way_of_naming_a_model_and_its_inputs(workdir, args, expected):
    args = [os.path.join(EXAMPLES, "..", a) if a.startswith("examples/") else a for a in args]
    result = run(*args, "-q", "--verify", "-o", "out.pt2", cwd=workdir)
    assert result.returncode == 0, out(result)
    assert result.stdout.startswith("ok "), result.stdout
    assert len(result.stdout.strip().splitlines()) == 1, "-q prints one line"
    torch.export.load(workdir / "out.pt2")


# -- bad input: one clear message, exit 2, no traceback ------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (["nothere.py:Net"], r"file nothere.py does not exist"),
        (["models.py:Nett"], r"models.py has no 'Nett'.*did you mean 'Net'"),
        (["bad_syntax.py:Net"], r"bad_syntax.py has a syntax error at line 2: expected ':'"),
        (["bad_import.py:Net"], r"importing bad_import.py failed: ModuleNotFoundError: No module named 'not_a_real_package_xyz'"),
        (["no.such.module:Net"], r"no module named 'no.such.module'"),
        (["models.py:Net", "--init-args", '{"hidden": -1}'], r"Net\(hidden=-1\) raised ValueError: hidden must be positive.*models.py:8"),
        (["models.py:Net", "--init-args", '{"hiden": 1}'], r"--init-args do not fit Net\(hidden: int = 8\): got an unexpected keyword argument 'hiden'"),
        (["models.py:Net", "--init-args", "{hidden: 1}"], r"--init-args is not valid JSON.* \{hidden: 1\} \^"),
        (["models.py:Net", "--init-args", "[1, 2]"], r"--init-args must be a JSON object"),
        (["models.py:instance", "--init-args", '{"hidden": 1}'], r"--init-args were given, but instance is already a module instance"),
        (["models.py:not_a_model"], r"not_a_model\(\) returned int, not a torch.nn.Module"),
        (["bare.py:NoInputs"], r"no example inputs for NoInputs.*--example-inputs"),
        (["models.py:Net", "--example-inputs", "f32[2,16"], r"--example-inputs: expected '\]'.* f32\[2,16 \^"),
        (["models.py:Net", "--example-inputs", "q32[2,16]"], r"--example-inputs: unknown dtype"),
        (["models.py:Net", "--example-inputs", "f32[2,16] f32[2,16]"], r"do not fit Net.forward\(x\): too many positional arguments"),
        (["models.py:Net", "--example-inputs", "f32[2,3]"], r"fails on the example inputs even when run eagerly.*mat1 and mat2 shapes cannot be multiplied"),
        (["models.py:Net", "--example-inputs", "inputs.py:nothing"], r"inputs.py has no 'nothing'"),
    ],
)
@pytest.mark.slow
def test_bad_input_names_the_input_and_exits_2(workdir, args, message):
    result = run(*args, cwd=workdir)
    assert result.returncode == 2, out(result)
    assert re.search(message, flat(result)), out(result)
    assert "Traceback" not in out(result)
    assert "hint:" in out(result)
    assert not list(workdir.glob("*.pt2")), "nothing is written on failure"


@pytest.mark.slow
def test_usage_errors_exit_2(workdir):
    assert run(cwd=workdir).returncode == 2
    assert run("models.py:Net", "--no-such-flag", cwd=workdir).returncode == 2
    assert run("check", cwd=workdir).returncode == 2
    assert run("check", "models.py:Net", "--update-baseline", cwd=workdir).returncode == 2


def test_several_dynamic_specs_after_one_flag_say_to_repeat_the_flag(capsys):
    from exporter.cli.main import _export_parser

    with pytest.raises(SystemExit) as exited:
        _export_parser().parse_args(["m.py:Net", "--dynamic", "x.0=b", "x.1=s", "y.0=b"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: x.1=s y.0=b" in err
    assert "repeat it, as in --dynamic x.1=s --dynamic y.0=b" in err
    # any other stray word gets argparse's message alone
    with pytest.raises(SystemExit):
        _export_parser().parse_args(["m.py:Net", "--bogus"])
    assert "repeat it" not in capsys.readouterr().err


def test_verbose_shows_the_traceback(workdir):
    result = run("models.py:Net", "--init-args", '{"hidden": -1}', "-v", cwd=workdir)
    assert result.returncode == 2
    assert "Traceback" in out(result)


# -- export failures: exit 1, category, source line, next step; the output file is untouched -------


@pytest.mark.slow
def test_export_failure_names_category_line_and_leaves_output_alone(workdir):
    target = workdir / "keep.pt2"
    target.write_bytes(b"previous program")
    result = run("models.py:Branchy", "--example-inputs", "f32[3]", "-o", str(target), "--json", "report.json", cwd=workdir)
    assert result.returncode == 1, out(result)
    text = out(result)
    assert "data-dependent control flow" in text
    assert "models.py:16" in text and "for _ in range(x.gt(0).sum()):" in text
    assert "loop a fixed number of times" in text  # the next step
    assert "Traceback" not in text
    assert target.read_bytes() == b"previous program"
    assert not [p for p in workdir.iterdir() if p.name.startswith(".exporter-")], "no temporary file left"

    report = json.loads((workdir / "report.json").read_text())
    assert report["status"] == "failed"
    assert report["error"]["category"] == "data-dependent control flow"
    assert report["error"]["location"].endswith("models.py:16")
    assert report["output_file"] is None


def test_report_submodules_shows_which_submodules_export_and_where_it_fails(workdir):
    result = run("models.py:Pipeline", "--report-submodules", "--json", "report.json", "-o", "p.pt2", cwd=workdir)
    assert result.returncode == 1, out(result)
    text = out(result)
    assert "export failed: data-dependent control flow" in text
    assert re.search(r"├── pre \(Linear\) (✓ )?ok", text), text
    assert re.search(r"├── gate \(Branchy\) (✗|FAIL) data-dependent control flow .*problem is here", text), text
    assert "the problem is in gate (Branchy)" in text
    assert not (workdir / "p.pt2").exists()

    submodules = json.loads((workdir / "report.json").read_text())["submodules"]
    assert submodules["frontier"] == ["gate"]
    root = submodules["root"]
    assert (root["class"], root["status"], root["error"]["category"]) == ("Pipeline", "failed", "data-dependent control flow")
    assert [(c["name"], c["status"]) for c in root["children"]] == [("pre", "ok"), ("gate", "failed"), ("post", "ok")]
    assert root["children"][1]["error"]["location"].endswith("models.py:16")


def test_draft_exports_past_the_branch_and_lists_the_assumption(workdir):
    result = run("models.py:Branchy", "--example-inputs", "f32[3]@[1,2)", "--draft", "--json", "report.json",
                 "-o", "b.pt2", cwd=workdir)
    assert result.returncode == 0, out(result)
    text = out(result)
    assert "draft export: 1 assumption(s) taken from the example inputs" in text
    assert "data-dependent" in text and "for _ in range(x.gt(0).sum()):" in text
    assert "WARNING" not in text  # the table says it once
    draft = json.loads((workdir / "report.json").read_text())["draft"]
    (assumption,) = draft["assumptions"]
    assert draft["sound"] is False
    assert assumption["kind"] == "data-dependent value" and assumption["location"].endswith("models.py:16")
    assert assumption["assumed"] == "u0 == 3" and assumption["checked"] is True  # all three entries are positive
    program = torch.export.load(workdir / "b.pt2")
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        program.module()(-torch.ones(3))  # another trip count: the assumption is checked


@pytest.mark.slow
def test_draft_on_a_model_that_needs_nothing_says_so(workdir):
    result = run("models.py:Net", "--draft", "-q", cwd=workdir)
    assert result.returncode == 0 and "draft assumption" not in out(result)
    result = run("models.py:Net", "--draft", "--json", "r.json", cwd=workdir)
    assert "nothing assumed" in out(result)
    assert json.loads((workdir / "r.json").read_text())["draft"] == {"sound": True, "assumptions": []}


MOE = textwrap.dedent(
    """
    import torch
    import transformers

    def mixtral():
        torch.manual_seed(0)
        config = transformers.MixtralConfig(
            vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=48, num_local_experts=4, num_experts_per_tok=2, experts_implementation="eager",
        )
        return transformers.MixtralForCausalLM(config)

    def example_inputs():
        return (torch.randint(0, 100, (2, 8)),)
    """
)


@pytest.mark.slow
def test_experts_implementation_flag_exports_the_moe_the_hint_names(workdir):
    pytest.importorskip("transformers")
    (workdir / "moe.py").write_text(MOE)  # without the flag it fails; the hint names it (test_experts.py)
    result = run("moe.py:mixtral", "--experts-implementation", "batched_mm", "--verify", "-o", "m.pt2", cwd=workdir)
    assert result.returncode == 0, out(result)
    assert (workdir / "m.pt2").exists()
    # eager captures the loop itself; a name transformers does not offer is a usage error
    assert run("moe.py:mixtral", "--experts-implementation", "eager", "--verify", cwd=workdir).returncode == 0
    assert run("moe.py:mixtral", "--experts-implementation", "loop", cwd=workdir).returncode == 2


def test_verification_mismatch_fails_the_run(workdir):
    result = run("models.py:Noisy", "--example-inputs", "f32[64]", "--verify", "-o", "noisy.pt2", cwd=workdir)
    assert result.returncode == 1, out(result)
    assert "MISMATCH" in out(result) and "program and eager differ" in out(result)
    assert not (workdir / "noisy.pt2").exists()


def test_graph_prints_the_code(workdir):
    result = run("models.py:Net", "--graph", cwd=workdir)
    assert result.returncode == 0
    assert 'def forward(self, p_lin_weight: "f32[8, 16]", p_lin_bias: "f32[8]", x: "f32[3, 16]")' in out(result)
    assert "torch.ops.aten.linear.default" in out(result)


def test_ir_training_writes_the_training_ir_and_verifies_it(workdir):
    (workdir / "bn.py").write_text(
        "import torch\n\nclass Norm(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.bn = torch.nn.BatchNorm1d(16)\n\n    def forward(self, x):\n        return self.bn(x)\n\n"
        "example_inputs = (torch.randn(4, 16),)\n"
    )
    result = run(
        "bn.py:Norm", "--ir", "training", "--verify", "--json", "r.json", "-o", "p.pt2",
        cwd=workdir,
    )
    assert result.returncode == 0, out(result)
    ep = torch.export.load(workdir / "p.pt2")
    assert ep.dialect == "TRAINING"
    assert all(spec.kind.name == "USER_OUTPUT" for spec in ep.graph_signature.output_specs)
    assert torch.ops.aten.batch_norm.default in [n.target for n in ep.graph.nodes]
    report = json.loads((workdir / "r.json").read_text())
    assert report["ir"] == "training" and report["artifacts"][0]["ir"] == "training"
    assert "program (training)" in out(result)


# -- the JSON report -----------------------------------------------------------------------------


def test_json_report_schema(workdir):
    result = run(os.path.join(EXAMPLES, "keyword_inputs.py:Scorer"), "--example-inputs", ":make_inputs",
                 "--verify", "--json", "r.json", "-q", cwd=workdir)
    assert result.returncode == 0, out(result)
    report = json.loads((workdir / "r.json").read_text())
    assert report["schema"] == "exporter.report/1"
    assert report["status"] == "ok"
    assert report["model"] == {
        "reference": os.path.join(EXAMPLES, "keyword_inputs.py:Scorer"), "name": "Scorer",
        "class": "keyword_inputs.Scorer", "parameters": 272, "train": False, "init_args": {},
    }
    assert report["inputs"]["source"] == ":make_inputs"
    assert report["inputs"]["leaves"][1] == {"path": "kwargs['mask']", "kind": "tensor", "dtype": "bool", "shape": [4, 16]}
    assert report["inputs"]["leaves"][2] == {"path": "kwargs['temperature']", "kind": "constant", "value": 0.5}
    assert report["output_file"].endswith("Scorer.pt2") and os.path.exists(report["output_file"])
    assert {"load", "inputs", "export", "export.trace", "verify", "save", "total"} <= set(report["timings"])
    inputs = report["signature"]["inputs"]
    assert inputs[0] == {"kind": "PARAMETER", "name": "p_proj_weight", "target": "proj.weight", "shape": [16, 16], "dtype": "float32",
                         "numel": 256, "bytes": 1024}
    assert inputs[-1] == {"kind": "USER_INPUT", "name": "temperature", "target": None, "path": "temperature", "value": 0.5,
                          "shape": None, "dtype": "float"}
    assert [o["name"] for o in report["signature"]["outputs"]] == ["softmax", "argmax"]
    assert [o["path"] for o in report["signature"]["outputs"]] == ["probs", "top"], "the keys of the returned dict"
    assert report["ops"]["aten.linear.default"] == 1
    assert report["modules"][0] == {"path": "", "class": "Scorer", "ops": 5, "total_ops": 6}
    verification = report["verification"]
    assert verification["passed"] and [r["inputs"] for r in verification["runs"]] == ["example", "fresh #1", "fresh #2"]
    assert set(verification["runs"][0]["outputs"][0]) == {"path", "max_abs", "max_rel", "ok", "note"}
    assert report["error"] is None and report["submodules"] is None
    assert report["versions"]["torch"] == torch.__version__ and "exporter" in report["versions"]


@pytest.mark.slow
def test_json_names_the_model_library_version(workdir):
    (workdir / "hf.py").write_text(textwrap.dedent(
        """
        import torch
        from transformers import BertConfig, BertModel

        def tiny_bert():
            return BertModel(BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1,
                                        num_attention_heads=2, intermediate_size=32))

        def example_inputs():
            return (torch.randint(0, 64, (1, 8)),)
        """
    ))
    result = run("hf.py:tiny_bert", "--json", "r.json", "-q", "-o", "bert.pt2", cwd=workdir)
    assert result.returncode == 0, out(result)
    import transformers

    assert json.loads((workdir / "r.json").read_text())["versions"]["transformers"] == transformers.__version__


# -- check, for CI --------------------------------------------------------------------------------


@pytest.mark.slow
def test_check_baseline_drift_junit_and_json(workdir):
    import xml.etree.ElementTree as ET

    model = workdir / "drift.py"
    model.write_text(textwrap.dedent(
        """
        import torch

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 4)

            def forward(self, x):
                return self.lin(x).relu()

        def example_inputs():
            return (torch.randn(2, 4),)
        """
    ))
    mlp = os.path.join(EXAMPLES, "mlp.py:MLP")
    first = run("check", "drift.py:M", mlp, "--baseline", "base.json", "--update-baseline", cwd=workdir)
    assert first.returncode == 0, out(first)
    assert "baseline recorded" in out(first)
    baseline = json.loads((workdir / "base.json").read_text())
    assert baseline["schema"] == "exporter.baseline/1"
    assert baseline["models"]["drift.py:M"]["ops"] == {"aten.linear.default": 1, "aten.relu.default": 1}

    unchanged = run("check", "drift.py:M", mlp, "--baseline", "base.json", "-j", "2", cwd=workdir)
    assert unchanged.returncode == 0, out(unchanged)
    assert "2/2 models passed" in out(unchanged)

    # The model changes, and the baseline was recorded under another torch: drift, named.
    model.write_text(model.read_text().replace("self.lin(x).relu()", "self.lin(x).relu() * 2"))
    baseline["models"]["drift.py:M"]["versions"]["torch"] = "2.12.0"
    (workdir / "base.json").write_text(json.dumps(baseline))
    drifted = run("check", "drift.py:M", mlp, "--baseline", "base.json", "--junit", "j.xml", "--json", "c.json", cwd=workdir)
    assert drifted.returncode == 1, out(drifted)
    text = out(drifted)
    assert "drift" in text and "aten.mul.Tensor: 0 -> 1 (+1)" in text
    assert "-output kind=USER_OUTPUT name=relu" in text and "+output kind=USER_OUTPUT name=mul" in text
    assert f"torch 2.12.0 -> {torch.__version__}" in text
    assert "1/2 models passed" in text

    suite = ET.parse(workdir / "j.xml").getroot().find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["drift.py:M"].find("failure").get("type") == "drift"
    assert cases[mlp].find("failure") is None

    summary = json.loads((workdir / "c.json").read_text())
    assert summary["schema"] == "exporter.check/1" and summary["status"] == "failed"
    assert [m["status"] for m in summary["models"]] == ["drift", "ok"]

    updated = run("check", "drift.py:M", "--baseline", "base.json", "--update-baseline", "-q", cwd=workdir)
    assert updated.returncode == 0
    assert json.loads((workdir / "base.json").read_text())["models"]["drift.py:M"]["ops"]["aten.mul.Tensor"] == 1
    assert mlp in json.loads((workdir / "base.json").read_text())["models"], "other entries are kept"


@pytest.mark.slow
def test_check_fails_on_export_failure_and_missing_baseline(workdir):
    failing = run("check", "models.py:Branchy", "models.py:Net", cwd=workdir)
    assert failing.returncode == 1
    assert "failed" in out(failing) and "data-dependent control flow" in out(failing)

    (workdir / "empty.json").write_text(json.dumps({"schema": "exporter.baseline/1", "models": {}}))
    missing = run("check", "models.py:Net", "--baseline", "empty.json", cwd=workdir)
    assert missing.returncode == 1
    assert "no baseline entry" in out(missing)

    bad_reference = run("check", "nothere.py:Net", cwd=workdir)
    assert bad_reference.returncode == 2


def test_live_status_on_a_terminal_only(workdir):
    import pty

    controller, terminal = pty.openpty()
    env = dict(os.environ, COLUMNS="120", TERM="xterm")
    proc = subprocess.Popen(
        [sys.executable, "-m", "exporter", "models.py:Net", "-o", "tty.pt2"],
        cwd=workdir, stdin=terminal, stdout=terminal, stderr=terminal, env=env,
    )
    os.close(terminal)
    chunks = []
    while True:
        try:
            data = os.read(controller, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=300)
    os.close(controller)
    text = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, text
    assert "exporting..." in text and "saved" in text


# -- dynamic shapes --------------------------------------------------------------------------------

TRANSFORMER = os.path.join(EXAMPLES, "tiny_transformer.py:TinyTransformer")


@pytest.mark.slow
def test_dynamic_flags_export_one_program_for_many_sizes(workdir):
    flags = ["--dynamic", "input_ids.0=batch:2..64", "--dynamic", "input_ids.1=seq:..127",
             "--dynamic", "attention_mask.0=batch", "--dynamic", "attention_mask.1=seq"]
    result = run(TRANSFORMER, *flags, "--verify", "--json", "d.json", "-o", "tt.pt2", "-q", cwd=workdir)
    assert result.returncode == 0, out(result)
    report = json.loads((workdir / "d.json").read_text())
    assert sorted(report["range_constraints"].values()) == [[0, 127], [2, 64]]
    assert report["dynamic"] == flags[1::2]

    program = torch.export.load(workdir / "tt.pt2").module()
    for batch, seq in [(2, 5), (7, 127), (64, 33)]:
        ids = torch.randint(0, 256, (batch, seq))
        assert program(ids, torch.ones(batch, seq, dtype=torch.long)).shape == (batch, seq, 256)
    with pytest.raises(Exception, match="<= 64"):
        program(torch.randint(0, 256, (65, 8)), torch.ones(65, 8, dtype=torch.long))


@pytest.mark.slow
def test_dynamic_export_at_80_columns_in_the_users_names_and_verified_across_the_ranges(workdir):
    flags = ["--dynamic", "input_ids.0=batch:2..64", "--dynamic", "input_ids.1=seq:..127",
             "--dynamic", "attention_mask.0=batch", "--dynamic", "attention_mask.1=seq"]
    env = dict(os.environ, COLUMNS="80")
    result = subprocess.run([sys.executable, "-m", "exporter", TRANSFORMER, *flags, "--verify", "--json", "d.json", "-o", "tt.pt2"],
                            cwd=workdir, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, out(result)
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in result.stdout
    text = result.stdout
    for expected in ("input   input_ids       int64    [batch, seq]", "output  output          float32  [batch, seq, 256]",
                     "blocks.0-1", "0-1 (Block x2): 23 ops each", "batch  named  2..64    2..64",
                     "min batch=2 seq=0", "max batch=64 seq=127", "random #2 batch="):
        assert expected in text, expected
    report = json.loads((workdir / "d.json").read_text())
    assert [(d["name"], d["min"], d["max"]) for d in report["dims"]] == [("batch", 2, 64), ("seq", 0, 127)]
    assert report["dims"][0]["inputs"] == ["input_ids.shape[0]", "attention_mask.shape[0]"]
    user = [r for r in report["signature"]["inputs"] if r["kind"] == "USER_INPUT"]
    assert [(r["path"], r["shape"]) for r in user] == [("input_ids", ["batch", "seq"]), ("attention_mask", ["batch", "seq"])]
    labels = [run["inputs"] for run in report["verification"]["runs"]]
    assert labels[3:5] == ["min batch=2 seq=0", "max batch=64 seq=127"] and len(labels) == 7


@pytest.mark.slow
def test_signature_full_lists_every_tensor(workdir):
    result = run(os.path.join(EXAMPLES, "mlp.py:MLP"), "--signature", "full", "-o", "m.pt2", cwd=workdir)
    assert result.returncode == 0, out(result)
    text = out(result)
    for module in ("net.0", "net.2"):  # each module's tensors under it
        assert re.search(rf"{module}\. *\nparameter +weight .*\nparameter +bias ", text), text
    summary = run(os.path.join(EXAMPLES, "mlp.py:MLP"), "-o", "m.pt2", cwd=workdir)
    assert "net.0.weight" not in out(summary) and "--signature full lists every one" in out(summary)


DECODE = textwrap.dedent(
    """
    import torch
    import transformers

    class Decode(torch.nn.Module):
        def __init__(self):
            super().__init__()
            config = transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                              hidden_size=32, intermediate_size=64, vocab_size=100)
            self.model = transformers.LlamaForCausalLM(config).eval()

        def forward(self, token, cache):
            return self.model(token, past_key_values=cache, use_cache=True)

    def make_inputs():
        model = Decode()
        with torch.no_grad():
            out = model.model(torch.randint(0, 100, (2, 5)), use_cache=True)
        return (torch.randint(0, 100, (2, 1)), getattr(out, "past_key_values", None) or out.cache), {}
    """
)


@pytest.mark.slow
def test_a_kv_cache_decode_step_by_its_pytree_paths_at_80_columns(workdir):
    (workdir / "decode.py").write_text(DECODE)
    flags = ["--dynamic=cache.layers.0.keys.2=past:..60"]
    flags += [f"--dynamic=cache.layers.{i}.{kv}.2=past" for i, kv in ((0, "values"), (1, "keys"), (1, "values"))]
    env = dict(os.environ, COLUMNS="80")
    result = subprocess.run([sys.executable, "-m", "exporter", "decode.py:Decode", "--example-inputs", ":make_inputs", *flags,
                             "--verify", "-o", "d.pt2"], cwd=workdir, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, out(result)
    text = result.stdout
    assert max(len(line) for line in text.splitlines()) <= 80 and "…" not in text
    for expected in ("input   cache.layers[0].keys    float32  [2, 2, past, 8]",
                     "output  logits                  float32  [2, 1, 100]",
                     "output  cache.layers[1].values  float32  [2, 2, past + 1, 8]",
                     "max past=60        all 5", "min past=0         all 5"):
        assert expected in text, expected


@pytest.mark.slow
def test_html_report_of_an_export_and_of_a_check(workdir):
    result = run("models.py:Net", "--verify", "--html", "net.html", "-o", "n.pt2", cwd=workdir)
    assert result.returncode == 0, out(result)
    page = (workdir / "net.html").read_text()
    assert ">Graph</h2>" in page and "Program vs eager" in page and "<code>models.py:Net</code>" in page

    result = run("check", "models.py:Net", "models.py:Branchy", "--html", "check.html", cwd=workdir)
    assert result.returncode == 1, out(result)
    page = (workdir / "check.html").read_text()
    assert "1/2 models passed" in page and "href='#model-1'" in page and "href='#model-2'" in page
    assert page.count(">Graph</h2>") == 1 and "Failure: " in page, "the graph of the model that exported, the failure of the other"


@pytest.mark.slow
def test_dynamic_constraint_violation_exits_1_with_the_fix(workdir):
    flags = ["--dynamic", "input_ids.0=batch", "--dynamic", "input_ids.1=seq:..128",
             "--dynamic", "attention_mask.0=batch", "--dynamic", "attention_mask.1=seq"]
    result = run(TRANSFORMER, *flags, "--json", "v.json", cwd=workdir)
    assert result.returncode == 1, out(result)
    text = flat(result)
    assert "export failed: dynamic shape constraint" in text
    assert "the model needs seq != 128" in text
    # the fix as a flag, on the flag that gave seq its range (a name's range is given once)
    assert "fix: --dynamic input_ids.1=seq:..127 (for --dynamic input_ids.1=seq:..128)" in text
    assert "change the --dynamic flags as listed above" in text
    assert "tiny_transformer.py:42" in text and "Traceback" not in text
    error = json.loads((workdir / "v.json").read_text())["error"]
    assert error["category"] == "dynamic shape constraint" and error["location"].endswith("tiny_transformer.py:42")


@pytest.mark.parametrize(
    "flag, message",
    [
        ("input_ids.x=batch", r"the last part of the path must be a dimension index"),
        ("ids.0=batch", r"forward\(\) was given no input named 'ids'"),
        ("input_ids.0=batch:0..1", r"input_ids.shape\[0\] = 2 is outside the range \[0, 1\]"),
    ],
)
@pytest.mark.slow
def test_bad_dynamic_flags_exit_2(workdir, flag, message):
    result = run(TRANSFORMER, "--dynamic", flag, cwd=workdir)
    assert result.returncode == 2, out(result)
    assert re.search(message, flat(result)), out(result)


# -- artifacts: core ATen, AOTInductor, ONNX ---------------------------------------------------


@pytest.mark.slow
def test_decompose_core_saves_core_aten_and_the_report_says_so(workdir):
    result = run("models.py:Net", "--decompose", "core", "--verify", "--json", "r.json", cwd=workdir)
    assert result.returncode == 0, out(result)
    report = json.loads((workdir / "r.json").read_text())
    assert report["ir"] == "core-aten" and "aten.addmm.default" in report["ops"] and "aten.linear.default" not in report["ops"]
    (program,) = report["artifacts"]
    assert program["kind"] == "program" and program["ir"] == "core-aten" and program["verification"]["passed"]
    assert program["path"] == report["output_file"] and program["bytes"] == os.path.getsize(report["output_file"])
    assert "program (core ATen)" in out(result) and "decompose" in report["timings"]
    saved = torch.export.load(workdir / "Net.pt2")
    assert "aten.linear.default" not in {str(n.target) for n in saved.graph.nodes}
    plain = run("models.py:Net", "--json", "plain.json", "-q", cwd=workdir)
    assert plain.returncode == 0 and json.loads((workdir / "plain.json").read_text())["ir"] == "aten"


@pytest.mark.slow
def test_onnx_is_converted_run_in_onnxruntime_and_reported(workdir):
    pytest.importorskip("onnxscript")
    pytest.importorskip("onnxruntime")
    result = run("models.py:Net", "--onnx", "out/net.onnx", "--verify", "--json", "r.json", cwd=workdir)
    assert result.returncode == 0, out(result)
    report = json.loads((workdir / "r.json").read_text())
    assert [a["kind"] for a in report["artifacts"]] == ["program", "onnx"]
    onnx = report["artifacts"][1]
    assert onnx["path"] == str(workdir / "out" / "net.onnx") and onnx["bytes"] > 0
    assert onnx["verification"]["passed"] and [r["inputs"] for r in onnx["verification"]["runs"]] == ["example", "fresh #1", "fresh #2"]
    assert {"onnx", "onnx.verify"} <= set(report["timings"])
    text = out(result)
    assert f"saved {os.path.join('out', 'net.onnx')}" in text, "relative to the working directory"
    assert "ONNX" in text and "torchvision" not in text
    assert sorted(os.listdir(workdir / "out")) == ["net.onnx"]  # nothing staged left behind


def test_onnx_without_the_extra_exits_2_and_says_how_to_install_it(workdir):
    stub = workdir / "stub" / "onnxruntime"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('No module named onnxruntime')\n")
    # onnxscript importable whether or not the extra is installed: the test is about onnxruntime
    (workdir / "stub" / "onnxscript").mkdir()
    (workdir / "stub" / "onnxscript" / "__init__.py").write_text("")
    env = dict(os.environ, COLUMNS="200", PYTHONPATH=str(workdir / "stub"))
    result = subprocess.run([sys.executable, "-m", "exporter", "models.py:Net", "--onnx", "net.onnx"],
                            cwd=workdir, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 2, out(result)
    assert "--onnx needs onnxruntime, which is not installed" in flat(result)
    assert "pip install 'torch-exporter[onnx]'" in flat(result)
    assert not (workdir / "Net.pt2").exists() and not (workdir / "net.onnx").exists()


@pytest.mark.slow
def test_aoti_package_beside_the_program_runs_like_the_model(workdir):
    result = run("models.py:Net", "-o", "out/net.pt2", "--aoti", "--verify", "--json", "r.json", cwd=workdir)
    assert result.returncode == 0, out(result)
    report = json.loads((workdir / "r.json").read_text())
    aoti = report["artifacts"][1]
    assert aoti["kind"] == "aoti" and aoti["path"] == str(workdir / "out" / "net.aoti.pt2")
    assert aoti["verification"]["passed"] and aoti["bytes"] == os.path.getsize(aoti["path"])
    assert "AOTInductor package" in out(result) and {"aoti", "aoti.verify"} <= set(report["timings"])
    package = torch._inductor.aoti_load_package(aoti["path"])
    x = torch.randn(3, 16)
    program = torch.export.load(workdir / "out" / "net.pt2")
    torch.testing.assert_close(package(x), program.module()(x))


# -- check from [tool.exporter] ----------------------------------------------------------------


@pytest.mark.slow
def test_check_without_models_reads_the_nearest_pyproject_upward(workdir):
    (workdir / "pyproject.toml").write_text(textwrap.dedent(
        """
        [tool.exporter]
        models = ["models.py:Net", { id = "Net-wide", model = "models.py:Net", init-args = { hidden = 32 }, example-inputs = "inputs.py:pair" }]
        baseline = "ci/baseline.json"
        """
    ))
    (workdir / "sub" / "deeper").mkdir(parents=True)
    result = run("check", "--update-baseline", "--json", "r.json", cwd=workdir / "sub" / "deeper")
    assert result.returncode == 0, out(result)
    report = json.loads((workdir / "sub" / "deeper" / "r.json").read_text())
    assert [m["reference"] for m in report["models"]] == ["models.py:Net", "Net-wide"] and "shard" not in report
    assert report["models"][1]["report"]["inputs"]["leaves"][0]["shape"] == [2, 16]
    assert report["models"][1]["report"]["model"]["parameters"] == 16 * 32 + 32
    assert sorted(json.loads((workdir / "ci" / "baseline.json").read_text())["models"]) == ["Net-wide", "models.py:Net"]

    empty = workdir.parent / f"{workdir.name}-elsewhere"  # outside the directory holding the config
    empty.mkdir()
    (empty / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    missing = subprocess.run([sys.executable, "-m", "exporter", "check"], cwd=empty, capture_output=True, text=True,
                             env=dict(os.environ, COLUMNS="200"), timeout=300)
    assert missing.returncode == 2 and "no MODEL given, and no pyproject.toml with a [tool.exporter] table" in flat(missing)


@pytest.mark.slow
def test_executorch_flags_given_wrongly_are_usage_errors(workdir):
    backend_alone = run("models.py:Net", "--backend", "portable", cwd=workdir)
    assert backend_alone.returncode == 2
    assert "--backend applies to --executorch only" in backend_alone.stdout
    unknown = run("models.py:Net", "--executorch", "n.pte", "--backend", "cuda", cwd=workdir)
    assert unknown.returncode == 2 and "invalid choice: 'cuda'" in unknown.stderr

    # ExecuTorch missing (a package of that name that fails to import stands in for it)
    shadow = workdir / "shadow" / "executorch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no ExecuTorch here')\n")
    env = dict(os.environ, COLUMNS="200", PYTHONPATH=str(workdir / "shadow"))
    missing = subprocess.run([sys.executable, "-m", "exporter", "models.py:Net", "--executorch", "n.pte"], cwd=workdir,
                             capture_output=True, text=True, env=env, timeout=300)
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "ExecuTorch is not installed" in missing.stdout and "pip install 'torch-exporter[executorch]'" in missing.stdout
    assert not (workdir / "n.pte").exists() and not (workdir / "Net.pt2").exists()


LOOP = '''
import torch


class RunningSum(torch.nn.Module):
    def forward(self, scores):
        total = scores.new_zeros(())
        for s in scores[scores > 0]:
            total = total * 0.5 + s
        return total


example_inputs = (torch.tensor([0.5, -1.0, 2.0, 1.5]),)
'''


def test_max_iterations_writes_the_loop_as_cond_steps_and_verifies_it(tmp_path, capsys):
    from exporter.cli.main import main

    (tmp_path / "loop.py").write_text(LOOP)
    out_path = tmp_path / "loop.pt2"
    code = main([f"{tmp_path / 'loop.py'}:RunningSum", "--max-iterations", "4", "--verify", "-o", str(out_path)])
    assert code == 0, capsys.readouterr()
    program = torch.export.load(str(out_path))
    targets = [n.target for n in program.graph.nodes]
    assert torch.ops.higher_order.while_loop not in targets
    assert targets.count(torch.ops.higher_order.cond) == 4
    scores = torch.tensor([1.0, 2.0, -1.0, 3.0])
    expected = ((0 * 0.5 + 1.0) * 0.5 + 2.0) * 0.5 + 3.0
    torch.testing.assert_close(program.module()(scores), torch.tensor(expected))


@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_max_iterations_that_is_no_number_of_steps_exits_2(value, capsys):
    from exporter.cli.main import _export_parser

    with pytest.raises(SystemExit) as exited:
        _export_parser().parse_args(["m.py:Net", "--max-iterations", value])
    assert exited.value.code == 2
    assert f"argument --max-iterations: {value!r} is not a number of loop steps" in capsys.readouterr().err
