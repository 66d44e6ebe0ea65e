"""The dispatcher helpers: kernels at a key, composite registrations, autograd and pre-dispatch guards."""


import torch

from exporter import _torch_internals as internals


def test_dispatcher_helpers():
    linear = torch.ops.aten.linear.default
    assert "aten::linear" in internals.composite_registrations()
    assert internals.has_composite_kernel(linear)
    x, w = torch.randn(2, 3), torch.randn(4, 3)
    torch.testing.assert_close(internals.call_at_key(linear, internals.COMPOSITE_KEY)(x, w), x @ w.T)
    internals.clear_dispatch_cache(linear)
    assert isinstance(linear.py_kernels, dict)


def test_op_implementation_dirs_hold_the_python_op_implementations():
    import os

    from torch._decomp import decompositions

    dirs = internals.op_implementation_dirs()
    assert os.path.abspath(decompositions.__file__).startswith(dirs)
    assert os.path.abspath(internals.fake_impls.__file__).startswith(dirs)
    assert not os.path.abspath(torch.nn.functional.__file__).startswith(dirs)


def test_autograd_visible_undoes_below_autograd_for_its_block():
    w = torch.randn(2, 2, requires_grad=True)
    with internals.below_autograd():
        assert (w * 2).grad_fn is None
        with internals.autograd_visible():
            assert (w * 2).grad_fn is not None
        assert (w * 2).grad_fn is None
    with torch.no_grad(), internals.autograd_visible():
        assert torch.is_grad_enabled()
    assert torch.is_grad_enabled()


def test_outside_pre_dispatch_excludes_the_pre_dispatch_key_for_the_block():
    from exporter._torch_internals import PRE_DISPATCH, outside_pre_dispatch

    assert not torch._C._dispatch_tls_is_dispatch_key_excluded(PRE_DISPATCH)
    with outside_pre_dispatch():
        assert torch._C._dispatch_tls_is_dispatch_key_excluded(PRE_DISPATCH)
    assert not torch._C._dispatch_tls_is_dispatch_key_excluded(PRE_DISPATCH)


def test_plain_alias_of_a_parameter_is_a_plain_tensor_on_its_data_under_any_mode():
    parameter = torch.nn.Parameter(torch.ones(3))
    with internals.FakeTensorMode(), internals.FunctionalTensorMode():
        alias = internals.plain_alias(parameter)
    assert type(alias) is torch.Tensor and not alias.requires_grad
    alias[0] = 5.0
    assert parameter[0].item() == 5.0


def test_higher_order_ops_are_named_as_torch_ops_higher_order_lists_them():
    for name in ("cond", "map_impl", "wrap_with_set_grad_enabled"):
        assert internals.higher_order_name(getattr(torch.ops.higher_order, name)) == name
