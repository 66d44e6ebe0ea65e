import pytest
import torch

from exporter._torch_internals import check_value
from exporter.passes import insert_runtime_asserts
from tests.support import call_targets, traced_state


class Checked(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 2)
        torch._check(k <= 6)
        return x[:k]


def test_facts_about_data_dependent_sizes_become_asserts_that_run():
    state = traced_state(Checked(), (torch.randn(8), torch.tensor(3)), until=insert_runtime_asserts)
    assert torch.ops.aten._assert_scalar.default not in call_targets(state.gm)

    assert insert_runtime_asserts(state) is True

    asserts = [n for n in state.gm.graph.nodes if n.target is torch.ops.aten._assert_scalar.default]
    assert len(asserts) == 2 and all("val" in n.meta for n in asserts)
    state.gm.recompile()
    x = torch.randn(8)
    torch.testing.assert_close(state.gm(x, torch.tensor(4))[0], x[:4])
    with pytest.raises(RuntimeError, match="u0 <= 6"):
        state.gm(x, torch.tensor(7))


def test_a_static_model_gets_no_asserts():
    state = traced_state(torch.nn.ReLU(), (torch.randn(3),), until=insert_runtime_asserts)
    assert insert_runtime_asserts(state) is False


class ReturnsASize(torch.nn.Module):
    def forward(self, x):
        rows, cols = x.size()
        return rows + cols + x[0], rows


def test_outputs_keep_naming_sizes_torch_computes_anew():
    from torch.export import Dim

    import exporter

    ep = exporter.export(ReturnsASize(), (torch.ones(2, 3),), dynamic_shapes={"x": (Dim("a"), Dim("b"))})
    values = list(ep.graph.output_node().args[0])
    assert [s.arg.name for s in ep.graph_signature.output_specs] == [v.name for v in values]
    out, rows = ep.module()(torch.ones(4, 5))
    assert rows == 4 and out.shape == (5,)


class HeldByName(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        check_value(k >= 2, "k is checked here")  # a fact held with a message of its own
        torch._check(k <= 6)
        return x[:k]


def test_an_assert_of_a_fact_held_with_a_message_says_it_and_keeps_the_expression():
    state = traced_state(HeldByName(), (torch.randn(8), torch.tensor(3)), until=insert_runtime_asserts)
    assert insert_runtime_asserts(state) is True
    state.gm.recompile()
    x = torch.randn(8)
    with pytest.raises(RuntimeError, match=r"^k is checked here \[the program checks u0 >= 2\]$"):
        state.gm(x, torch.tensor(1))
    with pytest.raises(RuntimeError, match="Runtime assertion failed for expression u0 <= 6"):  # torch's own
        state.gm(x, torch.tensor(7))
