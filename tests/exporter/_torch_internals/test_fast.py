"""The fast paths' torch pieces: each makes what torch's own machinery makes (fake tensors,
node metadata, sizes), checked against it on this release."""

import warnings

import torch

from exporter import _torch_internals as internals
from exporter._torch_internals import fast


def test_the_fast_recorders_pieces_of_make_fx():
    graph = torch.fx.Graph()
    assert fast.node_name_for(graph, "__and__") == "and"  # magic names lose their underscores
    node = graph.create_node("call_function", torch.ops.aten.max.dim, (), {}, fast.node_name_for(graph, "max"))
    assert node.name == "max_1"  # the graph avoids a builtin's name
    mode = internals.FakeTensorMode()
    with mode:
        fake = torch.empty(2, 3).t()
    snapshot = fast.snapshot_fake(fake)
    assert snapshot is not fake and (snapshot.shape, snapshot.stride()) == (fake.shape, fake.stride())
    meta = fast.tensor_meta(fake)
    assert (meta.shape, meta.stride, meta.memory_format) == (torch.Size([3, 2]), (1, 3), None)
    with internals.tracing(internals.TracingContext(mode)):
        value = fast.fake_value_of(torch.ones(4, 5))
    assert isinstance(value, internals.FakeTensor) and value.shape == (4, 5)
    assert not fast.needs_exact_strides(torch.ops.aten.add.Tensor)
    assert fast.autograd_would_have_expanded(torch.ops.aten.linear.default, [fake])
    assert not fast.autograd_would_have_expanded(torch.ops.aten.mm.default, [fake])
    assert fast.is_compiled_module(torch.fx.symbolic_trace(torch.nn.ReLU()))
    assert not fast.is_compiled_module(torch.nn.ReLU())
    before = fast.fx_tracing_flag(True)
    assert fast.fx_tracing_flag(before) is True


def test_fresh_symint_is_an_equal_size_of_its_own():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from exporter._torch_internals import DimDynamic, FakeTensorMode, StatelessSymbolicContext
    from exporter._torch_internals.fast import fresh_symint

    mode = FakeTensorMode(shape_env=ShapeEnv())
    x = mode.from_tensor(torch.randn(3, 4), symbolic_context=StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * 2))
    size = x.shape[0] * 2
    copy = fresh_symint(size)
    assert copy is not size and copy.node is not size.node
    assert copy.node.expr == size.node.expr and copy.node.shape_env is size.node.shape_env
    assert copy.node.hint == 6


def _same_fake(ours, theirs):
    assert type(ours) is type(theirs) is internals.FakeTensor
    assert ours.__dict__ == theirs.__dict__
    assert torch._C._dispatch_keys(ours) == torch._C._dispatch_keys(theirs)
    assert (ours.shape, ours.stride(), ours.storage_offset(), ours.dtype) == (
        theirs.shape, theirs.stride(), theirs.storage_offset(), theirs.dtype
    )
    assert (ours.requires_grad, ours.is_leaf, ours._is_view()) == (theirs.requires_grad, theirs.is_leaf, theirs._is_view())


def _data_pointer_raises(fake):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fake.data_ptr()
        except RuntimeError:
            return True
    return False


