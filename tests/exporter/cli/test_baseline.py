import json

import pytest

from exporter import InputSpecError
from exporter.cli.baseline import drift, load_baseline, save_baseline

ENTRY = {
    "signature": {
        "inputs": [{"kind": "PARAMETER", "name": "p_w", "target": "w", "shape": [2, 2], "dtype": "float32"}],
        "outputs": [{"kind": "USER_OUTPUT", "name": "relu", "target": None, "shape": [2], "dtype": "float32"}],
    },
    "ops": {"aten.linear.default": 1, "aten.relu.default": 1},
    "versions": {"python": "3.11.7", "torch": "2.13.0", "exporter": "0.1.0", "transformers": "5.24.0"},
}


def test_identical_entries_have_no_drift():
    assert drift(ENTRY, json.loads(json.dumps(ENTRY))) == []


def test_drift_lists_signature_ops_and_version_changes():
    new = json.loads(json.dumps(ENTRY))
    new["signature"]["outputs"][0]["dtype"] = "float16"
    new["ops"] = {"aten.linear.default": 2, "aten.gelu.default": 1}
    new["versions"]["transformers"] = "5.25.0"
    new["versions"]["exporter"] = "0.2.0"
    lines = drift(ENTRY, new)
    text = "\n".join(lines)
    assert "signature changed:" in text
    assert "-output kind=USER_OUTPUT name=relu shape=[2] dtype=float32" in text
    assert "+output kind=USER_OUTPUT name=relu shape=[2] dtype=float16" in text
    assert "aten.gelu.default: 0 -> 1 (+1)" in text
    assert "aten.linear.default: 1 -> 2 (+1)" in text
    assert "aten.relu.default: 1 -> 0 (-1)" in text
    assert lines[-1] == "versions changed since the baseline (the usual cause of drift): transformers 5.24.0 -> 5.25.0"


def test_save_and_load_round_trip_and_reject_other_files(tmp_path):
    path = tmp_path / "b.json"
    assert load_baseline(str(path)) == {}
    save_baseline(str(path), {"z.py:M": ENTRY, "a.py:M": ENTRY})
    assert list(load_baseline(str(path))) == ["a.py:M", "z.py:M"]
    (tmp_path / "other.json").write_text('{"models": []}')
    with pytest.raises(InputSpecError, match="is not an exporter baseline"):
        load_baseline(str(tmp_path / "other.json"))


def test_drift_lists_changed_dynamic_sizes_by_the_users_names():
    old = {**json.loads(json.dumps(ENTRY)), "dims": [{"name": "batch", "kind": "named", "min": 1, "max": 16}]}
    new = {**json.loads(json.dumps(ENTRY)), "dims": [{"name": "batch", "kind": "named", "min": 2, "max": 16}]}
    assert drift(old, new)[:3] == ["dynamic sizes changed:", "  - batch (named) 1..16", "  + batch (named) 2..16"]
    assert drift(ENTRY, new) == [], "a baseline from before the range table holds no sizes against the export"


def test_a_baseline_entry_keeps_the_range_table():
    from exporter.cli.baseline import baseline_entry
    from exporter.cli.report import ExportReport
    from exporter.cli.settings import ExportSettings

    report = ExportReport(ExportSettings("m.py:M"), signature=ENTRY["signature"], ops=ENTRY["ops"])
    report.dims = [{"name": "seq", "symbol": "s1", "kind": "named", "min": 2, "max": 512, "declared": [2, 512], "inputs": [], "note": ""}]
    assert baseline_entry(report)["dims"] == [{"name": "seq", "kind": "named", "min": 2, "max": 512}]


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", r"is not valid JSON: Expecting property name .*\(line 1, column 2\)"),
        ('{"schema": "exporter.baseline/1", "models": {"a.py:A": {"ops"', r"is not valid JSON: it ends early, as a file cut short does"),
        ('{"schema": "exporter.baseline/7", "models": {}}', r"was written by a newer exporter \(schema exporter.baseline/7\); this one reads exporter.baseline/1"),
        ("\xff\xfe", r"is not JSON: byte 0 is not UTF-8 text"),
    ],
)
def test_a_baseline_that_cannot_be_used_says_why(tmp_path, text, message):
    path = tmp_path / "base.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(InputSpecError, match=message):
        load_baseline(str(path))
