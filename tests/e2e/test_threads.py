"""Exports in some threads of a serving process, eager models, a FakeTensorMode computation
and torch.compile in others, all at once: every result is what it would be alone.

Four threads export (static, dynamic, buffer mutation, torch.cond) while four others run an
eager model with autograd (and the Python the trace rewrites: max, pow, indexing,
torch.tensor), an eager convolution + LSTM, a FakeTensorMode computation with a symbolic
size and the Python dispatcher on, and torch.compile'd code (a function compiled before,
and each round one compiled afresh).  Everything they compute is checked against results
computed before any thread started, each program against eager.  Rounds start at a
barrier, and the other threads keep working until the round's exports are done, so their
work overlaps the traces (counted, with forward hooks on the exported models).

The cond programs are run after the threads: running one is an eager higher-order op,
which torch traces with make_fx, and make_fx is not thread-safe (the design page, "Other threads").
"""

from __future__ import annotations

import copy
import math
import threading
import traceback
import types

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

import exporter
from exporter._torch_internals import (
    DimDynamic,
    FakeTensorMode,
    ShapeEnv,
    StatelessSymbolicContext,
    constant_source,
    enable_python_dispatcher,
)
from tests.support import OpsSeen

ROUNDS = 3
TIMEOUT = 240  # seconds a barrier or a join may wait before the test reports a hang


class Static(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(4)
        self.head = torch.nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        h = torch.relu(self.norm(self.conv(x)))
        return self.head(h.flatten(1))


class Dynamic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        h = self.down(F.gelu(self.up(x)))
        return self.norm(h + x) * max(x.shape[-1], 2)


class Mutating(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))
        self.register_buffer("running", torch.zeros(6))

    def forward(self, x):
        self.count.add_(1)
        self.running.mul_(0.9).add_(x.mean(0), alpha=0.1)
        return self.lin(x) + self.running


def _grow(a):
    return a.exp() + 1


def _shrink(a):
    return a.sin() - 1


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        return torch.cond(h.sum() > 0, _grow, _shrink, (h,))


def _export_jobs():
    """(name, model, example args, dynamic_shapes, [(args to check, expected outputs, expected buffers)])."""
    jobs = []
    torch.manual_seed(0)
    static = Static().eval()
    x = torch.randn(2, 3, 6, 6)
    jobs.append(("static", static, (x,), None, [((x,), static(x), {})]))

    dynamic = Dynamic()
    checks = [((t,), dynamic(t), {}) for t in (torch.randn(5, 8), torch.randn(3, 8), torch.randn(11, 8))]
    jobs.append(("dynamic", dynamic, checks[0][0], {"x": {0: Dim("batch", min=2, max=64)}}, checks))

    mutating = Mutating()
    x = torch.randn(4, 6)
    eager = copy.deepcopy(mutating)
    out = eager(x)
    jobs.append(("mutating", mutating, (x,), None, [((x,), out, {k: v.clone() for k, v in eager.named_buffers()})]))

    branchy = Branchy()
    with torch.no_grad():
        branchy.lin.bias.fill_(0.0)
    x = torch.randn(3, 4)  # without bias, x and -x take opposite branches
    checks = [((t,), branchy(t), {}) for t in (x, -x)]
    jobs.append(("cond", branchy, (x,), None, checks))
    return jobs


def _mark_tracing(event, args, started):
    if type(args[0]) is not torch.Tensor:  # fake (or functional) while tracing
        event.set() if started else event.clear()


def _check_program(program, checks):
    for args, expected, buffers in checks:
        module = program.module()
        torch.testing.assert_close(module(*args), expected)
        for name, value in buffers.items():
            torch.testing.assert_close(module.get_buffer(name), value, msg=f"buffer {name}")


# -- the work of the other threads, each with its expected result computed beforehand --------


def _eager_training_step(model, x, target):
    """An eager forward and backward, plus the Python the trace rewrites (max, pow, indexing,
    torch.tensor): the loss, the gradients and the Python values."""
    model.zero_grad()
    out = model(x)
    loss = F.mse_loss(out, target) * math.pow(2.0, 1)
    loss.backward()
    below_zero = -out.detach()[0, 0].abs() - 1
    python = (max(below_zero, 0.0), min(3, 4), out.detach()[1, 2], torch.tensor([x.shape[0]]))
    grads = [p.grad.clone() for p in model.parameters()]
    return loss.detach(), grads, python, torch.is_grad_enabled()


class ConvLSTM(torch.nn.Module):
    """Convolution and LSTM: the kernels the trace's mkldnn/nnpack switch reroutes."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(4, 8, 3)
        self.lstm = torch.nn.LSTM(8, 8, batch_first=True)

    def forward(self, x):
        h = self.conv(x).transpose(1, 2)
        return self.lstm(h)[0]


def _fake_computation(weight):
    """A FakeTensorMode computation with a ShapeEnv and a symbolic batch size, the Python
    dispatcher on (as AOTAutograd runs): the ops that reached the fake mode, the guards,
    and the outputs' shapes and dtypes."""
    shape_env = ShapeEnv()
    dynamic_batch = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC])
    mode, example = FakeTensorMode(shape_env=shape_env), torch.randn(5, 3)
    x = mode.from_tensor(example, source=constant_source("x"), symbolic_context=dynamic_batch)
    w = mode.from_tensor(weight, static_shapes=True)
    with mode, enable_python_dispatcher(), OpsSeen() as seen:
        h = F.linear(x, w)
        outputs = (h[: max(x.shape[0], 4)].to(torch.float64), h.sum(0))
    shapes = [(str(tuple(out.shape)), out.dtype) for out in outputs]
    return seen.ops, [str(guard.expr) for guard in shape_env.guards], shapes


