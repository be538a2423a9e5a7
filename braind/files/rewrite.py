"""Rewrites and appends that never lose what another process writes to the same file meanwhile.

braind changes MEMORY.md and logfiles while people edit them, and no filesystem offers a rename
"only if the file is still the one I read". A rewrite is therefore a compare-and-exchange made
of what Linux does offer (the caller holds the daemon's write lock):

1. Wait while the file is in flux: changed within the watcher's quiet window and now empty or
   smaller than braind last saw it (an editor's truncate-then-write caught half way).
2. Open the file and read it through a descriptor that stays open; compute the new text.
3. Write the new text to a temp file of a unique name and fsync it.
4. Compare: the name still leads to the inode that was read, and it holds the bytes read. What
   it gained at its end meanwhile (an append) is carried into the temp file; any other change
   starts the rewrite over on the new text.
5. Hard-link the old inode beside the backup, then swap the temp file and the file with one
   `renameat2(RENAME_EXCHANGE)`, and look at what came out. A file another program renamed in
   just before (vim's save) comes out instead of the one read: what it adds to the bytes
   compared is appended to the new version; any other change of it is swapped back in and the
   rewrite redone on it.
6. Look at the old inode once more through the kept descriptor. A write that reached it in the
   last moment comes from a program holding it open (an appender, an in-place save): it is
   swapped back in and the rewrite redone, and what reached braind's version meanwhile goes
   into the next one. Otherwise the old inode becomes the `.bak` and stays watched.

Bytes that reach a version no longer in place are never appended in place (the program that
wrote them may be truncating the file right now): they go into the next version braind swaps
in, at the next write to the file, after the request's index update, or when the daemon stops,
and are journaled in `<name>.carry` until then. Carried bytes that a save from an older read
drops again within a few seconds are carried again; bytes a version already holds are never
added twice.

Attempts are bounded; a file that never holds still gets `busy`, with nothing changed. A pure
append (new text = old text + more) is one `O_APPEND` write instead, checked afterwards to have
landed right after the bytes read. A file with git conflict markers, or with a hard link braind
did not make, is refused rather than rewritten. Where the filesystem cannot exchange names, the
temp file is renamed over the file after the compare (a window of microseconds remains there).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from braind.errors import BraindError, Rejected
from braind.files.durable import (
    OLD,
    TEMP,
    append_once,
    create_file,
    exchange,
    leftover,
    replace_file,
    temp_name,
    write_temp,
)
from braind.files.validate import open_dir, open_regular, read_open
from braind.model.lines import conflicts, printable

log = logging.getLogger(__name__)

BACKUPS = (".braind", "bak")
CARRY = ".carry"  # bytes still to be carried into a file, beside its backup
ATTEMPTS = 8
_CARRIES = 16  # appends carried into one rewrite before it starts over
_POLL_S = 0.002
_WATCHED = 16  # files whose earlier inodes are watched for late writes
_WATCHED_PER_FILE = 16
_TRACK_S = 5.0  # how long carried bytes are checked for: another program's save from an older read comes soon
_OPEN_APPEND = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
T = TypeVar("T")
Change = Callable[[str | None], tuple[str, T]]


class _Again(Exception):
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


@dataclass
class _Watched:
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


class Rewriter:
    """Safe edits of the files people edit too; the caller holds the daemon's write lock."""

    def __init__(self, quiet_s: float, max_wait_s: float, max_file_bytes: int) -> None:
        self.quiet_s = quiet_s
        self.max_wait_s = max_wait_s
        self.max_file_bytes = max_file_bytes
        self._sizes: dict[Path, int] = {}  # the size braind last read or wrote, per file
        self._watched: dict[Path, list[_Watched]] = {}  # inodes that left a file's name, watched for late writes
        self._pending: dict[Path, list[bytes]] = {}  # what was written to such inodes, for the next version
        self._tracked: dict[Path, dict[bytes, tuple[float, int]]] = {}  # carried bytes: when, and how often again
        self._targets: dict[Path, Target] = {}  # the files watched or tracked

    # -- the edit loop -------------------------------------------------------------

    def edit(self, target: Target, change: Change[T], known_size: int | None, append: bool) -> tuple[str, T]:
        """Apply change(old text or None): appended when it only adds at the end and `append` is set, else rewritten."""
        dir_fd = open_dir(target.root, target.rel.parts[:-1], create=True)
        try:
            self._look_back(target, dir_fd)
            for _ in range(ATTEMPTS):
                known = self._sizes.get(target.path, known_size)
                self._settle(dir_fd, target, known)
                with contextlib.suppress(_Again):
                    return self._attempt(target, dir_fd, change, append, known)
        finally:
            os.close(dir_fd)
        raise BraindError(
            "busy",
            f"{printable(str(target.path))} kept changing while braind tried to change it; nothing was "
            "changed, try again",
        )

    def _attempt(
        self, target: Target, dir_fd: int, change: Change[T], append: bool, known: int | None
    ) -> tuple[str, T]:
        """One read-change-write, with any bytes carried over from earlier versions at the end; _Again if it moved."""
        snap = self._open(dir_fd, target)
        if snap is None:
            text, info = change(None)
            chunks = self._missing(target, b"")
            self._create(dir_fd, target.name, _with_tail(text.encode("utf-8"), b"".join(chunks)))
            self._put_in(target, chunks)
            return text, info
        try:
            if snap.info.st_size != len(snap.data) or self._in_flux(snap.info, len(snap.data), known):
                raise _Again  # read while an editor was saving in place: wait, then read again
            self._sizes[target.path] = len(snap.data)
            refuse_conflicts(snap.text, target.path)
            text, info = change(snap.text)
            chunks = self._missing(target, snap.data)
            if append and not chunks and len(text) > len(snap.text) and text.startswith(snap.text):
                self._append(target, dir_fd, snap, text[len(snap.text) :].encode("utf-8"))
            elif chunks or text != snap.text:
                self._rewrite(target, dir_fd, snap, _with_tail(text.encode("utf-8"), b"".join(chunks)))
            self._put_in(target, chunks)
            return text, info
        finally:
            os.close(snap.fd)

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

    def _create(self, dir_fd: int, name: str, data: bytes) -> None:
        """Create a file that was missing when read; _Again if it appeared meanwhile."""
        try:
            create_file(dir_fd, name, data)
        except FileExistsError:
            raise _Again from None

    # -- appends -------------------------------------------------------------------

    def _append(self, target: Target, dir_fd: int, snap: Snapshot, tail: bytes) -> None:
        """Append the new bytes in one write; _Again unless they landed where the change meant them to."""
        start = self._append_at_end(target, dir_fd, snap, tail)
        if start == len(snap.data):
            return
        if start > len(snap.data):
            between = os.pread(snap.fd, start - len(snap.data), len(snap.data))
            if _self_contained(tail) or not any(_heading(line) for line in between.split(b"\n")):
                return  # what another program appended first does not change where ours belongs
        else:  # the file shrank before our write: an in-place save, which may write over our bytes
            self._settle(dir_fd, target, len(snap.data))
        self._take_back(target, dir_fd, snap, start, tail)

    def _append_at_end(self, target: Target, dir_fd: int, snap: Snapshot, tail: bytes) -> int:
        """One O_APPEND write to the inode read, still as read (_Again otherwise); where the bytes landed."""
        fd = _open_append(dir_fd, target.name, snap)
        try:
            if grown(snap.fd, snap.data) != b"":
                raise _Again
            start = append_once(fd, tail, target.name)
        finally:
            os.close(fd)
        self._sizes[target.path] = start + len(tail)
        return start

    def _carry(self, dir_fd: int, target: Target, extra: bytes, what: str) -> None:
        """Append bytes another program wrote to a version no longer in place, checked as braind's own appends are."""
        try:
            for _ in range(ATTEMPTS):
                if self._appended_once(dir_fd, target, extra):
                    log.info("%s: carried over %d bytes appended to the version %s", target.path, len(extra), what)
                    self._track(target, extra)
                    return
        except BraindError as exc:  # never fails the request: what changed the file has happened
            log.warning("%s: carrying over failed: %s", target.path, exc)
        _keep_bytes(extra, target, f"had {len(extra)} bytes added to the version {what}, which could not be carried")

    def _appended_once(self, dir_fd: int, target: Target, extra: bytes) -> bool:
        """One try at appending carried-over bytes where they survive an in-place save in progress."""
        self._settle(dir_fd, target, self._sizes.get(target.path))
        snap = self._open(dir_fd, target)
        if snap is None:
            return False
        try:
            tail = b"\n" + extra if snap.data and not snap.data.endswith(b"\n") else extra
            with contextlib.suppress(_Again):
                start = self._append_at_end(target, dir_fd, snap, tail)
                return start == len(snap.data) or self._survived(target, dir_fd, snap, start, tail)
            return False
        finally:
            os.close(snap.fd)

    def _survived(self, target: Target, dir_fd: int, snap: Snapshot, start: int, tail: bytes) -> bool:
        """After an append that did not land right after the bytes read: are the bytes in the settled file?"""
        self._settle(dir_fd, target, len(snap.data))
        now = self._open(dir_fd, target)
        if now is None:
            return False
        try:
            return now.data[start : start + len(tail)] == tail or _times(now.data, tail) > _times(snap.data, tail)
        finally:
            os.close(now.fd)

    def _take_back(self, target: Target, dir_fd: int, snap: Snapshot, start: int, tail: bytes) -> None:
        """An append that landed in the wrong place: remove it while intact and redo the change (_Again)."""
        now = self._open(dir_fd, target)
        if now is None:
            raise _Again
        try:
            if now.data[start : start + len(tail)] != tail:
                if _times(now.data, tail) > _times(snap.data, tail):
                    return  # the other program's save kept our text
                log.warning("%s: an in-place save overwrote braind's append; it is written again", target.path)
                raise _Again
            log.warning("%s: braind's append landed after another program's heading; it is moved", target.path)
            try:
                self._rewrite(target, dir_fd, now, now.data[:start] + now.data[start + len(tail) :])
            except Rejected as exc:  # a hard-linked file cannot be rewritten: the append stays where it is
                log.warning("%s: the append stays where it landed: %s", target.path, exc.message)
                return
        finally:
            os.close(now.fd)
        raise _Again

    # -- rewrites ------------------------------------------------------------------

    def _rewrite(self, target: Target, dir_fd: int, snap: Snapshot, new: bytes) -> None:
        """Replace the file with new bytes by compare-and-exchange; _Again when it changed under us."""
        refuse_hard_links(target, snap)
        bak_fd = open_dir(target.root, target.backups(), create=True)
        tmp, new_fd = write_temp(dir_fd, target.name, new)
        try:
            base, new = _carry_into(snap, new_fd, new, target)
            old = _link_old(dir_fd, bak_fd, target.name, snap)
            try:
                out_fd, seen = self._swap(target, dir_fd, tmp, snap, base, (new_fd, new))
            except BaseException:
                _unlink_quietly(bak_fd, old)
                raise
            _keep_backup(bak_fd, old, target)
            self._sizes[target.path] = os.fstat(new_fd).st_size
            self._watch(target, out_fd, seen)
        finally:
            os.close(new_fd)
            _unlink_quietly(dir_fd, tmp)
            os.close(bak_fd)

    def _swap(
        self, target: Target, dir_fd: int, tmp: str, snap: Snapshot, base: bytes, ours: tuple[int, bytes]
    ) -> tuple[int, bytes]:
        """Put the temp file in place of the file read; the inode swapped out (a new descriptor) and its bytes.

        A write that reached the old inode in the last moment comes from a program holding it
        open (an appender, an editor saving in place): that inode is swapped back in, with what
        reached ours meanwhile appended, and the rewrite redone on it. A file another program
        renamed in just before the swap comes out instead: what it adds to the bytes compared is
        appended to ours (no second rename to race with); any other change of it is swapped back.
        """
        base, new = _carry_into(snap, ours[0], ours[1], target, base)  # the last compare, just before the swap
        ours = (ours[0], new)
        if not _same_inode(dir_fd, target.name, snap):
            raise _Again
        if not exchange(dir_fd, tmp, dir_fd, target.name):
            return self._replace(target, dir_fd, tmp, snap, base)
        renamed_in = not _same_inode(dir_fd, tmp, snap)
        out = _open_name(dir_fd, tmp) if renamed_in else os.dup(snap.fd)
        try:
            self._judge(target, dir_fd, tmp, ours, grown(out, base), renamed_in)  # at once: the shortest exposure
            try:
                _fsync_dir(dir_fd, target)
            except BraindError as exc:  # the swap may not last: put the old version back, so the error changed nothing
                self._swap_back(target, dir_fd, tmp, ours, exc.message, BraindError(exc.reason, exc.message))
            late = grown(out, base)
            self._judge(target, dir_fd, tmp, ours, late, renamed_in)
            return out, self._carry_late(target, dir_fd, out, base, late or b"")
        except BaseException:
            os.close(out)
            raise

    def _judge(
        self, target: Target, dir_fd: int, tmp: str, ours: tuple[int, bytes], late: bytes | None, renamed_in: bool
    ) -> None:
        """Swap back when a program holding the old file wrote to it; its late bytes stay checked afterwards."""
        if late is None or (late and not renamed_in):
            if late:
                self._track(target, late)  # a save from an older read could still drop them: they are carried again
            self._swap_back(target, dir_fd, tmp, ours, "another program wrote to it as braind replaced it")

    def _replace(self, target: Target, dir_fd: int, tmp: str, snap: Snapshot, base: bytes) -> tuple[int, bytes]:
        """Without RENAME_EXCHANGE: rename over the file right after the compare, then carry late appends over."""
        try:
            os.replace(tmp, target.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            raise BraindError("io_error", f"cannot replace {target.path}: {exc.strerror}") from None
        try:
            _fsync_dir(dir_fd, target)  # a write that reached the old inode meanwhile is left to the watch of it
        except BraindError as exc:
            raise BraindError(exc.reason, exc.message, written={"path": str(target.path)}) from None
        out = os.dup(snap.fd)
        return out, self._carry_late(target, dir_fd, out, base, grown(out, base) or b"")

    def _swap_back(
        self,
        target: Target,
        dir_fd: int,
        tmp: str,
        ours: tuple[int, bytes],
        why: str,
        then: BaseException | None = None,
    ) -> None:
        """Give the file read (or another program's) its place back, keep what reached ours meanwhile; raise `then`."""
        log.info("%s: %s; braind's version is taken out again", target.path, why)
        try:
            swapped = exchange(dir_fd, tmp, dir_fd, target.name)
        except BraindError as exc:
            swapped, why = False, exc.message
        if not swapped:
            fd = _open_name(dir_fd, tmp)
            try:
                _keep_copy(fd, target, "was written by another program as braind replaced it")
            finally:
                os.close(fd)
            raise BraindError(
                "io_error",
                f"braind's rewrite of {target.path} is in place, but what another program wrote meanwhile could not "
                f"be put back ({why}); it is kept beside the backup (see the log)",
                written={"path": str(target.path)},
            )
        with contextlib.suppress(BraindError):  # the old version is what the disk holds for sure anyway
            _fsync_dir(dir_fd, target)
        if _same_inode(dir_fd, tmp, Snapshot(ours[0], os.fstat(ours[0]), b"", "")):
            self._left(target, dir_fd, ours[0], ours[1])
        else:
            self._newer_save(target, dir_fd, tmp, ours[1])
        raise then if then is not None else _Again()

    def _newer_save(self, target: Target, dir_fd: int, tmp: str, new: bytes) -> None:
        """A save replaced braind's version while it was in place, and came out instead of it: keep what it added."""
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
        try:
            newer, restored = os.pread(fd, os.fstat(fd).st_size, 0), _read_name(dir_fd, target.name)
            if newer.startswith(restored) and exchange(dir_fd, tmp, dir_fd, target.name):
                _fsync_dir(dir_fd, target)  # made from the version put back: the newest, so it goes in place
                self._watch(target, _open_name(dir_fd, tmp), restored)
            else:  # made from braind's version: what it added goes after the version put back
                self._left(target, dir_fd, fd, new)
        finally:
            os.close(fd)

    def _left(self, target: Target, dir_fd: int, fd: int, wrote: bytes) -> None:
        """An inode that was in place for a moment and is out now: what was added to it goes into the next version.

        A program may have saved into it in place in that moment, from the version put back: what
        that save adds to the version put back counts as added too.
        """
        watched = _Watched(target, os.dup(fd), wrote, _read_name(dir_fd, target.name))
        extra = watched.added()
        if extra:
            self._carry_later(target, extra, "that was in place for a moment")
            watched.seen += extra
        self._watch(target, watched.fd, watched.seen, watched.other)

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
            _journal(target, b"".join(chunks))
        log.info("%s: %d bytes added to the version %s are carried into the next one", target.path, len(extra), what)

    def _missing(self, target: Target, data: bytes) -> list[bytes]:
        """The carried-over chunks a version lacks (one its writer saved again itself is not added twice)."""
        return [chunk for chunk in self._pending.get(target.path, []) if not _times(data, chunk)]

    def _put_in(self, target: Target, chunks: list[bytes]) -> None:
        """The version now in place holds every carried-over chunk: forget them and their journal, keep checking."""
        if target.path not in self._pending:
            return
        del self._pending[target.path]
        _journal(target, b"")
        for chunk in chunks:
            self._track(target, chunk)

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
            if _times(data, chunk) or chunk in pending:
                if time.monotonic() - at > _TRACK_S:
                    del tracked[chunk]
            elif again < _CARRIES:
                tracked[chunk] = (time.monotonic(), again + 1)
                self._carry_later(target, chunk, "braind had carried over, which another program's save dropped")
            else:
                del tracked[chunk]
                _keep_bytes(chunk, target, "kept dropping carried-over text")
        if not tracked:
            del self._tracked[target.path]

    def recover(self, root: Path) -> list[str]:
        """Put in the bytes a crashed daemon was still carrying over (`<name>.carry` journals); what was done."""
        done = []
        for rel in (
            Path("MEMORY.md"),
            *(Path("logs", n[: -len(CARRY)]) for n in _names(root, "logs") if n.endswith(CARRY)),
        ):
            target = Target(root, rel)
            carried = _read_journal(target)
            if carried:
                self._pending[target.path] = [carried]
                if self.look_back(target):
                    done.append(f"put in {target.path} the text a crash had left in its {CARRY} journal")
        return done

    def _carry_late(self, target: Target, dir_fd: int, fd: int, base: bytes, late: bytes) -> bytes:
        """Append to the new file what reached the old inode after the compare, until nothing more does."""
        for _ in range(_CARRIES):
            if not late:
                break
            self._carry(dir_fd, target, late, "braind replaced")
            base += late
            late = grown(fd, base) or b""
        return base

    # -- old inodes ----------------------------------------------------------------

    def _watch(self, target: Target, fd: int, seen: bytes, other: bytes | None = None) -> None:
        """Keep an inode that left the file's name open (taking `fd`), to carry over what is still added to it."""
        self._targets[target.path] = target
        watched = self._watched.setdefault(target.path, [])
        for old in [w for w in watched if _identity(w.fd) == _identity(fd)]:
            self._drop(target.path, old)  # the same inode left the name again: only its newest bytes count
        watched.append(_Watched(target, fd, seen, other))
        while len(watched) > _WATCHED_PER_FILE:
            self._last_look(watched.pop(0))
        while len(self._watched) > _WATCHED:
            for oldest in self._watched.pop(next(iter(self._watched))):
                self._last_look(oldest)

    def _last_look(self, watched: _Watched) -> None:
        """An inode no longer watched: what was added to it still goes into the next version; a rewrite is kept."""
        try:
            extra = watched.added()
            if extra:
                self._carry_later(watched.target, extra, "braind replaced")
            elif extra is None:
                self._rewritten(watched, None)
        finally:
            os.close(watched.fd)

    def _rewritten(self, watched: _Watched, dir_fd: int | None) -> None:
        """An earlier inode was saved over: the lines it ends with that the file lacks are carried; all is kept."""
        target = watched.target
        data = os.pread(watched.fd, os.fstat(watched.fd).st_size, 0)
        current = _read_name(dir_fd, target.name) if dir_fd is not None else self._current(target)
        tail = _trailing_new(data, current)
        if tail:
            self._carry_later(target, tail, "saved over after braind replaced it")
        _keep_copy(watched.fd, target, "(an earlier version of it) was saved over after braind replaced it")

    def _current(self, target: Target) -> bytes:
        """A file's bytes now (empty when it cannot be read)."""
        try:
            dir_fd = open_dir(target.root, target.rel.parts[:-1])
        except (OSError, BraindError):
            return b""
        try:
            return _read_name(dir_fd, target.name)
        except OSError:
            return b""
        finally:
            os.close(dir_fd)

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
            self.edit(target, _unchanged, None, False)
        except BraindError as exc:  # never fails the request that looked: its own write has happened
            log.warning("%s: carrying over is left for later (its journal keeps the text): %s", target.path, exc)
            return False
        return True

    def _look_back(self, target: Target, dir_fd: int, final: bool = False) -> None:
        """Late writes to earlier inodes: additions go into the next version, a rewrite of one is kept as a copy."""
        self._confirm(target, dir_fd, final)
        current = _identity_at(dir_fd, target.name)
        for watched in list(self._watched.get(target.path, [])):
            if _identity(watched.fd) == current:  # swapped back in: it is the file again, read afresh
                self._drop(target.path, watched)
                continue
            extra = watched.added()
            if extra is None and final:
                extra = self._settled(watched)
            if extra is None and not self._in_flux(os.fstat(watched.fd), 0, None):
                self._rewritten(watched, dir_fd)
                self._drop(target.path, watched)
            elif extra:
                self._carry_later(target, extra, "braind replaced")
                watched.seen += extra

    def _settled(self, watched: _Watched) -> bytes | None:
        """At the last look: give an inode caught mid-save the quiet window to finish."""
        deadline = time.monotonic() + self.quiet_s
        extra = watched.added()
        while extra is None and time.monotonic() < deadline:
            time.sleep(_POLL_S)
            extra = watched.added()
        return extra

    def _drop(self, path: Path, watched: _Watched) -> None:
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


# -- refusals ----------------------------------------------------------------------


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
        return sum(_same_inode(bak_fd, name, snap) for name in names)
    finally:
        os.close(bak_fd)


# -- start-up clean-up ---------------------------------------------------------------


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


# -- small helpers -------------------------------------------------------------------


def _carry_into(
    snap: Snapshot, new_fd: int, new: bytes, target: Target, base: bytes | None = None
) -> tuple[bytes, bytes]:
    """Compare the file with what was read (or compared last); what was appended meanwhile goes into the temp file."""
    base = snap.data if base is None else base
    for _ in range(_CARRIES):
        extra = grown(snap.fd, base)
        if extra is None:
            raise _Again
        if not extra:
            return base, new
        tail = b"\n" + extra if base.endswith(b"\n") and new and not new.endswith(b"\n") else extra
        try:
            os.pwrite(new_fd, tail, len(new))
            os.fsync(new_fd)
        except OSError as exc:
            raise BraindError("io_error", f"cannot write beside {target.path}: {exc.strerror}") from None
        base, new = base + extra, new + tail
    raise _Again


def _read_name(dir_fd: int, name: str) -> bytes:
    """The bytes a name in a directory leads to (no links followed)."""
    fd = _open_name(dir_fd, name)
    try:
        return os.pread(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)


def _journal(target: Target, pending: bytes) -> None:
    """Keep (or, empty, remove) the bytes still to be carried into a file, durably, beside its backup."""
    bak_fd = open_dir(target.root, target.backups(), create=True)
    try:
        if pending:
            replace_file(bak_fd, target.name + CARRY, pending)
        else:
            _unlink_quietly(bak_fd, target.name + CARRY)
            os.fsync(bak_fd)
    finally:
        os.close(bak_fd)


def _trailing_new(data: bytes, current: bytes) -> bytes:
    """The lines a text ends with that another text lacks (walking back to the first line both hold)."""
    have = set(current.split(b"\n"))
    lines = data.rstrip(b"\n").split(b"\n")
    start = len(lines)
    while start > 0 and lines[start - 1] not in have and lines[start - 1].strip():
        start -= 1
    return b"".join(line + b"\n" for line in lines[start:])


def _times(data: bytes, chunk: bytes) -> int:
    """How often a chunk of whole lines is in a text as whole lines (`x 7` is not in `x 17`)."""
    lines = chunk.lstrip(b"\r\n")
    return (b"\n" + data).count(b"\n" + lines) if lines else 0


def _read_journal(target: Target) -> bytes:
    """The bytes a crashed daemon was still carrying into a file (none when there is no journal)."""
    try:
        bak_fd = open_dir(target.root, target.backups())
    except (OSError, BraindError):
        return b""
    try:
        return _read_name(bak_fd, target.name + CARRY)
    except OSError:
        return b""
    finally:
        os.close(bak_fd)


def _names(root: Path, *parts: str) -> list[str]:
    """The names in a directory of braind's backups (none when it is missing)."""
    try:
        fd = open_dir(root, (*BACKUPS, *parts))
    except (OSError, BraindError):
        return []
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def _unchanged(text: str | None) -> tuple[str, None]:
    """The change that leaves a file as it is: a rewrite only to put carried-over bytes in."""
    return text or "", None


def _with_tail(data: bytes, tail: bytes) -> bytes:
    """Bytes with more appended, on a line of their own."""
    if not tail:
        return data
    return data + (b"\n" if data and not data.endswith(b"\n") else b"") + tail


def _open_name(dir_fd: int, name: str) -> int:
    """A read-only descriptor on what a name leads to (no links followed)."""
    return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)


