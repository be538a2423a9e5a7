"""The diary services behind the socket: note, recall, inject, status and reindex."""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from braind import __version__
from braind.config import Config
from braind.errors import BraindError
from braind.files.durable import Appended, append_line, retract
from braind.files.problems import Problems
from braind.files.validate import open_dir
from braind.index.partitioned import PartitionedIndex
from braind.index.whoosh.index import Found, Hit
from braind.ingest.sync import Report, Syncer, root_available, walk
from braind.model.entries import Entry, Line, render_line
from braind.model.redact import neutralise_braces
from braind.model.roots import Root, ensure_root, project_root, user_root
from braind.services.inject import TurnLedger
from braind.services.layered.inject import compose
from braind.services.layered.tools import LayeredMemory
from braind.services.typed.approval import Approver
from braind.services.typed.memory import TypedMemory
from braind.services.typed.triggers import Chosen, cwd_triggers, signal_triggers, triggered_part

Clock = Callable[[], dt.datetime]
Then = Callable[[str | None], None]
_BLOCK_CACHE = 256


def local_now() -> dt.datetime:
    """The local wall-clock time, which names diary days and stamps entries."""
    return dt.datetime.now().astimezone()


class Memory:
    """Every operation on memory, independent of the socket that exposes it."""

    def __init__(
        self, config: Config, index: PartitionedIndex, syncer: Syncer, problems: Problems, clock: Clock = local_now
    ) -> None:
        self.config = config
        self.index = index
        self.syncer = syncer
        self.problems = problems
        self.clock = clock
        self.user = user_root(config.memory_root)
        self.projects = [project_root(p) for p in config.projects if p.is_dir()]
        self.ledger = TurnLedger()
        self._blocks: OrderedDict[tuple[Any, ...], tuple[str, list[Any], list[Chosen]]] = OrderedDict()
        self._blocks_lock = threading.Lock()
        self.started = time.monotonic()
        self.health: Callable[[], dict[str, Any]] = lambda: {"state": "stopped"}
        self.root_created: Callable[[], None] = lambda: None
        self.claim: Callable[[Root], None] = lambda root: None  # the daemon holds a root's lock before writing it
        self.reindexing: dict[str, int] | None = None
        self._reindex_lock = threading.Lock()
        self.layered = LayeredMemory(self)
        self.approver = Approver(config.approval)
        self.typed = TypedMemory(self)

    def roots(self) -> list[Root]:
        """Every root the daemon watches: the user root, then configured projects."""
        return [self.user, *self.projects]

    def root_for(self, project: str | None) -> Root:
        """The root a write goes to: the project's when one is named."""
        return self.layered.project(project) if project else self.user

    def visible_roots(self, project: str | None, realm: str | None = None) -> list[Root]:
        """What a request sees: the user root plus at most the one named project."""
        roots = [self.user] + ([self.layered.project(project)] if project else [])
        return [r for r in roots if realm is None or r.realm == realm]

    def brain_note(
        self,
        text: str,
        type: str = "note",
        key: str | None = None,
        triggers: Sequence[str] = (),
        project: str | None = None,
        session: str | None = None,
        approved: bool = False,
    ) -> dict[str, Any]:
        """Append one entry to today's diary, durably, and make it recallable before replying."""
        return self.typed.write(text, type, key, triggers, project, approved)

    def append(self, root: Root, date: str, line: Line, then: Then | None = None) -> dict[str, Any]:
        """Write the line, index it, then run `then(fp)` (the state the line needs); if that fails, take it back.

        The index is re-read only when the day changed behind our back. All or nothing: when `then`
        fails, the line is cut off again and the error says so, or, if another write came after it,
        the error says where the line stays.
        """
        name = f"{date}.md"
        rendered = render_line(line)
        with self.syncer.lock:
            if ensure_root(root):
                self.root_created()
            self.claim(root)
            dir_fd = open_dir(root.path, ("diary",), create=True)
            try:
                appended = append_line(dir_fd, name, rendered)
                loaded = self.syncer.sync_append(root, Path("diary", name), appended)
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
            self.syncer.sync_path(root, root.path / "diary" / name)
            if taken_back:
                raise BraindError(exc.reason, f"{exc.message}; nothing was written", **exc.data) from None
            path, fp = str(root.path / "diary" / name), entry.fp if entry else None
            raise BraindError(
                exc.reason,
                f"{exc.message}; the new line stays in {path} as entry {fp} (another write came after it)",
                **{**exc.data, "written": {"fp": fp, "path": path}},
            ) from None

    def require_approval(self, important: bool, approved: bool, what: str) -> None:
        """Fail closed on important writes that carry no approval (SPEC §6)."""
        self.approver.require(important, approved, what)

    def brain_recall(
        self,
        query: str,
        limit: int | None = None,
        days: int | None = None,
        type: str | None = None,
        project: str | None = None,
        realm: str | None = None,
        strict: bool = False,
    ) -> dict[str, Any]:
        """Entries holding every query word, then the best holding some; all of memory unless days narrows it."""
        days = days or self.config.recall.scan_days
        since = (self.clock().date() - dt.timedelta(days=days - 1)).isoformat() if days else None
        roots = [str(r.path) for r in self.visible_roots(project, realm)]
        found = self.index.search(
            query,
            since=since,
            roots=roots,
            type=type,
            limit=limit or self.config.recall.max_results,
            snippet_chars=self.config.recall.snippet_chars,
            strict=strict,
        )
        self.typed.used(h.entry for h in found.hits)
        result = {"hits": [_hit(h) for h in found.hits], "total": found.total, "partial_total": found.partial_total}
        if not found.hits:
            result["hint"] = recall_hint(found, days or None, strict, type, realm)
        return result

    def inject(
        self,
        session: str,
        turn: str | int | None = None,
        project: str | None = None,
        signals: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The memory block for one turn, served once per (session, turn)."""
        if turn is not None and not self.ledger.first(session, turn):
            return {"text": "", "bytes": 0, "parts": [], "skipped": "already_injected"}
        snapshot = self.layered.snapshot(session, project)
        triggers = signal_triggers(signals)
        self.typed.turn(session, turn, project, [t for t in triggers if t not in cwd_triggers(signals)])
        text, parts, chosen = self._compose(session, project, snapshot, tuple(triggers))
        self.typed.used(c.entry for c in chosen)
        skipped = None if text else "empty"
        return {
            "text": text,
            "bytes": len(text.encode("utf-8")),
            "parts": [p.describe() for p in parts],
            "skipped": skipped,
        }

    def _compose(
        self, session: str, project: str | None, snapshot: Any, triggers: tuple[str, ...]
    ) -> tuple[str, list[Any], list[Chosen]]:
        """The block, cached until memory changes: a steady session's turns cost a lookup."""
        version = (self.index.version, self.syncer.states.version)
        key = (session, id(snapshot), project, self.clock().date(), version, triggers)
        with self._blocks_lock:
            cached = self._blocks.get(key)
        if cached is None:
            chosen = self.typed.triggered(triggers, project)
            shown = {c.entry.fp for c in chosen}
            diary = [e for e in self._recent_diary(project) if e.fp not in shown]
            text, parts = compose(snapshot, diary, self.config.inject, triggered_part(chosen))
            cached = (neutralise_braces(text), parts, chosen)
            with self._blocks_lock:
                self._blocks[key] = cached
                while len(self._blocks) > _BLOCK_CACHE:
                    self._blocks.popitem(last=False)
        return cached

    def _recent_diary(self, project: str | None) -> list[Entry]:
        """Live entries of the last inject.diary_days diary days of the visible roots."""
        today = self.clock().date()
        days = [(today - dt.timedelta(days=n)).isoformat() for n in range(self.config.inject.diary_days)]
        found: list[Entry] = []
        for root in self.visible_roots(project):
            for day in days:
                found += self._live_tail(str(root.path / "diary" / f"{day}.md"))
        return found

    def _live_tail(self, path: str) -> list[Entry]:
        """A day's last live entries, as many as the block could show (each takes a line at least)."""
        wanted, count = self.config.inject.max_lines, self.config.inject.max_lines
        while True:
            tail = self.index.recent(path, count)
            live = [e for e in tail if e.status != "tombstoned"]
            if len(live) >= wanted or len(tail) < count:
                return live[-wanted:]
            count *= 2

    def status(self) -> dict[str, Any]:
        """Everything a person needs to see whether memory is healthy."""
        return {
            "version": __version__,
            "pid": os.getpid(),
            "uptime": round(time.monotonic() - self.started, 3),
            "config": self.config.source,
            "roots": [_root_status(r, self.syncer.emptied(r)) for r in self.roots()],
            "index": (index := self.index.stats()),
            "index_state": index["state"],
            "generation": self.index.generation,
            "watcher": self.health(),
            "rejected": [_problem(p) for p in self.problems.files()],
            "skipped_lines": [_problem(p) for p in self.problems.lines()],
            "reindex": self.reindexing,
        }

    def reconcile(self, roots: Sequence[Root] | None = None, verify: bool = False) -> Report:
        """Bring the index in line with the disk for the given roots (all by default); verify compares hashes too."""
        total = Report()
        for root in roots or self.roots():
            self.layered.migrator.ensure(root)
            report = self.syncer.reconcile(root, verify=verify)
            if root_available(root):
                self.typed.reconcile_status(root)
            for key, value in report.as_dict().items():
                setattr(total, key, getattr(total, key) + value)
        return total

    def reindex(self) -> dict[str, Any]:
        """Rebuild the index from the files while the old one keeps answering."""
        if not self._reindex_lock.acquire(blocking=False):
            raise BraindError("busy", "a reindex is already running")
        try:
            return self._rebuild()
        finally:
            self.reindexing = None
            self._reindex_lock.release()

    def _rebuild(self) -> dict[str, Any]:
        """Load every file of every root into a fresh index, then swap it in."""
        started = time.monotonic()
        missing = [str(root.path) for root in self.roots() if not root_available(root) or self.syncer.emptied(root)]
        if missing and self.index.stats()["files"]:
            raise BraindError("root_unavailable", f"not rebuilding while {', '.join(missing)} is unavailable")
        todo = [(root, rel) for root in self.roots() if root_available(root) for rel in walk(root)]
        self.reindexing = {"done": 0, "total": len(todo)}
        rebuild = self.index.rebuild()
        entries = files = 0
        try:
            for done, (root, rel) in enumerate(todo, start=1):
                loaded = self.syncer.load(root, rel)
                self.problems.set(loaded.path, loaded.problems)
                if loaded.record is not None:
                    rebuild.add(loaded.record, loaded.entries)
                    files, entries = files + 1, entries + len(loaded.entries)
                self.reindexing = {"done": done, "total": len(todo)}
            rebuild.finish()
        except BaseException:
            rebuild.abort()
            raise
        seconds = round(time.monotonic() - started, 3)
        return {"scanned": len(todo), "files": files, "entries": entries, "seconds": seconds}


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


def recall_hint(found: Found, days: int | None, strict: bool, type: str | None, realm: str | None) -> str:
    """What to try when recall found nothing: the words no entry holds, and what narrowed the search."""
    advice = []
    if found.unmatched:
        advice.append(f"no entry holds {' or '.join(repr(word) for word in found.unmatched)}: try other words")
    if strict and found.partial_total:
        some = "1 entry holds" if found.partial_total == 1 else f"{found.partial_total} entries hold"
        advice.append(f"{some} some of the words: search without strict to see them")
    elif not found.unmatched:
        advice.append("no entry holds all of these words together: try fewer words")
    narrowed = [f"the last {days} days" if days else "", f"type {type}" if type else "", realm and f"{realm} memory"]
    if any(narrowed):
        advice.append(f"only {', '.join(filter(None, narrowed))} searched: widen the search to look further")
    return "; ".join(advice) + "."


def _hit(hit: Hit) -> dict[str, Any]:
    """One recall hit as the wire carries it."""
    entry = hit.entry
    return {
        "fp": entry.fp,
        "path": entry.path,
        "line": entry.line,
        "date": entry.date,
        "time": entry.time,
        "type": entry.type,
        "key": entry.key,
        "triggers": list(entry.triggers),
        "realm": entry.realm,
        "text": entry.text,
        "snippet": hit.snippet,
        "score": round(hit.score, 4),
        "match": hit.match,
        "matched": list(hit.matched),
    }


def _root_status(root: Root, emptied: bool = False) -> dict[str, Any]:
    """A root's path, realm and whether it can be read now (an emptied root looks unmounted: not usable)."""
    available = root_available(root) and not emptied
    reason = None if available else "empty" if emptied else ("symlink" if root.path.is_symlink() else "missing")
    return {"path": str(root.path), "realm": root.realm, "available": available, "reason": reason}


def _problem(problem: Any) -> dict[str, Any]:
    """A rejection or skipped line as the wire carries it."""
    return dict(problem.to_wire())
