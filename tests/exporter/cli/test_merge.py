"""merge: shards of one check run joined into the unsharded run's summary, JUnit and baseline;
shards that do not add up are refused."""

import json
import re
import textwrap

import pytest

from exporter import InputSpecError
from exporter.cli.main import main
from exporter.cli.merge import load_shard, merge_shards

PYPROJECT = textwrap.dedent(
    """
    [tool.exporter]
    models = [
        "unit_models.py:Net",
        "unit_models.py:make_net",
        "unit_models.py:instance",
        "unit_models.py:Branchy",
        { id = "Net-3", model = "unit_models.py:Net", init-args = { hidden = 3 }, example-inputs = "f32[5,16]", dynamic = ["x.0=batch"] },
    ]
    baseline = "baseline.json"
    """
)
REFERENCES = ["unit_models.py:Net", "unit_models.py:make_net", "unit_models.py:instance", "unit_models.py:Branchy", "Net-3"]


def _without_timings(data):
    """Timings differ between runs, and so do rounding errors (the weights are drawn anew per run)."""
    if isinstance(data, dict):
        return {k: _without_timings(v) for k, v in data.items() if k not in ("timings", "seconds", "max_abs", "max_rel")}
    if isinstance(data, list):
        return [_without_timings(v) for v in data]
    return data


def test_shards_cover_every_model_once_and_merge_into_the_unsharded_run(models, capsys):
    (models / "pyproject.toml").write_text(PYPROJECT)
    assert main(["check", "--update-baseline", "-q"]) == 1  # Branchy does not export
    recorded = json.loads((models / "baseline.json").read_text())["models"]
    assert sorted(recorded) == sorted(set(REFERENCES) - {"unit_models.py:Branchy"})
    assert all(entry["seconds"] >= 0 for entry in recorded.values())
    assert main(["check", "--json", "full.json", "--junit", "full.xml", "-q"]) == 1

    for k in (1, 2, 3):
        assert main(["check", "--shard", f"{k}/3", "--json", f"shard{k}.json", "-q"]) in (0, 1)
    shards = [json.loads((models / f"shard{k}.json").read_text()) for k in (1, 2, 3)]
    checked = [m["reference"] for shard in shards for m in shard["models"]]
    assert sorted(checked) == sorted(REFERENCES) and all(shard["models"] for shard in shards)
    assert [s["shard"] for s in shards] == [{"index": k, "count": 3, "models": REFERENCES} for k in (1, 2, 3)]

    (models / "merged-baseline.json").write_text('{"schema": "exporter.baseline/1", "models": {}}')
    capsys.readouterr()
    code = main(["merge", "shard3.json", "shard1.json", "shard2.json", "--json", "merged.json", "--junit", "merged.xml",
                 "--baseline", "merged-baseline.json", "--update-baseline"])
    assert code == 1
    full, merged = (json.loads((models / name).read_text()) for name in ("full.json", "merged.json"))
    assert [m["reference"] for m in merged["models"]] == REFERENCES
    assert _without_timings(merged) == _without_timings(full)
    untimed = [re.sub(r' time="[0-9.]+"', "", (models / name).read_text()) for name in ("full.xml", "merged.xml")]
    assert untimed[0] == untimed[1] and untimed[0].count("<testcase") == 5
    assert _without_timings(json.loads((models / "merged-baseline.json").read_text())["models"]) == _without_timings(recorded)
    table = capsys.readouterr().out
    assert "4/5 models passed" in table and "unit_models.py:Branchy: data-dependent control flow" in table
    assert "exporter check, merged from 3 shard file(s)" in table
    main(["check", "--shard", "2/3"])
    assert f"exporter check, shard 2/3: {len(shards[1]['models'])} of 5 models" in capsys.readouterr().out


def _shard(index, count, references, models=None):
    def report(reference):
        return {"status": "ok", "model": {"reference": reference}, "ops": {"aten.add.Tensor": 1}, "timings": {"total": 1.0}}

    return {
        "schema": "exporter.check/1",
        "status": "ok",
        "models": [{"reference": r, "status": "ok", "drift": [], "note": None, "report": report(r)} for r in references],
        "shard": {"index": index, "count": count, "models": models or ["a", "b", "c"]},
    }


@pytest.mark.parametrize(
    "shards, message",
    [
        ([_shard(1, 2, ["a", "c"])], r"do not add up to 2: missing shard\(s\) 2"),
        ([_shard(1, 2, ["a", "c"]), _shard(1, 2, ["a", "c"]), _shard(2, 2, ["b"])], r"shard\(s\) 1 given twice"),
        ([_shard(1, 2, ["a", "c"]), _shard(2, 2, ["b"], ["a", "b"])], r"come from different runs"),
        ([_shard(1, 2, ["a", "c"]), _shard(2, 2, ["b", "c"])], r"c was checked by two shards"),
        ([_shard(1, 2, ["a"]), _shard(2, 2, ["b"])], r"do not cover the run: no result for c"),
    ],
)
def test_shards_that_do_not_add_up_are_refused(shards, message):
    with pytest.raises(InputSpecError, match=message):
        merge_shards({f"s{i}.json": shard for i, shard in enumerate(shards)})
    merged, results = merge_shards({"s1.json": _shard(1, 2, ["a", "c"]), "s2.json": _shard(2, 2, ["b"])})
    assert [m["reference"] for m in merged["models"]] == ["a", "b", "c"] and merged["status"] == "ok"
    assert [r.passed for r in results] == [True, True, True] and "shard" not in merged


def test_a_file_that_is_not_a_check_report_is_named(tmp_path):
    (tmp_path / "junit.xml").write_text("<testsuites/>")
    (tmp_path / "other.json").write_text('{"schema": "exporter.report/1"}')
    with pytest.raises(InputSpecError, match="shard file .*junit.xml is not valid JSON: Expecting value"):
        load_shard(str(tmp_path / "junit.xml"))
    with pytest.raises(InputSpecError, match="other.json is not the --json of `exporter check`"):
        load_shard(str(tmp_path / "other.json"))


def test_the_shipped_matrix_workflow_runs_commands_the_parsers_accept():
    import os
    import shlex

    from exporter.cli.main import _check_parser, _merge_parser

    workflow = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "ci", "exporter-check-sharded.yml")
    text = open(workflow).read().replace("\\\n", " ").replace("${{ matrix.shard }}", "2")
    commands = [shlex.split(line.split("python -m exporter", 1)[1]) for line in text.splitlines()
                if "python -m exporter" in line and not line.lstrip().startswith("#")]
    assert [c[0] for c in commands] == ["check", "merge"]
    check, merge = _check_parser().parse_args(commands[0][1:]), _merge_parser().parse_args(commands[1][1:])
    assert check.shard == "2/4" and check.models == [] and check.json == "shard-2.json"
    assert merge.shards == ["shard-*.json"] and merge.update_baseline and merge.junit == "exporter-junit.xml"