def _keep_copy(fd: int, target: Target, what: str) -> None:
    """Text another program wrote where braind cannot merge it: kept beside the backup, and said so."""
    _keep_bytes(os.pread(fd, os.fstat(fd).st_size, 0), target, what)


def _keep_bytes(data: bytes, target: Target, what: str) -> None:
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


def _keep_backup(bak_fd: int, old: str, target: Target) -> None:
    """The old inode becomes `<name>.bak`; a failure here costs the backup, never the rewrite."""
    try:
        os.replace(old, f"{target.name}.bak", src_dir_fd=bak_fd, dst_dir_fd=bak_fd)
        os.fsync(bak_fd)
    except OSError as exc:
        log.warning("%s: the previous version could not be kept as its .bak: %s", target.path, exc.strerror)
        _unlink_quietly(bak_fd, old)


def _open_append(dir_fd: int, name: str, snap: Snapshot) -> int:
    """Open the file that was read for appending; _Again when the name leads elsewhere now."""
    try:
        fd = os.open(name, _OPEN_APPEND, dir_fd=dir_fd)
    except OSError:
        raise _Again from None
    info = os.fstat(fd)
    if (info.st_dev, info.st_ino) != snap.identity:
        os.close(fd)
        raise _Again
    return fd


def _self_contained(data: bytes) -> bool:
    """An appended unit that brings its own `##` heading belongs wherever it lands."""
    return data.lstrip(b"\r\n").startswith(b"## ")


