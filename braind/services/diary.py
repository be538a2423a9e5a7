"""Appends to diary days: the line durable and indexed before the reply, the state it brings all or nothing.

A typed write may bring state changes with its line (the entry it supersedes
is tombstoned). An intent written to state.log before the line lets a daemon
that starts after a crash finish those changes; a failure of the changes takes
the line back, or, when another write came after it, says where it stays.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from braind.errors import BraindError
from braind.files.durable import Appended, append_line, retract
from braind.files.state import RootState, compact_line
from braind.files.validate import diary_date, open_dir
from braind.model.entries import Entry, Line, Meta, render_line
from braind.model.roots import Root
from braind.services.context import Context

NEW = "@new"  # in an intent's changes: the fp of the line they come with
Then = Callable[[str | None], None]


class Diary:
    """The diary's writes: one line at a time, with the state changes it brings."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self._unfinished: dict[tuple[str, ...], dict[str, Any]] = {}  # writes whose line stayed but state failed

    def state(self, root: Root) -> RootState:
        """The state of a root."""
        return self.context.syncer.states.of(root)

    def append(self, root: Root, date: str, line: Line, then: Then | None = None) -> dict[str, Any]:
        """Write the line, index it, then run `then(fp)` (the state the line needs); if that fails, take it back.

        The index is re-read only when the day changed behind our back. All or nothing: when `then`
        fails, the line is cut off again and the error says so, or, if another write came after it,
        the error says where the line stays.
        """
        name = f"{date}.md"
        rendered = render_line(line)
        syncer = self.context.syncer
        with syncer.lock:
            self.context.prepare_write(root)
            dir_fd = open_dir(root.path, ("diary",), create=True)
            try:
                appended = append_line(dir_fd, name, rendered)
                loaded = syncer.sync_append(root, Path("diary", name), appended)
                entry = _last_matching(loaded.entries, line)
                if then is not None:
                    self._then(then, entry, root, dir_fd, name, appended)
            finally:
                os.close(dir_fd)
        return {"fp": entry.fp if entry else None, "path": loaded.path, "date": date, "time": line.time}

    def _then(self, then: Then, entry: Entry | None, root: Root, dir_fd: int, name: str, appended: Appended) -> None:
        """Run the second half of a two-file write; on failure undo the first half, or say exactly what stays."""
        try:
            try:
                then(entry.fp if entry else None)
            except OSError as exc:
                raise BraindError("io_error", f"cannot write the state of {root.path}: {exc.strerror}") from None
        except BraindError as exc:
            taken_back = retract(dir_fd, name, appended)
            self.context.syncer.sync_path(root, root.path / "diary" / name)
            if taken_back:
                raise BraindError(exc.reason, f"{exc.message}; nothing was written", **exc.data) from None
            path, fp = str(root.path / "diary" / name), entry.fp if entry else None
            raise BraindError(
                exc.reason,
                f"{exc.message}; the new line stays in {path} as entry {fp} (another write came after it)",
                **{**exc.data, "written": {"fp": fp, "path": path}},
            ) from None

    def append_with(
        self, root: Root, line: Line, changes: list[dict[str, Any]], job: tuple[str, ...]
    ) -> dict[str, Any]:
        """Append a line to today's diary and the state changes it brings (NEW standing for its fp), all or nothing.

        An intent written to state.log first lets a daemon that starts after a crash finish the
        changes; a failure of the changes takes the line back. A retry of a write left half done
        (its line could not be taken back) only writes the changes.
        """
        now = self.context.clock()
        stamped = Line(now.strftime("%H:%M"), line.text, line.meta)
        if not changes:
            return self.append(root, now.date().isoformat(), stamped)
        written = self._unfinished.pop(job, None)
        if written is not None and self._still_live(written):
            self._complete(root, changes, written["fp"], None)
            return written
        day = now.date().isoformat()
        with self.context.syncer.lock:
            size = _size(root.path / "diary" / f"{day}.md")  # the line lands after this: the intent says so
            intent = self._intend(root, f"diary/{day}.md", render_line(stamped), size, changes)
            try:
                return self.append(root, day, stamped, lambda fp: self._complete(root, changes, fp, intent))
            except BraindError as exc:
                if "written" in exc.data:
                    self._unfinished[job] = {**exc.data["written"], "date": day, "time": stamped.time}
                raise

    def _still_live(self, written: dict[str, Any]) -> bool:
        """True while the line a half-done write left is still a live entry."""
        found = [e for e in self.context.index.select("fp", [written["fp"] or ""]) if e.path == written["path"]]
        return bool(found) and found[0].status != "tombstoned"

    def _intend(self, root: Root, path: str, line: str, size: int, changes: list[dict[str, Any]]) -> str:
        """The intent, before the line: when it cannot be written, nothing is."""
        try:
            return self.state(root).intend(path, line, size, changes)
        except BraindError as exc:
            raise BraindError(exc.reason, f"{exc.message}; nothing was written", **exc.data) from None

    def _complete(self, root: Root, changes: list[dict[str, Any]], fp: str | None, intent: str | None) -> None:
        """Write a line's state changes now that it is durable (fp None: left to its intent, at the next start)."""
        if fp is None:
            return
        done = [{**_filled(c, fp), **({"intent": intent} if intent else {})} for c in changes]
        state = self.state(root)
        written = state.record(done)
        lines = [compact_line(c["fp"], 1, "tombstone", c["detail"]) for c in done if c.get("why") == "key"]
        state.compact_log(lines, after=written)

    def finish_intents(self, root: Root) -> list[str]:
        """Complete what a crash cut short: the changes of intents whose line is on disk; close the others."""
        state, done = self.state(root), []
        for intent in list(state.intents.values()):
            entry = self._intended(root, intent)
            if entry is None:
                state.record([{"op": "void", "intent": intent["id"]}])
                continue
            self._complete(root, list(intent.get("then", [])), entry.fp, intent["id"])
            done.append(f"finished the state changes of {entry.fp} ({entry.path}:{entry.line}) a crash cut short")
        return done

    def _intended(self, root: Root, intent: dict[str, Any]) -> Entry | None:
        """The entry an intent's line became, if that line is in its diary file."""
        path = str(intent.get("path"))
        parts = Path(path).parts
        if len(parts) != 2 or parts[0] != "diary" or diary_date(parts[1]) is None:  # state.log may be hand-edited
            return None
        loaded = self.context.syncer.load(root, Path(path))
        after = _lines_before(root.path / path, intent.get("size"))
        found = [
            e
            for e in loaded.entries
            if e.line > after
            and render_line(Line(e.time, e.text, Meta(e.type, e.key, e.triggers))) == intent.get("line")
        ]
        return found[0] if found else None


def _last_matching(entries: Sequence[Entry], line: Line) -> Entry | None:
    """The newest entry that is the line just written."""
    for entry in reversed(entries):
        if (entry.time, entry.text, entry.type, entry.key, entry.triggers) == (
            line.time,
            line.text,
            line.meta.type,
            line.meta.key,
            line.meta.triggers,
        ):
            return entry
    return None


def _size(path: Path) -> int:
    """A file's size, 0 when it is missing."""
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _lines_before(path: Path, size: object) -> int:
    """How many lines a file had when it was `size` bytes long (an intent's line comes after them)."""
    if not isinstance(size, int) or size <= 0:
        return 0
    try:
        with open(path, "rb") as f:
            head = f.read(size)
    except OSError:
        return 0
    return head.count(b"\n") + (0 if head.endswith(b"\n") else 1)


def _filled(change: dict[str, Any], fp: str) -> dict[str, Any]:
    """A change with the NEW placeholder replaced by the fp of the line it came with."""
    return {k: v.replace(NEW, fp) if isinstance(v, str) else v for k, v in change.items()}
