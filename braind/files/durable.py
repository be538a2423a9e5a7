"""Durable file writes: one-write appends and atomic replaces, fsynced before replying.

Every temp file braind makes is named `.<name>.braind-tmp-<pid>-<n>` beside the file it stands
for (unique per write, so two writers never share one), and the hard link that keeps a file's
previous version while it is being replaced is `.<name>.braind-old-<pid>-<n>` in the backup
directory: `leftover` recognises both (and the fixed names older versions used), so that a
daemon starting after a crash can clean them up.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import itertools
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from braind.errors import BraindError, Rejected

_SETTLE_S = 0.002  # how long a file that seems to end mid-line is given to finish a write in progress
_LOOKS = 5  # a file that keeps growing mid-line is not waited for longer than this many pauses
_APPEND = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
TEMP, OLD = "braind-tmp", "braind-old"
_LEFTOVER = re.compile(r"\.(?P<name>.+)\.(?P<kind>braind-tmp|braind-old|bak-tmp)(?:-\d+-\d+)?", re.DOTALL)
_COUNTER = itertools.count(1)
_RENAME_EXCHANGE = 2  # renameat2(2) flag: swap two names atomically


@dataclass(frozen=True)
class Appended:
    """Where one append landed: enough to take it back while nothing was written after it."""

    start: int
    data: bytes
    created: bool
    prior: tuple[int, int] = (-1, -1)  # the file's (size, mtime_ns) just before: what the index may already hold


def temp_name(name: str, kind: str = TEMP) -> str:
    """A dot-name beside `name`, unique to this process and write, that `leftover` recognises."""
    return f".{name}.{kind}-{os.getpid()}-{next(_COUNTER)}"


def leftover(name: str) -> tuple[str, str] | None:
    """(file it stood for, kind) of a temp name braind makes (or made in older versions), else None."""
    match = _LEFTOVER.fullmatch(name)
    return (match["name"], match["kind"]) if match else None


def append_line(dir_fd: int, name: str, line: str) -> Appended:
    """Append one line in one write(), fsync it (and the directory on create); say where it landed."""
    return append_bytes(dir_fd, name, line.encode("utf-8") + b"\n")


def append_bytes(dir_fd: int, name: str, text: bytes) -> Appended:
    """Append bytes in one write() after a newline if the file lacks one, fsync, and say where they landed."""
    fd, created = _open_append(dir_fd, name)
    try:
        info = os.fstat(fd)
        size, prior = info.st_size, (info.st_size, info.st_mtime_ns)
        data = _separator(fd, size).encode("utf-8") + text
        try:
            start = append_once(fd, data, name)
        except BraindError:
            if created:
                _unlink_quietly(dir_fd, name)
            raise
    finally:
        os.close(fd)
    if created:
        try:
            _fsync(dir_fd, name)
        except BraindError:
            _unlink_quietly(dir_fd, name)
            raise
    return Appended(start, data, created, prior)


def append_once(fd: int, data: bytes, name: str) -> int:
    """One write() to an O_APPEND descriptor and an fsync; on failure our bytes are cut off again. Where they landed."""
    size = os.fstat(fd).st_size
    try:
        _write_once(fd, data, name)
        _fsync(fd, name)
    except BraindError:
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_size <= size + len(data):  # nobody appended after us
                os.ftruncate(fd, size)
        raise
    return os.lseek(fd, 0, os.SEEK_CUR) - len(data)


def retract(dir_fd: int, name: str, appended: Appended) -> bool:
    """Take an append back while it is still the end of the file; False when something came after it."""
    try:
        fd = os.open(name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        end = appended.start + len(appended.data)
        if os.fstat(fd).st_size != end or os.pread(fd, len(appended.data), appended.start) != appended.data:
            return False
        os.ftruncate(fd, appended.start)
        _fsync(fd, name)
    finally:
        os.close(fd)
    if appended.created and appended.start == 0:
        _unlink_quietly(dir_fd, name)
        _fsync(dir_fd, name)
    return True


def _fsync(fd: int, name: str) -> None:
    """fsync once; a failure fails the request and is never retried on this descriptor (its error is consumed)."""
    try:
        os.fsync(fd)
    except OSError as exc:
        raise BraindError("io_error", f"cannot sync {name}: {exc.strerror}") from None


def _unlink_quietly(dir_fd: int, name: str) -> None:
    """Best-effort removal while already failing."""
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)


def _open_append(dir_fd: int, name: str) -> tuple[int, bool]:
    """Open for appending without following links; create with 0600 if missing."""
    for _ in range(3):
        try:
            return _checked(os.open(name, _APPEND, dir_fd=dir_fd), name), False
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _refusal(exc, name) from None
        try:
            return os.open(name, _APPEND | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd), True
        except FileExistsError:
            continue
    raise BraindError("busy", f"{name} keeps appearing and disappearing; try again")


def _checked(fd: int, name: str) -> int:
    """Refuse to write into anything but a regular file."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Rejected("not_regular", f"{name} is not a regular file")
    return fd


