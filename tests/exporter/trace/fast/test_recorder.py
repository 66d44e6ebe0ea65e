"""The fast recorder records exactly what make_fx records, and hands make_fx what it cannot.

Differential: every static model of the e2e corpus and of the parity corpus (ported from
torch's own export tests) is traced twice, by the recorder and by make_fx alone
(every fast path off, ``FastPaths()``), and the two graphs must agree on every node: name, target,
arguments, stack trace, module stack, value and every other metadata entry.  The same
holds for the training IR (``training=True``: the recorder in make_fx's pre-dispatch slot
against make_fx with ``pre_dispatch=True``).
"""

from __future__ import annotations

import logging
import threading

import attrs
import pytest
import torch

import exporter
from exporter.inputs import bind_inputs
from exporter.trace import trace
from exporter._torch_internals import FakeTensor
from exporter.trace.active import traced_graph, traced_node
from exporter.trace.fast import FastPaths
from exporter.trace.fast.recorder import CannotRecord, forget_fake_results
from tests.e2e.cases import CASES, TRANSFORMER_CASES
from tests.parity.run import load
from tests.support import graph_fingerprint

ON, OFF = FastPaths.resolve(True), FastPaths()
"""Every fast path on (also on a release where they are not proven), and every one off."""

PARITY_STATIC = [c for c in load() if c.dynamic_shapes is None]


def _both(model: torch.nn.Module, args, kwargs, training: bool = False):
    bound = bind_inputs(model, args, kwargs)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    recorded = trace(model, bound, training=training, fast=ON)
    by_make_fx = trace(model, bound, fast=OFF, training=training)
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    return recorded, by_make_fx


IRS = pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])


@IRS
@pytest.mark.parametrize("case", CASES + TRANSFORMER_CASES, ids=lambda c: c.name)
def test_corpus_graphs_equal_make_fx(case, training):
    model = case.make_model()
    recorded, by_make_fx = _both(model, *case.make_inputs(0), training=training)
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)
    assert recorded.output_specs == by_make_fx.output_specs
    assert recorded.input_specs == by_make_fx.input_specs


@pytest.mark.slow
@IRS
@pytest.mark.parametrize("case", PARITY_STATIC, ids=lambda c: c.name)
def test_parity_graphs_equal_make_fx(case, training):
    torch.manual_seed(0)
    model = case.model()
    args, kwargs = case.inputs()
    try:
        by_make_fx = trace(model, bind_inputs(model, args, kwargs), fast=OFF, training=training)
    except Exception as e:  # the case fails in make_fx too: the recorder must fail alike
        with pytest.raises(type(e)):
            trace(model, bind_inputs(model, args, kwargs), training=training, fast=ON)
        return
    recorded = trace(model, bind_inputs(model, args, kwargs), training=training, fast=ON)
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)


# -- what the recorder hands to make_fx ------------------------------------------------------


