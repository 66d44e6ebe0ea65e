"""[tool.exporter] in pyproject.toml: found upward from the current directory, read into model
entries whose file paths hold wherever check runs, and rejected with the key named."""

import os
import textwrap

import pytest

from exporter import InputSpecError
from exporter.cli.config import find_config, load_config
from exporter.cli.settings import ModelEntry

CONFIG = textwrap.dedent(
    """
    [project]
    name = "mine"

    [tool.exporter]
    models = [
        "models/net.py:Net",
        "package.module:Thing",
        { id = "Net-3", model = "models/net.py:Net", example-inputs = "f32[5,16]", dynamic = "x.0=batch", init-args = { hidden = 3 } },
        { model = "models/net.py:make_net", example-inputs = "models/inputs.py:pair" },
    ]
    baseline = "ci/baseline.json"
    rtol = 1e-3
    """
)


def test_the_nearest_pyproject_with_the_table_is_found_upward(tmp_path):
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    inner = tmp_path / "sub" / "deeper"
    inner.mkdir(parents=True)
    (tmp_path / "sub" / "pyproject.toml").write_text("[project]\nname = 'other'\n")  # no [tool.exporter]
    assert find_config(str(inner)) == str(tmp_path / "pyproject.toml")
    assert find_config(str(tmp_path)) == str(tmp_path / "pyproject.toml")
    (inner / "pyproject.toml").write_text("[tool.exporter]\nmodels = ['a.py:A']\n")
    assert find_config(str(inner)) == str(inner / "pyproject.toml")


def test_models_strings_and_tables_with_paths_relative_to_the_pyproject(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    config = load_config(str(tmp_path / "pyproject.toml"))
    assert config.models == [
        ModelEntry("models/net.py:Net", model=os.path.join("..", "models", "net.py") + ":Net"),
        ModelEntry("package.module:Thing"),
        ModelEntry("Net-3", model="../models/net.py:Net", example_inputs="f32[5,16]", dynamic=("x.0=batch",), init_args={"hidden": 3}),
        ModelEntry("models/net.py:make_net", model="../models/net.py:make_net", example_inputs="../models/inputs.py:pair"),
    ]
    assert (config.baseline, config.rtol, config.atol, config.jobs) == (os.path.join("..", "ci", "baseline.json"), 1e-3, None, None)
    monkeypatch.chdir(tmp_path)
    assert load_config("pyproject.toml").models[0] == ModelEntry("models/net.py:Net")  # from its own directory: as written


@pytest.mark.parametrize(
    "table, message",
    [
        ("models = []", r"\[tool.exporter\] models: expected a non-empty list"),
        ("models = ['a.py:A']\nbaseline = 3", r"baseline: expected a path, got 3"),
        ("models = ['a.py:A']\nmodel = 'b.py:B'", r"unknown key\(s\) model"),
        ("models = [{ model = 'a.py:A', inputs = 'f32[2]' }]", r"models\[0\]: unknown key\(s\) inputs"),
        ("models = [3]", r"models\[0\]: expected a reference string or a table with `model`"),
        ("models = ['a.py']", r"models\[0\]: MODEL 'a.py' is not a reference"),
        ("models = ['a.py:A', 'a.py:A']", r"models\[1\]: 'a.py:A' is listed twice"),
        ("models = [{ model = 'a.py:A', dynamic = [1] }]", r"`dynamic` must be a string or a list of strings"),
        ("models = [{ model = 'a.py:A', init-args = 3 }]", r"`init-args` must be a table"),
        ("models = ['a.py:A']\nrtol = 'small'", r"rtol: expected a number"),
        ("models = ['a.py:A']\njobs = 0", r"jobs: expected a positive integer"),
        ("models = ['a.py:A']\ntimeout = 'long'", r"timeout: expected seconds, got 'long'"),
        ("models = ['a.py:A']\ntimeout = -5", r"timeout: expected seconds"),
        ("models = ['a.py:A']\nmax-memory = 'lots'", r"max-memory: expected a size, got 'lots'"),
        ("models = [", r"cannot be read"),
    ],
)
def test_a_wrong_table_names_the_file_and_the_key(tmp_path, table, message):
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.exporter]\n" + table + "\n")
    with pytest.raises(InputSpecError, match=message):
        load_config(str(path))


def test_limits_per_model_in_seconds_and_bytes(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.exporter]\nmodels = ['a.py:A']\ntimeout = 90\nmax-memory = '1.5G'\n")
    config = load_config(str(path))
    assert (config.timeout, config.max_memory) == (90.0, 3 << 29)
    path.write_text("[tool.exporter]\nmodels = ['a.py:A']\ntimeout = 0\n")
    assert load_config(str(path)).timeout == 0.0, "0 (no limit) is kept, so it overrides the default"
