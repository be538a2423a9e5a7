"""Fault injection with hostile files: bad bytes, bad names, odd file types, races.

Each hostile file is made while the real daemon watches; none may hang or crash it. Every rejection
is listed once in `status` with its reason and logged once; every other file is still served. A few
cases are not rejections (see EXPECTED_SERVED): what docs/files.md accepts is indexed as usual.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from braind.errors import Rejected
from braind.files.validate import read_file
from braind.model.lines import printable
from tests.conftest import Daemon, wait_until
from tests.faults import WrappedDaemon, assert_index_matches_files

CAP = 1024
"""files.max_file_bytes for these tests: the smallest the config allows."""
LINE_CAP = 128
SMALL = {"files": {"max_file_bytes": CAP, "max_line_bytes": LINE_CAP}}
WORD = "quokka"
"""Every note that must be served holds this word."""
HOSTILE = "hostile"
"""Every note in a file that must be refused holds this word, so a leak shows in a recall."""


def day(offset: int) -> str:
    """A diary date `offset` days ago."""
    return (dt.date.today() - dt.timedelta(days=offset)).isoformat()


def line(text: str, minute: int = 0) -> str:
    """One diary line."""
    return f"[09:{minute:02d}] {text}\n"


def entry(text: str) -> str:
    """A logfile with one untitled entry of today."""
    return f"## {day(0)} 09:00\n{text}\n"


def at_cap(name: str) -> bytes:
    """A valid diary file of exactly CAP bytes whose first note says `name`."""
    data = line(f"{WORD} {name}").encode()
    while len(data) + 100 <= CAP:
        data += line("x" * 90, 1).encode()
    filler = CAP - len(data) - len("[09:02] \n")
    return data + line("y" * filler, 2).encode()


Make = Callable[[Path, Path], None]
"""Makes a hostile file at a path; the second path is a scratch directory outside every root."""


@dataclass(frozen=True)
class Bad:
    """One hostile file: where it goes (a str, or bytes for names that are not UTF-8), how it is made, why refused."""

    where: str | bytes
    make: Make
    reason: str


def content(data: str | bytes) -> Make:
    """Make a regular file holding this text (UTF-8) or these bytes."""
    return lambda path, _: path.write_bytes(data.encode() if isinstance(data, str) else data)


def symlink_to(target: Callable[[Path, Path], Path]) -> Make:
    """Make a symlink to a target chosen from the path and the scratch directory outside the roots."""
    return lambda path, scratch: path.symlink_to(target(path, scratch))


def fifo(path: Path, _: Path) -> None:
    """A named pipe: opening it for reading would block forever without O_NONBLOCK."""
    os.mkfifo(path)


def unix_socket(path: Path, _: Path) -> None:
    """A bound Unix socket left on disk."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))


def sparse(size: int) -> Make:
    """A sparse file of `size` bytes: only its size says it is too large."""

    def make(path: Path, _: Path) -> None:
        with open(path, "wb") as handle:
            handle.truncate(size)

    return make


def directory(path: Path, _: Path) -> None:
    """A directory with a memory file's name, with a note inside that is not memory."""
    path.mkdir()
    (path / "inside.md").write_text(line(f"{HOSTILE} inside a directory"))


def outside(_: Path, scratch: Path) -> Path:
    """A secret file outside the roots."""
    secret = scratch / "secret.md"
    secret.write_text(line(f"{HOSTILE} secret outside the root"))
    return secret


def outside_dir(_: Path, scratch: Path) -> Path:
    """A directory outside the roots, holding a diary-like file."""
    target = scratch / "elsewhere"
    target.mkdir(exist_ok=True)
    (target / f"{day(0)}.md").write_text(line(f"{HOSTILE} behind a linked directory"))
    return target


