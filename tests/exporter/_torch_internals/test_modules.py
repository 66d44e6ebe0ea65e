"""nn.Module's own tables, as torch keeps them: live, and the module's own entries only."""

import torch

from exporter._torch_internals import non_persistent_buffers, own_buffers, own_parameters, own_submodules


def test_each_table_is_the_modules_own_and_edits_reach_the_module():
    outer = torch.nn.Sequential(torch.nn.Linear(2, 2))
    outer.register_buffer("kept", torch.zeros(1))
    outer.register_buffer("scratch", torch.zeros(1), persistent=False)
    assert set(own_buffers(outer)) == {"kept", "scratch"} and own_parameters(outer) == {}
    assert list(own_submodules(outer)) == ["0"] and set(own_parameters(outer[0])) == {"weight", "bias"}
    assert non_persistent_buffers(outer) == {"scratch"}
    del own_buffers(outer)["scratch"]
    assert "scratch" not in dict(outer.named_buffers())