@pytest.fixture
def why_make_fx():
    """The reasons logged when a trace went to make_fx."""
    reasons: list[str] = []

    class Handler(logging.Handler):
        def emit(self, record):
            message = record.getMessage()
            if message.startswith("tracing with make_fx"):
                reasons.append(message)

    logger = logging.getLogger("exporter.trace.tracer")
    handler, level = Handler(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield reasons
    logger.removeHandler(handler)
    logger.setLevel(level)


class ReadsValueButCatches(torch.nn.Module):
    """Catches the exception an `.item()` raises while tracing and carries on."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        try:
            scale = float(x.sum().item() > 1e9)
        except Exception:
            scale = 0.0
        return self.lin(x) + scale


class Shared(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Linear(3, 3)
        self.dec = self.enc

    def forward(self, x):
        return self.dec(self.enc(x))


class MadeInForward(torch.nn.Module):
    """A module created in forward is not on the module stack (make_fx: not a submodule)."""

    def forward(self, x):
        return torch.nn.ReLU()(x) + torch.nn.Identity()(x)


class Cond(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda y: y + 1, lambda y: y - 1, (x,))


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        (ReadsValueButCatches(), "reads a tensor's value"),
        (Shared(), "reachable under two names"),
        (Cond(), "higher-order op"),
    ],
    ids=["caught-refusal", "shared-module", "cond"],
)
def test_refusals_go_to_make_fx_with_the_same_graph(model, reason, why_make_fx):
    x = torch.randn(2, 3)
    recorded, by_make_fx = _both(model, (x,), None)
    assert any(reason in r for r in why_make_fx), why_make_fx
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)


def test_module_made_in_forward_is_recorded_off_the_stack(why_make_fx):
    recorded, by_make_fx = _both(MadeInForward(), (torch.randn(2, 3),), None)
    assert not why_make_fx
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)
    stacks = [n.meta["nn_module_stack"] for n in recorded.gm.graph.nodes if n.op == "call_function"]
    assert stacks and all(list(stack) == [""] for stack in stacks)


class Repeats(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh())

    def forward(self, x):
        return self.block(self.block(self.block(x)))


def test_repeated_calls_are_numbered_as_make_fx_numbers_them(why_make_fx):
    recorded, by_make_fx = _both(Repeats(), (torch.randn(2, 3),), None)
    assert not why_make_fx
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)
    keys = {k for n in recorded.gm.graph.nodes for k in n.meta.get("nn_module_stack", {})}
    assert {"block", "block@1", "block@2", "block.0@2", "block.1@1"} <= keys


class FailsOnFakeTensors(torch.nn.Module):
    """Runs eagerly, but reads a tensor's value to pick a shape."""

    def forward(self, x):
        return x.view(1 + 0 * round(float(x.abs().sum())), -1)


@pytest.mark.parametrize("model", [FailsOnFakeTensors(), Repeats()], ids=["fails-on-fakes", "wrong-inputs"])
def test_a_model_error_is_reported_as_make_fx_reports_it(model):
    """A model that raises is traced again by make_fx: its report is the one users know."""
    bound = bind_inputs(model, (torch.randn(2, 4),), None)
    with pytest.raises(Exception) as recorded:
        trace(model, bound, fast=ON)
    with pytest.raises(Exception) as by_make_fx:
        trace(model, bound, fast=OFF)
    assert type(recorded.value) is type(by_make_fx.value)
    assert str(recorded.value) == str(by_make_fx.value)
    assert isinstance(recorded.value, exporter.ExportError)


def test_global_state_is_restored_after_recording_and_after_a_refusal():
    from torch.fx._symbolic_trace import is_fx_tracing
    from torch._ops import HigherOrderOperator

    saved = (torch.nn.Module.__call__, HigherOrderOperator.__call__, is_fx_tracing(), torch.is_autocast_cache_enabled())
    for model in (Repeats(), ReadsValueButCatches(), Cond()):
        exporter.export(model, (torch.randn(2, 3),))
        assert (torch.nn.Module.__call__, HigherOrderOperator.__call__, is_fx_tracing(), torch.is_autocast_cache_enabled()) == saved


def test_traced_node_and_graph_see_the_recording():
    seen = {}

    class Looks(torch.nn.Module):
        def forward(self, x):
            y = x + 1
            seen["graph"] = traced_graph()
            seen["node"] = traced_node(y)
            return y * 2

    state = trace(Looks(), bind_inputs(Looks(), (torch.randn(2),), None), fast=ON)
    assert seen["graph"] is state.gm.graph
    assert seen["node"].target is torch.ops.aten.add.Tensor
    assert traced_graph() is None


def test_other_threads_calling_modules_do_not_enter_the_module_stack():
    """An eager model run in another thread mid-trace stays off the recorded module stack."""
    other = Repeats()
    done = threading.Event()
    results = []

    class Waits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            worker = threading.Thread(target=lambda: (results.append(other(torch.randn(1, 3))), done.set()))
            worker.start()
            done.wait(30)
            return self.lin(x)

    state = trace(Waits(), bind_inputs(Waits(), (torch.randn(2, 3),), None), fast=ON)
    assert results and results[0].shape == (1, 3)
    keys = {k for n in state.gm.graph.nodes for k in n.meta.get("nn_module_stack", {})}
    assert keys == {"", "lin"}


# -- the training IR -----------------------------------------------------------------------


class Regions(torch.nn.Module):
    """Grad-mode and autocast regions, an in-place write and a composite kept whole: what
    the training IR records as called."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.register_buffer("seen", torch.zeros(3))

    def forward(self, x):
        with torch.no_grad():
            frozen = self.lin(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = self.lin(x)
        self.seen.add_(x.sum(0))
        return torch.nn.functional.dropout(frozen, 0.0) + low.float()


def test_training_regions_are_recorded_as_make_fx_records_them(why_make_fx):
    recorded, by_make_fx = _both(Regions(), (torch.randn(2, 3),), None, training=True)
    assert not why_make_fx
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)
    targets = [n.target for n in recorded.gm.graph.nodes if n.op == "call_function"]
    names = {getattr(t, "__name__", str(t)) for t in targets}
    assert {"_set_grad_enabled", "_enter_autocast", "_exit_autocast"} <= names
    assert torch.ops.aten.linear.default in targets and torch.ops.aten.add_.Tensor in targets


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class TrainingCases(torch.nn.Module):
    """What the training IR keeps as written: one behaviour per ``kind``."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind
        self.lin = torch.nn.Linear(3, 3)
        self.drop = torch.nn.Dropout(0.5)
        self.register_buffer("buf", torch.zeros(3))

    def forward(self, x):
        if self.kind == "custom-function":
            return Square.apply(self.lin(x))
        if self.kind == "grad-calls":
            torch.set_grad_enabled(False)
            a = self.lin(x)
            torch.set_grad_enabled(True)
            with torch.no_grad(), torch.enable_grad():
                return a + self.lin(x)
        if self.kind == "inference-mode":
            with torch.inference_mode():
                a = x * 2
            return self.lin(x) + a.clone()
        if self.kind == "nested-autocast":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                a = self.lin(x)
                with torch.autocast("cpu", enabled=False):
                    b = self.lin(x.float())
            return a.float() + b
        if self.kind == "dropout":
            return self.drop(self.lin(x))
        if self.kind == "write-to-input-view":
            x[0].add_(1)
            return x * 2
        if self.kind == "buffer-assigned":
            self.buf = x.sum(0) * 2
            return x + self.buf
        if self.kind == "checkpoint":
            return torch.utils.checkpoint.checkpoint(self.lin, x, use_reentrant=False)
        raise AssertionError(self.kind)


@pytest.mark.parametrize(
    "kind",
    ["custom-function", "grad-calls", "inference-mode", "nested-autocast", "dropout", "write-to-input-view",
     "buffer-assigned", "checkpoint"],
)
def test_training_cases_are_recorded_as_make_fx_records_them(kind, why_make_fx):
    recorded, by_make_fx = _both(TrainingCases(kind).train(), (torch.randn(2, 3),), None, training=True)
    assert not why_make_fx
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)


