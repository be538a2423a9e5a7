"""Durable file writes: one-write appends and atomic replaces, fsynced before replying."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from pathlib import Path

from braind.errors import BraindError, Rejected

_SETTLE_S = 0.002  # how long a file that seems to end mid-line is given to finish a write in progress
_LOOKS = 5  # a file that keeps growing mid-line is not waited for longer than this many pauses
_APPEND = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def append_line(dir_fd: int, name: str, line: str) -> bool:
    """Append one line in one write(), fsync it (and the directory on create); True if created."""
    fd, created = _open_append(dir_fd, name)
    try:
        size = os.fstat(fd).st_size
        data = (_separator(fd, size) + line + "\n").encode("utf-8")
        try:
            _write_once(fd, data, name)
            _fsync(fd, name)
        except BraindError:
            _undo_append(fd, size + len(data), size, dir_fd, name if created else None)
            raise
    finally:
        os.close(fd)
    if created:
        try:
            _fsync(dir_fd, name)
        except BraindError:
            _unlink_quietly(dir_fd, name)
            raise
    return created


def _fsync(fd: int, name: str) -> None:
    """fsync once; a failure fails the request and is never retried on this descriptor (its error is consumed)."""
    try:
        os.fsync(fd)
    except OSError as exc:
        raise BraindError("io_error", f"cannot sync {name}: {exc.strerror}") from None


def _undo_append(fd: int, most: int, size: int, dir_fd: int, created: str | None) -> None:
    """Leave the file as it was after a failed append: cut our bytes off, or remove the file we created."""
    with contextlib.suppress(OSError):
        if os.fstat(fd).st_size <= most:  # nobody appended after us
            os.ftruncate(fd, size)
    if created is not None:
        _unlink_quietly(dir_fd, created)


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


def replace_file(dir_fd: int, name: str, data: bytes, keep_backup: bool = True, backup_fd: int | None = None) -> None:
    """Atomically replace a file: temp file, fsync, optional one .bak (in backup_fd's directory), rename, fsync."""
    tmp = _write_temp(dir_fd, name, data)
    if keep_backup:
        _backup(dir_fd, name, dir_fd if backup_fd is None else backup_fd)
    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    _fsync(dir_fd, name)


def create_file(dir_fd: int, name: str, data: bytes) -> None:
    """Create a file that must not exist, whole or not at all; FileExistsError when it is there."""
    tmp = _write_temp(dir_fd, name, data)
    try:
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    finally:
        os.unlink(tmp, dir_fd=dir_fd)
    _fsync(dir_fd, name)


def _write_temp(dir_fd: int, name: str, data: bytes) -> str:
    """Write data to a fresh dot-named temp file beside name and fsync it; return the temp name."""
    tmp = f".{name}.braind-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        _write_all(fd, data, name)
        _fsync(fd, name)
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(fd)
    return tmp


def _write_all(fd: int, data: bytes, name: str) -> None:
    """Write a whole buffer to a fresh temp file."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except OSError as exc:
            raise BraindError("io_error", f"cannot write {name}: {exc.strerror}") from None


def _backup(dir_fd: int, name: str, bak_fd: int) -> None:
    """Keep one previous generation as name.bak in bak_fd's directory: a hard link, swapped in atomically."""
    bak, tmp = f"{name}.bak", f".{name}.bak-tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=bak_fd)
    try:
        os.link(name, tmp, src_dir_fd=dir_fd, dst_dir_fd=bak_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    os.replace(tmp, bak, src_dir_fd=bak_fd, dst_dir_fd=bak_fd)
    os.fsync(bak_fd)


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
