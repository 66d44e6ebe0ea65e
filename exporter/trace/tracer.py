"""Run the real module under fake tensors and record functional, post-autograd ATen (or the
training IR) into an ``ExportState``: the ways to trace (``STRATEGIES``), tried in turn, and
what every trace's graph gets afterwards.  How a trace works is on the design page."""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import linecache
import logging
import os
import re
import sys
from collections.abc import Callable
from typing import Any

import attrs
import torch

from .._dims import DynamicPlan
from .._errors import Category, ExportError, TraceError
from .._ir import graph_modules, is_library_frame
from .._state import ExportState
from .._torch_internals import (
    FakeTensorMode,
    TracingContext,
    assumptions_undone,
    forget_pending_symbols,
    record_module_calls,
    retrace_graph,
    tracing,
)
from ..inputs.bind import BoundInputs
from .draft import (
    data_dependent_assumptions,
    missing_fake_kernel_assumptions,
    record_assumption_sites,
    values_taken_assumptions,
)
from .explain import explain, needed_a_data_sized_value
from .fast import FastPaths
from .module_function import ROOT_ATTR, Holder, ModuleRun, Recorded, functional_fn, plain_fn, training_fn
from .patches import tracing_patches
from .python_ops import int_shadows_safely
from .preserve import module_preserved
from .signature import constant_attribute_fqns, input_specs, output_specs
from .stacks import on_roomy_stack, recording_user_calls
from .state_inputs import StateInputs, collect_state, real_writes_undone
from .symbols import FakeInputs, fake_inputs, new_fake_mode
from .write_watch import NeedsFunctionalization, WriteWatch

__all__ = ["STRATEGIES", "finish", "prepare", "replay", "run", "trace"]

log = logging.getLogger(__name__)


def _strip_holder(text: str) -> str:
    if text == ROOT_ATTR:
        return ""
    prefix = ROOT_ATTR + "."
    return text[len(prefix) :] if text.startswith(prefix) else text


def _root_relative_module_stacks(gm: torch.fx.GraphModule) -> None:
    """Rewrite module-stack keys and paths recorded under the holder to be root-relative."""
    for module in graph_modules(gm):
        for node in module.graph.nodes:
            stack = node.meta.get("nn_module_stack")
            if stack:
                node.meta["nn_module_stack"] = {
                    _strip_holder(key): (_strip_holder(path), cls) for key, (path, cls) in stack.items()
                }


def _requires_grad_as_received(placeholder: torch.fx.Node, value: torch.Tensor, made: Any, spare: bool) -> None:
    """A placeholder's value requires grad when the input it stands for does as the program
    receives it (a parameter unless frozen, a user input passed so; its ``tensor_meta``
    says the same), in either IR.  The trace leaves the fake as forward left it, so a
    buffer that forward writes a value requiring grad into would claim to require grad
    coming in; the placeholder gets a fake of its own instead of that one, which the
    nodes that wrote to it keep.

    That fake is the one made for the input before the trace (``made``) where it is
    ``spare``: forward did not write the input and no other placeholder holds it.  It
    already has the sizes and the ``requires_grad`` of the input, and taking it costs
    nothing, where a ``detach`` runs through the fake mode (most of what this step costs on
    a model with many parameters)."""
    val = placeholder.meta.get("val")
    if not isinstance(val, torch.Tensor) or (val.requires_grad == value.requires_grad and val.is_leaf):
        return
    if (
        spare
        and type(made) is type(val)
        and made.is_leaf
        and made.requires_grad == value.requires_grad
        and made.dtype == val.dtype
        and made.device == val.device
        and made.shape == val.shape
        and made.stride() == val.stride()
        and made.storage_offset() == val.storage_offset()
    ):
        placeholder.meta["val"] = made
        return
    placeholder.meta["val"] = val.detach().requires_grad_(value.requires_grad)