FULL_WIDTH = "\uff12\uff10\uff12\uff15-01-31.md"
BAD_FILES: list[Bad] = [
    Bad(f"diary/{day(40)}.md", content(line(f"{HOSTILE} bad \xff\xfe bytes").encode("latin-1")), "invalid_utf8"),
    Bad(f"diary/{day(41)}.md", content(b"[09:00] hostile \xed\xa0\x80 encoded surrogate\n"), "invalid_utf8"),
    Bad(f"diary/{day(42)}.md", content(b"[09:00] hostile \xc0\xaf overlong slash\n"), "invalid_utf8"),
    Bad(f"diary/{day(43)}.md", content(b"[09:00] hostile cut in a character \xe4\xb9"), "invalid_utf8"),
    Bad(f"diary/{day(44)}.md", content(b"[09:00] hostile \x00 nul\n"), "nul_byte"),
    Bad(f"diary/{day(45)}.md", content(line(f"{HOSTILE} utf-16 from notepad").encode("utf-16")), "nul_byte"),
    Bad(f"diary/{day(46)}.md", content(at_cap(HOSTILE) + b"\n"), "too_large"),
    Bad(f"diary/{day(47)}.md", sparse(1 << 30), "too_large"),
    Bad("diary/2025-02-30.md", content(line(f"{HOSTILE} february 30")), "invalid_date"),
    Bad("diary/2025-13-01.md", content(line(f"{HOSTILE} month 13")), "invalid_date"),
    Bad("diary/2025-1-31.md", content(line(f"{HOSTILE} short month")), "invalid_date"),
    Bad("diary/20250131.md", content(line(f"{HOSTILE} no dashes")), "invalid_date"),
    Bad("diary/2025-W05-5.md", content(line(f"{HOSTILE} week date")), "invalid_date"),
    Bad(f"diary/{FULL_WIDTH}", content(line(f"{HOSTILE} full-width digits")), "invalid_date"),
    Bad("diary/2025-01-31.txt", content(line(f"{HOSTILE} not .md")), "invalid_date"),
    Bad("diary/2025-01-1\n2.md", content(line(f"{HOSTILE} newline in the name")), "invalid_date"),
    Bad(b"diary/2025-01-13\xff.md", content(line(f"{HOSTILE} byte in the name").encode()), "invalid_date"),
    Bad("diary/2025-01-14" + "x" * 242 + ".md", content(line(f"{HOSTILE} 255-byte name")), "invalid_date"),
    Bad(f"diary/{day(48)}.md", symlink_to(outside), "symlink"),
    Bad(f"diary/{day(49)}.md", symlink_to(outside_dir), "symlink"),
    Bad(f"diary/{day(50)}.md", symlink_to(lambda path, _: path.with_name("nowhere.md")), "symlink"),
    Bad(f"diary/{day(51)}.md", fifo, "not_regular"),
    Bad(f"diary/{day(52)}.md", unix_socket, "not_regular"),
    Bad(f"diary/{day(53)}.md", directory, "not_regular"),
    Bad(b"logs/bad\xffname.md", content(entry(f"{HOSTILE} undecodable name")), "invalid_name"),
    Bad("logs/new\nline.md", content(entry(f"{HOSTILE} newline name")), "invalid_name"),
    Bad("logs/\u202edm.evil.md", content(entry(f"{HOSTILE} right-to-left override")), "invalid_name"),
    Bad("logs/nul.md", content(entry(f"{HOSTILE} \x00 nul")), "nul_byte"),
    Bad("logs/latin1.md", content(entry(f"{HOSTILE} caf\xe9").encode("latin-1")), "invalid_utf8"),
    Bad("MEMORY.md", fifo, "not_regular"),
    Bad("SOUL.md", symlink_to(lambda *_: Path("/etc/passwd")), "symlink"),
]
"""Thirty-one hostile files in the user root; the project root and the fixtures below add more."""

PROJECT_BAD: list[Bad] = [
    Bad("diary", content(line(f"{HOSTILE} a diary that is a file").encode()), "not_a_directory"),
    Bad("logs", symlink_to(outside_dir), "symlink"),
]
"""A project root whose diary/ is a regular file and whose logs/ is a symlink."""


def deep(levels: int) -> Make:
    """A note `levels` directories below the given directory: not memory, ignored silently."""

    def make(path: Path, _: Path) -> None:
        below = path.joinpath(*["d"] * levels)
        below.mkdir(parents=True)
        (below / "deep.md").write_text(entry(f"{HOSTILE} fifty levels deep"))

    return make


