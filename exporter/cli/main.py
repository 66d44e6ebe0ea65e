"""Command line: ``python -m exporter MODEL ...``, ``python -m exporter check [MODEL ...]`` and
``python -m exporter merge SHARD.json ...``.

Argument parsing only; the work is done by ``job``, ``check`` and ``merge``, the output by
``render``.  Exit codes: 0 success, 1 export / verification / drift failure, 2 usage or
input error.
"""

from __future__ import annotations

import argparse
import logging
import sys

from rich.console import Console

from .._errors import ErrorInfo, InputSpecError
from .._options import IR_LEVELS, TRACING_CHECKS
from .._torch_internals import FAKE_TENSOR_LOGGER
from ..experts import EXPERTS_IMPLEMENTATIONS
from ..executorch import BACKENDS, require_executorch
from .artifacts import DECOMPOSITIONS, require_onnx
from .baseline import baseline_entry, load_baseline, save_baseline
from .check import check_exit_code, check_json, run_check
from .config import find_config, load_config
from .html import check_html, export_html, write_html
from .job import run_export
from .junit import write_junit
from .loading import parse_init_args
from .memory import parse_size
from .render import progress, render_check, render_error, render_export, render_quiet
from .save import require_writable, write_json
from .settings import CheckSettings, ExportSettings
from .shard import parse_shard
from .workers import DEFAULT_TIMEOUT, parse_timeout

__all__ = ["main", "parsers"]

_EXAMPLE_INPUTS_HELP = (
    "example inputs: shorthand in torch's notation, positional then name=keyword, e.g. "
    "\"f32[2,3] i64[2,16]@[0,1000) mask=b8[2,16] 4 0.5 None\"; or a function returning "
    "args or (args, kwargs): file.py:make_inputs, or :make_inputs in the model's file. "
    "Default: example_inputs defined on the model class or in the model file"
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own usage errors exit 2, as ours do
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}{_unrecognized_hint(message)}\n")


_UNRECOGNIZED = "unrecognized arguments: "


def _unrecognized_hint(message: str) -> str:
    """What to write instead, when the words argparse did not take look like the
    ``--dynamic`` specs of one flag given several (``--dynamic x.0=b x.1=s``)."""
    if not message.startswith(_UNRECOGNIZED):
        return ""
    words = message[len(_UNRECOGNIZED):].split()
    if not words or not all("=" in w and "." in w.split("=", 1)[0] and not w.startswith("-") for w in words):
        return ""
    flags = " ".join(f"--dynamic {w}" for w in words)
    return f"\n  --dynamic takes one PATH=SPEC per flag: repeat it, as in {flags}"


def _steps(value: str) -> int:
    """``--max-iterations``: a whole number of loop steps, at least 1."""
    try:
        steps = int(value)
    except ValueError:
        steps = 0
    if steps < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of loop steps (a whole number, at least 1)")
    return steps