def _one_update_per_node(gm: torch.fx.GraphModule, updates: int) -> list[Any]:
    """The graph's outputs, each input update its own node.

    Two inputs that are one tensor (passed twice, or registered under two names) get the
    same new value when forward writes to it; torch.export's signature names each update
    by its node, so the second one reads the value through an ``alias`` of its own."""
    output = gm.graph.output_node()
    outputs = list(output.args[0])
    seen: set[torch.fx.Node] = set()
    for i, value in enumerate(outputs[:updates]):
        if isinstance(value, torch.fx.Node) and value in seen:
            with gm.graph.inserting_before(output):
                alias = gm.graph.call_function(torch.ops.aten.alias.default, (value,))
            alias.meta = dict(value.meta)
            outputs[i] = alias
        seen.add(value)
    if outputs != list(output.args[0]):
        output.args = (tuple(outputs),)
    return outputs


def _write_back_buffers(gm: torch.fx.GraphModule, placeholders: list[torch.fx.Node], writes: dict[int, torch.fx.Node]) -> None:
    """``copy_(buffer, value)`` before the output for each buffer forward() assigned."""
    output = gm.graph.output_node()
    for i, value in sorted(writes.items()):
        with gm.graph.inserting_before(output):
            copy = gm.graph.call_function(torch.ops.aten.copy_.default, (placeholders[i], value))
        copy.meta = dict(value.meta)


@attrs.frozen
class _Traced:
    gm: torch.fx.GraphModule
    fake_mode: FakeTensorMode
    fakes: FakeInputs
    recorded: Recorded
    root_relative: bool = False
    """Module stacks are already relative to the user's module (the recorder's are)."""
    kind: str = ""
    """The flat function traced: ``plain``, ``functional`` or ``training``."""


@attrs.frozen
class _Request:
    """What every try at tracing one export shares."""

    root: torch.nn.Module
    state_inputs: StateInputs
    bound: BoundInputs
    labels: list[str]
    """How errors name each flat input: ``parameter 'w'``, ``buffer 'b'``, ``args[0]``."""
    plan: DynamicPlan | None
    fast: FastPaths
    draft: bool
    prefer_deferred_runtime_asserts_over_guards: bool
    training: bool
    always_functionalize: bool
    watch: WriteWatch
    decider: Any = None
    """Branch capture's decider for the data-dependent booleans of this run (None: they fail)."""
    world: _World | None = None
    """One fake mode and one set of fake inputs for every run of an export (branch capture's
    runs share them, so their graphs hold the same symbols); None: a fresh one per try."""
    python: PythonSemantics = attrs.field(factory=lambda: PythonSemantics())


@attrs.define
class PythonSemantics:
    """How Python's own functions behave in the runs of one export, learned as they run."""

    data_sized_len: bool = False
    """``len()`` of a tensor whose first size only the data decides gives that size (set once a
    run needed a size's value: ``len(boxes)`` after ``nonzero``)."""
    int_modules: frozenset[str] = frozenset()
    """Modules whose ``int()`` keeps a value only the data decides symbolic (each added once a
    run needed such a value on a line of it that calls ``int``: ``int(lengths.max())``)."""
    range_modules: frozenset[str] = frozenset()
    """Modules whose ``range()`` of a number only the data decides is a loop branch capture
    goes round as a ``torch.while_loop`` (each added once a run needed such a value on a line
    of it that calls ``range``: ``for i in range(len(boxes)):``)."""

    def learn(self, error: TraceError) -> bool:
        """Take the next step for a run that failed with ``error`` needing a data-decided
        number as a plain one: ``int()`` in the module whose line asked, if the line calls
        it, and ``len()`` with the first step.  False when there is none left to take."""
        learned = not self.data_sized_len
        self.data_sized_len = True
        module = int_module_at(error.location)
        if module is not None and module not in self.int_modules:
            self.int_modules = self.int_modules | {module}
            learned = True
        module = _module_calling(error.location, "range")
        if module is not None and module not in self.range_modules:
            self.range_modules = self.range_modules | {module}
            learned = True
        return learned


def int_module_at(location: str | None) -> str | None:
    """The name of the module whose source line ``location`` (``path:line``) calls ``int``,
    when that module may take ``SymbolicInt`` (not torch's, exporter's or the standard
    library's, and using the name ``int`` only in ways it keeps); else None."""
    name = _module_calling(location, "int")
    if name is None:
        return None
    try:
        source = inspect.getsource(sys.modules[name])
    except (OSError, TypeError):
        return None
    return name if int_shadows_safely(source) else None


