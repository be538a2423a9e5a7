"""A file as read and the steps on inodes and names that a compare-and-exchange is made of."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from braind.errors import BraindError
from braind.files.durable import (
    OLD,
    temp_name,
)

log = logging.getLogger(__name__)


BACKUPS = (".braind", "bak")


ATTEMPTS = 8


CARRIES = 16  # appends carried into one rewrite before it starts over


_OPEN_APPEND = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class Again(Exception):
    """The file changed in a way that cannot be carried over: read it again and redo the change."""


@dataclass(frozen=True)
class Target:
    """A memory file: its root, its path inside the root, and both joined (for messages and keys)."""

    root: Path
    rel: Path

    @property
    def path(self) -> Path:
        """The file's full path."""
        return self.root / self.rel

    @property
    def name(self) -> str:
        """The file's name in its directory."""
        return self.rel.name

    def backups(self) -> tuple[str, ...]:
        """The parts of the directory its .bak lives in, below the root."""
        return (*BACKUPS, *self.rel.parts[:-1])


@dataclass
class Snapshot:
    """A file as read: an open descriptor on its inode, the inode's identity, its bytes and text."""

    fd: int
    info: os.stat_result
    data: bytes
    text: str

    @property
    def identity(self) -> tuple[int, int]:
        """Device and inode."""
        return (self.info.st_dev, self.info.st_ino)


def grown(fd: int, known: bytes) -> bytes | None:
    """What an open file gained at its end since it held `known` (b"" for nothing); None if it changed otherwise."""
    size = os.fstat(fd).st_size
    if size < len(known) or os.pread(fd, len(known), 0) != known:
        return None
    return os.pread(fd, size - len(known), len(known)) if size > len(known) else b""


def in_flux(info: os.stat_result, size: int, known_size: int | None, quiet_s: float, patience_s: float) -> bool:
    """An editor's truncate-then-write looks under way: shrunk within the quiet window, or emptied within patience."""
    age = time.time() - info.st_ctime_ns / 1e9
    if size == 0 and known_size and age < patience_s:
        return True  # a file braind knew with text is empty: its editor may be slow to write the rest
    return age < quiet_s and (size == 0 or (known_size is not None and size < known_size))


def carry_into(
    snap: Snapshot, new_fd: int, new: bytes, target: Target, base: bytes | None = None
) -> tuple[bytes, bytes]:
    """Compare the file with what was read (or compared last); what was appended meanwhile goes into the temp file."""
    base = snap.data if base is None else base
    for _ in range(CARRIES):
        extra = grown(snap.fd, base)
        if extra is None:
            raise Again
        if not extra:
            return base, new
        tail = b"\n" + extra if base.endswith(b"\n") and new and not new.endswith(b"\n") else extra
        try:
            os.pwrite(new_fd, tail, len(new))
            os.fsync(new_fd)
        except OSError as exc:
            raise BraindError("io_error", f"cannot write beside {target.path}: {exc.strerror}") from None
        base, new = base + extra, new + tail
    raise Again


def read_name(dir_fd: int, name: str) -> bytes:
    """The bytes a name in a directory leads to (no links followed)."""
    fd = open_name(dir_fd, name)
    try:
        return os.pread(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)


def open_name(dir_fd: int, name: str) -> int:
    """A read-only descriptor on what a name leads to (no links followed)."""
    return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)


def open_append(dir_fd: int, name: str, snap: Snapshot) -> int:
    """Open the file that was read for appending; Again when the name leads elsewhere now."""
    try:
        fd = os.open(name, _OPEN_APPEND, dir_fd=dir_fd)
    except OSError:
        raise Again from None
    info = os.fstat(fd)
    if (info.st_dev, info.st_ino) != snap.identity:
        os.close(fd)
        raise Again
    return fd


def link_old(dir_fd: int, bak_fd: int, name: str, snap: Snapshot) -> str:
    """Hard-link the file's inode beside its backup before the swap; Again if the name leads elsewhere now."""
    old = temp_name(name, OLD)
    try:
        os.link(name, old, src_dir_fd=dir_fd, dst_dir_fd=bak_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise Again from None
    except OSError as exc:
        raise BraindError("io_error", f"cannot keep the previous version of {name}: {exc.strerror}") from None
    if not same_inode(bak_fd, old, snap):
        unlink_quietly(bak_fd, old)
        raise Again
    return old


def identity(fd: int) -> tuple[int, int]:
    """Device and inode of an open file."""
    info = os.fstat(fd)
    return (info.st_dev, info.st_ino)


def identity_at(dir_fd: int, name: str) -> tuple[int, int] | None:
    """Device and inode a name leads to, None when it leads nowhere."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def same_inode(dir_fd: int, name: str, snap: Snapshot) -> bool:
    """True when a name leads to the inode that was read."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return (info.st_dev, info.st_ino) == snap.identity


def fsync_dir(dir_fd: int, target: Target) -> None:
    """Make the directory's new entries durable; a failure fails the request and says the file was changed."""
    try:
        os.fsync(dir_fd)
    except OSError as exc:
        raise BraindError(
            "io_error", f"{target.path} was changed but its directory could not be synced ({exc.strerror}): check it"
        ) from None


def unlink_quietly(dir_fd: int, name: str) -> None:
    """Remove a name if it is there."""
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)


def times(data: bytes, chunk: bytes) -> int:
    """How often a chunk of whole lines is in a text as whole lines (`x 7` is not in `x 17`)."""
    lines = chunk.lstrip(b"\r\n")
    return (b"\n" + data).count(b"\n" + lines) if lines else 0


def holds_in_order(data: bytes, version: bytes) -> bool:
    """True when a text holds every line of a version in order: it was saved from that version, lines added."""
    lines = iter(data.split(b"\n"))
    return all(line in lines for line in version.split(b"\n"))


def saved_from(data: bytes, read: bytes, shown: bytes) -> bool:
    """True when a text was saved from a version braind showed (made from `read`), not from `read`: the change is in."""
    return holds_in_order(data, shown) and not (holds_in_order(read, shown) and holds_in_order(data, read))


def trailing_new(data: bytes, current: bytes) -> bytes:
    """The lines a text ends with that another text lacks (walking back to the first line both hold)."""
    have = set(current.split(b"\n"))
    lines = data.rstrip(b"\n").split(b"\n")
    start = len(lines)
    while start > 0 and lines[start - 1] not in have and lines[start - 1].strip():
        start -= 1
    return b"".join(line + b"\n" for line in lines[start:])


def with_tail(data: bytes, tail: bytes) -> bytes:
    """Bytes with more appended, on a line of their own."""
    if not tail:
        return data
    return data + (b"\n" if data and not data.endswith(b"\n") else b"") + tail


def self_contained(data: bytes) -> bool:
    """An appended unit that brings its own `##` heading belongs wherever it lands."""
    return data.lstrip(b"\r\n").startswith(b"## ")


def heading(line: bytes) -> bool:
    """A `#` or `##` heading line (up to three spaces of indentation): it starts another unit."""
    stripped = line.rstrip(b"\r")
    body = stripped.lstrip(b" ")
    if len(stripped) - len(body) > 3:
        return False
    return body in (b"#", b"##") or body.startswith((b"# ", b"## ", b"#\t", b"##\t"))


def unchanged(text: str | None) -> tuple[str, None]:
    """The change that leaves a file as it is: a rewrite only to put carried-over bytes in."""
    return text or "", None