def hard_link(path: Path, scratch: Path) -> None:
    """A hard link to a file outside the root: a regular file like any other."""
    source = scratch / "linked.md"
    source.write_text(line(f"{WORD} hard link"))
    os.link(source, path)


def with_long_line(path: Path, _: Path) -> None:
    """A good file with one overlong line and one line holding an escape character."""
    lines = [line(f"{WORD} before long"), line("z" * LINE_CAP), line("esc \x1b[31m red"), line(f"{WORD} after")]
    path.write_text("".join(lines))


SERVED: list[tuple[str, Make]] = [
    (f"diary/{day(0)}.md", content(line(f"{WORD} good neighbour").encode())),
    (f"diary/{day(1)}.md", content(b"\xef\xbb\xbf" + line(f"{WORD} after a bom").encode())),
    (f"diary/{day(2)}.md", content(at_cap("exactly at the cap"))),
    (f"diary/{day(3)}.md", content(b"")),
    (f"diary/{day(4)}.md", with_long_line),
    (f"diary/{day(5)}.md", content(line(f"{WORD} crlf line").replace("\n", "\r\n").encode())),
    (f"diary/{day(6)}.md", hard_link),
    ("logs/" + "a" * 252 + ".md", content(entry(f"{WORD} 255-byte logfile name"))),
    ("logs/" + "一" * 84 + ".md", content(entry(f"{WORD} 255-byte cjk name"))),
    ("logs/deep", deep(50)),
    ("diary/nested", deep(50)),
]
"""Files that are not rejections: the BOM is dropped, the cap is inclusive, an empty file has no entries,
bad lines are skipped alone, a hard link is a regular file, long names are names, deep paths are not memory."""
EXPECTED_SERVED = {
    f"{WORD} good neighbour",
    f"{WORD} after a bom",
    f"{WORD} exactly at the cap",
    f"{WORD} before long",
    f"{WORD} after",
    f"{WORD} crlf line",
    f"{WORD} hard link",
    f"{WORD} 255-byte logfile name",
    f"{WORD} 255-byte cjk name",
}
EXPECTED_SKIPPED = {(f"diary/{day(4)}.md", 2, "line_too_long"), (f"diary/{day(4)}.md", 3, "control_char")}


def place(root: Path, where: str | bytes) -> Path:
    """The path of a case inside a root; bytes names go through the filesystem encoding."""
    return root / (os.fsdecode(where) if isinstance(where, bytes) else where)


def shown(path: Path) -> str:
    """A path as `status` shows it."""
    return printable(str(path))


@pytest.fixture
def project(short_tmp: Path) -> Path:
    """A project directory whose memory root is hostile."""
    path = short_tmp / "proj"
    (path / ".agents" / ".memory").mkdir(parents=True)
    return path


@pytest.fixture
def hostile(make_daemon: Callable[..., Daemon], project: Path) -> Daemon:
    """A running daemon with small caps on an empty root, watching a configured project too."""
    daemon = make_daemon({**SMALL, "projects": [str(project)]}, start=False)
    for part in ("diary", "logs"):
        (daemon.root / part).mkdir(parents=True)
    daemon.start()
    return daemon


def settle(get: Callable[[], Any], expected: Any, what: str, timeout: float = 30) -> None:
    """Wait until get() returns expected; on a timeout, fail with the difference."""
    try:
        wait_until(lambda: get() == expected, timeout, what)
    except AssertionError:
        assert get() == expected, f"timed out waiting for {what}"


def recalled(daemon: Daemon, word: str, **params: Any) -> set[str]:
    """Every note holding `word` in the last year."""
    return {hit["text"] for hit in daemon.call("brain_recall", query=word, days=365, limit=500, **params)["hits"]}


def log_count(daemon: Daemon, text: str) -> int:
    """How often the daemon logged a line holding `text`."""
    return daemon.log_text().count(text)