def _module_calling(location: str | None, name: str) -> str | None:
    """The name of the module whose source line ``location`` (``path:line``) calls the
    builtin ``name``, where that module is the model's (not a library's); else None."""
    if not location or ":" not in location:
        return None
    path, _, line = location.rpartition(":")
    if not line.isdigit() or is_library_frame(path):
        return None
    if not re.search(rf"(?<![\w.]){name}\s*\(", linecache.getline(path, int(line))):
        return None
    real = os.path.realpath(path)
    for module_name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and os.path.realpath(file) == real:
            return module_name
    return None


@attrs.define
class _World:
    """The fake mode and fake inputs the runs of one export share."""

    fake_mode: FakeTensorMode | None = None
    fakes: FakeInputs | None = None


def _fake_world(r: _Request) -> tuple[FakeTensorMode, FakeInputs]:
    """The fake mode and the fake inputs for one try: the shared ones when the runs share a
    world (made on the first try), else fresh ones."""
    if r.world is not None and r.world.fake_mode is not None:
        return r.world.fake_mode, r.world.fakes
    fake_mode = new_fake_mode(
        r.root, prefer_deferred_runtime_asserts_over_guards=r.prefer_deferred_runtime_asserts_over_guards,
        dynamic=r.plan is not None,
    )
    if r.draft:
        record_assumption_sites(fake_mode.shape_env)
    fakes = fake_inputs(fake_mode, r.state_inputs.values, r.bound, r.plan, direct=r.fast.direct_fake())
    if r.world is not None:
        r.world.fake_mode, r.world.fakes = fake_mode, fakes
    return fake_mode, fakes


def _trace_once(request: _Request, kind: str, *, by_recorder: bool = False) -> _Traced:
    """One trace of the ``kind`` of flat function (``plain``, ``functional``, ``training``:
    ``module_function``), with make_fx, or with the fast recorder, whose nodes reach the
    write watch directly (make_fx's reach it through the patches)."""
    r = request
    fake_mode, fakes = _fake_world(r)
    fake_mode.shape_env.decider = r.decider
    if r.world is not None:  # a try abandoned in this world leaves no symbol for this one to bind
        forget_pending_symbols(fake_mode.shape_env)
        # and the inputs' ``.item()``, ``nonzero`` and ``unique`` give this trace symbols of its
        # own, which it binds, not the ones an earlier trace took (and decided) for them
        fake_mode.epoch += 1
    if r.decider is not None:
        r.decider.reset()
        # the recorder hands a run that branches on data to make_fx, whose graph is the one joined
        r.decider.active = not by_recorder
    recorded = Recorded()
    run = ModuleRun(r.root, r.state_inputs, r.bound, Holder(r.root))
    builders = {"plain": lambda: plain_fn(run, recorded), "functional": lambda: functional_fn(run, recorded, r.labels),
                "training": lambda: training_fn(run, recorded, r.labels)}
    fn = builders[kind]()
    # The tracing context hands our fake mode to anything that compiles a region
    # internally (torch.cond runs its branches through torch.compile).
    memo = contextlib.nullcontext()
    if r.plan is not None and not r.draft:
        memo = r.fast.symbolic_memo_for(fake_mode, training=r.training)
    # what a run decided holds for that run only: the next one may decide the other way
    undone = assumptions_undone(fake_mode.shape_env) if r.decider is not None else contextlib.nullcontext()
    metas = r.fast.meta_kernels_for(fake_mode)
    # where a decision's sides rejoin: the user's function calls each node is made in, for
    # the runs branch capture joins (the first run only finds whether there are decisions)
    joined = r.decider is not None and r.world is not None and not by_recorder
    calls = recording_user_calls(r.decider.calls) if joined else contextlib.nullcontext()
    with real_writes_undone(fake_mode), undone, calls, fake_mode, metas, memo, tracing(TracingContext(fake_mode)):
        if by_recorder:
            from .fast.recorder import record

            recording = functools.partial(record, training=r.training, direct_pre_dispatch=r.fast.direct_pre_dispatch)
            gm = on_roomy_stack(recording, fn, r.root, fakes.inputs, r.watch, fake_mode.shape_env)
        else:
            with r.fast.pre_dispatch_for_make_fx() if r.training else contextlib.nullcontext():
                record_calls = functools.partial(record_module_calls, pre_dispatch=r.training)
                gm = on_roomy_stack(record_calls, fn, run.holder, {}, fakes.inputs)
    return _Traced(gm, fake_mode, fakes, recorded, root_relative=by_recorder, kind=kind)


