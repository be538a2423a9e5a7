"""Late writes: bytes that reach an inode after it left a file's name go into the file's next version."""

from __future__ import annotations

import logging
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from braind.errors import BraindError, Rejected
from braind.files.rewrite.backups import CARRY, backup_names, journal, keep_bytes, keep_copy, read_journal
from braind.files.rewrite.inodes import (
    CARRIES,
    Snapshot,
    Target,
    grown,
    identity,
    identity_at,
    in_flux,
    read_name,
    times,
    trailing_new,
    unchanged,
)
from braind.files.validate import open_dir, open_regular, read_open
from braind.model.lines import printable

log = logging.getLogger(__name__)


_POLL_S = 0.002


_WATCHED = 16  # files whose earlier inodes are watched for late writes


_WATCHED_PER_FILE = 16


_TRACK_S = 5.0  # how long carried bytes are checked for: another program's save from an older read comes soon


T = TypeVar("T")


Change = Callable[[str | None], tuple[str, T]]


@dataclass
class Watched:
    """An inode that left a file's name, with the bytes it held when it left (later ones are late writes)."""

    target: Target
    fd: int
    seen: bytes
    other: bytes | None = None  # the version put back in its place: a save made into it may extend that one

    def added(self) -> bytes | None:
        """What was added to it since (b"" for nothing), against what it held or the version put back."""
        extra = grown(self.fd, self.seen)
        if extra is None and self.other is not None:
            extra = grown(self.fd, self.other)
            if extra is not None:
                self.seen, self.other = self.other, None
        return extra