class Vmapped(torch.nn.Module):
    def forward(self, x):
        return torch.vmap(torch.sin)(x)


def test_training_refusal_when_torch_reaches_for_make_fxs_tracer(why_make_fx):
    """torch.func transforms record through make_fx's tracer: the recorder refuses."""
    recorded, by_make_fx = _both(Vmapped(), (torch.randn(2, 3),), None, training=True)
    assert any("make_fx's tracer" in r for r in why_make_fx), why_make_fx
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)


def test_training_trace_leaves_no_mode_behind():
    from torch._ops import _len_torch_dispatch_stack_pre_dispatch
    from torch.fx.experimental.proxy_tensor import get_proxy_mode
    from torch.overrides import _get_current_function_mode_stack

    for model in (Regions(), Vmapped(), ReadsValueButCatches()):
        program = exporter.export(model, (torch.randn(2, 3),), ir="training")
        assert program.graph_module is not None
        assert _len_torch_dispatch_stack_pre_dispatch() == 0
        assert get_proxy_mode() is None and not _get_current_function_mode_stack()
        assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")


def test_pre_dispatch_calls_reach_the_training_trace_without_torchs_per_call_kernel(monkeypatch, why_make_fx):
    """torch's pre-dispatch kernel (built per call, flattening the arguments in
    ``handle_dispatch_mode``) is skipped while the recorder, or make_fx's own mode, is alone
    in the slot.  Both record the same graph, and torch's kernel lookup is itself again
    afterwards, also after a refusal and a failed export."""
    import torch._library.utils as library_utils
    from torch._ops import OpOverload

    get_dispatch = OpOverload._get_dispatch
    handed = []
    real = library_utils.handle_dispatch_mode

    def counted(mode, op, *args, **kwargs):
        handed.append(op)
        return real(mode, op, *args, **kwargs)

    monkeypatch.setattr(library_utils, "handle_dispatch_mode", counted)
    model, x = Regions(), torch.randn(2, 3)
    recorded = trace(model, bind_inputs(model, (x,), None), training=True, fast=ON)
    assert not why_make_fx and handed == []
    by_make_fx = trace(model, bind_inputs(model, (x,), None), fast=attrs.evolve(ON, recorder=False), training=True)
    assert handed == []
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)
    assert OpOverload._get_dispatch is get_dispatch
    trace(model, bind_inputs(model, (x,), None), fast=OFF, training=True)
    assert torch.ops.aten.linear.default in handed  # the plain path takes torch's kernel

    trace(Vmapped(), bind_inputs(Vmapped(), (x,), None), training=True, fast=ON)  # refused: make_fx traces
    assert why_make_fx and OpOverload._get_dispatch is get_dispatch
    with pytest.raises(exporter.ExportError):
        exporter.export(FailsOnFakeTensors(), (x,), ir="training")
    assert OpOverload._get_dispatch is get_dispatch


