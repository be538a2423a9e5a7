"""Validation of untrusted memory files: the fixtures, hostile files made at run time, names and notes."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braind.errors import Rejected
from braind.files.validate import (
    FileData,
    classify,
    clean_note,
    diary_date,
    is_artefact,
    open_dir,
    parse_diary,
    read_file,
)
from braind.model.entries import Line, parse_line, render_line
from braind.model.lines import Problem

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GOOD = FIXTURES / "roots" / "good"
BAD = FIXTURES / "roots" / "bad"
MAX_FILE = 4096  # the caps fixtures/README.md documents
MAX_LINE = 512
GOOD_LINE = "[12:00] A good line.\n"


def examine(root: Path, rel: Path) -> str | tuple[list[tuple[int, Line]], list[tuple[int | None, str]]]:
    """What the validator makes of one diary path: 'artefact', a rejection reason, or lines and problems."""
    if classify(rel) == "artefact":
        return "artefact"
    if diary_date(rel.name) is None:
        return "invalid_date"
    try:
        data = read_file(root, rel, MAX_FILE)
    except Rejected as exc:
        return exc.reason
    lines, problems = parse_diary(str(root / rel), data.text, MAX_LINE)
    return lines, [(p.line, p.reason) for p in problems]


def rejection(root: Path, rel: str | Path, cap: int = MAX_FILE) -> str:
    """The reason read_file refuses a path with; fails the test if it reads it."""
    with pytest.raises(Rejected) as caught:
        read_file(root, Path(rel), cap)
    return caught.value.reason


def names_in(root: Path) -> set[str]:
    """Every file name in a fixture root's diary/ directory."""
    return {p.name for p in (root / "diary").iterdir()}


# --- the committed fixtures ---------------------------------------------------

GOOD_EXPECTED = {
    "2026-11-29.md": 13,
    "2026-11-30.md": 1,
    "2024-02-29.md": 1,
    ".2026-11-29.md.swp": "artefact",
    "2026-11-29.md~": "artefact",
    "4913": "artefact",
    "#2026-11-29.md#": "artefact",
    ".#2026-11-29.md": "artefact",
    ".goutputstream-ABC123": "artefact",
    "sedAbC123": "artefact",
}

GRAMMAR_SKIPS: list[tuple[int | None, str]] = [
    (2, "bad_line"),  # [25:00] x
    (3, "bad_line"),  # [9:05] x
    (4, "bad_line"),  # no time here
    (5, "bad_line"),  # [12:00]
    (7, "bad_line"),  # [12:00] [fact]
    (9, "bad_line"),  # a tab after the time
    (10, "control_char"),  # ESC
]
BAD_EXPECTED: dict[str, str | tuple[int, list[tuple[int | None, str]]]] = {
    "2026-02-30.md": "invalid_date",
    "2026-13-01.md": "invalid_date",
    "2026-1-31.md": "invalid_date",
    "20260131.md": "invalid_date",
    "2026-W05-5.md": "invalid_date",
    "\uff12\uff10\uff12\uff16-01-31.md": "invalid_date",
    "2026-01-31.txt": "invalid_date",
    "2026-01-10.md": "nul_byte",
    "2026-01-11.md": "invalid_utf8",
    "2026-01-12.md": "invalid_utf8",
    "2026-01-13.md": (2, []),
    "2026-01-14.md": (0, []),
    "2026-01-15.md": (2, [(2, "line_too_long")]),
    "2026-01-16.md": (4, GRAMMAR_SKIPS),
    "2026-01-17.md": "invalid_utf8",
    "2026-01-18.md": "invalid_utf8",
}


def test_every_fixture_has_an_expectation_and_a_readme_line() -> None:
    assert names_in(GOOD) == set(GOOD_EXPECTED)
    assert names_in(BAD) == set(BAD_EXPECTED)
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    for path in sorted(FIXTURES.joinpath("roots").rglob("*")):
        if path.is_file():
            assert f"`{path.relative_to(FIXTURES)}`" in readme, path


