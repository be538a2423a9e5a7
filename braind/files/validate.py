"""Validation of untrusted memory files and names (docs/files.md, Validation)."""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from braind.errors import Rejected
from braind.model.entries import GrammarError, Line, parse_line
from braind.model.lines import Problem, conflicts, line_problem, printable

_DIARY_NAME = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.md", re.ASCII)
_SED_TEMP = re.compile(r"sed[A-Za-z0-9]{6}")


def is_artefact(name: str) -> bool:
    """Editor and tool leftovers that are ignored silently: swap, backup, lock and temp files."""
    return (
        name.startswith(".")
        or name == "4913"
        or name.endswith("~")
        or (name.startswith("#") and name.endswith("#"))
        or name.endswith((".swp", ".swx", ".swo", ".tmp"))
        or bool(_SED_TEMP.fullmatch(name))
    )


def diary_date(name: str) -> str | None:
    """The ISO date of a diary file name, or None when it is not a real calendar date."""
    match = _DIARY_NAME.fullmatch(name)
    if not match:
        return None
    try:
        day = dt.date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None
    return day.isoformat()


_BAD_NAME = frozenset({"Cc", "Cf", "Cs"})
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_BOM = "\ufeff"


@dataclass(frozen=True)
class FileData:
    """The validated text of a file with what reconcile compares: size, mtime, hash."""

    text: str
    size: int
    mtime_ns: int
    sha256: str


def classify(rel: Path) -> str:
    """What a path inside a root is: 'diary', 'soul', 'memory', 'logfile', 'ignored' (not memory) or 'artefact'."""
    parts = rel.parts
    if any(is_artefact(part) for part in parts):
        return "artefact"
    if len(parts) == 2 and parts[0] == "diary":
        return "diary"
    if len(parts) == 2 and parts[0] == "logs" and parts[1].endswith(".md"):
        return "logfile"
    return _TOP_FILES.get(rel.as_posix(), "ignored")


_TOP_FILES = {"SOUL.md": "soul", "MEMORY.md": "memory"}


def open_dir(root: Path, parts: tuple[str, ...] = (), create: bool = False) -> int:
    """Open root/parts as a directory fd, refusing a symlink at every layer."""
    for part in parts:
        _check_component(part, root)
    fd = _open_nofollow(str(root), _OPEN_DIR, None, str(root))
    try:
        for depth, part in enumerate(parts, start=1):
            if create:
                _mkdir_at(part, fd)
            new = _open_nofollow(part, _OPEN_DIR, fd, str(root.joinpath(*parts[:depth])))
            os.close(fd)
            fd = new
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_component(part: str, root: Path) -> None:
    """One plain name inside a root: no separator, no '.', '..', NUL or empty part, nothing unprintable."""
    if part in ("", ".", "..") or "/" in part or "\0" in part:
        raise Rejected("path_escape", f"{printable(part)!r} is not a plain name inside {root}")
    if any(unicodedata.category(c) in _BAD_NAME for c in part):
        message = f"the name {printable(part)!r} is not valid UTF-8 or holds a control or format character"
        raise Rejected("invalid_name", message)


def _mkdir_at(name: str, dir_fd: int) -> None:
    """Create a directory (0700) relative to dir_fd if it is not there yet; a full disk is an io_error."""
    try:
        os.mkdir(name, 0o700, dir_fd=dir_fd)
        os.fsync(dir_fd)
    except FileExistsError:
        return
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise Rejected("permission_denied", f"cannot create the directory {name}: {exc.strerror}") from None
        raise Rejected("io_error", f"cannot create the directory {name}: {exc.strerror}") from None


def _open_nofollow(name: str, flags: int, dir_fd: int | None, shown: str) -> int:
    """os.open that turns a symlink or a non-directory into a Rejected with a reason."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Rejected("symlink", f"{shown} is a symbolic link") from None
        if exc.errno == errno.ENOTDIR:
            if os.path.islink(shown):
                raise Rejected("symlink", f"{shown} is a symbolic link") from None
            raise Rejected("not_a_directory", f"{shown} is not a directory") from None
        if exc.errno == errno.ENOENT:
            raise Rejected("not_found", f"{shown} does not exist") from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise Rejected("permission_denied", f"{shown} cannot be opened: {exc.strerror}") from None
        raise


def read_file(root: Path, rel: Path, max_file_bytes: int) -> FileData:
    """Read and validate one memory file without following links or blocking on FIFOs."""
    _check_component(rel.name, root)
    try:
        return _read_validated(root, rel, max_file_bytes)
    except OSError as exc:  # an I/O error on one file is that file's problem, never the reader's
        raise Rejected("io_error", f"{root / rel} cannot be read: {exc.strerror or exc}") from None


def _read_validated(root: Path, rel: Path, max_file_bytes: int) -> FileData:
    """read_file once the name is checked; OSErrors other than the expected refusals propagate."""
    dir_fd = open_dir(root, rel.parts[:-1])
    try:
        fd = open_regular(rel.name, dir_fd, str(root / rel))
    finally:
        os.close(dir_fd)
    try:
        info = os.fstat(fd)
        data = _read_capped(fd, info.st_size, max_file_bytes, str(root / rel))
    finally:
        os.close(fd)
    return FileData(_decode(data, str(root / rel)), len(data), info.st_mtime_ns, hashlib.sha256(data).hexdigest())


def read_open(fd: int, shown: str, max_file_bytes: int) -> tuple[bytes, str]:
    """The bytes of an open memory file, from its start, and their validated text (a leading BOM dropped)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = _read_capped(fd, os.fstat(fd).st_size, max_file_bytes, shown)
    except OSError as exc:
        raise Rejected("io_error", f"{shown} cannot be read: {exc.strerror or exc}") from None
    return data, _decode(data, shown)


