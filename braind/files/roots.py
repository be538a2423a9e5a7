"""Roots on disk: a project's root found, a root created on first write, its identity."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from braind.errors import InvalidParams, Rejected
from braind.model.roots import PROJECT_SUBDIR, Root


def project_root(project: str | Path) -> Root:
    """The root of a project named by an absolute path to its directory."""
    if not isinstance(project, str | Path) or not os.path.isabs(project):
        raise InvalidParams("path_escape", f"project must be an absolute path, got {project!r}")
    if "\0" in str(project):  # names no directory; normalising it would redirect the write elsewhere
        raise InvalidParams("path_escape", f"project path holds a NUL byte: {project!r}")
    base = Path(os.path.normpath(project))
    if not base.is_dir():
        raise InvalidParams("not_found", f"project directory {base} does not exist")
    return Root(base.joinpath(*PROJECT_SUBDIR), "project", base)


def ensure_root(root: Root) -> bool:
    """Create a root (0700) on first write, returning True then; refuse a symlink or a non-directory."""
    created = False
    try:
        info = os.lstat(root.path)
    except FileNotFoundError:
        root.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info, created = os.lstat(root.path), True
    if stat.S_ISLNK(info.st_mode):
        raise Rejected("symlink", f"memory root {root.path} is a symbolic link")
    if not stat.S_ISDIR(info.st_mode):
        raise Rejected("not_a_directory", f"memory root {root.path} is not a directory")
    return created


def identity(path: Path) -> str:
    """Device and inode of a root, to notice it being replaced; empty when missing."""
    try:
        info = os.lstat(path)
    except OSError:
        return ""
    return f"{info.st_dev}:{info.st_ino}"
