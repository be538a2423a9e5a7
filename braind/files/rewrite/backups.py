"""What braind keeps beside a file's backup: the .bak, the carry journal, kept copies; clean-up after a crash."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from braind.errors import BraindError
from braind.files.durable import (
    OLD,
    TEMP,
    create_file,
    leftover,
    replace_file,
)
from braind.files.rewrite.inodes import BACKUPS, Target, read_name, unlink_quietly
from braind.files.validate import open_dir
from braind.model.lines import printable

log = logging.getLogger(__name__)


CARRY = ".carry"  # bytes still to be carried into a file, beside its backup


def journal(target: Target, pending: bytes) -> None:
    """Keep (or, empty, remove) the bytes still to be carried into a file, durably, beside its backup."""
    bak_fd = open_dir(target.root, target.backups(), create=True)
    try:
        if pending:
            replace_file(bak_fd, target.name + CARRY, pending)
        else:
            unlink_quietly(bak_fd, target.name + CARRY)
            os.fsync(bak_fd)
    finally:
        os.close(bak_fd)


def read_journal(target: Target) -> bytes:
    """The bytes a crashed daemon was still carrying into a file (none when there is no journal)."""
    try:
        bak_fd = open_dir(target.root, target.backups())
    except (OSError, BraindError):
        return b""
    try:
        return read_name(bak_fd, target.name + CARRY)
    except OSError:
        return b""
    finally:
        os.close(bak_fd)


def backup_names(root: Path, *parts: str) -> list[str]:
    """The names in a directory of braind's backups (none when it is missing)."""
    try:
        fd = open_dir(root, (*BACKUPS, *parts))
    except (OSError, BraindError):
        return []
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def keep_copy(fd: int, target: Target, what: str) -> None:
    """Text another program wrote where braind cannot merge it: kept beside the backup, and said so."""
    keep_bytes(os.pread(fd, os.fstat(fd).st_size, 0), target, what)


def keep_bytes(data: bytes, target: Target, what: str) -> None:
    """Bytes braind could not put where they belong: kept beside the backup, and said so."""
    name = f"{target.name}.{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{time.monotonic_ns()}.kept"
    try:
        bak_fd = open_dir(target.root, target.backups(), create=True)
        try:
            create_file(bak_fd, name, data)
        finally:
            os.close(bak_fd)
    except (OSError, BraindError) as exc:
        log.error("%s %s, and that text could not be kept: %s", target.path, what, exc)
        return
    kept = target.root.joinpath(*target.backups(), name)
    log.warning("%s %s; that text is kept in %s: merge it by hand", target.path, what, kept)


def keep_backup(bak_fd: int, old: str, target: Target) -> None:
    """The old inode becomes `<name>.bak`; a failure here costs the backup, never the rewrite."""
    try:
        os.replace(old, f"{target.name}.bak", src_dir_fd=bak_fd, dst_dir_fd=bak_fd)
        os.fsync(bak_fd)
    except OSError as exc:
        log.warning("%s: the previous version could not be kept as its .bak: %s", target.path, exc.strerror)
        unlink_quietly(bak_fd, old)


def clean_leftovers(root: Path) -> list[str]:
    """Remove (or keep as the backup) the temp files a crashed braind left in a root; what was done, per file."""
    done: list[str] = []
    for parts in [(), ("diary",), ("logs",), (".braind",), BACKUPS, (*BACKUPS, "logs")]:
        try:
            dir_fd = open_dir(root, parts)
        except (OSError, BraindError):
            continue
        try:
            done += [what for name in sorted(os.listdir(dir_fd)) if (what := _clean(root, parts, dir_fd, name))]
        finally:
            os.close(dir_fd)
    return done


def _clean(root: Path, parts: tuple[str, ...], dir_fd: int, name: str) -> str | None:
    """One leftover: a backup link of a version no longer in place becomes the .bak; the others go."""
    found = leftover(name)
    if found is None:
        return None
    target, kind = found
    shown = printable(str(root.joinpath(*parts, name)))
    try:
        if kind == OLD and parts[:2] == BACKUPS and not _is_current(root.joinpath(*parts[2:], target), dir_fd, name):
            os.replace(name, f"{target}.bak", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return f"kept leftover {shown} as the backup {target}.bak"
        os.unlink(name, dir_fd=dir_fd)
    except OSError as exc:
        return f"could not clean up leftover {shown}: {exc.strerror}"
    return f"removed leftover {shown} ({'an unfinished write' if kind == TEMP else 'a link to the current version'})"


def _is_current(path: Path, dir_fd: int, name: str) -> bool:
    """True when a backup link is the very inode the file has now (its rewrite never happened)."""
    try:
        mine = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        now = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)
