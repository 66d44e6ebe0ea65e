"""Export a model from Python and use the program: run it, save it, load it, lower it.

    python examples/export_with_library.py
"""

import os
import tempfile

import torch

import exporter
from mlp import MLP, example_inputs


def main() -> None:
    model = MLP().eval()
    args = example_inputs()
    program = exporter.export(model, args)
    print(program.graph_module.code)
    print(program.graph_signature)

    x = torch.randn(8, 16)
    torch.testing.assert_close(program.module()(x), model(x))

    path = os.path.join(tempfile.mkdtemp(), "mlp.pt2")
    torch.export.save(program, path)
    loaded = torch.export.load(path)
    torch.testing.assert_close(loaded.module()(x), model(x))

    core = program.run_decompositions()  # core ATen, as ExecuTorch and AOTInductor take it
    print("ops after core ATen lowering:", sorted({str(n.target) for n in core.graph.nodes if n.op == "call_function"}))
    print(f"saved to {path}; the program matches eager")


if __name__ == "__main__":
    main()
