"""AOTInductor: a program compiled into a package and loaded back runs like the program."""

import pytest
import torch

import exporter
from exporter._torch_internals import aoti_compile_package, aoti_load_package


@pytest.mark.slow
def test_a_compiled_package_loads_and_runs_like_the_program(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    x = torch.randn(2, 4)
    program = exporter.export(model, (x,))
    path = aoti_compile_package(program, str(tmp_path / "model.pt2"))
    compiled = aoti_load_package(path)
    torch.testing.assert_close(compiled(x), model(x))
