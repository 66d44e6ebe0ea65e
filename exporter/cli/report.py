"""The report of one export: the data the terminal, JSON, baselines and JUnit are made from."""

from __future__ import annotations

from typing import Any

import attrs
import torch

from .._assumptions import DraftReport
from .._branch_report import BranchReport
from .._errors import Category, ErrorInfo
from .._notes import Note
from ..submodules import SubmoduleReport
from .artifacts import Artifact
from .compare import Comparison
from .settings import ExportSettings

__all__ = ["REPORT_SCHEMA", "ExportReport", "describe_leaf"]

REPORT_SCHEMA = "exporter.report/1"


def describe_leaf(label: str, value: Any) -> dict[str, Any]:
    """An example input leaf as a report row: its path, kind, and dtype and shape or value."""
    if isinstance(value, torch.Tensor):
        return {"path": label, "kind": "tensor", "dtype": str(value.dtype).replace("torch.", ""), "shape": list(value.shape)}
    shown = value if isinstance(value, (int, float, bool, str, type(None))) else repr(value)
    return {"path": label, "kind": "constant", "value": shown}


@attrs.define
class ExportReport:
    """Everything one export produced; ``to_json()`` is the documented report schema."""

    settings: ExportSettings
    status: str = "failed"
    model_name: str | None = None
    model_class: str | None = None
    parameters: int | None = None
    inputs: list[dict[str, Any]] = attrs.field(factory=list)
    input_source: str | None = None
    output_file: str | None = None
    timings: dict[str, float] = attrs.field(factory=dict)
    signature: dict[str, list[dict[str, Any]]] | None = None
    range_constraints: dict[str, list[Any]] = attrs.field(factory=dict)
    dims: list[dict[str, Any]] = attrs.field(factory=list)
    """The range table: each dynamic size in the user's Dim names, accepted and declared range."""
    ops: dict[str, int] = attrs.field(factory=dict)
    modules: list[dict[str, Any]] = attrs.field(factory=list)
    verification: list[Comparison] | None = None
    error: ErrorInfo | None = None
    submodules: SubmoduleReport | None = None
    """With ``--report-submodules``, when the export failed: which submodules export on their own."""
    versions: dict[str, str] = attrs.field(factory=dict)
    draft: DraftReport | None = None
    """With ``--draft``: what the export took from the example inputs."""
    branches: BranchReport | None = None
    """The branches on tensor values the program captured as torch.cond (None: none)."""
    notes: list[Note] = attrs.field(factory=list)
    """What the program does differently from eager (a buffer replacement not written back)."""
    ir: str | None = None
    """The IR of the program saved: ``aten`` (functional, post-autograd) or ``core-aten`` (``--decompose core``)."""
    artifacts: list[Artifact] = attrs.field(factory=list)
    """The .pt2 and, with ``--aoti`` / ``--onnx``, the files made from it; each with its size and check."""
    program: Any = None
    """The ExportedProgram (not part of the JSON report, and not sent between processes)."""
    graph: dict[str, Any] | None = None
    """The graph for the HTML report's drawing (``graph_data``; not part of the JSON report)."""
    input_paths: list[str] | None = None
    """Each of ``inputs`` by the forward() path it binds to (``x``, ``inputs['mask']``), once
    bound: how the tables name inputs when no signature does (the export failed; not part of
    the JSON report)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def exit_code(self) -> int:
        """0 success, 2 the user gave the model or inputs wrongly, 1 any other failure."""
        if self.ok:
            return 0
        return 2 if self.error is not None and self.error.is_input_error else 1

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "status": self.status,
            "model": {
                "reference": self.settings.model,
                "name": self.model_name,
                "class": self.model_class,
                "parameters": self.parameters,
                "train": self.settings.train,
                "init_args": self.settings.init_args,
            },
            "inputs": {"source": self.input_source, "leaves": self.inputs},
            "output_file": self.output_file,
            "ir": self.ir,
            "artifacts": [a.to_json() for a in self.artifacts],
            "timings": {k: round(v, 6) for k, v in self.timings.items()},
            "dynamic": self.settings.dynamic,
            "range_constraints": self.range_constraints,
            "dims": self.dims,
            "signature": self.signature,
            "ops": self.ops,
            "modules": self.modules,
            "verification": None
            if self.verification is None
            else {
                "passed": all(c.ok for c in self.verification),
                "rtol": self.settings.rtol,
                "atol": self.settings.atol,
                "runs": [c.to_json() for c in self.verification],
            },
            "draft": None if self.draft is None else self.draft.to_json(),
            "branches": None if self.branches is None else self.branches.to_json(),
            "notes": [n.to_json() for n in self.notes],
            "error": None if self.error is None else self.error.to_json(),
            "submodules": None if self.submodules is None else self.submodules.to_json(),
            "versions": self.versions,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExportReport:
        """The parts of a report ``to_json()`` wrote that verdicts, JUnit, the check table and
        baselines read (for ``merge``, which joins the JSON of several ``check --shard`` runs)."""
        model = data.get("model") or {}
        error = data.get("error")
        return cls(
            ExportSettings(model=model.get("reference") or "", train=bool(model.get("train"))),
            status=data.get("status", "failed"),
            model_name=model.get("name"),
            model_class=model.get("class"),
            parameters=model.get("parameters"),
            output_file=data.get("output_file"),
            timings=dict(data.get("timings") or {}),
            signature=data.get("signature"),
            dims=list(data.get("dims") or []),
            ops=dict(data.get("ops") or {}),
            error=None
            if error is None
            else ErrorInfo(error["type"], Category(error["category"]), error["message"], error.get("location"), error.get("hint")),
            versions=dict(data.get("versions") or {}),
            ir=data.get("ir"),
        )