class _Counting(internals.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args, kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def test_fake_tensors_made_directly_are_the_ones_torchs_constructor_makes():
    from torch._subclasses.fake_tensor import FakeTensorConfig
    from torch.fx.experimental import proxy_tensor

    strict, lenient = internals.FakeTensorMode(), internals.FakeTensorMode()
    strict._allow_unsafe_data_ptr_access = False  # data pointers raise (torch's default: they warn)
    lenient._allow_unsafe_data_ptr_access = True
    for mode in (strict, lenient):
        with mode:
            fake = torch.empty(2, 3, 4, requires_grad=True)[:, 1].t()
        real = torch.ones(3)
        with torch._C._DisableTorchDispatch():
            carrying = internals.FakeTensor(mode, torch.empty(3, device="meta"), torch.device("cpu"), real_tensor=real)
        counting = _Counting()
        with counting:  # reaches no mode on the way
            snapshots = [fast.snapshot_fake(t, include_real=r) for t in (fake, carrying) for r in (False, True)]
            made = fast.fake_empty_strided(mode, (3, 2), (1, 3), torch.float16, torch.device("cpu"), True)
        assert counting.calls == 0
        expected = [proxy_tensor.snapshot_fake(t, include_real=r) for t in (fake, carrying) for r in (False, True)]
        for ours, theirs in zip(snapshots, expected):
            _same_fake(ours, theirs)
        for snapshot, source in zip(snapshots, (fake, fake, carrying, carrying)):
            assert snapshot.untyped_storage()._cdata == source.untyped_storage()._cdata  # aliases as torch's does
        assert snapshots[3].real_tensor is real and snapshots[2].real_tensor is None
        with torch._C._DisableTorchDispatch():
            empty = torch.empty_strided((3, 2), (1, 3), dtype=torch.float16, device="meta", requires_grad=True)
            _same_fake(made, internals.FakeTensor(mode, empty, torch.device("cpu")))
        assert _data_pointer_raises(snapshots[0]) == _data_pointer_raises(expected[0]) == (mode is strict)

    with internals.FakeTensorMode() as mode:
        fake = torch.empty(2)
    FakeTensorConfig.debug = True
    try:  # in debug mode each fake tensor records where it was made: torch's constructor does
        assert hasattr(fast.snapshot_fake(fake), "_debug_trace")
        assert hasattr(fast.fake_empty_strided(mode, (2,), (1,), torch.float32, torch.device("cpu"), False), "_debug_trace")
    finally:
        FakeTensorConfig.debug = False


def _export_mode():
    return internals.FakeTensorMode(shape_env=internals.ShapeEnv(), allow_non_fake_inputs=True, export=True)


def test_plain_tensors_are_faked_as_torchs_converter_fakes_them():
    linear = torch.nn.Linear(4, 3)
    plain = [
        linear.weight,
        torch.nn.Parameter(torch.randn(2, 2), requires_grad=False),
        torch.randn(5, 2),
        torch.nn.Buffer(torch.ones(3), persistent=False),
        torch.empty_strided((3, 4), (1, 3)),  # a leaf with a storage larger than contiguous
        torch.tensor(3),
        torch.zeros(2, dtype=torch.bfloat16),
        torch.ones(2, 2, dtype=torch.bool),
    ]
    for t in plain:
        ours_mode, torch_mode = _export_mode(), _export_mode()
        ours = fast.fake_of_plain_tensor(ours_mode, t)
        theirs = torch_mode.from_tensor(t, static_shapes=True)
        assert ours is not None
        _same_fake_of(ours, theirs)
        assert ours.untyped_storage().nbytes() == theirs.untyped_storage().nbytes()
        assert ours_mode.from_tensor(t, static_shapes=True) is ours  # in the converter's memo
        assert fast.fake_of_plain_tensor(ours_mode, t) is None  # converted: the memo answers

    with torch.inference_mode():
        inference = torch.ones(2)
    with_grad = torch.ones(2, requires_grad=True)
    with_grad.grad = torch.ones(2)
    base = torch.randn(4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized tensors are deprecated
        quantized = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)
    not_plain = [
        base.t(),  # a view
        torch.randn(6).set_(torch.randn(6).untyped_storage(), 2, (3,), (1,)),  # at an offset
        inference,
        with_grad,
        torch.randn(2, requires_grad=True) * 2,  # not a leaf
        torch.randn(2, 2).to_sparse(),
        torch.empty(2, device="meta"),
        torch.randn(2, dtype=torch.cfloat).conj().detach(),  # the conjugate bit set
        quantized,
    ]
    for t in not_plain:
        assert fast.fake_of_plain_tensor(_export_mode(), t) is None, t


def _same_fake_of(ours, theirs):
    assert {k: v for k, v in ours.__dict__.items() if k != "fake_mode"} == {
        k: v for k, v in theirs.__dict__.items() if k != "fake_mode"
    }
    assert torch._C._dispatch_keys(ours) == torch._C._dispatch_keys(theirs)
    assert (ours.shape, ours.stride(), ours.storage_offset(), ours.dtype, ours.device) == (
        theirs.shape, theirs.stride(), theirs.storage_offset(), theirs.dtype, theirs.device
    )
    assert (ours.requires_grad, ours.is_leaf, ours._is_view()) == (theirs.requires_grad, theirs.is_leaf, theirs._is_view())


def test_tensors_converted_after_a_plain_one_alias_it_as_torchs_converter_aliases_them():
    weight = torch.randn(4, 4)
    shares = weight.detach()  # the same storage, not a view
    mode = _export_mode()
    fake = fast.fake_of_plain_tensor(mode, weight)
    assert fast.fake_of_plain_tensor(mode, shares) is None  # its storage was converted
    for other in (shares, weight.t(), weight[1:]):
        converted = mode.from_tensor(other, static_shapes=True)
        assert converted.untyped_storage()._cdata == fake.untyped_storage()._cdata
        assert (converted.shape, converted.stride(), converted.storage_offset()) == (
            other.shape, other.stride(), other.storage_offset()
        )


def test_a_fake_tensor_over_a_storage_is_the_fake_modes_view_result_below_autograd():
    mode = internals.FakeTensorMode()
    with mode:
        base = torch.empty(4, 6)
        with torch._C._AutoDispatchBelowADInplaceOrView():
            theirs = torch.ops.aten.transpose.int(base[1:], 0, 1)
    ours = fast.fake_view_of(mode, base, (6, 3), (1, 6), 6, torch.float32, torch.device("cpu"), False)
    _same_fake(ours, theirs)
    assert ours.untyped_storage()._cdata == theirs.untyped_storage()._cdata == base.untyped_storage()._cdata


def _symbolic(mode, *shape):
    from exporter._torch_internals import DimDynamic, StatelessSymbolicContext

    context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.DYNAMIC] + [DimDynamic.STATIC] * (len(shape) - 2))
    return mode.from_tensor(torch.randn(*shape), symbolic_context=context)