# -- the ways to trace, tried in order: each returns a trace, or None to hand over to the next


def _by_the_recorder(request: _Request) -> _Traced | None:
    """The fast recorder (a fast path), on the first try of a static trace.  None when make_fx
    must trace instead: the recorder refused, or the model raised (make_fx's trace then
    reports the error as it always has).  A write that needs functionalization sets
    ``watch.functionalized``, as make_fx's unfunctionalized try does."""
    r = request
    if not (r.fast.recorder and r.plan is None and not r.draft and not r.state_inputs.subclasses):
        return None
    if r.world is not None:  # branch capture's runs are joined as make_fx records them
        return None
    if r.always_functionalize and not r.training:
        return None
    from .fast.recorder import CannotRecord

    try:
        return _trace_once(r, "training" if r.training else "plain", by_recorder=True)
    except NeedsFunctionalization as why:
        log.debug("tracing again, functionalized: %s", why)
        r.watch.functionalized = True
    except ExportError:
        raise
    except Exception as why:  # CannotRecord, or an error make_fx's trace will report
        log.debug("tracing with make_fx: %s", why if isinstance(why, CannotRecord) else repr(why))
    r.watch.reset()
    return None


def _by_make_fx_pre_dispatch(request: _Request) -> _Traced | None:
    """The training IR: make_fx above autograd, writes kept in place."""
    return _trace_once(request, "training") if request.training else None


def _by_make_fx_unfunctionalized(request: _Request) -> _Traced | None:
    """make_fx without functionalization, writes to fresh intermediates recorded out of place
    (``write_watch``); None when another write needs functionalization."""
    if request.training or request.watch.functionalized:
        return None
    try:
        return _trace_once(request, "plain")
    except NeedsFunctionalization as why:
        log.debug("tracing again, functionalized: %s", why)
        request.watch.functionalized = True
        return None


def _by_make_fx_functionalized(request: _Request) -> _Traced | None:
    """make_fx through a functionalizing mode: every write becomes functional."""
    return _trace_once(request, "functional")


STRATEGIES: tuple[tuple[str, Callable[[_Request], _Traced | None]], ...] = (
    ("the fast recorder", _by_the_recorder),
    ("make_fx, pre-dispatch (training IR)", _by_make_fx_pre_dispatch),
    ("make_fx, unfunctionalized", _by_make_fx_unfunctionalized),
    ("make_fx, functionalized", _by_make_fx_functionalized),
)
"""The ways a model is traced, tried in this order until one gives a trace."""


def _refuse_subclass_state_in_training_ir(root: torch.nn.Module, state_inputs: StateInputs) -> None:
    """torch.export's training IR keeps a tensor-subclass parameter or buffer as one input of
    that subclass (its inner tensors read through ``export.access_subclass_inner_tensor``);
    exporter traces such state as its plain inner tensors, which is what the default IR
    holds and not what the training IR does."""
    state = dict(root.named_parameters(remove_duplicate=False)) | dict(root.named_buffers(remove_duplicate=False))
    named = ", ".join(f"{sub.name!r} ({type(state[sub.name]).__qualname__})" for sub in state_inputs.subclasses)
    raise TraceError(
        f"ir='training' keeps tensor-subclass parameters and buffers as subclass inputs, which exporter "
        f"does not trace: {named}",
        category=Category.UNSUPPORTED_TENSOR_SUBCLASS,
        hint="export with ir='inference' (the default; --ir inference on the command line), which "
        "traces them as their inner tensors as torch.export's run_decompositions does; or use "
        "torch.export.export for a training IR with subclass inputs",
    )


