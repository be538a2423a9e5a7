"""The rewriter: appends and compare-and-exchange rewrites of files people edit too."""

from __future__ import annotations

import contextlib
import logging
import os

from braind.errors import BraindError, Rejected
from braind.files.durable import (
    append_once,
    create_file,
    exchange,
    write_temp,
)
from braind.files.rewrite.backups import keep_backup, keep_bytes, keep_copy
from braind.files.rewrite.inodes import (
    ATTEMPTS,
    CARRIES,
    Again,
    Snapshot,
    Target,
    carry_into,
    fsync_dir,
    grown,
    heading,
    link_old,
    open_append,
    open_name,
    read_name,
    same_inode,
    saved_from,
    self_contained,
    times,
    trailing_new,
    unlink_quietly,
    with_tail,
)
from braind.files.rewrite.late import Change, LateWrites, T, Watched
from braind.files.rewrite.refusals import refuse_conflicts, refuse_hard_links
from braind.files.validate import open_dir
from braind.model.lines import printable

log = logging.getLogger(__name__)


class Rewriter(LateWrites):
    """Safe edits of the files people edit too; the caller holds the daemon's write lock."""

    def __init__(self, quiet_s: float, max_wait_s: float, max_file_bytes: int) -> None:
        super().__init__(quiet_s, max_wait_s, max_file_bytes)
        self._shown: list[tuple[bytes, bytes]] = []  # this edit's versions in place for a moment, and what they changed

    # -- the edit loop -------------------------------------------------------------

    def edit(self, target: Target, change: Change[T], known_size: int | None, append: bool) -> tuple[str, T]:
        """Apply change(old text or None): appended when it only adds at the end and `append` is set, else rewritten."""
        dir_fd = open_dir(target.root, target.rel.parts[:-1], create=True)
        self._shown = []
        try:
            self._look_back(target, dir_fd)
            for _ in range(ATTEMPTS):
                known = self._sizes.get(target.path, known_size)
                self._settle(dir_fd, target, known)
                with contextlib.suppress(Again):
                    return self._attempt(target, dir_fd, change, append, known)
        finally:
            os.close(dir_fd)
            self._shown = []
        raise BraindError(
            "busy",
            f"{printable(str(target.path))} kept changing while braind tried to change it; nothing was "
            "changed, try again",
        )

    def _attempt(
        self, target: Target, dir_fd: int, change: Change[T], append: bool, known: int | None
    ) -> tuple[str, T]:
        """One read-change-write, with any bytes carried over from earlier versions at the end; Again if it moved."""
        snap = self._open(dir_fd, target)
        if snap is None:
            text, info = change(None)
            chunks = self._missing(target, b"")
            self._create(dir_fd, target.name, with_tail(text.encode("utf-8"), b"".join(chunks)))
            self._put_in(target, chunks)
            return text, info
        try:
            if snap.info.st_size != len(snap.data) or self._in_flux(snap.info, len(snap.data), known):
                raise Again  # read while an editor was saving in place: wait, then read again
            self._sizes[target.path] = len(snap.data)
            refuse_conflicts(snap.text, target.path)
            text, info = change(snap.text)
            if any(saved_from(snap.data, read, shown) for read, shown in self._shown):
                text = snap.text  # saved from braind's version while it was in place: the change is in already
            chunks = self._missing(target, snap.data)
            if append and not chunks and len(text) > len(snap.text) and text.startswith(snap.text):
                self._append(target, dir_fd, snap, text[len(snap.text) :].encode("utf-8"))
            elif chunks or text != snap.text:
                self._rewrite(target, dir_fd, snap, with_tail(text.encode("utf-8"), b"".join(chunks)))
            self._put_in(target, chunks)
            return text, info
        finally:
            os.close(snap.fd)

    def _create(self, dir_fd: int, name: str, data: bytes) -> None:
        """Create a file that was missing when read; Again if it appeared meanwhile."""
        try:
            create_file(dir_fd, name, data)
        except FileExistsError:
            raise Again from None

    # -- appends -------------------------------------------------------------------

    def _append(self, target: Target, dir_fd: int, snap: Snapshot, tail: bytes) -> None:
        """Append the new bytes in one write; Again unless they landed where the change meant them to."""
        start = self._append_at_end(target, dir_fd, snap, tail)
        if start == len(snap.data):
            return
        if start > len(snap.data):
            between = os.pread(snap.fd, start - len(snap.data), len(snap.data))
            if self_contained(tail) or not any(heading(line) for line in between.split(b"\n")):
                return  # what another program appended first does not change where ours belongs
        else:  # the file shrank before our write: an in-place save, which may write over our bytes
            self._settle(dir_fd, target, len(snap.data))
        self._take_back(target, dir_fd, snap, start, tail)

    def _append_at_end(self, target: Target, dir_fd: int, snap: Snapshot, tail: bytes) -> int:
        """One O_APPEND write to the inode read, still as read (Again otherwise); where the bytes landed."""
        fd = open_append(dir_fd, target.name, snap)
        try:
            if grown(snap.fd, snap.data) != b"":
                raise Again
            start = append_once(fd, tail, target.name)
        finally:
            os.close(fd)
        self._sizes[target.path] = start + len(tail)
        return start

    def _carry(self, dir_fd: int, target: Target, extra: bytes, what: str, held: bytes) -> None:
        """Append bytes another program wrote to a version no longer in place, checked as braind's own appends are.

        `held` is what braind put in place: a file holding the bytes more often than that was saved since by a
        program that had them (vim saving again from its own save), and gets them no second time.
        """
        try:
            for _ in range(ATTEMPTS):
                if self._appended_once(dir_fd, target, extra, held):
                    log.info("%s: carried over %d bytes appended to the version %s", target.path, len(extra), what)
                    self._track(target, extra)
                    return
        except BraindError as exc:  # never fails the request: what changed the file has happened
            log.warning("%s: carrying over failed: %s", target.path, exc)
        keep_bytes(extra, target, f"had {len(extra)} bytes added to the version {what}, which could not be carried")

    def _appended_once(self, dir_fd: int, target: Target, extra: bytes, held: bytes) -> bool:
        """One try at appending carried-over bytes where they survive an in-place save in progress."""
        self._settle(dir_fd, target, self._sizes.get(target.path))
        snap = self._open(dir_fd, target)
        if snap is None:
            return False
        try:
            if times(snap.data, extra) > times(held, extra):
                return True  # saved again since by the program that added them: they are in already
            tail = b"\n" + extra if snap.data and not snap.data.endswith(b"\n") else extra
            with contextlib.suppress(Again):
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
            return now.data[start : start + len(tail)] == tail or times(now.data, tail) > times(snap.data, tail)
        finally:
            os.close(now.fd)

    def _take_back(self, target: Target, dir_fd: int, snap: Snapshot, start: int, tail: bytes) -> None:
        """An append that landed in the wrong place: remove it while intact and redo the change (Again)."""
        now = self._open(dir_fd, target)
        if now is None:
            raise Again
        try:
            if now.data[start : start + len(tail)] != tail:
                if times(now.data, tail) > times(snap.data, tail):
                    return  # the other program's save kept our text
                log.warning("%s: an in-place save overwrote braind's append; it is written again", target.path)
                raise Again
            log.warning("%s: braind's append landed after another program's heading; it is moved", target.path)
            try:
                self._rewrite(target, dir_fd, now, now.data[:start] + now.data[start + len(tail) :])
            except Rejected as exc:  # a hard-linked file cannot be rewritten: the append stays where it is
                log.warning("%s: the append stays where it landed: %s", target.path, exc.message)
                return
        finally:
            os.close(now.fd)
        raise Again

    # -- rewrites ------------------------------------------------------------------

    def _rewrite(self, target: Target, dir_fd: int, snap: Snapshot, new: bytes) -> None:
        """Replace the file with new bytes by compare-and-exchange; Again when it changed under us."""
        refuse_hard_links(target, snap)
        bak_fd = open_dir(target.root, target.backups(), create=True)
        tmp, new_fd = write_temp(dir_fd, target.name, new)
        try:
            base, new = carry_into(snap, new_fd, new, target)
            old = link_old(dir_fd, bak_fd, target.name, snap)
            try:
                out_fd, seen = self._swap(target, dir_fd, tmp, snap, base, (new_fd, new))
            except BaseException:
                unlink_quietly(bak_fd, old)
                raise
            keep_backup(bak_fd, old, target)
            self._sizes[target.path] = os.fstat(new_fd).st_size
            self._watch(target, out_fd, seen)
        finally:
            os.close(new_fd)
            unlink_quietly(dir_fd, tmp)
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
        base, new = carry_into(snap, ours[0], ours[1], target, base)  # the last compare, just before the swap
        ours = (ours[0], new)
        if not same_inode(dir_fd, target.name, snap):
            raise Again
        if not exchange(dir_fd, tmp, dir_fd, target.name):
            return self._replace(target, dir_fd, tmp, snap, base, new)
        self._shown.append((base, new))  # a program may read it now and save it, with lines of its own, elsewhere
        renamed_in = not same_inode(dir_fd, tmp, snap)
        out = open_name(dir_fd, tmp) if renamed_in else os.dup(snap.fd)
        try:
            self._judge(target, dir_fd, tmp, ours, grown(out, base), renamed_in)  # at once: the shortest exposure
            try:
                fsync_dir(dir_fd, target)
            except BraindError as exc:  # the swap may not last: put the old version back, so the error changed nothing
                self._swap_back(target, dir_fd, tmp, ours, exc.message, BraindError(exc.reason, exc.message))
            late = grown(out, base)
            self._judge(target, dir_fd, tmp, ours, late, renamed_in)
            return out, self._carry_late(target, dir_fd, out, (base, new), late or b"")
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

    def _replace(
        self, target: Target, dir_fd: int, tmp: str, snap: Snapshot, base: bytes, new: bytes
    ) -> tuple[int, bytes]:
        """Without RENAME_EXCHANGE: rename over the file right after the compare, then carry late appends over."""
        try:
            os.replace(tmp, target.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            raise BraindError("io_error", f"cannot replace {target.path}: {exc.strerror}") from None
        try:
            fsync_dir(dir_fd, target)  # a write that reached the old inode meanwhile is left to the watch of it
        except BraindError as exc:
            raise BraindError(exc.reason, exc.message, written={"path": str(target.path)}) from None
        out = os.dup(snap.fd)
        return out, self._carry_late(target, dir_fd, out, (base, new), grown(out, base) or b"")

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
        put_back = [_read_quietly(dir_fd, tmp)]  # the version going back, as the late write left it
        try:
            swapped = exchange(dir_fd, tmp, dir_fd, target.name)
        except BraindError as exc:
            swapped, why = False, exc.message
        if not swapped:
            fd = open_name(dir_fd, tmp)
            try:
                keep_copy(fd, target, "was written by another program as braind replaced it")
            finally:
                os.close(fd)
            raise BraindError(
                "io_error",
                f"braind's rewrite of {target.path} is in place, but what another program wrote meanwhile could not "
                f"be put back ({why}); it is kept beside the backup (see the log)",
                written={"path": str(target.path)},
            )
        put_back.append(_read_quietly(dir_fd, target.name))  # and once back, before a save of the moment replaces it
        self._track_put_back(target, put_back, ours[1])
        with contextlib.suppress(BraindError):  # the old version is what the disk holds for sure anyway
            fsync_dir(dir_fd, target)
        if same_inode(dir_fd, tmp, Snapshot(ours[0], os.fstat(ours[0]), b"", "")):
            self._left(target, dir_fd, ours[0], ours[1])
        else:
            self._newer_save(target, dir_fd, tmp, ours[1])
        raise then if then is not None else Again()

    def _track_put_back(self, target: Target, versions: list[bytes], wrote: bytes) -> None:
        """Lines the version put back gained late are checked at the next looks, and carried again if dropped.

        A program saving in place may have read braind's version (`wrote`) in its moment in place, after
        writing these lines to the old inode, and save that read over the old inode once it is back: its
        save would drop them without a trace, since braind's version never held them.
        """
        read = self._shown[-1][0] if self._shown else b""  # the version braind read and compared last
        known = read + b"\n" + wrote
        for version in versions:
            tail = trailing_new(version[: version.rfind(b"\n") + 1], known)  # a line still being written is not one
            if tail:
                self._track(target, tail)

    def _newer_save(self, target: Target, dir_fd: int, tmp: str, new: bytes) -> None:
        """A save replaced braind's version while it was in place, and came out instead of it: keep what it added."""
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
        try:
            newer, restored = os.pread(fd, os.fstat(fd).st_size, 0), read_name(dir_fd, target.name)
            if newer.startswith(restored) and exchange(dir_fd, tmp, dir_fd, target.name):
                fsync_dir(dir_fd, target)  # made from the version put back: the newest, so it goes in place
                self._watch(target, open_name(dir_fd, tmp), restored)
            else:  # made from braind's version: what it added goes after the version put back
                self._left(target, dir_fd, fd, new)
        finally:
            os.close(fd)

    def _left(self, target: Target, dir_fd: int, fd: int, wrote: bytes) -> None:
        """An inode that was in place for a moment and is out now: what was added to it goes into the next version.

        A program may have saved into it in place in that moment, from the version put back: what
        that save adds to the version put back counts as added too, when that is a whole text (a file
        emptied by a save just begun is the start of every text, and would make all of it added).
        """
        put_back = read_name(dir_fd, target.name)
        watched = Watched(target, os.dup(fd), wrote, put_back if put_back.endswith(b"\n") else None)
        extra = watched.added()
        if extra:
            self._carry_later(target, extra, "that was in place for a moment")
            watched.seen += extra
        self._watch(target, watched.fd, watched.seen, watched.other)

    def _carry_late(self, target: Target, dir_fd: int, fd: int, versions: tuple[bytes, bytes], late: bytes) -> bytes:
        """Append to the new file (versions: the old one compared, the new one) what reached the old inode after the
        compare, until nothing more does."""
        base, held = versions
        for _ in range(CARRIES):
            if not late:
                break
            self._carry(dir_fd, target, late, "braind replaced", held)
            base, held = base + late, held + late
            late = grown(fd, base) or b""
        return base


def _read_quietly(dir_fd: int, name: str) -> bytes:
    """The bytes a name leads to, or none when it cannot be read."""
    try:
        return read_name(dir_fd, name)
    except OSError:
        return b""