def test_every_hostile_file_is_refused_once_with_its_reason(hostile: Daemon, project: Path, short_tmp: Path) -> None:
    daemon, root, proj = hostile, hostile.root, project / ".agents" / ".memory"
    for where, make in SERVED:
        make(place(root, where), short_tmp)
    for bad in BAD_FILES:
        bad.make(place(root, bad.where), short_tmp)
    for bad in PROJECT_BAD:
        bad.make(place(proj, bad.where), short_tmp)
    grow_past_the_cap(root / "diary" / f"{day(54)}.md")
    expected = {shown(place(root, b.where)): b.reason for b in BAD_FILES}
    expected |= {shown(place(proj, b.where)): b.reason for b in PROJECT_BAD}
    expected[shown(root / "diary" / f"{day(54)}.md")] = "too_large"
    assert len(expected) >= 30
    settle(daemon.rejected, expected, "every hostile file rejected with its reason")
    settle(lambda: recalled(daemon, WORD), EXPECTED_SERVED, "every good file served")
    check_served_and_reported(daemon, project, expected, EXPECTED_SERVED)
    assert daemon.call("brain_note", text=f"{WORD} still answering")["path"] == str(root / "diary" / f"{day(0)}.md")
    daemon.call("reindex")
    check_served_and_reported(daemon, project, expected, EXPECTED_SERVED | {f"{WORD} still answering"})
    for path, reason in expected.items():
        assert log_count(daemon, f"rejected {path}: {reason}: ") == 1, f"{path} not logged exactly once"
    assert_index_matches_files(daemon)


def check_served_and_reported(daemon: Daemon, project: Path, expected: dict[str, str], served: set[str]) -> None:
    """Status lists exactly the rejections and skipped lines; the good notes are served, no hostile one is."""
    status = daemon.call("status")
    assert {p["path"]: p["reason"] for p in status["rejected"]} == expected
    skipped = {(p["path"], p["line"], p["reason"]) for p in status["skipped_lines"]}
    assert skipped == {(str(daemon.root / path), number, reason) for path, number, reason in EXPECTED_SKIPPED}
    assert recalled(daemon, WORD) == served
    assert recalled(daemon, HOSTILE, project=str(project)) == set()
    assert daemon.proc is not None and daemon.proc.poll() is None


def grow_past_the_cap(path: Path) -> None:
    """Append 100-byte lines while the daemon watches, stopping at the first that takes the file past the cap."""
    with open(path, "ab") as handle:
        while handle.tell() <= CAP:
            handle.write(line(f"{HOSTILE} growing " + "g" * 80).encode())
            handle.flush()


# -- races: a symlink swapped in after the check ------------------------------------------------------