def prepare(
    root: torch.nn.Module,
    bound: BoundInputs,
    plan: DynamicPlan | None = None,
    *,
    always_functionalize: bool = False,
    fast: FastPaths | None = None,
    draft: bool = False,
    prefer_deferred_runtime_asserts_over_guards: bool = False,
    training: bool = False,
    shared_world: bool = False,
    python: PythonSemantics | None = None,
) -> _Request:
    """What every run of forward for one export shares (see ``trace`` for the arguments);
    ``shared_world``: every run uses one fake mode and one set of fake inputs; ``python``:
    what an earlier request of the export learned of Python's functions."""
    state_inputs = collect_state(root)
    if training and state_inputs.subclasses:
        _refuse_subclass_state_in_training_ir(root, state_inputs)
    parameters, buffers = list(state_inputs.parameters), list(state_inputs.buffers)
    labels = [*(f"parameter '{n}'" for n in parameters), *(f"buffer '{n}'" for n in buffers), *bound.labels]
    fast = FastPaths.resolve() if fast is None else fast
    watch = WriteWatch(functionalized=always_functionalize or training)
    return _Request(
        root, state_inputs, bound, labels, plan, fast, draft, prefer_deferred_runtime_asserts_over_guards,
        training, always_functionalize, watch, world=_World() if shared_world else None,
        python=python if python is not None else PythonSemantics(),
    )


def run(request: _Request, decider: Any = None) -> _Traced:
    """One run of forward, traced by the first of ``STRATEGIES`` that gives a trace; each try
    starts from the model as the user gave it, and the model is left so afterwards.
    ``decider``: takes the data-dependent booleans the run meets (branch capture).

    A run that fails needing, as a plain number, the value of an integer only the data
    decides is made again with Python behaving otherwise (``PythonSemantics.learn``):
    ``len()`` giving such sizes symbolic (``len(boxes)`` is then ``boxes.shape[0]``), and
    ``int()`` keeping such values symbolic in the module whose line asked; the export's
    later runs keep what was learned.  The error raised is that of the run that got
    furthest; where none did, the first."""
    if decider is not None:
        request = attrs.evolve(request, decider=decider)
    try:
        return _run(request)
    except TraceError as error:
        if request.draft or not needed_a_data_sized_value(error):
            raise
        first = error
    error = first
    while request.python.learn(error):
        try:
            return _run(request)
        except TraceError as again:
            if again.location == error.location and again.category is error.category:
                continue  # no further: the next step, if any, may help
            if not needed_a_data_sized_value(again):
                raise
            error = again
    raise error


def _run(request: _Request) -> _Traced:
    r = request
    try:
        with tracing_patches(r.watch, draft=r.draft, training=r.training, fast=r.fast, data_sized_len=r.python.data_sized_len, int_modules=r.python.int_modules, range_modules=r.python.range_modules), module_preserved(r.root) as as_given:
            for name, strategy in STRATEGIES:
                traced = strategy(request)
                if traced is not None:
                    log.debug("traced by %s", name)
                    return traced
                # the next way starts from the model as the user gave it, not as this try left
                # it (a cache forward filled with this try's fake tensors)
                as_given.restore()
    except ExportError:
        raise
    except Exception as e:
        raise explain(e) from e
    raise AssertionError("the last way of tracing always gives a trace or raises")


def replay(request: _Request, fn: Callable[..., Any], recorded: Recorded, kind: str) -> _Traced:
    """Trace ``fn`` (which runs joined graphs through an interpreter) on the export's shared
    fake inputs, under the same process-wide patches as a run of forward, so the ops it
    replays are recorded as the runs recorded them."""
    r = request
    fake_mode, fakes = r.world.fake_mode, r.world.fakes
    fake_mode.shape_env.decider = None
    # The joined graph is post-autograd already (but the training IR's): with grad on, every
    # torch.cond in it would trace its branches once more for a backward nobody asks for.
    grad = contextlib.nullcontext() if r.training else torch.no_grad()
    try:
        with tracing_patches(r.watch, draft=r.draft, training=r.training, fast=r.fast, data_sized_len=r.python.data_sized_len, int_modules=r.python.int_modules, range_modules=r.python.range_modules), fake_mode, grad, tracing(TracingContext(fake_mode)):
            gm = on_roomy_stack(functools.partial(retrace_graph, pre_dispatch=r.training), fn, fakes.inputs)
    except ExportError:
        raise
    except Exception as e:
        raise explain(e) from e
    return _Traced(gm, fake_mode, fakes, recorded, kind=kind)