def test_cannot_record_is_internal():
    assert not issubclass(CannotRecord, exporter.ExportError)


def _fake_dispatches(monkeypatch, wanted) -> list:
    """The ops, among those ``wanted(op)`` picks, the fake mode itself is asked to run from now on."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    calls: list = []
    dispatch = FakeTensorMode.dispatch

    def spy(self, func, *args, **kwargs):
        if wanted(func):
            calls.append(func)
        return dispatch(self, func, *args, **kwargs)

    monkeypatch.setattr(FakeTensorMode, "dispatch", spy)
    return calls


class AsksDevices(torch.nn.Module):
    """Reads its tensors' devices from Python and passes them on, as models do (no
    kept-whole composite: their fake rules run below the recorder and ask the fake mode)."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        y = x * self.scale.to(x.device)
        mask = torch.ones(y.shape, device=y.device, dtype=torch.bool)
        return y.masked_fill(mask.logical_not(), 0.0), str(y.device)


@IRS
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_device_queries_are_answered_by_the_recorder_as_the_fake_mode_answers_them(training, device, monkeypatch):
    """A Python tensor method asks its tensor's device through the dispatch modes; the
    inference recorder answers for fake tensors (the fake mode is never asked) with the same
    graph.  (The training recorder sits at the pre-dispatch key, which device queries pass by.)"""
    model = AsksDevices().to(device)
    x = torch.randn(2, 3, device=device)
    asked = _fake_dispatches(monkeypatch, lambda func: func is torch.ops.prim.device.default)
    recorded = trace(model, bind_inputs(model, (x,), None), training=training, fast=ON)
    assert training or not asked
    asked.clear()
    by_make_fx = trace(model, bind_inputs(model, (x,), None), fast=OFF, training=training)
    assert asked, "make_fx's trace asks the fake mode"
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)
    assert recorded.gm.graph.output_node().args[0][-1] == device


# -- the recorder's memo of fake results -----------------------------------------------------


@pytest.fixture
def fake_calls(monkeypatch):
    """The ops the fake mode itself was asked to run (device queries left out)."""
    return _fake_dispatches(monkeypatch, lambda func: func is not torch.ops.prim.device.default)


def _recorder_in(mode):
    from exporter.trace.fast.recorder import Recorder

    recorder = Recorder(torch.nn.Module(), None)
    recorder.fake_mode = mode
    return recorder


