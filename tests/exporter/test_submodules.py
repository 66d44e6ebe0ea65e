"""report_submodules: which submodules of a failing model export on their own, and where it fails."""

import inspect

import pytest
import torch

import exporter
from exporter import Category, ConstraintError, ErrorInfo, InputSpecError, ModuleStatus, report_submodules


class Gate(torch.nn.Module):
    def forward(self, x):
        for _ in range(x.gt(0).sum()):
            x = x * 0.5
        return x


GATE_LINE = f"{__file__}:{inspect.getsourcelines(Gate.forward)[1] + 1}"


class Block(torch.nn.Module):
    def __init__(self, gated: bool):
        super().__init__()
        self.norm = torch.nn.LayerNorm(8)
        self.gate = Gate() if gated else torch.nn.ReLU()
        self.unused = torch.nn.Linear(8, 8)

    def forward(self, x, scale, mode="sum"):
        return self.gate(self.norm(x)) * scale if mode == "scaled" else x


class Net(torch.nn.Module):
    """The gate of the second block loops as many times as a value says; everything else exports."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(4, 8)
        self.bn = torch.nn.BatchNorm1d(8)
        self.blocks = torch.nn.ModuleList([Block(gated=False), Block(gated=True)])
        self.head = torch.nn.Linear(8, 2)
        self.spare = torch.nn.ModuleList([torch.nn.Linear(8, 8)])

    def forward(self, x):
        x = self.bn(self.embed(x))
        for block in self.blocks:
            x = block(x, 2.0, mode="scaled")
        return self.head(x)


def _statuses(report) -> dict[str, str]:
    return {node.name: node.status.value for node in report.root.walk()}


def _model_state(model: torch.nn.Module):
    return (
        {k: v.clone() for k, v in model.state_dict().items()},
        [m.training for m in model.modules()],
        [(dict(m._forward_pre_hooks), dict(m._forward_hooks)) for m in model.modules()],
    )


def _assert_unchanged(model, before) -> None:
    state, training, hooks = _model_state(model)
    assert state.keys() == before[0].keys() and all(torch.equal(state[k], before[0][k]) for k in state)
    assert training == before[1] and hooks == before[2]


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_the_frontier_is_the_failing_leaf_and_the_model_is_left_as_it_was(train):
    model = Net().train(train)
    before = _model_state(model)
    report = report_submodules(model, (torch.randn(3, 4),))

    assert _statuses(report) == {
        "": "failed",
        "embed": "ok",
        "bn": "ok",
        "blocks": "not called",  # a ModuleList: what it holds is tried
        "blocks.0": "ok",  # called with a float and a string: they go in as constants
        "blocks.1": "failed",
        "blocks.1.norm": "ok",
        "blocks.1.gate": "failed",
        "blocks.1.unused": "not called",
        "head": "ok",
        "spare": "not called",  # nothing in it is called either: not listed
    }
    assert [n.name for n in report.frontier] == ["blocks.1.gate"]
    gate = report.find("blocks.1.gate")
    assert gate.class_name == "Gate" and gate.calls == 1 and gate.seconds > 0
    assert gate.error.category is Category.DATA_DEPENDENT_CONTROL_FLOW and gate.error.location == GATE_LINE
    assert report.root.error.location == GATE_LINE and report.root.seconds is not None
    # train-mode BatchNorm updated its running statistics in the eager run; they are put back
    _assert_unchanged(model, before)
    assert model.bn.num_batches_tracked.item() == 0


def test_the_json_is_the_tree_as_plain_data():
    data = report_submodules(Net().eval(), (torch.randn(3, 4),)).to_json()
    assert data["frontier"] == ["blocks.1.gate"] and data["seconds"] > 0
    root = data["root"]
    assert [c["name"] for c in root["children"]] == ["embed", "bn", "blocks", "head", "spare"]
    assert root["children"][0] == {
        "name": "embed", "class": "Linear", "status": "ok", "calls": 1,
        "seconds": root["children"][0]["seconds"], "frontier": False, "error": None, "children": [],
    }
    gate = root["children"][2]["children"][1]["children"][1]
    assert gate["name"] == "blocks.1.gate" and gate["frontier"] is True
    assert gate["error"]["category"] == "data-dependent control flow" and gate["error"]["location"] == GATE_LINE
    assert "\n" not in gate["error"]["message"] and set(gate["error"]) == {"type", "category", "message", "location", "hint"}


def test_a_model_that_exports_is_reported_ok_and_nothing_below_is_tried():
    tried = []

    def export_fn(module, args, kwargs):
        tried.append(module)
        return exporter.export(module, args, kwargs)

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    report = report_submodules(model, (torch.randn(2, 4),), export_fn=export_fn)
    assert report.root.status is ModuleStatus.OK and report.root.children == [] and report.frontier == []
    assert tried == [model]


class Twice(torch.nn.Module):
    """Calls ``inner`` twice, then writes to the tensor inner was first given."""

    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = x * 1
        first = self.inner(h)
        h.add_(100)
        second = self.inner(torch.ones(5, 4))
        for _ in range(first.gt(0).sum()):
            second = second * 0.5
        return second


def test_modules_are_exported_on_the_inputs_of_their_first_call_as_they_were_then():
    seen = {}

    def export_fn(module, args, kwargs):
        seen[type(module).__name__] = args
        return exporter.export(module, args, kwargs)

    x = torch.randn(3, 4)
    report = report_submodules(Twice(), (x,), export_fn=export_fn)
    assert report.find("inner").calls == 2 and report.find("inner").status is ModuleStatus.OK
    assert torch.equal(seen["Linear"][0], x)  # the first call's input, before forward's add_
    assert [n.name for n in report.frontier] == [""]  # nothing below the model fails: its own forward does


class SharedNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        norm = torch.nn.LayerNorm(4)
        self.left = torch.nn.Sequential(norm, Gate())
        self.right = torch.nn.Sequential(norm, torch.nn.ReLU())

    def forward(self, x):
        return self.left(x) + self.right(x)


def test_a_shared_module_appears_once():
    report = report_submodules(SharedNorm(), (torch.randn(2, 4),))
    names = [n.name for n in report.root.walk()]
    assert names == ["", "left", "left.0", "left.1", "right"]
    assert report.find("left.0").calls == 2 and [n.name for n in report.frontier] == ["left.1"]


def test_max_depth_skips_what_is_deeper():
    report = report_submodules(Net().eval(), (torch.randn(3, 4),), max_depth=2)
    assert _statuses(report)["blocks.1"] == "failed"
    assert {_statuses(report)[n] for n in ("blocks.1.norm", "blocks.1.gate", "blocks.1.unused")} == {"skipped"}
    assert report.find("blocks.1.gate").calls == 1 and report.find("blocks.1.unused").calls == 0
    assert [n.name for n in report.frontier] == ["blocks.1"]  # the deepest failure found


def test_a_known_root_error_is_not_exported_again():
    tried = []

    def export_fn(module, args, kwargs):
        tried.append(type(module).__name__)
        return exporter.export(module, args, kwargs)

    known = ErrorInfo.from_exception(ConstraintError("the model does not fit the declared dynamic shapes"))
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Gate())
    report = report_submodules(model, (torch.randn(2, 4),), export_fn=export_fn, root_error=known)
    assert tried == ["Linear", "Gate"]
    assert report.root.error is known and report.root.seconds is None
    assert [n.name for n in report.frontier] == ["1"]


def test_a_model_that_fails_eagerly_is_an_input_error_and_left_as_it_was():
    model = Net().train()
    before = _model_state(model)
    with pytest.raises(InputSpecError, match=r"fails on these inputs when run eagerly.*RuntimeError: .*mat1 and mat2"):
        report_submodules(model, (torch.randn(3, 5),))
    _assert_unchanged(model, before)


def test_a_transformers_model_with_one_layer_made_to_fail():
    from transformers import BertConfig, BertModel
    from transformers.models.bert.modeling_bert import BertSelfOutput

    class BranchySelfOutput(BertSelfOutput):
        def forward(self, hidden_states, input_tensor):
            for _ in range(hidden_states.gt(0).sum()):
                hidden_states = hidden_states * 0.5
            return super().forward(hidden_states, input_tensor)

    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    model = BertModel(config).eval()
    model.encoder.layer[1].attention.output.__class__ = BranchySelfOutput
    before = _model_state(model)
    ids = torch.randint(0, 64, (2, 8))
    report = report_submodules(model, (ids,), {"attention_mask": torch.ones(2, 8, dtype=torch.long)})

    loop_line = f"{__file__}:{inspect.getsourcelines(BranchySelfOutput.forward)[1] + 1}"
    assert [n.name for n in report.frontier] == ["encoder.layer.1.attention.output"]
    frontier = report.frontier[0]
    assert frontier.class_name == "BranchySelfOutput" and frontier.error.location == loop_line
    assert frontier.error.category is Category.DATA_DEPENDENT_CONTROL_FLOW
    statuses = _statuses(report)
    assert [name for name, status in statuses.items() if status == "failed"] == [
        "", "encoder", "encoder.layer.1", "encoder.layer.1.attention", "encoder.layer.1.attention.output",
    ]
    for name in ("embeddings", "encoder.layer.0", "encoder.layer.1.attention.self", "encoder.layer.1.intermediate",
                 "encoder.layer.1.output", "encoder.layer.1.attention.output.dense", "pooler"):
        assert statuses[name] == "ok", name
    assert "encoder.layer.0.attention" not in statuses  # below a module that exports: not tried
    _assert_unchanged(model, before)
