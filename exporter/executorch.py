"""Lower exported programs to an ExecuTorch ``.pte`` file, and run one like the model.

Needs the ``executorch`` extra (``pip install 'torch-exporter[executorch]'``); nothing here is
imported by ``import exporter``.
"""

from __future__ import annotations

import collections
import importlib
import os
import re
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from ._errors import InputSpecError, LoweringError
from ._ir import is_library_frame
from ._torch_internals import OpOverload

__all__ = ["BACKENDS", "ExecuTorchFile", "MethodLowering", "load_executorch", "require_executorch", "to_executorch"]

BACKENDS = ("xnnpack", "portable")
"""``xnnpack`` delegates what XNNPACK runs (the CPU backend ExecuTorch ships); ``portable``
delegates nothing: every op runs on ExecuTorch's portable kernels."""


@attrs.frozen
class MethodLowering:
    """One method of a ``.pte`` file, as lowered."""

    name: str
    """The method's name in the file (``forward``, ``prefill``)."""
    delegated: int
    """How many parts of the graph a backend took (calls of ``executorch_call_delegate``)."""
    outside_delegate: dict[str, int]
    """Ops left to ExecuTorch's portable kernels, by name, with their counts."""

    def to_json(self) -> dict[str, Any]:
        """The method as the JSON report's artifacts rows write it."""
        return {"name": self.name, "delegated": self.delegated, "outside_delegate": dict(self.outside_delegate)}


@attrs.frozen
class ExecuTorchFile:
    """What ``to_executorch`` wrote."""

    path: str
    """The file's absolute path."""
    bytes: int
    """Its size."""
    backend: str
    """The backend it was lowered for (``xnnpack`` or ``portable``)."""
    methods: tuple[MethodLowering, ...]
    """Each method in the file, in the order given."""

    def to_json(self) -> dict[str, Any]:
        """The file as the JSON report's artifacts rows write it."""
        return {
            "path": self.path,
            "bytes": self.bytes,
            "backend": self.backend,
            "methods": [m.to_json() for m in self.methods],
        }


def require_executorch() -> None:
    """Raise ``InputSpecError`` saying how to install the extra unless ExecuTorch imports."""
    try:
        importlib.import_module("executorch.exir")
    except ImportError as e:
        raise InputSpecError(
            f"ExecuTorch is not installed ({e})",
            hint="install the extra: pip install 'torch-exporter[executorch]'",
        ) from None


def to_executorch(
    programs: ExportedProgram | Mapping[str, ExportedProgram], path: str | os.PathLike[str], *, backend: str = "xnnpack"
) -> ExecuTorchFile:
    """Lower ``programs`` to ExecuTorch and write the ``.pte`` file at ``path``.

    Needs the ``executorch`` extra (``pip install 'torch-exporter[executorch]'``). Buffers the
    programs update keep their initial values in the file, as the model's state starts out.

    Args:
        programs: one program (the file's method ``forward``), or ``{method name: program}``:
            the prefill and decode steps of an LLM go into one file as two methods.
        path: where to write the ``.pte`` file.
        backend: ``"xnnpack"`` (the default) delegates what XNNPACK runs to it;
            ``"portable"`` keeps every op on ExecuTorch's portable kernels.

    Returns:
        What was written: the file's path and size, the backend, and per method the ops
        delegated to the backend and those left to the portable kernels.

    Raises:
        InputSpecError: ``backend`` is not one of ``xnnpack``, ``portable``; ``programs`` is
            not an ExportedProgram or a non-empty mapping of them; ExecuTorch is not installed.
        LoweringError: ExecuTorch refused the program; the error names the op, the model's
            line it came from, and what to do.

    Examples:
        >>> import torch, exporter
        >>> from exporter.executorch import load_executorch
        >>> model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU()).eval()
        >>> x = torch.randn(2, 16)
        >>> ep = exporter.export(model, (x,))
        >>> written = exporter.to_executorch(ep, "model.pte")
        >>> written.backend, [m.name for m in written.methods]
        ('xnnpack', ['forward'])
        >>> run = load_executorch("model.pte", ep)
        >>> torch.testing.assert_close(run(x), model(x))
    """
    if backend not in BACKENDS:
        raise InputSpecError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}", hint="choose xnnpack or portable")
    require_executorch()
    methods = {"forward": programs} if isinstance(programs, ExportedProgram) else dict(programs)
    if not methods or not all(isinstance(p, ExportedProgram) for p in methods.values()):
        raise InputSpecError(
            "to_executorch takes an ExportedProgram or a non-empty {method name: ExportedProgram}",
            hint="pass the programs exporter.export returned",
        )
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    partitioners = None
    if backend == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioners = [XnnpackPartitioner()]
    updated = sorted({name for program in methods.values() for name in _updated_buffer_placeholders(program)})
    try:
        edge = to_edge_transform_and_lower(methods, partitioner=partitioners)
        lowered = tuple(_method_lowering(name, edge.exported_program(name)) for name in methods)
        config = ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(updated)])
        buffer = edge.to_executorch(config).buffer
    except Exception as e:  # noqa: BLE001 - every lowering failure is reported in the export's terms
        raise lowering_error(e, methods, backend) from e
    path = os.fspath(path)
    with open(path, "wb") as f:
        f.write(buffer)
    return ExecuTorchFile(os.path.abspath(path), len(buffer), backend, lowered)


