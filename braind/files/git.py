"""`braind git-init`: make a memory root ready to be kept in git and synced between machines.

Opt-in only: braind never writes these files to a root unasked. The root
becomes a repository unless it already lies inside one (a project's memory
lives in the project's repository). `.gitattributes` gives the append-only
files git's built-in `union` merge, so lines appended on two machines are both
kept instead of conflicting; `.gitignore` keeps what belongs to one machine
(backups, temp files, editor swap files) out of the repository. Lines already
there are kept; only missing ones are appended.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from braind.errors import BraindError
from braind.files.roots import ensure_root
from braind.model.roots import user_root

ATTRIBUTES = (
    "# braind: append-only memory merges by keeping the lines of both sides",
    "diary/*.md merge=union",
    ".braind/state.log merge=union",
    ".braind/uses.log merge=union",
    ".braind/turns.log merge=union",
    ".braind/compact.log merge=union",
)
IGNORES = (
    "# braind: what belongs to one machine",
    ".braind/bak/",
    "*.braind-tmp",
    "*.bak-tmp",
    "*.lock",
    ".*.swp",
    ".*.swo",
    "*~",
    ".#*",
    "\\#*#",
    "4913",
    ".goutputstream-*",
    "*.tmp",
    "sed??????",
)


def git_init(path: Path) -> dict[str, Any]:
    """Make the root a repository (unless it is inside one) and add the attributes and ignores it lacks."""
    git = shutil.which("git")
    if git is None:
        raise BraindError("missing_tool", "git is not installed; install it, then run braind git-init again")
    ensure_root(user_root(path))
    top = toplevel(git, path)
    initialised = top is None
    if initialised:
        _git(git, "init", "--quiet", str(path))
        top = path
    return {
        "root": str(path),
        "repository": str(top),
        "initialised": initialised,
        "gitattributes": add_lines(path / ".gitattributes", ATTRIBUTES),
        "gitignore": add_lines(path / ".gitignore", IGNORES),
    }


def toplevel(git: str, path: Path) -> Path | None:
    """The work tree that holds path, or None when it is in no repository."""
    done = subprocess.run(
        [git, "-C", str(path), "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False
    )
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def _git(git: str, *args: str) -> None:
    """Run one git command; its failure is an error naming what git said."""
    done = subprocess.run([git, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BraindError("git_failed", f"git {' '.join(args)}: {done.stderr.strip() or done.returncode}")


def add_lines(path: Path, lines: tuple[str, ...]) -> list[str]:
    """Append the lines a file does not have yet (one write, synced); the ones added."""
    try:
        before = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        before = ""
    have = set(before.splitlines())
    missing = [line for line in lines if line not in have and not line.startswith("#")]
    if not missing:
        return []
    comment = [lines[0]] if lines[0] not in have else []
    chunk = ("\n" if before and not before.endswith("\n") else "") + "\n".join([*comment, *missing]) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, chunk.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return missing