def trace(
    root: torch.nn.Module,
    bound: BoundInputs,
    plan: DynamicPlan | None = None,
    *,
    always_functionalize: bool = False,
    fast: FastPaths | None = None,
    draft: bool = False,
    prefer_deferred_runtime_asserts_over_guards: bool = False,
    training: bool = False,
) -> ExportState:
    """Trace ``root`` on ``bound`` inputs into an ExportState holding functional ATen (the
    training IR with ``training``), trying each of ``STRATEGIES`` in turn.

    ``plan``: the parsed ``dynamic_shapes``, whose dynamic dimensions of user inputs are
    symbolic; checking the guards the trace produced against it is a later step.
    ``always_functionalize``: skip the unfunctionalized first try.
    ``fast``: the fast paths to take (``FastPaths.resolve()`` when None).
    ``draft``: fake tensors carry real values; where the trace needs a tensor's value (a
    branch, a hashed size, ``.numpy()``) or an operator has no fake kernel, the example inputs
    decide, and ``state.assumptions`` lists each such place (``draft.py``).
    ``prefer_deferred_runtime_asserts_over_guards``: size conditions that decide no control
    flow become runtime asserts in the program rather than guards.
    """
    request = prepare(
        root, bound, plan, always_functionalize=always_functionalize, fast=fast, draft=draft,
        prefer_deferred_runtime_asserts_over_guards=prefer_deferred_runtime_asserts_over_guards, training=training,
    )
    return finish(request, run(request))


def finish(request: _Request, traced: _Traced) -> ExportState:
    """The ExportState of a traced run (or of runs joined into one graph): placeholders'
    values as the program receives its inputs, buffer write-backs, the first signature."""
    root, bound, state_inputs, draft, training = request.root, request.bound, request.state_inputs, request.draft, request.training
    parameters, buffers = list(state_inputs.parameters), list(state_inputs.buffers)
    gm, fake_mode, recorded = traced.gm, traced.fake_mode, traced.recorded
    if not traced.root_relative:
        _root_relative_module_stacks(gm)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    _write_back_buffers(gm, placeholders, recorded.buffer_writes)
    received = [*state_inputs.values, *bound.flat]
    written = set(recorded.mutated)
    holders = collections.Counter(id(value) for value in traced.fakes.inputs)
    for i, (node, value, given) in enumerate(zip(placeholders, traced.fakes.inputs, received)):
        if not isinstance(value, torch.Tensor):
            node.meta["val"] = value
        else:
            _requires_grad_as_received(node, given, value, i not in written and holders[id(value)] == 1)
    for node in gm.graph.nodes:
        # Ops that return nothing (asserts) get an explicit None, so every call has a `val`.
        if node.op == "call_function":
            node.meta.setdefault("val", None)

    outputs = _one_update_per_node(gm, len(recorded.mutated))
    state = ExportState(
        root=root,
        gm=gm,
        input_specs=input_specs(placeholders, parameters, buffers, state_inputs.non_persistent),
        output_specs=output_specs(outputs, recorded.mutated, placeholders, parameters, buffers),
        fake_mode=fake_mode,
        args=bound.args,
        kwargs=bound.kwargs,
        in_spec=bound.in_spec,
        out_spec=recorded.out_spec,
        user_input_paths=list(bound.paths),
        forward_arg_names=list(bound.forward_arg_names),
        constant_fqns=constant_attribute_fqns(root),
        subclass_leaves=state_inputs.leaves,
        dynamic=request.plan,
        tracked=traced.fakes.tracked,
        equalities=traced.fakes.equalities,
        training=training,
        notes=list(recorded.replaced),
    )
    if draft:
        state.assumptions = (
            data_dependent_assumptions(state) + values_taken_assumptions(state) + missing_fake_kernel_assumptions(state)
        )
    return state