class LateWrites(ABC):
    """What reaches a file's earlier inodes after braind replaced them, carried into its next version."""

    def __init__(self, quiet_s: float, max_wait_s: float, max_file_bytes: int) -> None:
        self.quiet_s = quiet_s
        self.max_wait_s = max_wait_s
        self.max_file_bytes = max_file_bytes
        self._sizes: dict[Path, int] = {}  # the size braind last read or wrote, per file
        self._watched: dict[Path, list[Watched]] = {}  # inodes that left a file's name, watched for late writes
        self._pending: dict[Path, list[bytes]] = {}  # what was written to such inodes, for the next version
        self._tracked: dict[Path, dict[bytes, tuple[float, int]]] = {}  # carried bytes: when, and how often again
        self._targets: dict[Path, Target] = {}  # the files watched or tracked

    def _settle(self, dir_fd: int, target: Target, known_size: int | None) -> None:
        """Wait (at most max_wait_s) while an editor is saving the file in place."""
        deadline = time.monotonic() + self.max_wait_s
        while True:
            try:
                info = os.stat(target.name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                return
            if not self._in_flux(info, info.st_size, known_size):
                return
            if time.monotonic() > deadline:
                shown = printable(str(target.path))
                raise BraindError("busy", f"{shown} is being saved by another program; nothing was changed, try again")
            time.sleep(_POLL_S)

    def _in_flux(self, info: os.stat_result, size: int, known_size: int | None) -> bool:
        """in_flux with this daemon's quiet window and patience."""
        return in_flux(info, size, known_size, self.quiet_s, self.max_wait_s)

    def _open(self, dir_fd: int, target: Target) -> Snapshot | None:
        """Open and read a file, keeping the descriptor; None when it does not exist."""
        shown = str(target.path)
        try:
            fd = open_regular(target.name, dir_fd, shown)
        except Rejected as exc:
            if exc.reason == "not_found":
                return None
            raise
        try:
            data, text = read_open(fd, shown, self.max_file_bytes)
            return Snapshot(fd, os.fstat(fd), data, text)
        except BaseException:
            os.close(fd)
            raise

    def _steady_text(self, dir_fd: int, target: Target) -> bytes | None:
        """The file's bytes, or None while it is missing or in flux (a truncate-then-write under way)."""
        try:
            snap = self._open(dir_fd, target)
        except BraindError:
            return None
        if snap is None:
            return None
        try:
            if self._in_flux(snap.info, len(snap.data), self._sizes.get(target.path)):
                return None
            return snap.data
        finally:
            os.close(snap.fd)

    def _carry_later(self, target: Target, extra: bytes, what: str) -> None:
        """Bytes another program wrote to a version no longer in place: the next version swapped in ends with them.

        They are never appended to the file in place: the program that wrote them may be saving
        it in place right now, and would truncate them away. Until a version holds them they are
        kept in `<name>.carry` beside the backup, which a daemon starting after a crash puts in.
        """
        chunks = self._pending.setdefault(target.path, [])
        chunk = extra if extra.endswith(b"\n") else extra + b"\n"
        if chunk not in chunks:
            chunks.append(chunk)
            journal(target, b"".join(chunks))
        log.info("%s: %d bytes added to the version %s are carried into the next one", target.path, len(extra), what)

    def _missing(self, target: Target, data: bytes) -> list[bytes]:
        """The carried-over chunks a version lacks (one its writer saved again itself is not added twice)."""
        return [chunk for chunk in self._pending.get(target.path, []) if not times(data, chunk)]

    def _put_in(self, target: Target, chunks: list[bytes]) -> None:
        """The version now in place holds every carried-over chunk: forget them and their journal, keep checking."""
        if target.path not in self._pending:
            return
        del self._pending[target.path]
        journal(target, b"")
        for chunk in chunks:
            self._track(target, chunk)

    def _track(self, target: Target, chunk: bytes) -> None:
        """Carried bytes are checked at the next looks: another program's save made before it saw them drops them."""
        self._targets[target.path] = target
        tracked = self._tracked.setdefault(target.path, {})
        tracked[chunk] = (time.monotonic(), tracked.get(chunk, (0.0, 0))[1])

    def _confirm(self, target: Target, dir_fd: int, final: bool) -> None:
        """Carry again what another program's save dropped soon after braind carried it (a save from an older read)."""
        tracked = self._tracked.get(target.path)
        if not tracked:
            return
        if final:
            self._settle(dir_fd, target, self._sizes.get(target.path))
        data = self._steady_text(dir_fd, target)
        if data is None:
            return  # being saved in place right now: judged at the next look
        pending = self._pending.get(target.path, [])
        for chunk, (at, again) in list(tracked.items()):
            if times(data, chunk) or chunk in pending:
                if time.monotonic() - at > _TRACK_S:
                    del tracked[chunk]
            elif again < CARRIES:
                tracked[chunk] = (time.monotonic(), again + 1)
                self._carry_later(target, chunk, "braind had carried over, which another program's save dropped")
            else:
                del tracked[chunk]
                keep_bytes(chunk, target, "kept dropping carried-over text")
        if not tracked:
            del self._tracked[target.path]

    def recover(self, root: Path) -> list[str]:
        """Put in the bytes a crashed daemon was still carrying over (`<name>.carry` journals); what was done."""
        done = []
        for rel in (
            Path("MEMORY.md"),
            *(Path("logs", n[: -len(CARRY)]) for n in backup_names(root, "logs") if n.endswith(CARRY)),
        ):
            target = Target(root, rel)
            carried = read_journal(target)
            if carried:
                self._pending[target.path] = [carried]
                if self.look_back(target):
                    done.append(f"put in {target.path} the text a crash had left in its {CARRY} journal")
        return done

    def _watch(self, target: Target, fd: int, seen: bytes, other: bytes | None = None) -> None:
        """Keep an inode that left the file's name open (taking `fd`), to carry over what is still added to it."""
        self._targets[target.path] = target
        watched = self._watched.setdefault(target.path, [])
        for old in [w for w in watched if identity(w.fd) == identity(fd)]:
            self._drop(target.path, old)  # the same inode left the name again: only its newest bytes count
        watched.append(Watched(target, fd, seen, other))
        while len(watched) > _WATCHED_PER_FILE:
            self._last_look(watched.pop(0))
        while len(self._watched) > _WATCHED:
            for oldest in self._watched.pop(next(iter(self._watched))):
                self._last_look(oldest)

    def _last_look(self, watched: Watched) -> None:
        """An inode no longer watched: what was added to it still goes into the next version; a rewrite is kept."""
        try:
            extra = watched.added()
            if extra:
                self._carry_later(watched.target, extra, "braind replaced")
            elif extra is None:
                self._rewritten(watched, self._current(watched.target))
        finally:
            os.close(watched.fd)

    def _rewritten(self, watched: Watched, current: bytes | None) -> None:
        """An earlier inode was saved over: the lines it ends with that the file lacks are carried; all is kept.

        `current` is the file as saved (None when it cannot be told): weighed against a file caught half
        way through a save in place, every line back to the last blank one would be carried, and doubled.
        """
        target = watched.target
        data = os.pread(watched.fd, os.fstat(watched.fd).st_size, 0)
        tail = trailing_new(data, current) if current is not None else b""
        if tail:
            self._carry_later(target, tail, "saved over after braind replaced it")
        keep_copy(watched.fd, target, "(an earlier version of it) was saved over after braind replaced it")

    def _current(self, target: Target) -> bytes | None:
        """A file's bytes once a save in place under way is done (None when they cannot be read)."""
        try:
            dir_fd = open_dir(target.root, target.rel.parts[:-1])
        except (OSError, BraindError):
            return None
        try:
            return self._saved_text(dir_fd, target)
        finally:
            os.close(dir_fd)

    def _saved_text(self, dir_fd: int, target: Target) -> bytes | None:
        """A file's bytes once a save in place under way is done (None: it did not end in time, or no read)."""
        try:
            self._settle(dir_fd, target, self._sizes.get(target.path))
            return read_name(dir_fd, target.name)
        except (OSError, BraindError):
            return None

    def look_back(self, target: Target, final: bool = False) -> bool:
        """Carry over what reached a file's earlier inodes since they left its name; True when the file changed."""
        if target.path not in self._watched and target.path not in self._pending and target.path not in self._tracked:
            return False
        dir_fd = open_dir(target.root, target.rel.parts[:-1])
        try:
            self._look_back(target, dir_fd, final)
        finally:
            os.close(dir_fd)
        if target.path not in self._pending:
            return False
        try:
            self.edit(target, unchanged, None, False)
        except BraindError as exc:  # never fails the request that looked: its own write has happened
            log.warning("%s: carrying over is left for later (its journal keeps the text): %s", target.path, exc)
            return False
        return True

    def _look_back(self, target: Target, dir_fd: int, final: bool = False) -> None:
        """Late writes to earlier inodes: additions go into the next version, a rewrite of one is kept as a copy."""
        self._confirm(target, dir_fd, final)
        current = identity_at(dir_fd, target.name)
        for watched in list(self._watched.get(target.path, [])):
            if identity(watched.fd) == current:  # swapped back in: it is the file again, read afresh
                self._drop(target.path, watched)
                continue
            extra = watched.added()
            if extra is None and final:
                extra = self._settled(watched)
            if extra is None and not self._in_flux(os.fstat(watched.fd), 0, None):
                now = self._saved_text(dir_fd, target) if final else self._steady_text(dir_fd, target)
                if now is None and not final:
                    continue  # the file is being saved in place: the old inode is judged at the next look
                self._rewritten(watched, now)
                self._drop(target.path, watched)
            elif extra:
                self._carry_later(target, extra, "braind replaced")
                watched.seen += extra

    def _settled(self, watched: Watched) -> bytes | None:
        """At the last look: give an inode caught mid-save the quiet window to finish."""
        deadline = time.monotonic() + self.quiet_s
        extra = watched.added()
        while extra is None and time.monotonic() < deadline:
            time.sleep(_POLL_S)
            extra = watched.added()
        return extra

    def _drop(self, path: Path, watched: Watched) -> None:
        """Stop watching one inode."""
        self._watched[path].remove(watched)
        os.close(watched.fd)

    def _forget(self, path: Path) -> None:
        """Stop watching every earlier inode of a file."""
        for watched in self._watched.pop(path, []):
            os.close(watched.fd)

    def close(self) -> list[Target]:
        """A last look at every earlier inode, then let them go (the daemon is stopping); the files that changed."""
        changed = []
        for path, target in list(self._targets.items()):
            try:
                if self.look_back(target, final=True):
                    changed.append(target)
            except (OSError, BraindError) as exc:
                log.warning("%s: a last look at its earlier versions failed: %s", path, exc)
            self._forget(path)
        self._tracked.clear()
        return changed

    @abstractmethod
    def edit(self, target: Target, change: Change[T], known_size: int | None, append: bool) -> tuple[str, T]:
        """Apply a change to a file safely (the rewriter)."""