def _exprs(t):
    """A fake tensor's layout with sizes as expressions (comparing SymInts would guard)."""
    expr = lambda n: n.node.expr if isinstance(n, torch.SymInt) else n  # noqa: E731
    return (
        tuple(map(expr, t.shape)), tuple(map(expr, t.stride())), expr(t.storage_offset()),
        expr(t.untyped_storage().nbytes()), t.dtype, t._is_view(),
    )


def test_views_and_fresh_tensors_made_directly_on_symbolic_sizes_are_the_kernels():
    """``fake_view_of`` (``as_strided`` on the base) and ``fake_flat_restrided`` (storage of one element
    per element) make what the fake kernels make on symbolic sizes, down to the expression
    of the storage's size; ``fake_view_of`` of another dtype keeps its ``set_`` path."""
    mode = internals.FakeTensorMode(shape_env=internals.ShapeEnv())
    mode.cache_enabled = False
    x = _symbolic(mode, 2, 5, 8)
    b, s, _ = x.shape
    with mode, torch._C._AutoDispatchBelowADInplaceOrView():
        view = torch.ops.aten.view.default(x, [b, s, 2, 4])
        sliced = torch.ops.aten.slice.Tensor(x, 1, 1)
        added = torch.ops.aten.add.Tensor(x.transpose(0, 1), 1)  # a permuted result
        as_ints = torch.ops.aten.view.dtype(x, torch.int32)
    cpu = torch.device("cpu")
    for theirs in (view, sliced):
        ours = fast.fake_view_of(mode, x, theirs.shape, theirs.stride(), theirs.storage_offset(), x.dtype, cpu, False)
        assert _exprs(ours) == _exprs(theirs)
        assert ours.untyped_storage()._cdata == x.untyped_storage()._cdata
        assert torch._C._dispatch_keys(ours) == torch._C._dispatch_keys(theirs) and ours.__dict__.keys() == theirs.__dict__.keys()
    retyped = fast.fake_view_of(mode, x, as_ints.shape, as_ints.stride(), 0, torch.int32, cpu, False)
    assert _exprs(retyped) == _exprs(as_ints)
    fresh = fast.fake_flat_restrided(mode, added.numel(), added.shape, added.stride(), added.dtype, cpu)
    assert _exprs(fresh) == _exprs(added)
    assert fresh.untyped_storage()._cdata != x.untyped_storage()._cdata


def test_symint_of_makes_a_size_of_the_given_shape_env():
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(shape_env=ShapeEnv())
    x = mode.from_tensor(torch.randn(3, 5), symbolic_context=StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.DYNAMIC]))
    rows, cols = x.shape
    size = fast.symint_of(mode.shape_env, (rows * cols + 2).node.expr, 17)
    assert size.node.shape_env is mode.shape_env
    assert size.node.expr == (rows * cols + 2).node.expr
    assert size.node.hint == 17 and int(size) == 17


def test_lazily_known_tells_answers_held_without_computing_them():
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(shape_env=ShapeEnv())
    x = mode.from_tensor(torch.randn(6, 2), symbolic_context=StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC]))
    with mode:
        scaled = x * 2.5  # the kernel works out its result's contiguity
        squashed = torch.sigmoid(x)  # this one does not
    made = fast.fake_empty(mode, tuple(x.shape), torch.float32, torch.device("cpu"))
    assert fast.lazily_known(scaled)[1] == ""
    assert fast.lazily_known(squashed)[1] != ""
    assert fast.lazily_known(made)[1] == ""  # empty(shape) holds it too
    guards = len(mode.shape_env.guards)
    for _ in range(2):  # asking computes nothing: the answer is still not held
        assert fast.lazily_known(squashed)[1] != ""
    assert len(mode.shape_env.guards) == guards
    assert made.shape == x.shape and made.stride() == x.stride() and made.is_contiguous()
    # a symbolic element count, once worked out, is held (only wrapped on its way out)
    assert fast.lazily_known(squashed)[0] != ""
    assert isinstance(squashed.numel(), torch.SymInt)
    assert fast.lazily_known(squashed)[0] == ""


def test_a_mode_given_the_proxy_mode_fields_holds_what_make_fxs_pre_dispatch_mode_holds():
    from torch.fx.experimental.proxy_tensor import PythonKeyTracer, get_proxy_mode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Mode(fast.ProxyTorchDispatchMode):
        def __init__(self):
            TorchDispatchMode.__init__(self)  # not make_fx's __init__
            self.enter_stack = []

    mode = Mode()
    fast.set_proxy_mode_fields(mode)
    made = fast.ProxyTorchDispatchMode(PythonKeyTracer(), "fake", pre_dispatch=True)
    for name in ("_mode_key", "_decomposition_table_stack", "_allow_fake_constant", "_error_on_data_dependent_ops"):
        assert getattr(mode, name) == getattr(made, name), name
    with mode:  # the mode key puts it in make_fx's infra-mode slot
        assert get_proxy_mode() is mode
    assert get_proxy_mode() is None