@pytest.mark.parametrize(("name", "expected"), sorted(GOOD_EXPECTED.items()))
def test_good_root(name: str, expected: int | str) -> None:
    outcome = examine(GOOD, Path("diary", name))
    if isinstance(expected, str):
        assert outcome == expected
        return
    assert not isinstance(outcome, str)
    lines, problems = outcome
    assert problems == []
    assert len(lines) == expected


@pytest.mark.parametrize(("name", "expected"), sorted(BAD_EXPECTED.items()))
def test_bad_root(name: str, expected: str | tuple[int, list[tuple[int | None, str]]]) -> None:
    outcome = examine(BAD, Path("diary", name))
    if isinstance(expected, str):
        assert outcome == expected
        return
    assert not isinstance(outcome, str)
    lines, problems = outcome
    assert (len(lines), problems) == expected


def test_good_diary_lines_crlf_cjk_and_typed_entries() -> None:
    raw = (GOOD / "diary" / "2026-11-29.md").read_bytes()
    assert raw.count(b"\r\n") == raw.count(b"\n") > 10
    lines = dict(parse_diary("p", read_file(GOOD, Path("diary/2026-11-29.md"), MAX_FILE).text, MAX_LINE)[0])
    assert sorted(lines) == [3, 4, 5, 6, 9, 10, 11, 12, 13, 14, 15, 16, 17]
    assert lines[4] == Line("09:30", "我最喜欢的饮料是乌龙茶")
    assert lines[5].meta.type == "fact" and lines[5].meta.key == "drink"
    assert lines[6].meta.triggers == ("file:app/db.py", "tool:pytest")
    assert lines[11].meta.type == "note" and lines[11].text.startswith("[fact] ")
    assert lines[13].text == "Tabs\tinside\ttext are kept."
    assert lines[14] == lines[15]
    assert all("\r" not in line.text for line in lines.values())


def test_good_diary_lines_are_in_canonical_form() -> None:
    text = read_file(GOOD, Path("diary/2026-11-29.md"), MAX_FILE).text
    raws = text.split("\r\n")
    for number, line in parse_diary("p", text, MAX_LINE)[0]:
        assert render_line(line) == raws[number - 1]


def test_bom_is_dropped_but_counted_in_size_and_hash() -> None:
    raw = (BAD / "diary" / "2026-01-13.md").read_bytes()
    data = read_file(BAD, Path("diary/2026-01-13.md"), MAX_FILE)
    assert raw.startswith(b"\xef\xbb\xbf")
    assert data.text.startswith("[12:00] A BOM opens this file.")
    assert (data.size, data.sha256) == (len(raw), hashlib.sha256(raw).hexdigest())


def test_empty_file_is_accepted() -> None:
    data = read_file(BAD, Path("diary/2026-01-14.md"), MAX_FILE)
    assert (data.text, data.size) == ("", 0)
    assert parse_diary("p", data.text, MAX_LINE) == ([], [])


def test_nul_and_utf8_messages_name_the_line() -> None:
    with pytest.raises(Rejected, match="NUL byte at line 2"):
        read_file(BAD, Path("diary/2026-01-10.md"), MAX_FILE)
    with pytest.raises(Rejected, match="invalid UTF-8 at line 1"):
        read_file(BAD, Path("diary/2026-01-12.md"), MAX_FILE)


def test_fixture_is_read_with_its_stat() -> None:
    path = GOOD / "diary" / "2024-02-29.md"
    data = read_file(GOOD, Path("diary/2024-02-29.md"), MAX_FILE)
    info = path.stat()
    assert data == FileData(path.read_text(encoding="utf-8"), info.st_size, info.st_mtime_ns, data.sha256)
    assert data.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


# --- hostile files made at run time -------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root with one good diary day, and a directory outside it."""
    (tmp_path / "root" / "diary").mkdir(parents=True)
    (tmp_path / "root" / "diary" / "2026-01-01.md").write_text(GOOD_LINE, encoding="utf-8")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text(GOOD_LINE, encoding="utf-8")
    return tmp_path / "root"