def _updated_buffer_placeholders(program: ExportedProgram) -> list[str]:
    """Placeholder names of the buffers ``program`` updates: ExecuTorch leaves a buffer it
    sees updated uninitialised in the file unless ``InitializedMutableBufferPass`` names it
    (it matches names by substring, so at worst a few more buffers keep their values)."""
    signature = program.graph_signature
    updated = {spec.target for spec in signature.output_specs if spec.kind == OutputKind.BUFFER_MUTATION}
    return [spec.arg.name for spec in signature.input_specs if spec.kind == InputKind.BUFFER and spec.target in updated]


def _method_lowering(name: str, program: ExportedProgram) -> MethodLowering:
    delegated, outside = 0, collections.Counter()
    for node in program.graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        if getattr(node.target, "__name__", None) == "executorch_call_delegate":
            delegated += 1
        elif (op := _tensor_op_name(node.target)) is not None:
            outside[op] += 1
    return MethodLowering(name, delegated, dict(sorted(outside.items())))


def _tensor_op_name(target: Any) -> str | None:
    """``aten.add.Tensor`` for an ATen or edge op on tensors; None for size arithmetic and
    Python operators, which run on the sizes, not in a kernel."""
    if isinstance(target, OpOverload):
        op = str(target)
    elif type(target).__name__ == "EdgeOpOverload":
        op = target.__name__
    else:
        return None
    return None if op.startswith("aten.sym_") else op


_OP_PATTERNS = (
    re.compile(r"Operator torch\._ops\.(?P<op>[\w.]+) is not"),
    re.compile(r"call_function\[target=torch\.ops\.(?P<op>[\w.]+)\]"),
    re.compile(r"(?:target|operator|Operator)\W+(?:torch\.ops\.)?(?P<op>aten\.[\w.]+)"),
)
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def lowering_error(error: BaseException, methods: Mapping[str, ExportedProgram], backend: str) -> LoweringError:
    """``error`` from ExecuTorch's lowering as a ``LoweringError``: the op it names, the
    model's line that op came from, and the next step."""
    text = "\n".join(str(e) for e in _chain(error))
    op = next((m.group("op") for pattern in _OP_PATTERNS if (m := pattern.search(text))), None)
    location = _location_of(op, methods) or _user_line(text, error)
    first = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
    if "not in Core ATen opset" in text or "not Aten Canonical" in text:
        hint = (
            f"ExecuTorch has no kernel for {op or 'this op'}: replace the call on that line with ops "
            "in core ATen, or add a kernel for it to your ExecuTorch runtime"
        )
    elif "Cannot view a tensor" in text or "view size is not compatible" in text:
        hint = (
            "a view relies on a layout the lowering does not keep: use .reshape() instead of .view() "
            "on that line"
        )
    elif "did not preserve symbolic metadata" in text and op in ("higher_order.cond", "higher_order.while_loop"):
        hint = (
            "ExecuTorch's passes trace each torch.cond and torch.while_loop again and refuse one whose operands "
            "have a size only the data decides (a nonzero, a mask's selection, a loop's items); compute that "
            "selection inside the branch or loop, or run the .pt2 (AOTInductor or ONNX take it)"
        )
    elif "upper bound" in text or "unbounded" in text:
        hint = "ExecuTorch plans memory for the largest size: give every dynamic dim a max (Dim(name, max=N))"
    else:
        other = "portable" if backend == "xnnpack" else "xnnpack"
        hint = f"try --backend {other}; if it fails too, run the .pt2 with ep.module() to check the program itself"
    where = f" at {op}" if op else ""
    return LoweringError(f"lowering to ExecuTorch ({backend}) failed{where}: {first}", location=location, hint=hint)


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while error is not None and error not in seen:
        seen.append(error)
        error = error.__cause__ or error.__context__
    return seen


