"""The layered files on disk: SOUL.md, MEMORY.md and logs/<name>.md, read validated, written durably.

Rewrites are compare-and-swap: a file is replaced only if it is still the one
that was read (same size and mtime), so an editor's save in between is never
lost; the edit is simply redone on the new text. Every rewrite keeps the
previous version as `<root>/.braind/bak/<relative path>.bak` (one per file).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from braind.config import FilesConfig
from braind.errors import BraindError, Exists, Rejected
from braind.fsutil import append_line, create_file, replace_file
from braind.layered import LogMeta, parse_logfile
from braind.roots import Root
from braind.validate import FileData, is_artefact, open_dir, read_file

SOUL = Path("SOUL.md")
MEMORY = Path("MEMORY.md")
LOGS = "logs"
BACKUPS = (".braind", "bak")
_ATTEMPTS = 5
T = TypeVar("T")


@dataclass(frozen=True)
class Logfile:
    """One logfile as the catalogue and the listing show it."""

    name: str
    type: str
    description: str
    path: str
    mtime_ns: int

    def line(self) -> str:
        """The catalogue line: `- name [type] description`."""
        return f"- {self.name} [{self.type}] {self.description}"

    def as_dict(self) -> dict[str, str]:
        """The logfile as the wire carries it."""
        modified = dt.datetime.fromtimestamp(self.mtime_ns / 1e9).astimezone().isoformat(timespec="seconds")
        return {
            "name": self.name,
            "type": self.type,
            "description": self.description,
            "path": self.path,
            "modified": modified,
        }


class _Changed(Exception):
    """The file changed between reading and replacing it; the edit is redone."""


def logfile_rel(name: str) -> Path:
    """Where a logfile lives inside a root."""
    return Path(LOGS, f"{name}.md")


def backup_path(root: Root, rel: Path) -> Path:
    """Where the previous version of a rewritten file is kept."""
    return root.path.joinpath(*BACKUPS, rel.parent, rel.name + ".bak")


def read(root: Root, rel: Path, files: FilesConfig) -> FileData | None:
    """A validated memory file, or None when it (or its root) does not exist; other refusals raise."""
    try:
        return read_file(root.path, rel, files.max_file_bytes)
    except Rejected as exc:
        if exc.reason == "not_found":
            return None
        raise


def read_quietly(root: Root, rel: Path, files: FilesConfig) -> FileData | None:
    """A memory file for injection: a refused file is left out (status lists it) rather than failing."""
    try:
        return read(root, rel, files)
    except BraindError:
        return None


def logfiles(root: Root, files: FilesConfig) -> list[Logfile]:
    """The readable logfiles of a root, most recently changed first, then by name."""
    found = [lf for name in _logfile_names(root) if (lf := _logfile(root, name, files)) is not None]
    return sorted(found, key=lambda lf: (-lf.mtime_ns, lf.name))


def _logfile_names(root: Root) -> list[str]:
    """File names of the *.md regular files in logs/ (none when it is missing or refused)."""
    try:
        fd = open_dir(root.path, (LOGS,))
    except BraindError:
        return []
    try:
        with os.scandir(fd) as it:
            return [e.name for e in it if _is_logfile(e.name) and e.is_file(follow_symlinks=False)]
    finally:
        os.close(fd)


def _is_logfile(name: str) -> bool:
    """A logfile's file name: *.md and not an editor artefact."""
    return name.endswith(".md") and len(name) > 3 and not is_artefact(name)


def _logfile(root: Root, name: str, files: FilesConfig) -> Logfile | None:
    """One logfile's catalogue data; None when the file is refused (status reports why)."""
    rel = Path(LOGS, name)
    try:
        data = read_file(root.path, rel, files.max_file_bytes)
    except BraindError:
        return None
    meta = parse_logfile(data.text, files.max_line_bytes).meta or LogMeta()
    return Logfile(name[:-3], meta.type, meta.description, str(root.path / rel), data.mtime_ns)


def edit(root: Root, rel: Path, files: FilesConfig, change: Callable[[str | None], tuple[str, T]]) -> tuple[str, T]:
    """Read, change and atomically replace a file, redoing the change if the file moved under us."""
    for _ in range(_ATTEMPTS):
        before = read(root, rel, files)
        text, info = change(None if before is None else before.text)
        try:
            _rewrite(root, rel, text, before)
        except _Changed:
            continue
        return text, info
    raise BraindError("busy", f"{root.path / rel} keeps changing while being edited; try again")


def _rewrite(root: Root, rel: Path, text: str, before: FileData | None) -> None:
    """Create the file, or replace it keeping a .bak, if it is still as it was read."""
    dir_fd = open_dir(root.path, rel.parts[:-1], create=True)
    try:
        if not _unchanged(dir_fd, rel.name, before):
            raise _Changed
        if before is None:
            _create_or_changed(dir_fd, rel.name, text)
            return
        bak_fd = open_dir(root.path, (*BACKUPS, *rel.parts[:-1]), create=True)
        try:
            replace_file(dir_fd, rel.name, text.encode("utf-8"), keep_backup=True, backup_fd=bak_fd)
        finally:
            os.close(bak_fd)
    finally:
        os.close(dir_fd)


def _create_or_changed(dir_fd: int, name: str, text: str) -> None:
    """Create a file that was missing when read; if it appeared meanwhile, redo the edit."""
    try:
        create_file(dir_fd, name, text.encode("utf-8"))
    except FileExistsError:
        raise _Changed from None


def _unchanged(dir_fd: int, name: str, before: FileData | None) -> bool:
    """True when the file is still missing, or still has the size and mtime it was read with."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return before is None
    return before is not None and (info.st_size, info.st_mtime_ns) == (before.size, before.mtime_ns)


def append(root: Root, rel: Path, chunk: str) -> None:
    """Append to an existing file in one write (O_APPEND, fsync before returning)."""
    dir_fd = open_dir(root.path, rel.parts[:-1])
    try:
        append_line(dir_fd, rel.name, chunk)
    finally:
        os.close(dir_fd)


def create(root: Root, rel: Path, text: str) -> None:
    """Create a new file whole, never overwriting one; Exists when it is there."""
    dir_fd = open_dir(root.path, rel.parts[:-1], create=True)
    try:
        create_file(dir_fd, rel.name, text.encode("utf-8"))
    except FileExistsError:
        raise Exists(
            f"{root.path / rel} already exists: add entries with memory_write_logfile, or remove the file by hand "
            "to start over (read it first with memory_recall)",
            path=str(root.path / rel),
        ) from None
    finally:
        os.close(dir_fd)
