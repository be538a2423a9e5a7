"""The layered files on disk: SOUL.md, MEMORY.md and logs/<name>.md, read validated, written durably.

Every change goes through `braind.files.rewrite`: an addition at the end of a file is one O_APPEND
write, anything else a compare-and-exchange rewrite that never loses what an editor writes
meanwhile. Every rewrite keeps the previous version as `<root>/.braind/bak/<relative path>.bak`
(one per file).
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
from braind.files.durable import create_file
from braind.files.rewrite.inodes import BACKUPS, Target
from braind.files.rewrite.rewriter import Rewriter
from braind.files.validate import FileData, is_artefact, open_dir, read_file
from braind.model.layered import LogMeta, parse_logfile
from braind.model.roots import Root

SOUL = Path("SOUL.md")
MEMORY = Path("MEMORY.md")
LOGS = "logs"
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


def edit(
    rewriter: Rewriter,
    root: Root,
    rel: Path,
    change: Callable[[str | None], tuple[str, T]],
    known_size: int | None = None,
    append: bool = False,
) -> tuple[str, T]:
    """Apply change(old text or None) to a file safely: appended when it only grows and `append`, else rewritten."""
    return rewriter.edit(Target(root.path, rel), change, known_size, append)


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