def test_a_repeated_call_is_served_from_the_memo_as_the_fake_cache_would_serve_it(fake_calls):
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    recorder = _recorder_in(mode)
    x, w = mode.from_tensor(torch.randn(4, 6)), mode.from_tensor(torch.randn(6))
    add, view = torch.ops.aten.add.Tensor, torch.ops.aten.view.default
    with mode:
        first = recorder._served(add, (x, w), {})
        computed = len(fake_calls)
        again = recorder._served(add, (x, w), {})
        assert len(fake_calls) == computed
        # called where autograd makes a view's result a view of its argument (``_base``
        # set), which a remade result is not: computed each time
        viewed = [recorder._served(view, (x, [24]), {}) for _ in range(2)]
        assert fake_calls.count(view) == 2 and all(v._is_view() and v._base is x for v in viewed)
        with torch._C._AutoDispatchBelowADInplaceOrView():  # where a trace's calls run
            below = [recorder._served(view, (x[1:], [2, 9]), {}) for _ in range(3)]
    assert fake_calls.count(add) == 1
    assert fake_calls.count(view) == 3  # below autograd, served as the fake cache serves it
    for v in below:  # over the argument's storage, at its offset, not an autograd view
        assert (v.shape, v.stride(), v.storage_offset(), v._is_view()) == ((2, 9), (9, 1), 6, False)
        assert v.untyped_storage()._cdata == x.untyped_storage()._cdata
    assert len({id(v) for v in below}) == 3
    assert type(again) is FakeTensor and again.fake_mode is mode and again is not first
    assert (again.shape, again.stride(), again.dtype, again.device) == (first.shape, first.stride(), first.dtype, first.device)
    assert again.untyped_storage()._cdata not in (first.untyped_storage()._cdata, x.untyped_storage()._cdata)