def _location_of(op: str | None, methods: Mapping[str, ExportedProgram]) -> str | None:
    """The model's line of the first node calling ``op`` in the programs (or in their core
    ATen form, where a decomposition made it)."""
    if op is None:
        return None
    wanted = op.removeprefix("aten.")
    for program in _with_core_forms(methods.values()):
        for node in program.graph_module.graph.nodes:
            if node.op == "call_function" and str(node.target) in (op, f"aten.{wanted}"):
                frame = _last_user_frame(node.meta.get("stack_trace") or "")
                if frame:
                    return frame
    return None


def _is_model_file(filename: str) -> bool:
    """Not torch's, exporter's, the standard library's or ExecuTorch's."""
    return not is_library_frame(filename) and f"{os.sep}executorch{os.sep}" not in filename


def _with_core_forms(programs: Any) -> Any:
    """Each program, then each program lowered to core ATen (where it lowers)."""
    programs = list(programs)
    yield from programs
    for program in programs:
        try:
            yield program.run_decompositions()
        except Exception:  # noqa: BLE001, S112 - a program that does not lower has no core form to search
            continue


def _last_user_frame(text: str) -> str | None:
    frames = [m for m in _FRAME.finditer(text) if _is_model_file(m.group("file"))]
    return f"{frames[-1].group('file')}:{frames[-1].group('line')}" if frames else None


def _user_line(text: str, error: BaseException) -> str | None:
    """The model's line named in the error's text (torch's "Original traceback"), else in its
    own traceback."""
    marker = text.rfind("Original traceback:")
    if marker >= 0 and (frame := _last_user_frame(text[marker:])):
        return frame
    frames = [f for f in traceback.extract_tb(error.__traceback__) if _is_model_file(f.filename)]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


def load_executorch(
    path: str | os.PathLike[str], program: ExportedProgram, method: str = "forward"
) -> Callable[..., Any]:
    """The method ``method`` of the ``.pte`` file at ``path``, called like the model
    ``program`` was exported from: inputs flattened as the program flattens them, outputs put
    back in its output structure.  Each call starts from the file's initial state (a fresh
    load), as each run of a verification starts from the model's."""
    require_executorch()
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    if method not in runtime.load_program(os.fspath(path)).method_names:
        raise InputSpecError(
            f"{os.fspath(path)} has no method {method!r}",
            hint=f"choose one of {', '.join(sorted(runtime.load_program(os.fspath(path)).method_names))}",
        )
    return _MethodRunner(runtime, os.fspath(path), method, program)


class _MethodRunner:
    """Calls one method of a ``.pte`` file like the model; ``seconds`` is the time of the last
    call's execution alone (loading the file for a fresh state is not counted)."""

    def __init__(self, runtime: Any, path: str, method: str, program: ExportedProgram) -> None:
        self.runtime, self.path, self.method = runtime, path, method
        self.in_spec, self.out_spec = program.call_spec.in_spec, program.call_spec.out_spec
        self.seconds: float | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        in_spec, out_spec = self.in_spec, self.out_spec
        if in_spec is not None and in_spec.num_children == 2:
            order = in_spec.child(1).context or []
            kwargs = {k: kwargs[k] for k in order if k in kwargs}
        leaves = [_contiguous(leaf) for leaf in pytree.tree_leaves((args, kwargs))]
        method = self.runtime.load_program(self.path).load_method(self.method)  # the file's state
        start = time.perf_counter()
        outputs = list(method.execute(leaves))
        self.seconds = time.perf_counter() - start
        if out_spec is None:
            return outputs
        if len(outputs) != out_spec.num_leaves:
            raise RuntimeError(f"the ExecuTorch method gave {len(outputs)} outputs, the program {out_spec.num_leaves}")
        return pytree.tree_unflatten(outputs, out_spec)


def _contiguous(leaf: Any) -> Any:
    """ExecuTorch takes tensors in their default dim order."""
    return leaf.contiguous() if isinstance(leaf, torch.Tensor) else leaf
