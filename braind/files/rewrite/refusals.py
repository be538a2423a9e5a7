"""Files braind does not rewrite: git conflict markers, hard links it did not make."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from braind.errors import BraindError, Rejected
from braind.files.durable import (
    OLD,
    leftover,
)
from braind.files.rewrite.inodes import Snapshot, Target, same_inode
from braind.files.validate import open_dir
from braind.model.lines import conflicts, printable

log = logging.getLogger(__name__)


def refuse_conflicts(text: str, path: Path) -> None:
    """A file with git conflict markers is not written until a person resolves the merge."""
    found = conflicts(text.split("\n"))
    if found.markers:
        line, shown = found.markers[0][0] + 1, printable(str(path))
        raise Rejected(
            "conflict_markers",
            f"{shown}:{line}: git merge conflict markers; resolve the merge in an editor first "
            "(braind does not change a file in this state)",
            path=shown,
            line=line,
        )


def refuse_hard_links(target: Target, snap: Snapshot) -> None:
    """A rewrite gives the file a new inode, which would split one hard-linked elsewhere: refused, and logged."""
    links = snap.info.st_nlink - _our_links(target, snap)
    if links > 1:
        shown = printable(str(target.path))
        log.warning("refused to rewrite %s: it has %d hard links, which a rewrite would split", shown, links)
        raise Rejected(
            "hard_link",
            f"{shown} has {links} hard links; a rewrite would give it a new inode and split them. Edit it in an "
            "editor, or remove the other links (appends still work)",
            path=shown,
            links=links,
        )


def _our_links(target: Target, snap: Snapshot) -> int:
    """How many of a file's links are braind's own: its .bak, or a backup link a crash left behind."""
    try:
        bak_fd = open_dir(target.root, target.backups())
    except (OSError, BraindError):
        return 0
    try:
        names = [n for n in os.listdir(bak_fd) if n == f"{target.name}.bak" or leftover(n) == (target.name, OLD)]
        return sum(same_inode(bak_fd, name, snap) for name in names)
    finally:
        os.close(bak_fd)