def test_the_memo_serves_nothing_that_could_differ(fake_calls):
    """Other layouts, another default dtype, a tensor carrying a constant, a tensor of
    another fake mode, an op the fake cache refuses: each call is computed."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    recorder = _recorder_in(mode)
    x = mode.from_tensor(torch.randn(4, 6))
    strided = mode.from_tensor(torch.randn(6, 4)).t()
    other_mode = FakeTensorMode()
    foreign = other_mode.from_tensor(torch.randn(4, 6))
    add, ones, nonzero = torch.ops.aten.add.Tensor, torch.ops.aten.ones.default, torch.ops.aten.nonzero.default
    # an op the fake cache refuses (data-dependent size) or one that writes: never memoized
    constant = mode.from_tensor(torch.tensor([1.0, 2.0]))
    constant.constant = torch.tensor([1.0, 2.0])  # as a trace keeps a small tensor's value
    with mode:
        recorder._served(add, (x, 1), {})
        recorder._served(add, (strided, 1), {})  # another stride
        recorder._served(add, (x, 1.0), {})  # another scalar type
        for _ in range(2):
            recorder._served(add, (constant, 1), {})
        singles = [recorder._served(ones, ([2],), {})]
        torch.set_default_dtype(torch.float64)
        try:
            singles.append(recorder._served(ones, ([2],), {}))
        finally:
            torch.set_default_dtype(torch.float32)
    assert fake_calls.count(add) == 5 and fake_calls.count(ones) == 2
    assert [t.dtype for t in singles] == [torch.float32, torch.float64]
    fake_calls.clear()
    with other_mode:
        for _ in range(2):
            recorder._served(add, (foreign, 1), {})
    assert fake_calls.count(add) == 2
    from exporter.trace.fast.symbolic_memo import memoizable as _memoizable

    assert not _memoizable(nonzero) and not _memoizable(torch.ops.aten.add_.Tensor)


class Layers(torch.nn.Module):
    def __init__(self, n: int = 4):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(n))
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        for layer in self.layers:
            x = self.norm(layer(x).relu().transpose(0, 1).transpose(0, 1))
        return x.view(-1)


def test_layers_repeating_calls_are_served_and_the_graph_is_make_fxs(fake_calls, monkeypatch):
    from exporter.trace.fast import meta_kernels

    # every linear the memo misses reaches the fake mode (not the meta_kernels path's rule)
    monkeypatch.setattr(meta_kernels, "kept_whole_rule_installed", lambda op: False)
    model, x = Layers(), torch.randn(3, 8)
    forget_fake_results()
    recorded = trace(model, bind_inputs(model, (x,), None), fast=ON)
    # the first layer's input requires no grad and the later layers' do: two first calls
    assert fake_calls.count(torch.ops.aten.linear.default) == 2, fake_calls
    assert fake_calls.count(torch.ops.aten.relu.default) == 1, fake_calls
    by_make_fx = trace(model, bind_inputs(model, (x,), None), fast=OFF)
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)
    program = exporter.export(model, (x,))
    torch.testing.assert_close(program.module()(x), model(x))


def test_later_traces_are_served_what_earlier_ones_computed(fake_calls, monkeypatch):
    """The memo outlives its trace, per ShapeEnv settings; the graphs and programs stay make_fx's and eager's."""
    from exporter.trace.fast import meta_kernels

    # every linear the memo misses reaches the fake mode (not the meta_kernels path's rule)
    monkeypatch.setattr(meta_kernels, "kept_whole_rule_installed", lambda op: False)
    linear, relu, transpose = torch.ops.aten.linear.default, torch.ops.aten.relu.default, torch.ops.aten.transpose.int
    model, x = Layers(), torch.randn(3, 8)
    forget_fake_results()
    first = trace(model, bind_inputs(model, (x,), None), fast=ON)
    assert fake_calls.count(linear) == 2 and fake_calls.count(relu) == 1  # (x requires no grad, then does)
    assert fake_calls.count(transpose) == 2  # (3, 8) -> (8, 3), and back
    fake_calls.clear()
    again = trace(model, bind_inputs(model, (x,), None), fast=ON)
    assert fake_calls.count(linear) == fake_calls.count(relu) == fake_calls.count(transpose) == 0, fake_calls
    assert graph_fingerprint(again.gm) == graph_fingerprint(first.gm)
    program = exporter.export(model, (x,))  # served throughout
    for inputs in (x, torch.randn(3, 8)):
        torch.testing.assert_close(program.module()(inputs), model(inputs))
    fake_calls.clear()
    exporter.export(model, (x,), prefer_deferred_runtime_asserts_over_guards=True)  # other settings
    assert fake_calls.count(linear) == 2  # run again: with and without grad, as above
    fake_calls.clear()
    other = torch.randn(5, 8)  # other layouts
    torch.testing.assert_close(exporter.export(model, (other,)).module()(other), model(other))
    assert fake_calls.count(linear) == 2
    forget_fake_results()
    fake_calls.clear()
    trace(model, bind_inputs(model, (x,), None), fast=ON)
    assert fake_calls.count(linear) == 2


class GradAware(torch.nn.Module):
    """Layers whose forward reads autograd state the memo must not hide."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            y = layer(x)
            x = y.relu() if y.requires_grad and y.grad_fn is not None else y.sigmoid()
        with torch.no_grad():
            scale = self.layers[0](x)
        return x * (1 if scale.requires_grad else 2)


def test_training_traces_are_served_below_autograd_and_keep_its_answers(fake_calls):
    """In the training IR every call still runs through autograd (forward sees
    ``requires_grad``/``grad_fn`` as eager does); what autograd asks the fake mode is served."""
    addmm = torch.ops.aten.addmm.default
    model, x = GradAware(), torch.randn(3, 8)
    forget_fake_results()
    recorded, by_make_fx = _both(model, (x,), None, training=True)
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)
    assert "relu" in str(recorded.gm.code) and "sigmoid" not in str(recorded.gm.code)
    fake_calls.clear()
    again = trace(model, bind_inputs(model, (x,), None), training=True, fast=ON)
    assert fake_calls.count(addmm) == 0, fake_calls
    assert graph_fingerprint(again.gm) == graph_fingerprint(by_make_fx.gm)
    program = exporter.export(model, (x,), ir="training")
    for inputs in (x, torch.randn(3, 8)):
        torch.testing.assert_close(program.module()(inputs), model(inputs))


