"""Files are written whole or not at all."""

import errno
import json

import pytest
import torch

import exporter
from exporter import InputSpecError
from exporter.cli.save import (
    require_writable,
    save_program,
    write_atomically,
    write_json,
)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")

    def fail(path):
        with open(path, "w") as f:
            f.write("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(InputSpecError, match=r"cannot write .*out.txt: No space left on device; the file already there is left") as raised:
        write_atomically(str(target), fail)
    assert raised.value.hint == "free some space there, or write the file elsewhere"
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_an_unwritable_location_is_found_before_any_work(tmp_path):
    (tmp_path / "a_file").write_text("")
    with pytest.raises(InputSpecError, match=r"-o .*a_file/sub/out.pt2: .*not a directory"):
        require_writable(str(tmp_path / "a_file" / "sub" / "out.pt2"), "-o")
    with pytest.raises(InputSpecError, match=r"--json .* is a directory"):
        require_writable(str(tmp_path), "--json")
    require_writable(str(tmp_path / "new" / "dirs" / "out.pt2"), "-o")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"], "checking creates nothing"


def test_json_and_programs_land_in_new_directories(tmp_path):
    write_json(str(tmp_path / "a" / "r.json"), {"x": torch.float32})
    assert json.loads((tmp_path / "a" / "r.json").read_text()) == {"x": "torch.float32"}
    program = exporter.export(torch.nn.ReLU(), (torch.randn(2),))
    save_program(program, str(tmp_path / "b" / "p.pt2"))
    assert torch.export.load(tmp_path / "b" / "p.pt2").module()(torch.tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]


def test_a_written_file_gets_the_mode_a_new_file_gets(tmp_path):
    import os
    import stat

    write_json(str(tmp_path / "r.json"), {})
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(tmp_path / "r.json").st_mode) == 0o666 & ~mask


def test_staged_files_appear_together_on_commit_and_not_at_all_on_discard(tmp_path):
    from exporter.cli.save import Staging

    staging = Staging()
    for name in ("a/one.pt2", "two.onnx"):
        with open(staging.path(str(tmp_path / name)), "w") as f:
            f.write(name)
    (tmp_path / "two.onnx").write_text("old")
    assert not (tmp_path / "a" / "one.pt2").exists() and (tmp_path / "two.onnx").read_text() == "old"
    staging.commit()
    assert (tmp_path / "a" / "one.pt2").read_text() == "a/one.pt2" and (tmp_path / "two.onnx").read_text() == "two.onnx"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "two.onnx"]

    dropped = Staging()
    with open(dropped.path(str(tmp_path / "three.pt2")), "w") as f:
        f.write("x")
    dropped.discard()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "two.onnx"]