def _export_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m exporter",
        description="Export a PyTorch model to a torch.export .pt2 program (functional ATen). "
        "`python -m exporter check ...` checks many models for CI.",
    )
    p.add_argument("model", metavar="MODEL", help="path/to/file.py:Name or package.module:Name "
                   "(an nn.Module class, a function returning a module, or a module instance)")
    p.add_argument("--example-inputs", metavar="SPEC", help=_EXAMPLE_INPUTS_HELP)
    p.add_argument("--init-args", metavar="JSON", help="keyword arguments for the class or function, as a JSON object")
    p.add_argument(
        "--dynamic",
        action="append",
        default=[],
        metavar="PATH=SPEC",
        help="make an input dimension dynamic, e.g. x.0=batch:1..64 (a named Dim with its range; "
        "flags sharing a name share it), y.0=batch, z.1=2*batch, w.0=auto; repeat the flag",
    )
    p.add_argument("--train", action="store_true", help="export in train mode (default: eval)")
    p.add_argument(
        "--draft",
        action="store_true",
        help="where the export would stop (a branch on a tensor's value, an op without a fake kernel, "
        "a dynamic shape the model does not fit), take what the example inputs do, check it at run "
        "time where possible, and list every assumption",
    )
    p.add_argument(
        "--branches",
        choices=("capture", "refuse", "draft"),
        default="capture",
        help="where forward branches on a tensor's value: capture both sides as torch.cond (default), "
        "refuse (fail naming the line), or draft (follow the example inputs, as --draft)",
    )
    p.add_argument(
        "--max-iterations",
        type=_steps,
        metavar="N",
        help="write each captured loop over a data-sized tensor as N torch.cond steps instead of a "
        "torch.while_loop, for a consumer that cannot run one (ExecuTorch); the program asserts no "
        "loop needs more",
    )
    p.add_argument(
        "--tracing-checks",
        choices=TRACING_CHECKS,
        default="traced",
        help="how the trace answers the model asking whether it is traced (transformers' is_tracing(), "
        "torch.compiler.is_exporting()): traced (default, as torch.export) or eager (the model's eager "
        "path, its value tests captured as torch.cond)",
    )
    p.add_argument(
        "--experts-implementation",
        choices=EXPERTS_IMPLEMENTATIONS,
        help="export a transformers mixture-of-experts model with this experts implementation: batched_mm "
        "or grouped_mm instead of its data-dependent loop, checked against the model as configured; eager "
        "captures the loop itself as a torch.while_loop",
    )
    p.add_argument(
        "--ir",
        choices=IR_LEVELS,
        default="inference",
        help="inference (default): functional post-autograd ATen; training: torch.export's pre-dispatch "
        "training IR (what pt2e quantization and fine-tuning start from)",
    )
    p.add_argument("-o", "--output", metavar="OUT.pt2", help="where to write the program (default: <Name>.pt2 here)")
    p.add_argument(
        "--decompose",
        choices=DECOMPOSITIONS,
        help="lower the program before saving: core = core ATen (run_decompositions()), what ExecuTorch takes",
    )
    p.add_argument(
        "--aoti",
        nargs="?",
        const="",
        metavar="PATH",
        help="also compile an AOTInductor package (default: beside the program, OUT.aoti.pt2); "
        "with --verify it is run against eager too",
    )
    p.add_argument(
        "--onnx",
        metavar="OUT.onnx",
        help="also convert to ONNX with torch's ONNX exporter (needs pip install 'torch-exporter[onnx]'); "
        "with --verify it is run in onnxruntime against eager",
    )
    p.add_argument(
        "--executorch",
        metavar="OUT.pte",
        help="also lower to ExecuTorch and write the .pte file (needs pip install 'torch-exporter[executorch]'); "
        "with --verify it is run in the ExecuTorch runtime against eager",
    )
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="xnnpack",
        help="with --executorch: xnnpack (default) delegates what XNNPACK runs; portable delegates nothing",
    )
    p.add_argument("--json", metavar="REPORT.json", help="also write a machine-readable report")
    p.add_argument(
        "--html",
        metavar="REPORT.html",
        help="also write a report to look at: one self-contained file with the signature, ops, module tree, "
        "a drawing of the graph (modules as boxes, open them down to single ops), verification and timings",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="compare program and eager on the example and fresh inputs; with --dynamic also with every "
        "dynamic size at its min, its max and random sizes in between",
    )
    p.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance for --verify (default 1e-4)")
    p.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance for --verify (default 1e-5)")
    p.add_argument("--graph", action="store_true", help="print the graph's code")
    p.add_argument(
        "--signature",
        choices=("summary", "full"),
        default="summary",
        help="summary (default): user inputs and outputs, parameters and buffers summed per module; "
        "full: every row of the signature",
    )
    p.add_argument(
        "--report-submodules",
        action="store_true",
        help="when the export fails, export each failing module's submodules on their own and show "
        "the tree of which export and where the problem is (also in --json)",
    )
    loud = p.add_mutually_exclusive_group()
    loud.add_argument("-q", "--quiet", action="store_true", help="print one line")
    loud.add_argument("-v", "--verbose", action="store_true", help="debug logging and tracebacks")
    p.add_argument("--version", action="version", version=_version())
    return p


def _check_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m exporter check",
        description="Export and verify every MODEL (example inputs from each model's file); "
        "exit 0 only if all export, verify and match their baseline.",
    )
    p.add_argument(
        "models",
        metavar="MODEL",
        nargs="*",
        help="path/to/file.py:Name or package.module:Name; none: the models of [tool.exporter] in the "
        "nearest pyproject.toml at or above the current directory",
    )
    p.add_argument("--baseline", metavar="FILE", help="JSON file of accepted signatures and op histograms")
    p.add_argument(
        "--shard",
        metavar="K/N",
        help="check only the K-th of N disjoint shares (balanced by the baseline's recorded durations, "
        "else by count), for a CI matrix; join the --json files with `python -m exporter merge`",
    )
    p.add_argument("--update-baseline", action="store_true", help="record the current exports in --baseline")
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML")
    p.add_argument("--json", metavar="FILE", help="write a machine-readable report")
    p.add_argument("--html", metavar="FILE", help="write one HTML report of every model, each linked from the table")
    p.add_argument("-j", "--jobs", type=int, metavar="N", help="export N models at once (default 1); each model "
                   "runs in a worker process of its own, so one that crashes, hangs or runs out of memory fails alone")
    p.add_argument("--timeout", metavar="SECONDS", help="stop a model's worker after SECONDS and fail that model "
                   f"(default {DEFAULT_TIMEOUT:g}; 0: no limit)")
    p.add_argument("--max-memory", metavar="SIZE", help="stop a model's worker when it holds more than SIZE of "
                   "memory (resident, torch included, e.g. 4G) and fail that model (default: no limit)")
    p.add_argument("--rtol", type=float, help="relative tolerance (default 1e-4)")
    p.add_argument("--atol", type=float, help="absolute tolerance (default 1e-5)")
    loud = p.add_mutually_exclusive_group()
    loud.add_argument("-q", "--quiet", action="store_true", help="print only the verdict")
    loud.add_argument("-v", "--verbose", action="store_true", help="debug logging, and each failure's traceback "
                      "(for a worker that crashed or was stopped: the stacks of its threads)")
    return p