def open_regular(name: str, dir_fd: int, shown: str) -> int:
    """Open a file only if it is a regular file, checked before and after opening."""
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise Rejected("not_found", f"{shown} does not exist") from None
    if stat.S_ISLNK(before.st_mode):
        raise Rejected("symlink", f"{shown} is a symbolic link")
    if not stat.S_ISREG(before.st_mode):
        raise Rejected("not_regular", f"{shown} is not a regular file")
    fd = _open_nofollow(name, _OPEN_FILE, dir_fd, shown)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Rejected("not_regular", f"{shown} is not a regular file")
    return fd


def _read_capped(fd: int, size: int, cap: int, shown: str) -> bytes:
    """Read at most cap bytes; a file that is or grows over the cap is refused."""
    if size > cap:
        raise Rejected("too_large", f"{shown} is {size} bytes, over files.max_file_bytes={cap}")
    chunks: list[bytes] = []
    total = 0
    while total <= cap:
        chunk = os.read(fd, min(1 << 20, cap + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > cap:
        raise Rejected("too_large", f"{shown} grew over files.max_file_bytes={cap} while being read")
    return b"".join(chunks)


def _decode(data: bytes, shown: str) -> str:
    """Strict UTF-8 with no NUL bytes; a leading BOM is dropped."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise Rejected("nul_byte", f"{shown}: NUL byte at line {_line_of(data, nul)}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Rejected("invalid_utf8", f"{shown}: invalid UTF-8 at line {_line_of(data, exc.start)}") from None
    return text[1:] if text.startswith(_BOM) else text


def _line_of(data: bytes, offset: int) -> int:
    """The 1-based line number of a byte offset, for messages."""
    return data.count(b"\n", 0, offset) + 1


def parse_diary(path: str, text: str, max_line_bytes: int) -> tuple[list[tuple[int, Line]], list[Problem]]:
    """Parse a diary file into good lines and skipped ones; headings and blanks are allowed."""
    good: list[tuple[int, Line]] = []
    raws = text.split("\n")
    found = conflicts(raws)
    skipped: list[Problem] = found.problems(path)
    hidden = found.hidden()
    for number, raw in enumerate(raws, start=1):
        raw = raw.removesuffix("\r")
        if not raw.strip() or raw.startswith("#") or number - 1 in hidden:
            continue
        problem = line_problem(raw, max_line_bytes)
        if problem is None:
            try:
                good.append((number, parse_line(raw)))
                continue
            except GrammarError as exc:
                problem = ("bad_line", str(exc))
        skipped.append(Problem(path, number, *_torn(problem, number == len(raws))))
    return good, sorted(skipped, key=lambda p: p.line or 0)


def _torn(problem: tuple[str, str], unterminated: bool) -> tuple[str, str]:
    """A bad last line with no newline was most likely cut short by a crash mid-write: say so."""
    if not unterminated:
        return problem
    return "torn_line", f"the last line has no newline and does not parse ({problem[1]}); probably cut short"


def clean_note(text: str, max_bytes: int) -> str:
    """Check text for a diary line: whitespace folded, no control characters, within budget."""
    if not isinstance(text, str):
        raise Rejected("invalid_text", "text must be a string")
    if "\0" in text:
        raise Rejected("nul_byte", "text contains a NUL byte")
    folded = " ".join(text.replace("\r\n", "\n").split())
    if any(unicodedata.category(c) == "Cc" for c in folded):
        raise Rejected("control_char", "text contains a control character")
    if not folded:
        raise Rejected("empty", "text is empty")
    if any(unicodedata.category(c) == "Cs" for c in folded):
        raise Rejected("invalid_text", "text contains a lone surrogate, which is not valid UTF-8")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise Rejected("too_large", f"text is {size} bytes, over note.max_bytes={max_bytes}")
    return folded