def test_a_symlink_swapped_in_between_the_check_and_the_open_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window between lstat and open is microseconds wide; hitting it from outside is luck, so the swap
    is done from inside the check itself: the open must still refuse to follow the link."""
    (tmp_path / "diary").mkdir()
    note = tmp_path / "diary" / f"{day(0)}.md"
    note.write_text(line(f"{WORD} regular"))
    secret = tmp_path / "secret.md"
    secret.write_text(line(f"{HOSTILE} secret"))
    real_stat = os.stat

    def stat_then_swap(*args: Any, **kwargs: Any) -> os.stat_result:
        result = real_stat(*args, **kwargs)
        swapped = tmp_path / "diary" / ".swap"
        swapped.symlink_to(secret)
        os.replace(swapped, note)
        return result

    monkeypatch.setattr(os, "stat", stat_then_swap)
    with pytest.raises(Rejected) as refused:
        read_file(tmp_path, Path("diary", note.name), CAP)
    assert refused.value.reason == "symlink"


def swap_storm(path: Path, secret: Path, stop: threading.Event) -> int:
    """Swap a regular file and a symlink to `secret` at `path` until stopped, ending on the symlink."""
    swaps = 0
    while not stop.is_set() or swaps % 2 == 0:
        staged = path.with_name(f".{path.name}.{swaps}")
        if swaps % 2:
            staged.write_text(line(f"{WORD} the regular file"))
        else:
            staged.symlink_to(secret)
        os.replace(staged, path)
        swaps += 1
    return swaps


def test_a_symlink_swapped_in_again_and_again_never_leaks(hostile: Daemon, short_tmp: Path) -> None:
    daemon, path = hostile, hostile.root / "diary" / f"{day(0)}.md"
    secret = short_tmp / "secret.md"
    secret.write_text(line(f"{HOSTILE} secret behind the swapped link"))
    stop = threading.Event()
    storm = threading.Thread(target=swap_storm, args=(path, secret, stop), name="swap-storm")
    storm.start()
    try:
        for _ in range(100):
            assert recalled(daemon, HOSTILE) == set()
    finally:
        stop.set()
        storm.join()
    settle(daemon.rejected, {str(path): "symlink"}, "the final symlink rejected")
    assert recalled(daemon, HOSTILE) == set()
    path.unlink()
    path.write_text(line(f"{WORD} the regular file"))
    settle(lambda: recalled(daemon, WORD), {f"{WORD} the regular file"}, "the regular file served again")
    assert daemon.rejected() == {}
    assert_index_matches_files(daemon)


# -- files only a private mount namespace and dropped capabilities can make ----------------------------

DROP_DAC = ["setpriv", "--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search"]
MOUNT_THEN_DROP = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'


def growing_proc_file() -> Path | None:
    """A /proc file that stats as 0 bytes but reads as more than CAP: a file that grows while it is read."""
    for candidate in (Path("/proc/meminfo"), Path("/proc/self/mountinfo"), Path("/proc/cpuinfo")):
        with contextlib.suppress(OSError):
            if candidate.stat().st_size == 0 and len(candidate.read_bytes()) > CAP:
                return candidate
    return None


def _private_mount_allowed() -> bool:
    """Whether `unshare -Urm` may bind-mount here and setpriv can drop the override capabilities."""
    if growing_proc_file() is None or shutil.which("unshare") is None or shutil.which("setpriv") is None:
        return False
    probe = ["unshare", "-Urm", "sh", "-c", MOUNT_THEN_DROP, "sh", "/proc/meminfo", "/proc/cpuinfo", *DROP_DAC, "true"]
    return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0


@pytest.mark.skipif(not _private_mount_allowed(), reason="needs `unshare -Urm` (bind mounts) and setpriv")
def test_an_unreadable_file_and_a_file_growing_while_read(short_tmp: Path) -> None:
    """Run as root the daemon could read a mode-000 file, so it runs without CAP_DAC_OVERRIDE; a /proc file
    bind-mounted over a diary day (in the daemon's own mount namespace) grows between fstat and read."""
    diary = short_tmp / "d" / "root" / "diary"
    growing, unreadable = diary / f"{day(60)}.md", diary / f"{day(61)}.md"
    wrapper = ["unshare", "-Urm", "sh", "-c", MOUNT_THEN_DROP, "sh", str(growing_proc_file()), str(growing), *DROP_DAC]
    daemon = WrappedDaemon(short_tmp / "d", SMALL, wrapper=wrapper)
    diary.mkdir(parents=True)
    growing.touch()
    (diary / f"{day(0)}.md").write_text(line(f"{WORD} readable neighbour"))
    try:
        daemon.start()
        unreadable.write_text(line(f"{WORD} once unreadable"))
        unreadable.chmod(0)
        expected = {str(growing): "too_large", str(unreadable): "permission_denied"}
        settle(daemon.rejected, expected, "both files rejected")
        messages = {p["path"]: p["message"] for p in daemon.call("status")["rejected"]}
        assert "while being read" in messages[str(growing)]
        assert recalled(daemon, WORD) == {f"{WORD} readable neighbour"}
        for path, reason in expected.items():
            assert log_count(daemon, f"rejected {path}: {reason}: ") == 1
        unreadable.chmod(0o600)
        settle(lambda: recalled(daemon, WORD), {f"{WORD} readable neighbour", f"{WORD} once unreadable"}, "chmod")
        assert daemon.rejected() == {str(growing): "too_large"}
        assert_index_matches_files(daemon)
    finally:
        daemon.stop()