def _to_compile(x, weight):
    if torch.compiler.is_exporting():
        return x * 0
    return torch.relu(F.linear(x, weight))[: max(x.shape[0] - 1, 1)] * 2


def _freshly_compiled(tag):
    """_to_compile as a new code object: Dynamo has no cache entry for it, so a call compiles."""
    code = _to_compile.__code__.replace(co_name=f"_to_compile_{tag}")
    return torch.compile(types.FunctionType(code, _to_compile.__globals__), backend="aot_eager")


@pytest.mark.slow
def test_exports_and_eager_fake_and_compiled_work_in_other_threads_all_see_their_own_results():
    jobs = _export_jobs()

    torch.manual_seed(1)
    mlp = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    mlp_x, mlp_target = torch.randn(7, 6), torch.randn(7, 3)
    expected_step = _eager_training_step(mlp, mlp_x, mlp_target)

    conv_lstm = ConvLSTM().eval()
    sequence = torch.randn(2, 4, 12)
    with torch.no_grad():
        expected_conv_lstm = conv_lstm(sequence)

    weight = torch.randn(4, 3)
    expected_fake = _fake_computation(weight)
    assert "aten.linear.default" not in expected_fake[0] and expected_fake[1]  # expanded, and a guard

    compile_x, compile_w = torch.randn(6, 4), torch.randn(5, 4)
    expected_compiled = _to_compile(compile_x, compile_w)
    warm = torch.compile(_to_compile, backend="aot_eager")
    torch.testing.assert_close(warm(compile_x, compile_w), expected_compiled)  # compiled before the threads

    errors: list[str] = []
    start = threading.Barrier(len(jobs) + 4, timeout=TIMEOUT)
    finish = threading.Barrier(len(jobs) + 4, timeout=TIMEOUT)
    exports_done = [threading.Event() for _ in range(ROUNDS)]
    exported = [threading.Barrier(len(jobs), action=event.set, timeout=TIMEOUT) for event in exports_done]
    overlapping = {}  # worker -> iterations that ran while a trace was under way
    programs_with_cond = []
    tracing = threading.Event()  # a model's forward runs on fake tensors: a trace is under way

    def guarded(name, body):
        def run():
            try:
                body()
            except threading.BrokenBarrierError:
                pass  # another thread failed, and said why
            except BaseException:  # noqa: BLE001 - reported below, with the others
                errors.append(f"{name}:\n{traceback.format_exc()}")
                for barrier in (start, finish, *exported):
                    barrier.abort()

        return threading.Thread(target=run, name=name, daemon=True)

    def exporting(job):
        name, model, args, dynamic_shapes, checks = job
        model.register_forward_pre_hook(lambda module, args: _mark_tracing(tracing, args, True))
        model.register_forward_hook(lambda module, args, out: _mark_tracing(tracing, args, False))

        def body():
            for round_ in range(ROUNDS):
                start.wait()
                program = exporter.export(copy.deepcopy(model), args, dynamic_shapes=dynamic_shapes)
                if name == "cond":
                    programs_with_cond.append((program, checks))  # run after the threads
                else:
                    _check_program(program, checks)
                exported[round_].wait()
                finish.wait()

        return guarded(f"export {name}", body)

    def alongside(name, iteration, after_round=None):
        overlapping[name] = 0

        def body():
            for round_ in range(ROUNDS):
                start.wait()
                while True:
                    last = exports_done[round_].is_set()
                    during = tracing.is_set()
                    iteration()
                    overlapping[name] += during
                    if last or errors:
                        break
                    exports_done[round_].wait(0.005)
                if after_round is not None:
                    after_round(round_)
                finish.wait()

        return guarded(name, body)

    def eager_step():
        loss, grads, python, grad_mode = _eager_training_step(mlp, mlp_x, mlp_target)
        torch.testing.assert_close((loss, grads), expected_step[:2])
        assert repr(python) == repr(expected_step[2]) and grad_mode is True

    def eager_conv_lstm():
        with torch.no_grad():
            # the trace turns mkldnn off process-wide: other kernels, equal up to rounding
            torch.testing.assert_close(conv_lstm(sequence), expected_conv_lstm, rtol=1e-4, atol=1e-5)

    def fake():
        assert _fake_computation(weight) == expected_fake

    def compiled():
        torch.testing.assert_close(warm(compile_x, compile_w), expected_compiled)

    def compile_fresh(round_):
        torch.testing.assert_close(_freshly_compiled(round_)(compile_x, compile_w), expected_compiled)

    workers = [exporting(job) for job in jobs] + [
        alongside("eager training step", eager_step),
        alongside("eager conv and LSTM", eager_conv_lstm),
        alongside("FakeTensorMode computation", fake),
        alongside("torch.compile", compiled, after_round=compile_fresh),
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(TIMEOUT)
    assert not [w.name for w in workers if w.is_alive()], "hung"
    assert not errors, "\n".join(errors)
    assert all(overlapping.values()), overlapping  # each ran during some trace
    assert len(programs_with_cond) == ROUNDS
    for program, checks in programs_with_cond:
        _check_program(program, checks)