def _refusal(exc: OSError, name: str) -> BraindError:
    """Translate an open() failure into a typed refusal."""
    if exc.errno == errno.ELOOP:
        return Rejected("symlink", f"{name} is a symbolic link")
    return BraindError("io_error", f"cannot open {name}: {exc.strerror}")


def _separator(fd: int, size: int) -> str:
    """A newline when the file does not end with one (an editor saved without it).

    A last byte that is not a newline may also be another process's append seen half done: a
    write that crosses a page becomes visible a page at a time. Such a file grows within a
    moment, so it is looked at again; one that stays as it is, or keeps growing mid-line, gets the newline.
    """
    for _ in range(_LOOKS):
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return ""
        time.sleep(_SETTLE_S)
        grown = os.fstat(fd).st_size
        if grown == size:
            break
        size = grown
    return "\n"


def _write_once(fd: int, data: bytes, name: str) -> None:
    """One write() call; a short write or an error fails the request, never retried."""
    try:
        written = os.write(fd, data)
    except OSError as exc:
        raise BraindError("io_error", f"cannot write {name}: {exc.strerror}") from None
    if written != len(data):
        raise BraindError("io_error", f"short write to {name}: {written} of {len(data)} bytes")


def replace_file(dir_fd: int, name: str, data: bytes) -> None:
    """Atomically replace a file that nobody else writes: temp file, fsync, rename, fsync the directory."""
    tmp, fd = write_temp(dir_fd, name, data)
    os.close(fd)
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as exc:
        _unlink_quietly(dir_fd, tmp)
        raise BraindError("io_error", f"cannot replace {name}: {exc.strerror}") from None
    _fsync(dir_fd, name)


def create_file(dir_fd: int, name: str, data: bytes) -> None:
    """Create a file that must not exist, whole or not at all; FileExistsError when it is there."""
    tmp, fd = write_temp(dir_fd, name, data)
    os.close(fd)
    try:
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as exc:
        raise BraindError("io_error", f"cannot create {name}: {exc.strerror}") from None
    finally:
        os.unlink(tmp, dir_fd=dir_fd)
    try:
        _fsync(dir_fd, name)
    except BraindError:
        _unlink_quietly(dir_fd, name)  # not durable: nothing was created
        raise


def write_temp(dir_fd: int, name: str, data: bytes) -> tuple[str, int]:
    """Write data to a fresh temp file beside name and fsync it; return its name and an open descriptor."""
    tmp = temp_name(name)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        raise BraindError("io_error", f"cannot create a temp file beside {name}: {exc.strerror}") from None
    try:
        _write_all(fd, data, name)
        _fsync(fd, name)
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    return tmp, fd


def exchange(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> bool:
    """Swap two names atomically (renameat2 RENAME_EXCHANGE); False where the kernel or filesystem cannot."""
    call = _renameat2()
    if call is None:
        return False
    if call(src_dir_fd, os.fsencode(src), dst_dir_fd, os.fsencode(dst), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise BraindError("io_error", f"cannot swap {src} and {dst}: {os.strerror(code)}")


@functools.cache
def _renameat2() -> Any:
    """The C library's renameat2, the one call Python's os module lacks; None without it (glibc < 2.28)."""
    func = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if func is not None:
        func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        func.restype = ctypes.c_int
    return func


def _write_all(fd: int, data: bytes, name: str) -> None:
    """Write a whole buffer to a fresh temp file."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except OSError as exc:
            raise BraindError("io_error", f"cannot write {name}: {exc.strerror}") from None


def lkind(path: Path) -> str:
    """What is at a path, without following a symlink: missing, file, dir, link or other."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"
