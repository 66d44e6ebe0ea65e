"""The memo of a trace on symbolic sizes: served calls get exactly what the kernels make,
and a training-IR export is the same program with and without it."""


import pytest
import torch
import torch.nn.functional as F

import exporter
from exporter._torch_internals import DimDynamic, FakeTensorMode, ShapeEnv, StatelessSymbolicContext
from exporter._torch_internals.fast import lazily_known
from exporter.trace.fast import symbolic_memo as memo_module
from exporter.trace.fast.symbolic_memo import SymbolicMemo, layouts_of, memo_key, memoizable, remade
from tests.e2e.cases import TRANSFORMER_CASES
from tests.support import graph_fingerprint

aten = torch.ops.aten


def _mode():
    mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True, export=True)
    mode.cache_enabled = False  # as for every dynamic export
    return mode


def _symbolic(mode, *shape, dynamic=2):
    sizes = [DimDynamic.DYNAMIC] * dynamic + [DimDynamic.STATIC] * (len(shape) - dynamic)
    return mode.from_tensor(torch.randn(*shape), symbolic_context=StatelessSymbolicContext(dynamic_sizes=sizes))


def _exprs(t):
    expr = lambda n: n.node.expr if isinstance(n, torch.SymInt) else n  # noqa: E731
    return (
        tuple(map(expr, t.shape)), tuple(map(expr, t.stride())), expr(t.storage_offset()),
        expr(t.untyped_storage().nbytes()), t.dtype, t.device, t._is_view(), t.requires_grad,
    )


