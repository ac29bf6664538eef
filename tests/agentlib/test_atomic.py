"""Replacing a file atomically: the old content or the new, never half; modes kept; no leftovers."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ipyagent.agentlib.atomic import atomic_bytes, atomic_write


def test_a_new_file_gets_the_mode_open_would_give(tmp_path: Path) -> None:
    atomic_write(tmp_path / "new.txt", "héllo\r\n")
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert (tmp_path / "new.txt").read_bytes() == "héllo\r\n".encode()  # newlines as given
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)


def test_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "script.sh"
    target.write_text("old")
    os.chmod(target, 0o751)
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o751


def test_a_failure_part_way_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "data.bin"
    target.write_bytes(b"old")

    def write_half() -> None:
        with atomic_bytes(target) as out:
            out.write(b"half of the new")
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_half()
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.bin"]


def test_the_folder_is_created(tmp_path: Path) -> None:
    atomic_write(tmp_path / "a" / "b" / "c.txt", "x")
    assert (tmp_path / "a" / "b" / "c.txt").read_text() == "x"
