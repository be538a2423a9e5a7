"""Bad files on disk are rejected loudly with their reason, and picked up again when fixed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Daemon, days_ago, today, wait_until

SMALL = {"files": {"max_file_bytes": 2048, "max_line_bytes": 128}}


@pytest.fixture
def small(make_daemon) -> Daemon:  # type: ignore[no-untyped-def]
    """A daemon with small file and line caps, so oversize cases stay tiny."""
    d = make_daemon(SMALL)
    (d.root / "diary").mkdir(parents=True)
    return d


BAD_FILES: list[tuple[str, bytes, str]] = [
    ("2026-02-30.md", b"[10:00] impossible date\n", "invalid_date"),
    ("2026-13-01.md", b"[10:00] month thirteen\n", "invalid_date"),
    ("2026-1-31.md", b"[10:00] short month\n", "invalid_date"),
    ("20260131.md", b"[10:00] no dashes\n", "invalid_date"),
    ("2026-W05-5.md", b"[10:00] week date\n", "invalid_date"),
    ("\uff12\uff10\uff12\uff16-01-31.md", b"[10:00] full width\n", "invalid_date"),
    # real dates of the last days: were they indexed, the recall below (365 days) would find them
    (f"{days_ago(1)}.md", b"[10:00] has a \x00 nul\n", "nul_byte"),
    (f"{days_ago(2)}.md", b"[10:00] bad \xff\xfe utf8\n", "invalid_utf8"),
    (f"{days_ago(3)}.md", b"[10:00] surrogate \xed\xa0\x80\n", "invalid_utf8"),
    (f"{days_ago(4)}.md", b"[10:00] " + b"big " * 600 + b"\n", "too_large"),
]


def test_every_bad_file_is_rejected_with_its_reason(small: Daemon) -> None:
    diary = small.root / "diary"
    (diary / f"{today()}.md").write_text("[08:00] good neighbour entry\n")
    for name, data, _ in BAD_FILES:
        (diary / name).write_bytes(data)
    expected = {str(diary / name): reason for name, _, reason in BAD_FILES}
    wait_until(lambda: small.rejected() == expected, 15, "all bad files rejected")
    assert small.recall("good neighbour") == ["good neighbour entry"]
    assert small.call("brain_recall", query="10", days=365)["total"] == 0


def test_fixed_file_is_picked_up_again(small: Daemon) -> None:
    bad = small.root / "diary" / f"{today()}.md"
    bad.write_bytes(b"[10:00] broken \xff line\n")
    wait_until(lambda: small.rejected().get(str(bad)) == "invalid_utf8", 15, "rejection")
    bad.write_bytes(b"[10:00] mended line\n")
    small.wait_recall("mended", "mended line")
    assert str(bad) not in small.rejected()


def test_bad_lines_skipped_rest_indexed(small: Daemon) -> None:
    path = small.root / "diary" / f"{today()}.md"
    path.write_text("[08:00] first good\n[25:00] bad hour\n[09:00] " + "y" * 200 + "\nfree text\n[10:00] last good\n")
    small.wait_recall("good", "last good")
    assert sorted(small.recall("good")) == ["first good", "last good"]
    skipped = {(p["line"], p["reason"]) for p in small.call("status")["skipped_lines"]}
    assert skipped == {(2, "bad_line"), (3, "line_too_long"), (4, "bad_line")}


def test_symlinked_file_and_directory_rejected(small: Daemon, short_tmp: Path) -> None:
    secret = short_tmp / "secret.md"
    secret.write_text("[10:00] secret outside the root\n")
    link = small.root / "diary" / f"{today()}.md"
    link.symlink_to(secret)
    wait_until(lambda: small.rejected().get(str(link)) == "symlink", 15, "symlinked file rejected")
    assert small.recall("secret") == []


def test_symlinked_diary_dir_rejected(make_daemon, short_tmp: Path) -> None:  # type: ignore[no-untyped-def]
    outside = short_tmp / "outside"
    outside.mkdir()
    (outside / f"{today()}.md").write_text("[10:00] leaked through a link\n")
    d = make_daemon(start=False)
    d.root.mkdir()
    (d.root / "diary").symlink_to(outside)
    d.start()
    assert d.rejected() == {str(d.root / "diary"): "symlink"}
    assert d.recall("leaked") == []


def test_fifo_and_device_never_hang(small: Daemon) -> None:
    fifo = small.root / "diary" / "2026-04-01.md"
    os.mkfifo(fifo)
    device = small.root / "diary" / "2026-04-02.md"
    os.mknod(device, 0o600 | 0o020000, os.makedev(1, 3))
    wait_until(lambda: small.rejected().get(str(fifo)) == "not_regular", 15, "fifo rejected")
    wait_until(lambda: small.rejected().get(str(device)) == "not_regular", 15, "device rejected")
    small.call("brain_note", text="still alive after a fifo")
    assert small.recall("alive fifo") == ["still alive after a fifo"]


def test_editor_artefacts_ignored_silently(small: Daemon) -> None:
    diary = small.root / "diary"
    for name in [f".{today()}.md.swp", "4913", f"{today()}.md~", f".#{today()}.md", "#x#", "sedAb12Cd"]:
        (diary / name).write_bytes(b"\x00 garbage")
    small.call("brain_note", text="marker after artefacts")
    small.call("reindex")
    assert small.rejected() == {}