def _calls(x, w):
    """(op, args, kwargs) of calls a transformer layer makes below autograd, on ``x`` of
    symbolic batch and length and a static weight ``w``."""
    b, s, d = x.shape
    flat = x.view(b * s, d)
    heads = x.view(b, s, 2, d // 2).transpose(1, 2)
    return [
        (aten.view.default, (x, [b, s, 2, d // 2]), {}),
        (aten.transpose.int, (x, 0, 1), {}),
        (aten.slice.Tensor, (x, 1, 1, s), {}),
        (aten.expand.default, (x[:, :1], [b, s, d]), {}),
        (aten._unsafe_view.default, (flat, [b, s, d]), {}),
        (aten.mm.default, (flat, w), {}),
        (aten.add.Tensor, (x.transpose(0, 1), 1.0), {}),
        (aten.mul.Tensor, (heads, heads), {}),
        (aten.cat.default, ([x, x], -1), {}),
        (aten.mean.dim, (x, [-1], True), {}),
        # results holding their element count (the kernel read it), each its own way
        (aten.native_layer_norm.default, (x, [d], None, None, 1e-5), {}),
        (aten.addmm.default, (w[0], flat, w), {}),
        (aten._scaled_dot_product_flash_attention_for_cpu.default, (heads, heads, heads), {"is_causal": True}),
        (aten.view.dtype, (x, torch.int32), {}),
    ]


def test_served_results_are_exactly_what_the_kernels_make_on_other_sizes():
    """Recorded on one call, remade for a later call with the same key (other tensors of
    the same symbolic layout): the same layout as the kernel's, down to the storage's size
    expression; views over the argument's storage, other results over storage of their own."""
    mode = _mode()
    with mode:
        w = torch.empty(8, 8)
    first = _symbolic(mode, 2, 5, 8)
    with mode, torch._C._AutoDispatchBelowADInplaceOrView():
        second = torch.ops.aten.clone.default(first)
        recorded = []
        for op, args, kwargs in _calls(first, w):
            assert memoizable(op)
            key, sizes = memo_key(op, args, kwargs)
            layouts = layouts_of(op(*args, **kwargs), sizes, args, kwargs, mode)
            if op is aten.view.dtype:
                # its kernel's result holds answers (element count, contiguity) no remake
                # holds as made: served, the model's later questions would add graph nodes
                assert layouts is None
                continue
            assert layouts is not None, op
            recorded.append((key, layouts))
        for (key, layouts), (op, args, kwargs) in zip(recorded, [c for c in _calls(second, w) if c[0] is not aten.view.dtype]):
            again, sizes = memo_key(op, args, kwargs)
            assert again == key
            theirs = op(*args, **kwargs)
            ours = remade(layouts, sizes, args, mode)
            theirs, ours = (theirs, ours) if isinstance(theirs, tuple) else ((theirs,), (ours,))
            storages = {a.untyped_storage()._cdata for a in torch.utils._pytree.tree_leaves(args) if isinstance(a, torch.Tensor)}
            for t, o in zip(theirs, ours):
                assert _exprs(o) == _exprs(t), op
                assert lazily_known(o) == lazily_known(t), op
                assert (o.untyped_storage()._cdata in storages) == (t.untyped_storage()._cdata in storages), op


def test_calls_that_may_differ_are_never_keyed_or_laid_out():
    mode = _mode()
    x = _symbolic(mode, 2, 5, 8)
    with mode:
        constant = torch.empty(2)
    constant.constant = torch.tensor([1.0, 2.0])  # a fake tensor carrying its value
    with mode:
        rows = torch.ops.aten.nonzero.default(x[0, :, 0] > 0)
    assert not memoizable(aten.add_.Tensor)  # writes
    assert not memoizable(aten.nonzero.default)  # data-dependent size
    assert not memoizable(aten.split.Tensor)  # a list of results
    assert memo_key(aten.add.Tensor, (constant, constant), {}) is None
    assert memo_key(aten.add.Tensor, (rows, rows), {}) is None  # a data-dependent size in
    plain = memo_key(aten.add.Tensor, (x, x), {})[0]
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        assert memo_key(aten.add.Tensor, (x, x), {})[0] != plain  # settings are in the key
    with torch.inference_mode():
        assert memo_key(aten.add.Tensor, (x, x), {})[0] != plain
    with mode:
        y = x + 0  # sizes of their own objects: the same expressions
    assert memo_key(aten.add.Tensor, (x, y), {})[0] != plain  # another sharing of size objects


class _Counted(SymbolicMemo):
    served: list = []

    def __call__(self, dispatch, func, types, args, kwargs):
        keyed = memo_key(func, args, kwargs or {}) if isinstance(func, torch._ops.OpOverload) else None
        if keyed is not None and self._memo.get(keyed[0]) is not None:
            _Counted.served.append(func)
        return SymbolicMemo.__call__(self, dispatch, func, types, args, kwargs)


@pytest.fixture
def served(monkeypatch):
    """The ops a dynamic trace's memo served, one entry per call it answered."""
    _Counted.served = []
    monkeypatch.setattr(memo_module, "SymbolicMemo", _Counted)
    return _Counted.served


IRS = pytest.mark.parametrize("ir", ["inference", "training"])


def _same_program(model, args, kwargs, spec, ir, monkeypatch):
    """The program exported with the memos (every fast path on) and without them (every one
    off): equal, node by node (every ``val``, ``tensor_meta``, stack trace), with equal ranges."""
    with_memo = exporter.export(model, args, kwargs, dynamic_shapes=spec, ir=ir, fast_paths=True)
    without = exporter.export(model, args, kwargs, dynamic_shapes=spec, ir=ir, fast_paths=False)
    assert graph_fingerprint(with_memo.graph_module) == graph_fingerprint(without.graph_module)
    assert with_memo.range_constraints == without.range_constraints
    return with_memo


class Blocks(torch.nn.Module):
    """Repeated blocks of views, a permuted elementwise result and attention; one linear
    output is written to afterwards (served results must be tensors of their own)."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        b, s, _ = x.shape
        for block in self.blocks:
            h = block(self.norm(x))
            again = block(self.norm(x))
            again.mul_(2)
            h = (h + again).view(b, s, 2, 4).transpose(1, 2)
            a = F.scaled_dot_product_attention(h, h, h, is_causal=True)
            x = x + a.transpose(1, 2).reshape(b, s, 8) * x.transpose(0, 1).transpose(0, 1)
        return x, x[:, 1:].sum(1)


def _spec():
    return ({0: torch.export.Dim("batch", min=2, max=32), 1: torch.export.Dim("seq", min=3, max=64)},)


@IRS
def test_a_dynamic_export_is_the_same_program_with_and_without_the_memo(ir, served, monkeypatch):
    model, x = Blocks(), torch.randn(3, 5, 8)
    program = _same_program(model, (x,), None, _spec(), ir, monkeypatch)
    kept = aten.linear.default if ir == "inference" else aten.addmm.default  # the default IR keeps linear whole
    assert {aten.view.default, aten.transpose.int, kept} <= set(served)
    for shape in ((3, 5, 8), (7, 3, 8), (2, 33, 8)):
        fresh = torch.randn(shape)
        torch.testing.assert_close(program.module()(fresh), model(fresh))


class DataDependent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        rows = x[x[:, 0] > 0]
        return self.lin(rows).sum(0) + self.lin(rows).sum(0), self.lin(x) + self.lin(x)


@IRS
def test_data_dependent_sizes_are_never_served(ir, served, monkeypatch):
    model, x = DataDependent(), torch.randn(6, 4)
    x[:3, 0] = 1.0
    program = _same_program(model, (x,), None, ({0: torch.export.Dim("n", min=2, max=32)},), ir, monkeypatch)
    assert served  # the second self.lin(x); no call on `rows` has a key
    for rows in (6, 9):
        fresh = torch.randn(rows, 4)
        fresh[::2, 0] = 1.0
        torch.testing.assert_close(program.module()(fresh), model(fresh))


class TwoBackends(torch.nn.Module):
    """The same attention call twice, the second under another backend choice."""

    def forward(self, q):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        first = F.scaled_dot_product_attention(q, q, q)
        with sdpa_kernel(SDPBackend.MATH):
            second = F.scaled_dot_product_attention(q, q, q)
        return first + second


@IRS
def test_a_repeat_under_other_global_settings_is_computed_again(ir, served, monkeypatch):
    model, q = TwoBackends(), torch.randn(2, 3, 5, 4)
    program = _same_program(model, (q,), None, ({0: torch.export.Dim("batch", min=2, max=8)},), ir, monkeypatch)
    assert aten.scaled_dot_product_attention.default not in served
    assert aten._scaled_dot_product_flash_attention_for_cpu.default not in served
    fresh = torch.randn(5, 3, 5, 4)
    torch.testing.assert_close(program.module()(fresh), model(fresh))


class PaddedTwice(torch.nn.Module):
    """A call whose output has a size of its own (the padded length, computed), made twice;
    later code reads both outputs' sizes."""

    def forward(self, x):
        a = F.pad(x, (1, 1))
        b = F.pad(x, (1, 1))
        return a.reshape(a.shape[0] * a.shape[1]), b.reshape(b.shape[0] * b.shape[1])


@IRS
def test_a_served_output_gets_size_objects_of_its_own(ir, served, monkeypatch):
    """make_fx reads each size object once, from the first tensor it met it in: a served
    output reusing the first call's computed sizes would read them from the first output."""
    model, x = PaddedTwice(), torch.randn(3, 5)
    spec = ({0: torch.export.Dim("rows", min=2, max=16), 1: torch.export.Dim("cols", min=2, max=16)},)
    program = _same_program(model, (x,), None, spec, ir, monkeypatch)
    assert served
    fresh = torch.randn(4, 7)
    torch.testing.assert_close(program.module()(fresh), model(fresh))


class Branches(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.shape[0] > 4, lambda t: (t * 2).transpose(0, 1), lambda t: (t + 1).transpose(0, 1), (x,))


@IRS
def test_higher_order_op_bodies_trace_as_without_the_memo(ir, monkeypatch):
    """torch.cond compiles its call with torch.compile and traces its branches on the fake
    mode: the program is the one exported without the memo."""
    model, x = Branches(), torch.randn(6, 3)
    program = _same_program(model, (x,), None, ({0: torch.export.Dim("n", min=2, max=32)},), ir, monkeypatch)
    for rows in (3, 9):
        fresh = torch.randn(rows, 3)
        torch.testing.assert_close(program.module()(fresh), model(fresh))


def _text_dims(kwargs):
    batch = torch.export.Dim("batch", min=2, max=16)
    lengths = {}
    for name, value in kwargs.items():
        lengths.setdefault(value.shape[1], torch.export.Dim(f"seq{len(lengths)}", min=2, max=32))
    return {name: {0: batch, 1: lengths[value.shape[1]]} for name, value in kwargs.items()}


@pytest.mark.slow
@IRS
@pytest.mark.parametrize("case", TRANSFORMER_CASES, ids=lambda c: c.name)
def test_transformers_programs_are_the_same_with_and_without_the_memo(case, ir, served, monkeypatch):
    """Batch and sequence dynamic: the program and its ranges do not depend on the memo,
    and it runs as the model does on other sizes."""
    model = case.make_model()
    _, kwargs = case.make_inputs(0)
    program = _same_program(model, (), kwargs, _text_dims(kwargs), ir, monkeypatch)
    assert served
    # one more row, two fewer positions: other sizes, values the model accepts
    other = {name: torch.cat([v, v[:1]])[:, : v.shape[1] - 2] for name, v in case.make_inputs(1)[1].items()}
    with torch.no_grad():
        expected = model(**other)
        actual = program.module()(**other)
    expected = [t for t in torch.utils._pytree.tree_leaves(expected) if isinstance(t, torch.Tensor)]
    actual = [t for t in torch.utils._pytree.tree_leaves(actual) if isinstance(t, torch.Tensor)]
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a, e, atol=1e-4, rtol=1e-4)


def test_memory_formats_are_remembered_per_layout_and_shape_env_version():
    from exporter._torch_internals.fast import shape_env_version, tensor_meta
    from exporter.trace.fast.symbolic_memo import memory_formats_remembered

    computed = []

    def extract(value, include_contiguity=True):
        computed.append(value)
        return tensor_meta(value)

    remembered = memory_formats_remembered(extract)
    mode = _mode()
    image = _symbolic(mode, 2, 3, 5, 5, dynamic=1)
    x = _symbolic(mode, 2, 5, 8)
    with mode:
        layouts = [x, x.transpose(0, 1), image, image.contiguous(memory_format=torch.channels_last), image[:, :, 1:]]
        again = [t.clone(memory_format=torch.preserve_format) if t.is_contiguous() else t + 0 for t in layouts]
    for first in layouts:
        assert remembered(first) == tensor_meta(first)
    assert len(computed) == len(layouts)
    for second in again:
        ours = remembered(second)
        assert ours == tensor_meta(second)
        assert [getattr(n, 'node', n) for n in ours.shape] == [getattr(n, 'node', n) for n in second.shape]  # its own
    assert len(computed) == len(layouts) + sum(
        not any(_exprs(t)[:2] == _exprs(s)[:2] for t in layouts) for s in again
    )
    version = shape_env_version(mode.shape_env)
    assert bool(x.shape[1] == 5)  # a guard that pins the size: a replacement
    assert shape_env_version(mode.shape_env) != version
    computed.clear()
    remembered(again[0])
    assert computed  # worked out again under the new facts
    static = torch.empty(2, 3)
    remembered(static)
    assert computed[-1] is static  # no symbolic size: torch's own answer


def test_a_failure_of_the_memo_itself_costs_speed_not_the_export(monkeypatch):
    """Should the memo's bookkeeping raise, each call is computed as without the memo."""
    from exporter.trace.fast import symbolic_memo

    model, x = Blocks(), torch.randn(3, 5, 8)
    expected = exporter.export(model, (x,), dynamic_shapes=_spec())

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the memo")

    programs = []
    for part in ("unchecked_layouts", "checked", "remade", "memo_key"):
        symbolic_memo.forget_shared()
        with monkeypatch.context() as patch:
            patch.setattr(symbolic_memo, part, broken)
            programs.append(exporter.export(model, (x,), dynamic_shapes=_spec()))
    for program in programs:
        assert graph_fingerprint(program.graph_module) == graph_fingerprint(expected.graph_module)


class _SharedHits(dict):
    """The shared memo, counting the lookups it answers."""

    hits = 0

    def get(self, key, default=None):
        found = dict.get(self, key, default)
        if found is not default:
            _SharedHits.hits += 1
        return found


@pytest.fixture
def shared(monkeypatch):
    """An empty shared memo that counts its hits."""
    from exporter.trace.fast import symbolic_memo

    table = _SharedHits()
    _SharedHits.hits = 0
    monkeypatch.setattr(symbolic_memo, "_SHARING", True)
    monkeypatch.setattr(symbolic_memo, "_SHARED", table)
    monkeypatch.setattr(symbolic_memo, "_FACTS", {})
    return table


def _layouts_in(entry):
    """The layouts a shared entry holds, checked or not."""
    return entry.layouts if hasattr(entry, "described") else entry


def _sizes_of_other_shape_envs(program):
    """Symbolic sizes in the program's node values that belong to another ShapeEnv than
    its inputs' sizes."""
    sizes = [
        (n.name, size)
        for n in program.graph.nodes
        for value in torch.utils._pytree.tree_leaves(n.meta.get("val"))
        for size in ((*value.shape, *value.stride()) if isinstance(value, torch.Tensor) else (value,))
        if isinstance(size, torch.SymInt)
    ]
    shape_env = sizes[0][1].node.shape_env
    return [name for name, size in sizes if size.node.shape_env is not shape_env]


@IRS
def test_a_later_export_is_served_what_an_earlier_one_computed(ir, shared, monkeypatch):
    """A second export of a model, in a ShapeEnv that knows what the first one's knew at
    each call, is served the calls the first computed, and is the same program as one
    exported without any memo; sizes the first computed are remade in the second's
    ShapeEnv."""
    model, x = PaddedTwice(), torch.randn(3, 5)
    spec = ({0: torch.export.Dim("rows", min=2, max=16), 1: torch.export.Dim("cols", min=2, max=16)},)
    first = exporter.export(model, (x,), dynamic_shapes=spec, ir=ir)
    assert shared and not _SharedHits.hits
    computed_sizes = [  # pad's output sizes: no argument's, kept as expressions
        size for entry in shared.values() for shape, *_ in _layouts_in(entry)[1] for size in shape
        if isinstance(size, tuple) and size[0] == "new"
    ]
    assert computed_sizes
    second = _same_program(model, (x,), None, spec, ir, monkeypatch)
    assert _SharedHits.hits
    assert graph_fingerprint(second.graph_module) == graph_fingerprint(first.graph_module)
    assert not _sizes_of_other_shape_envs(second)
    fresh = torch.randn(4, 7)
    torch.testing.assert_close(second.module()(fresh), model(fresh))

    blocks, y = Blocks(), torch.randn(3, 5, 8)
    exporter.export(blocks, (y,), dynamic_shapes=_spec(), ir=ir)
    _SharedHits.hits = 0
    program = _same_program(blocks, (y,), None, _spec(), ir, monkeypatch)
    assert _SharedHits.hits
    assert not _sizes_of_other_shape_envs(program)


@IRS
def test_a_shape_env_that_knows_otherwise_is_not_served(ir, shared, monkeypatch):
    """The same calls on the same expressions, under other ranges: nothing the first export
    kept applies, and the program is the one exported without any memo."""
    model, x = Blocks(), torch.randn(3, 5, 8)
    exporter.export(model, (x,), dynamic_shapes=_spec(), ir=ir)
    narrower = ({0: torch.export.Dim("batch", min=2, max=8), 1: torch.export.Dim("seq", min=3, max=64)},)
    program = _same_program(model, (x,), None, narrower, ir, monkeypatch)
    assert not _SharedHits.hits
    fresh = torch.randn(8, 9, 8)
    torch.testing.assert_close(program.module()(fresh), model(fresh))


def test_shape_env_facts_change_with_every_guard():
    """torch's own version counter does not move when a guard narrows a range; ours does,
    and the facts differ."""
    from exporter._torch_internals.fast import shape_env_facts, shape_env_version

    mode = _mode()
    x = _symbolic(mode, 4, 5, 8)
    version, facts = shape_env_version(mode.shape_env), shape_env_facts(mode.shape_env)
    torch_counter = mode.shape_env._version_counter
    assert bool(x.shape[0] < 10)  # a guard that narrows the range, no replacement
    assert mode.shape_env._version_counter == torch_counter
    assert shape_env_version(mode.shape_env) != version
    assert shape_env_facts(mode.shape_env) != facts
    other = _mode()
    _symbolic(other, 4, 5, 8)
    assert shape_env_facts(other.shape_env) == facts  # another ShapeEnv that knows the same
    hash(facts)


def test_the_two_irs_do_not_share_layouts(shared, monkeypatch):
    """The default IR's trace keeps composites whole with fake rules of its own: what a
    training-IR trace computed is not served to it, nor the other way round."""
    model, x = Blocks(), torch.randn(3, 5, 8)
    exporter.export(model, (x,), dynamic_shapes=_spec(), ir="training")
    _same_program(model, (x,), None, _spec(), "inference", monkeypatch)
    assert not _SharedHits.hits
    _SharedHits.hits = 0
    exporter.export(model, (x,), dynamic_shapes=_spec(), ir="inference")
    assert _SharedHits.hits  # the default IR serves itself


def test_traces_share_nothing_unless_asked(monkeypatch):
    """By default each trace has its own memo: a re-export is the same program, names
    included, whatever the process exported before."""
    from exporter.trace.fast import symbolic_memo

    model, x = Blocks(), torch.randn(3, 5, 8)
    table = _SharedHits()
    monkeypatch.setattr(symbolic_memo, "_SHARED", table)
    first = exporter.export(model, (x,), dynamic_shapes=_spec())
    second = exporter.export(model, (x,), dynamic_shapes=_spec())
    assert not table
    assert graph_fingerprint(first.graph_module) == graph_fingerprint(second.graph_module)
    symbolic_memo.share_across_traces()
    try:
        exporter.export(model, (x,), dynamic_shapes=_spec())
        assert table
    finally:
        symbolic_memo.share_across_traces(False)
    assert not table  # turned off: emptied
