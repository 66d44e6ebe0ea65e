import pytest
import torch

from exporter.testing import assert_exportable


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 2)

    def forward(self, x, scale=1.0):
        return self.lin(x) * scale


class Branchy(torch.nn.Module):
    def forward(self, x):
        for _ in range(x.gt(0).sum()):
            x = x * 0.5
        return x


class Noisy(torch.nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x)


def test_returns_the_verified_program():
    model = Small().eval()
    program = assert_exportable(model, (torch.randn(3, 4),), {"scale": 2.0})
    x = torch.randn(3, 4)
    torch.testing.assert_close(program.module()(x, scale=2.0), model(x, scale=2.0))


def test_unexportable_model_fails_with_category_and_hint():
    with pytest.raises(AssertionError, match=r"(?s)Branchy is not exportable \[data-dependent control flow\].*hint:"):
        assert_exportable(Branchy(), (torch.randn(3),))


def test_a_failure_is_reported_without_the_trace_frames_behind_it():
    with pytest.raises(AssertionError) as failure:
        assert_exportable(Branchy(), (torch.randn(3),))
    assert failure.value.__cause__ is None and failure.value.__suppress_context__
    assert type(failure.value.export_error).__name__ == "TraceError"
    assert "x.gt(0).sum()" in str(failure.value.export_error)


pytest_plugins = ["pytester"]


@pytest.mark.slow
def test_pytest_shows_the_test_line_and_the_reason_only(pytester):
    pytester.makepyfile(
        test_one="""
        import torch
        from exporter.testing import assert_exportable

        class Loop(torch.nn.Module):
            def forward(self, x):
                for _ in range(x.gt(0).sum()):
                    x = x * 0.5
                return x

        def test_it():
            assert_exportable(Loop(), (torch.randn(3),))
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "Loop is not exportable [data-dependent control flow]" in text
    assert "test_one.py:11: AssertionError" in text and "test_one.py:6" in text
    assert "sym_node.py" not in text and "in evaluate_expr" not in text and "direct cause" not in text


def test_program_that_differs_from_eager_fails_with_the_error_per_output():
    with pytest.raises(AssertionError, match=r"(?s)Noisy is not exportable \[verification\]: program and eager differ.*example output: max abs error"):
        assert_exportable(Noisy(), (torch.randn(64),))


def test_reference_form_uses_the_model_file(tmp_path):
    (tmp_path / "m.py").write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self, k=2):\n"
        "        super().__init__(); self.k = k\n"
        "    def forward(self, x):\n"
        "        return x * self.k\n"
        "def example_inputs():\n"
        "    return (torch.randn(2),)\n"
    )
    program = assert_exportable(f"{tmp_path}/m.py:M", init_args={"k": 3})
    assert torch.equal(program.module()(torch.ones(2)), torch.full((2,), 3.0))
    with pytest.raises(AssertionError, match=r"(?s)m.py:N is not exportable \[input\].*has no 'N'"):
        assert_exportable(f"{tmp_path}/m.py:N")