def _merge_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m exporter merge",
        description="Join the --json files of `check --shard K/N` runs into one summary (as one "
        "unsharded run writes it), one JUnit file and one updated baseline; exit as check would.",
    )
    p.add_argument("shards", metavar="SHARD.json", nargs="+", help="the --json file of every shard")
    p.add_argument("--json", metavar="FILE", help="write the merged summary")
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML for every model")
    p.add_argument("--baseline", metavar="FILE", help="the baseline the shards were checked against")
    p.add_argument("--update-baseline", action="store_true", help="record every exported model in --baseline")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the verdict")
    return p


def parsers() -> dict[str, argparse.ArgumentParser]:
    """The command line's parsers by subcommand (``""`` for the export itself), as the
    documentation's reference renders them."""
    return {"": _export_parser(), "check": _check_parser(), "merge": _merge_parser()}


def _version() -> str:
    from .. import __version__

    return f"exporter {__version__}"


def _input_error(console: Console, error: InputSpecError) -> int:
    render_error(ErrorInfo.from_exception(error), console)
    return 2


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING)
    if not verbose:
        # Fake-tensor kernels log the traceback of a failing meta kernel at ERROR level;
        # the failure itself reaches the user as a readable error.
        logging.getLogger(FAKE_TENSOR_LOGGER).setLevel(logging.CRITICAL)
        # --draft prints its assumptions as a table; the library's warning would repeat them
        logging.getLogger("exporter.draft").setLevel(logging.ERROR)
        # --onnx: the ONNX exporter warns about every optional operator library it lacks
        logging.getLogger("torch.onnx").setLevel(logging.ERROR)
        # --executorch: its lowering logs every partitioning decision, and importing it
        # imports torchao, which logs the optional kernels it cannot load
        for name in ("executorch", "torchao", "torch.utils._pytree"):
            logging.getLogger(name).setLevel(logging.ERROR)


def _export_main(argv: list[str]) -> int:
    args = _export_parser().parse_args(argv)
    console = Console(emoji=False)
    _configure_logging(args.verbose)
    try:
        init_args = parse_init_args(args.init_args)
        if args.onnx is not None:
            require_onnx()
        if args.executorch is not None:
            require_executorch()
        elif args.backend != "xnnpack":
            raise InputSpecError("--backend applies to --executorch only", hint="add --executorch OUT.pte")
    except InputSpecError as e:
        return _input_error(console, e)
    settings = ExportSettings(
        model=args.model,
        example_inputs=args.example_inputs,
        init_args=init_args,
        train=args.train,
        output=args.output,
        verify=args.verify,
        rtol=args.rtol,
        atol=args.atol,
        dynamic=args.dynamic,
        report_submodules=args.report_submodules,
        draft=args.draft,
        branches=args.branches,
        max_iterations=args.max_iterations,
        tracing_checks=args.tracing_checks,
        experts_implementation=args.experts_implementation,
        ir=args.ir,
        decompose=args.decompose,
        aoti=args.aoti,
        onnx=args.onnx,
        executorch=args.executorch,
        backend=args.backend,
    )
    with progress(console if not args.quiet else Console(quiet=True, emoji=False)) as stage:
        report = run_export(settings, on_stage=stage)
    if args.json:
        write_json(args.json, report.to_json())
    if args.html:
        write_html(args.html, export_html(report))
    if args.quiet:
        render_quiet(report, console)
    else:
        render_export(report, console, show_graph=args.graph, verbose=args.verbose, signature=args.signature)
    return report.exit_code