def _heading(line: bytes) -> bool:
    """A `#` or `##` heading line (up to three spaces of indentation): it starts another unit."""
    stripped = line.rstrip(b"\r")
    body = stripped.lstrip(b" ")
    if len(stripped) - len(body) > 3:
        return False
    return body in (b"#", b"##") or body.startswith((b"# ", b"## ", b"#\t", b"##\t"))


def _link_old(dir_fd: int, bak_fd: int, name: str, snap: Snapshot) -> str:
    """Hard-link the file's inode beside its backup before the swap; _Again if the name leads elsewhere now."""
    old = temp_name(name, OLD)
    try:
        os.link(name, old, src_dir_fd=dir_fd, dst_dir_fd=bak_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise _Again from None
    except OSError as exc:
        raise BraindError("io_error", f"cannot keep the previous version of {name}: {exc.strerror}") from None
    if not _same_inode(bak_fd, old, snap):
        _unlink_quietly(bak_fd, old)
        raise _Again
    return old


def _identity(fd: int) -> tuple[int, int]:
    """Device and inode of an open file."""
    info = os.fstat(fd)
    return (info.st_dev, info.st_ino)


def _identity_at(dir_fd: int, name: str) -> tuple[int, int] | None:
    """Device and inode a name leads to, None when it leads nowhere."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def _same_inode(dir_fd: int, name: str, snap: Snapshot) -> bool:
    """True when a name leads to the inode that was read."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return (info.st_dev, info.st_ino) == snap.identity


def _fsync_dir(dir_fd: int, target: Target) -> None:
    """Make the directory's new entries durable; a failure fails the request and says the file was changed."""
    try:
        os.fsync(dir_fd)
    except OSError as exc:
        raise BraindError(
            "io_error", f"{target.path} was changed but its directory could not be synced ({exc.strerror}): check it"
        ) from None


def _unlink_quietly(dir_fd: int, name: str) -> None:
    """Remove a name if it is there."""
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)