class ProjectsTokens(torch.nn.Module):
    """Linear layers on (batch, tokens, features): below autograd each ``matmul`` ends in an
    ``_unsafe_view`` over the product's storage, which the fake-tensor cache refuses."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = torch.matmul(x, layer.weight.t()) + layer.bias
        return x


def test_unsafe_view_is_served_below_autograd_over_its_arguments_storage(fake_calls):
    unsafe_view = torch.ops.aten._unsafe_view.default
    model, x = ProjectsTokens(), torch.randn(2, 5, 8)
    forget_fake_results()
    recorded, by_make_fx = _both(model, (x,), None, training=True)
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)
    fake_calls.clear()
    again = trace(model, bind_inputs(model, (x,), None), training=True, fast=ON)
    assert unsafe_view not in fake_calls, fake_calls  # three layers, every call served
    assert graph_fingerprint(again.gm) == graph_fingerprint(by_make_fx.gm)
    program = exporter.export(model, (x,), ir="training")
    for inputs in (x, torch.randn(2, 5, 8)):
        torch.testing.assert_close(program.module()(inputs), model(inputs))

    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    recorder = _recorder_in(mode)
    product = mode.from_tensor(torch.randn(10, 8))
    with mode, torch._C._AutoDispatchBelowADInplaceOrView():
        made = [recorder._served(unsafe_view, (product, [2, 5, 8]), {}) for _ in range(3)]
    assert fake_calls.count(unsafe_view) == 1
    for m in made:  # as the kernel makes it: over the product's storage, not a view
        assert (m.shape, m.stride(), m.storage_offset(), m._is_view()) == ((2, 5, 8), (40, 8, 1), 0, False)
        assert m.untyped_storage()._cdata == product.untyped_storage()._cdata


class _MaskedSoftmax(torch.autograd.Function):
    """DeBERTa's XSoftmax: the output is written in place and saved for backward."""

    @staticmethod
    def forward(ctx, x, mask):
        out = torch.softmax(x.masked_fill(mask, -1e4), -1)
        out.masked_fill_(mask, 0.0)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out, None


class UsesMaskedSoftmax(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)

    def forward(self, x, mask):
        return _MaskedSoftmax.apply(self.proj(x), mask) * 2


def test_what_autograd_function_apply_asks_below_autograd_is_not_recorded(fake_calls):
    """``apply`` asks for a ``detach`` below autograd outside any op the trace is handling; the
    memo's mode runs it below the trace (as the fake mode would), on a cold memo too."""
    model = UsesMaskedSoftmax()
    x, mask = torch.randn(2, 6), torch.rand(2, 6) > 0.5
    forget_fake_results()
    recorded, by_make_fx = _both(model, (x, mask), None, training=True)
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)
    program = exporter.export(model, (x, mask), ir="training")
    torch.testing.assert_close(program.module()(x, mask), model(x, mask))


def test_the_shared_memo_starts_over_past_its_limit(monkeypatch):
    from exporter.trace.fast import recorder as recorder_module

    model, x = Layers(), torch.randn(3, 8)
    forget_fake_results()
    trace(model, bind_inputs(model, (x,), None), fast=ON)
    (memo,) = recorder_module._MEMOS.values()
    assert 1 < len(memo) < 60
    monkeypatch.setattr(recorder_module, "_MEMO_LIMIT", len(memo) - 1)
    recorded = trace(model, bind_inputs(model, (x,), None), fast=ON)
    (fresh,) = recorder_module._MEMOS.values()
    assert fresh is not memo and len(fresh) == len(memo)  # one trace's worth again
    by_make_fx = trace(model, bind_inputs(model, (x,), None), fast=OFF)
    assert graph_fingerprint(recorded.gm) == graph_fingerprint(by_make_fx.gm)


def test_the_recorders_dispatch_is_not_wrapped_for_dynamo():
    """torch wraps a mode's __torch_dispatch__ so Dynamo never compiles inside it; no Dynamo
    frame is active in a trace, and the recorder opts out of that per-op cost."""
    from exporter.trace.fast.recorder import Recorder, TrainingRecorder, _ServedBelowAutograd

    for cls in (Recorder, TrainingRecorder, _ServedBelowAutograd):
        dispatch = cls.__torch_dispatch__
        assert not getattr(dispatch, "_torchdynamo_disable", False) and not hasattr(dispatch, "__wrapped__")
