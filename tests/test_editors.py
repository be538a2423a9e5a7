"""Real editor save patterns: after the debounce window recall matches the disk."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Daemon, today, yesterday


@pytest.fixture
def day(daemon: Daemon) -> Path:
    """Today's diary with one note written through the daemon."""
    daemon.call("brain_note", text="original alpha entry")
    return daemon.root / "diary" / f"{today()}.md"


def _vim(path: Path, backupcopy: str, line: str) -> None:
    """Append a line with real vim, the way a person saving in their home directory would."""
    cmds = [
        "set nocompatible",
        "set backup writebackup",
        f"set backupcopy={backupcopy}",
        "set backupskip=",
        f"call append(line('$'), '{line}')",
        "wq",
    ]
    args = ["vim", "-u", "NONE", "-i", "NONE", "-N", "-n", "-es"] + [a for c in cmds for a in ("-c", c)]
    subprocess.run([*args, str(path)], check=True, timeout=30, stdin=subprocess.DEVNULL)


@pytest.mark.skipif(shutil.which("vim") is None, reason="vim is not installed")
@pytest.mark.parametrize("backupcopy", ["auto", "yes", "no"])
def test_vim_saves(daemon: Daemon, day: Path, backupcopy: str) -> None:
    _vim(day, backupcopy, f"[11:11] vim wrote bravo {backupcopy}")
    daemon.wait_recall("bravo", f"vim wrote bravo {backupcopy}")
    assert daemon.recall("alpha") == ["original alpha entry"]


def test_sed_in_place(daemon: Daemon, day: Path) -> None:
    subprocess.run(["sed", "-i", "s/alpha/gamma/", str(day)], check=True)
    daemon.wait_recall("gamma", "original gamma entry")
    daemon.wait_gone("alpha", "original alpha entry")


def test_temp_file_and_rename(daemon: Daemon, day: Path) -> None:
    tmp = day.with_name(day.name + ".tmp")
    tmp.write_text(day.read_text() + "[12:00] renamed delta\n")
    os.replace(tmp, day)
    daemon.wait_recall("delta", "renamed delta")
    assert daemon.recall("alpha") == ["original alpha entry"]


def test_truncate_and_write(daemon: Daemon, day: Path) -> None:
    with open(day, "r+", encoding="utf-8") as f:
        f.truncate(0)
        f.flush()
        f.write("[12:30] rewritten epsilon\n")
    daemon.wait_recall("epsilon", "rewritten epsilon")
    daemon.wait_gone("alpha", "original alpha entry")


def test_gio_style_rename(daemon: Daemon, day: Path) -> None:
    tmp = day.parent / ".goutputstream-AB12CD"
    tmp.write_text(day.read_text() + "[13:00] gio zeta\n")
    os.rename(tmp, day)
    daemon.wait_recall("zeta", "gio zeta")


def test_moves_in_and_out(daemon: Daemon, day: Path, short_tmp: Path) -> None:
    outside = short_tmp / f"{yesterday()}.md"
    outside.write_text("[10:00] moved in eta\n")
    os.rename(outside, daemon.root / "diary" / outside.name)
    daemon.wait_recall("eta", "moved in eta")
    os.rename(daemon.root / "diary" / outside.name, outside)
    daemon.wait_gone("eta", "moved in eta")


def test_whole_directory_moved_out_and_in(daemon: Daemon, day: Path, short_tmp: Path) -> None:
    parked = short_tmp / "parked"
    os.rename(daemon.root / "diary", parked)
    daemon.wait_gone("alpha", "original alpha entry")
    os.rename(parked, daemon.root / "diary")
    daemon.wait_recall("alpha", "original alpha entry")


def test_mkdir_then_immediate_write(daemon: Daemon) -> None:
    root = daemon.root
    shutil.rmtree(root / "diary", ignore_errors=True)
    (root / "diary").mkdir(parents=True)
    (root / "diary" / f"{today()}.md").write_text("[07:00] fresh theta\n")
    daemon.wait_recall("theta", "fresh theta")