@pytest.fixture
def short_root() -> Iterator[Path]:
    """A root with a short path, for Unix socket files (sun_path is 108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="bv") as tmp:
        (Path(tmp) / "diary").mkdir()
        yield Path(tmp)


def test_plain_file_reads(root: Path) -> None:
    assert read_file(root, Path("diary/2026-01-01.md"), MAX_FILE).text == GOOD_LINE


def test_symlink_as_the_root(root: Path) -> None:
    link = root.parent / "link"
    link.symlink_to(root)
    assert rejection(link, "diary/2026-01-01.md") == "symlink"


def test_symlink_above_the_root_is_followed(root: Path) -> None:
    alias = root.parent / "alias"
    alias.symlink_to(root.parent)
    assert read_file(alias / "root", Path("diary/2026-01-01.md"), MAX_FILE).text == GOOD_LINE


@pytest.mark.parametrize("target", ["inside", "outside", "dangling"])
def test_symlink_as_the_diary_dir(root: Path, target: str) -> None:
    (root / "diary").rename(root / "real")
    dest = {"inside": root / "real", "outside": root.parent / "outside", "dangling": root / "nowhere"}[target]
    (root / "diary").symlink_to(dest)
    assert rejection(root, "diary/2026-01-01.md") == "symlink"


@pytest.mark.parametrize("target", ["file inside", "file outside", "directory", "dangling", "itself"])
def test_symlink_as_the_file(root: Path, target: str) -> None:
    link = root / "diary" / "2026-01-02.md"
    dest = {
        "file inside": root / "diary" / "2026-01-01.md",
        "file outside": root.parent / "outside" / "secret.md",
        "directory": root.parent / "outside",
        "dangling": root / "diary" / "2026-01-03.md",
        "itself": link,
    }[target]
    link.symlink_to(dest)
    assert rejection(root, "diary/2026-01-02.md") == "symlink"


def test_open_dir_create_refuses_a_linked_component(root: Path) -> None:
    (root / "diary").rename(root / "real")
    (root / "diary").symlink_to(root.parent / "outside" / "made")
    with pytest.raises(Rejected) as caught:
        open_dir(root, ("diary",), create=True)
    assert caught.value.reason == "symlink"
    assert not (root.parent / "outside" / "made").exists()


def test_open_dir_creates_private_directories(tmp_path: Path) -> None:
    fd = open_dir(tmp_path, ("a", "b"), create=True)
    try:
        assert stat.S_ISDIR(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o700


def test_fifo_is_refused_without_blocking(root: Path) -> None:
    fifo = root / "diary" / "2026-01-02.md"
    os.mkfifo(fifo)
    outcome: list[str] = []

    def read() -> None:
        outcome.append(rejection(root, "diary/2026-01-02.md"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # a blocked open or read: give it a writer and EOF so the thread ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=10)
        pytest.fail("read_file blocked on a FIFO")
    assert outcome == ["not_regular"]


def test_character_device_is_refused(root: Path) -> None:
    try:
        os.mknod(root / "diary" / "2026-01-02.md", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    assert rejection(root, "diary/2026-01-02.md") == "not_regular"


def test_unix_socket_is_refused(short_root: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(short_root / "diary" / "2026-01-02.md"))
        assert rejection(short_root, "diary/2026-01-02.md") == "not_regular"


def test_directory_with_a_diary_name_is_refused(root: Path) -> None:
    (root / "diary" / "2026-01-02.md").mkdir()
    assert rejection(root, "diary/2026-01-02.md") == "not_regular"


@pytest.mark.parametrize(
    ("make", "rel", "reason"),
    [
        ("no root", "diary/2026-01-01.md", "not_found"),
        ("no diary", "diary/2026-01-01.md", "not_found"),
        ("no file", "diary/2026-01-09.md", "not_found"),
        ("root is a file", "diary/2026-01-01.md", "not_a_directory"),
        ("diary is a file", "diary/2026-01-01.md", "not_a_directory"),
        ("ok", "../outside/secret.md", "path_escape"),
        ("ok", "diary/../../outside/secret.md", "path_escape"),
        ("ok", "/etc/hostname", "path_escape"),
        ("ok", "", "path_escape"),
    ],
)
def test_missing_wrong_kind_and_escaping_paths(root: Path, make: str, rel: str, reason: str) -> None:
    if make == "no root":
        root = root.parent / "absent"
    elif make == "no diary":
        (root / "diary").rename(root / "elsewhere")
    elif make == "root is a file":
        root = root.parent / "outside" / "secret.md"
    elif make == "diary is a file":
        (root / "diary" / "2026-01-01.md").rename(root / "x")
        (root / "diary").rmdir()
        (root / "x").rename(root / "diary")
    assert rejection(root, rel) == reason


@pytest.mark.parametrize("parts", [("..",), (".",), ("",), ("a/b",), ("diary", "..")])
def test_open_dir_refuses_anything_but_plain_names(root: Path, parts: tuple[str, ...]) -> None:
    with pytest.raises(Rejected) as caught:
        open_dir(root, parts, create=True)
    assert caught.value.reason == "path_escape"
    assert sorted(p.name for p in root.parent.iterdir()) == ["outside", "root"]


@pytest.mark.parametrize("size", [0, 1, 100])
def test_size_cap_is_inclusive(root: Path, size: int) -> None:
    (root / "diary" / "2026-01-02.md").write_bytes(b"x" * size)
    assert read_file(root, Path("diary/2026-01-02.md"), size).size == size
    (root / "diary" / "2026-01-02.md").write_bytes(b"x" * (size + 1))
    assert rejection(root, "diary/2026-01-02.md", cap=size) == "too_large"


def test_file_growing_past_the_cap_while_read() -> None:
    # A regular file whose stat says 0 bytes but whose read yields more than the cap: exactly the
    # view read_file has of a file that grows between fstat and read. /proc gives it deterministically.
    proc = Path(f"/proc/{os.getpid()}")
    if not (proc / "status").is_file():
        pytest.skip("needs a mounted /proc")
    assert (proc / "status").stat().st_size == 0
    assert len((proc / "status").read_bytes()) > 64
    with pytest.raises(Rejected, match=re.escape("grew over files.max_file_bytes=64")) as caught:
        read_file(proc, Path("status"), 64)
    assert caught.value.reason == "too_large"
    assert read_file(proc, Path("status"), 1 << 16).text.startswith("Name:")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"[12:00] a\x00b\n", "nul_byte"),
        (b"\x00", "nul_byte"),
        (b"[12:00] \xff\n", "invalid_utf8"),
        (b"[12:00] \xed\xa0\x80\n", "invalid_utf8"),
        (b"[12:00] \xed\xbf\xbf\n", "invalid_utf8"),
        (b"[12:00] \xf4\x90\x80\x80 above U+10FFFF\n", "invalid_utf8"),
        (b"[12:00] \xe4\xb9", "invalid_utf8"),
        (b"\xff\xfe[\x001\x00", "nul_byte"),
    ],
)
def test_bad_bytes(root: Path, content: bytes, reason: str) -> None:
    (root / "diary" / "2026-01-02.md").write_bytes(content)
    assert rejection(root, "diary/2026-01-02.md") == reason


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (b"\xef\xbb\xbf[12:00] x\n", "[12:00] x\n"),
        (b"\xef\xbb\xbf", ""),
        (b"\xef\xbb\xbf\xef\xbb\xbfx", "\ufeffx"),
        (b"[12:00] \xef\xbb\xbf inside\n", "[12:00] \ufeff inside\n"),
    ],
)
def test_bom(root: Path, content: bytes, text: str) -> None:
    (root / "diary" / "2026-01-02.md").write_bytes(content)
    assert read_file(root, Path("diary/2026-01-02.md"), MAX_FILE).text == text


# --- names --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "date"),
    [
        ("2026-01-31.md", "2026-01-31"),
        ("2026-11-29.md", "2026-11-29"),
        ("2024-02-29.md", "2024-02-29"),
        ("2000-02-29.md", "2000-02-29"),
        ("0001-01-01.md", "0001-01-01"),
        ("9999-12-31.md", "9999-12-31"),
        ("2025-02-29.md", None),
        ("1900-02-29.md", None),
        ("2026-02-30.md", None),
        ("2026-04-31.md", None),
        ("2026-13-01.md", None),
        ("2026-00-10.md", None),
        ("2026-01-00.md", None),
        ("0000-01-01.md", None),
        ("2026-1-31.md", None),
        ("2026-01-1.md", None),
        ("20260131.md", None),
        ("2026-W05-5.md", None),
        ("2026-031.md", None),
        ("\uff12\uff10\uff12\uff16-01-31.md", None),
        ("\u0662\u0660\u0662\u0666-01-31.md", None),
        ("2026-01-31.txt", None),
        ("2026-01-31.MD", None),
        ("2026-01-31", None),
        ("2026-01-31.md.md", None),
        ("2026-01-31.md\n", None),
        (" 2026-01-31.md", None),
        ("2026/01/31.md", None),
        ("+2026-01-31.md", None),
    ],
)
def test_diary_date(name: str, date: str | None) -> None:
    assert diary_date(name) == date


@pytest.mark.parametrize(
    ("name", "artefact"),
    [
        (".foo.md.swp", True),
        (".2026-01-01.md.swx", True),
        ("4913", True),
        ("x~", True),
        ("2026-01-01.md~", True),
        (".#x", True),
        ("#x#", True),
        ("#2026-01-01.md#", True),
        (".goutputstream-ABC123", True),
        ("sedAbC123", True),
        (".hidden.md", True),
        (".braind", True),
        ("2026-01-01.md", False),
        ("notes.md", False),
        ("4913.md", False),
        ("sed.md", False),
        ("sedAbC12", False),
        ("sedAbC123.md", False),
        ("#notes.md", False),
        ("乌龙茶.md", False),
    ],
)
def test_is_artefact(name: str, artefact: bool) -> None:
    assert is_artefact(name) is artefact


@pytest.mark.parametrize(
    ("rel", "kind"),
    [
        ("diary/2026-01-01.md", "diary"),
        ("diary/20260131.md", "diary"),
        ("diary/.2026-01-01.md.swp", "artefact"),
        ("diary/4913", "artefact"),
        (".braind/tombstones", "artefact"),
        (".git/diary/2026-01-01.md", "artefact"),
        ("diary/sub/2026-01-01.md", "ignored"),
        ("notes.md", "ignored"),
        ("other/2026-01-01.md", "ignored"),
    ],
)
def test_classify(rel: str, kind: str) -> None:
    assert classify(Path(rel)) == kind


# --- parse_diary --------------------------------------------------------------


def test_parse_diary_numbers_skips_and_keeps() -> None:
    text = "\r\n".join(
        [
            "# 2026-01-01",  # 1 heading
            "",  # 2 blank
            "[08:00] first",  # 3
            "   ",  # 4 whitespace only
            "[25:00] x",  # 5 bad time
            "[08:01] esc \x1b[0m",  # 6 control
            "[08:02] " + "x" * 40,  # 7 too long
            "## section",  # 8 heading
            "[08:03] [fact key=k] last",  # 9
            "",
        ]
    )
    lines, skipped = parse_diary("diary/2026-01-01.md", text, 40)
    assert lines == [(3, parse_line("[08:00] first")), (9, parse_line("[08:03] [fact key=k] last"))]
    assert [(p.path, p.line, p.reason) for p in skipped] == [
        ("diary/2026-01-01.md", 5, "bad_line"),
        ("diary/2026-01-01.md", 6, "control_char"),
        ("diary/2026-01-01.md", 7, "line_too_long"),
    ]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("[12:00] bell\x07", "control_char"),
        ("[12:00] del\x7f", "control_char"),
        ("[12:00] c1\x85", "control_char"),
        ("[12:00] lone\rcr", "control_char"),
        ("[12:00] vt\x0b", "control_char"),
        ("[12:00] x\r\r", "control_char"),
        (" # indented heading", "bad_line"),
        ("\ufeff[12:00] a second BOM", "bad_line"),
        ("- [12:00] list item", "bad_line"),
    ],
)
def test_parse_diary_skip_reasons(raw: str, reason: str) -> None:
    lines, skipped = parse_diary("p", f"[11:00] ok\n{raw}\n[13:00] ok\n", 100)
    assert [n for n, _ in lines] == [1, 3]
    assert [(p.line, p.reason) for p in skipped] == [(2, reason)]


def test_line_cap_counts_bytes_not_characters_nor_the_cr() -> None:
    line = "[12:00] " + "乌" * 4  # 8 + 12 bytes, 12 characters
    assert parse_diary("p", line + "\r\n", 20) == ([(1, Line("12:00", "乌" * 4))], [])
    _, skipped = parse_diary("p", line + "\r\n", 19)
    assert [(p.line, p.reason) for p in skipped] == [(1, "line_too_long")]
    assert "20 bytes" in skipped[0].message


def test_problem_text() -> None:
    assert str(Problem("/r/diary/x.md", 7, "bad_line", "expected '[HH:MM] text'")) == (
        "/r/diary/x.md:7: bad_line: expected '[HH:MM] text'"
    )
    assert str(Problem("/r/diary/x.md", None, "nul_byte", "NUL")) == "/r/diary/x.md: nul_byte: NUL"


# --- clean_note ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cleaned"),
    [
        ("plain", "plain"),
        ("  padded  ", "padded"),
        ("a\nb", "a b"),
        ("a\r\nb", "a b"),
        ("a\tb", "a b"),
        ("a \n\n\t  b", "a b"),
        ("a\u2028b\u2029c", "a b c"),
        ("a\x85b", "a b"),
        ("a\x0bb\x0cc\x1cd", "a b c d"),
        ("a\u3000b", "a b"),
        ("我最喜欢的饮料是乌龙茶", "我最喜欢的饮料是乌龙茶"),
        ("[fact err] x", "[fact err] x"),
        ("emoji 🚀", "emoji 🚀"),
    ],
)
def test_clean_note_folds(text: str, cleaned: str) -> None:
    assert clean_note(text, 100) == cleaned


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("a\x00b", "nul_byte"),
        ("\x00", "nul_byte"),
        ("a\x1b[31mb", "control_char"),
        ("bell\x07", "control_char"),
        ("del\x7f", "control_char"),
        ("c1\x9b", "control_char"),
        ("", "empty"),
        (" \r\n\t ", "empty"),
        ("lone \ud800 surrogate", "invalid_text"),
        (b"bytes", "invalid_text"),
        (None, "invalid_text"),
        (42, "invalid_text"),
    ],
)
def test_clean_note_rejects(text: object, reason: str) -> None:
    with pytest.raises(Rejected) as caught:
        clean_note(text, 100)  # type: ignore[arg-type]
    assert caught.value.reason == reason


@pytest.mark.parametrize(
    ("text", "budget", "ok"),
    [
        ("abc", 3, True),
        ("abcd", 3, False),
        ("乌", 3, True),
        ("乌", 2, False),
        ("乌龙茶", 9, True),
        ("乌龙茶", 8, False),
        ("🚀", 4, True),
        ("🚀", 3, False),
        ("é", 1, False),
    ],
)
def test_clean_note_budget_is_in_bytes(text: str, budget: int, ok: bool) -> None:
    if ok:
        assert clean_note(text, budget) == text
        return
    with pytest.raises(Rejected, match=re.escape(f"{len(text.encode())} bytes")) as caught:
        clean_note(text, budget)
    assert caught.value.reason == "too_large"


@given(st.text())
def test_clean_note_output_is_one_diary_line(text: str) -> None:
    try:
        cleaned = clean_note(text, 8192)
    except Rejected as exc:
        assert exc.reason in {"nul_byte", "control_char", "empty", "invalid_text", "too_large"}
        return
    line = Line("12:00", cleaned)
    rendered = render_line(line)
    assert parse_diary("p", rendered + "\n", 16384) == ([(1, line)], [])


@given(st.lists(st.text(min_size=1), min_size=1, max_size=8), st.sampled_from(["\n", "\r\n"]))
def test_notes_written_as_a_file_read_back_in_order(texts: list[str], newline: str) -> None:
    notes = []
    for text in texts:
        try:
            notes.append(Line("12:00", clean_note(text, 8192)))
        except Rejected:
            continue
    text = newline.join(render_line(n) for n in notes) + newline
    assert parse_diary("p", text, 16384) == (list(enumerate(notes, start=1)), [])