def _check_main(argv: list[str]) -> int:
    args = _check_parser().parse_args(argv)
    console = Console(emoji=False)
    _configure_logging(args.verbose)
    if args.jobs is not None and args.jobs < 1:
        _check_parser().error("--jobs must be at least 1")
    try:
        settings = _check_settings(args)
    except InputSpecError as e:
        return _input_error(console, e)
    if args.update_baseline and not settings.baseline:
        _check_parser().error("--update-baseline needs --baseline FILE (or baseline = ... in [tool.exporter])")
    try:
        _require_writable(args, settings.baseline if args.update_baseline else None)
        with progress(console if not args.quiet else Console(quiet=True, emoji=False)) as stage:
            stage("exporting")
            results = run_check(settings, lambda ref, finished: stage(f"exported {finished}, last {ref}"))
    except InputSpecError as e:
        return _input_error(console, e)
    title = "exporter check"
    if settings.shard is not None:
        title += f", shard {settings.shard[0]}/{settings.shard[1]}: {len(results)} of {len(settings.models)} models"
    summary = check_json(results, settings.shard, [m.reference for m in settings.models])
    return _check_outcome(results, args, console, summary, title)


def _require_writable(args: argparse.Namespace, baseline: str | None) -> None:
    """Refuse output locations that cannot be written before exporting anything."""
    outputs = (("--json", args.json), ("--junit", args.junit), ("--html", getattr(args, "html", None)), ("--baseline", baseline))
    for what, path in outputs:
        if path:
            require_writable(path, what)


def _check_settings(args: argparse.Namespace) -> CheckSettings:
    """Command-line flags over ``[tool.exporter]`` (read only when no MODEL is given) over defaults."""
    shard = parse_shard(args.shard) if args.shard else None
    if args.models:
        models, config = list(args.models), None
    else:
        path = find_config(".")
        if path is None:
            raise InputSpecError(
                "no MODEL given, and no pyproject.toml with a [tool.exporter] table here or above",
                hint='name the models, or list them in pyproject.toml: [tool.exporter] models = ["models/net.py:Net"]',
            )
        config = load_config(path)
        models = config.models

    def pick(flag, key, default):
        if flag is not None:
            return flag
        value = getattr(config, key) if config is not None else None
        return default if value is None else value

    return CheckSettings(
        models=models,
        baseline=pick(args.baseline, "baseline", None),
        update_baseline=args.update_baseline,
        jobs=pick(args.jobs, "jobs", 1),
        rtol=pick(args.rtol, "rtol", 1e-4),
        atol=pick(args.atol, "atol", 1e-5),
        shard=shard,
        timeout=parse_timeout(args.timeout) if args.timeout is not None else pick(None, "timeout", DEFAULT_TIMEOUT) or None,
        max_memory=parse_size(args.max_memory) if args.max_memory is not None else pick(None, "max_memory", None),
    )


def _check_outcome(results, args: argparse.Namespace, console: Console, summary: dict, title: str = "exporter check") -> int:
    """Write --junit and --json, print the table (or the verdict line), return the exit code."""
    if args.junit:
        write_junit(args.junit, results)
    if args.json:
        write_json(args.json, summary)
    if getattr(args, "html", None):
        write_html(args.html, check_html(results, title))
    if args.quiet:
        console.print(f"{sum(r.passed for r in results)}/{len(results)} models passed", highlight=False)
    else:
        render_check(results, console, title=title, verbose=getattr(args, "verbose", False))
    return check_exit_code(results)


def _merge_main(argv: list[str]) -> int:
    from .merge import load_shard, merge_shards

    args = _merge_parser().parse_args(argv)
    console = Console(emoji=False)
    if args.update_baseline and not args.baseline:
        _merge_parser().error("--update-baseline needs --baseline FILE")
    try:
        _require_writable(args, args.baseline if args.update_baseline else None)
        merged, results = merge_shards({path: load_shard(path) for path in args.shards})
        if args.update_baseline:
            baseline = load_baseline(args.baseline)
            for result in results:
                if result.report.ok:
                    baseline[result.reference] = baseline_entry(result.report)
            save_baseline(args.baseline, baseline)
    except InputSpecError as e:
        return _input_error(console, e)
    return _check_outcome(results, args, console, merged, f"exporter check, merged from {len(args.shards)} shard file(s)")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] == "check":
            return _check_main(argv[1:])
        if argv and argv[0] == "merge":
            return _merge_main(argv[1:])
        return _export_main(argv)
    except InputSpecError as e:  # found late, such as an output location that fills up
        return _input_error(Console(emoji=False), e)


if __name__ == "__main__":
    sys.exit(main())
