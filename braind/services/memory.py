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
from braind.errors import BraindError
from braind.index.api import Found, Hit
from braind.ingest.sync import Report, root_available, walk
from braind.model.entries import Entry
from braind.model.redact import neutralise_braces
from braind.model.roots import Root
from braind.services.context import Context
from braind.services.inject import TurnLedger
from braind.services.layered.inject import compose
from braind.services.layered.tools import LayeredMemory
from braind.services.typed.memory import TypedMemory
from braind.services.typed.triggers import Chosen, cwd_triggers, signal_triggers, triggered_part

_BLOCK_CACHE = 256


class Memory:
    """The diary's operations behind the socket, independent of the socket that exposes them."""

    def __init__(self, context: Context, typed: TypedMemory, layered: LayeredMemory) -> None:
        self.context = context
        self.typed = typed
        self.layered = layered
        self.config = context.config
        self.index = context.index
        self.syncer = context.syncer
        self.roots = context.roots
        self.ledger = TurnLedger()
        self._blocks: OrderedDict[tuple[Any, ...], tuple[str, list[Any], list[Chosen]]] = OrderedDict()
        self._blocks_version: tuple[int, int] | None = None  # the memory the cached blocks were made of
        self._blocks_lock = threading.Lock()
        self.started = time.monotonic()
        self.health: Callable[[], dict[str, Any]] = lambda: {"state": "stopped"}  # the daemon plugs in its watcher's
        self.reindexing: dict[str, int] | None = None
        self._reindex_lock = threading.Lock()

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
        since = (self.context.clock().date() - dt.timedelta(days=days - 1)).isoformat() if days else None
        roots = [str(r.path) for r in self.roots.visible(project, realm)]
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
        """The block, cached until memory changes: a steady session's turns cost a lookup.

        Only blocks of the memory as it is now are kept: one made before a note can never be served
        again, and under agents writing, 256 of them held 7 MB.
        """
        version = (self.index.version, self.syncer.states.version)
        key = (session, id(snapshot), project, self.context.clock().date(), triggers)
        with self._blocks_lock:
            if version != self._blocks_version:
                self._blocks.clear()
                self._blocks_version = version
            cached = self._blocks.get(key)
        if cached is None:
            chosen = self.typed.triggered(triggers, project)
            shown = {c.entry.fp for c in chosen}
            diary = [e for e in self._recent_diary(project) if e.fp not in shown]
            text, parts = compose(snapshot, diary, self.config.inject, triggered_part(chosen))
            cached = (neutralise_braces(text), parts, chosen)
            with self._blocks_lock:
                if version != self._blocks_version:  # memory changed meanwhile: the block is already old
                    return cached
                self._blocks[key] = cached
                while len(self._blocks) > _BLOCK_CACHE:
                    self._blocks.popitem(last=False)
        return cached

    def _recent_diary(self, project: str | None) -> list[Entry]:
        """Live entries of the last inject.diary_days diary days of the visible roots."""
        today = self.context.clock().date()
        days = [(today - dt.timedelta(days=n)).isoformat() for n in range(self.config.inject.diary_days)]
        found: list[Entry] = []
        for root in self.roots.visible(project):
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
            "roots": [_root_status(r, self.syncer.emptied(r)) for r in self.roots.all()],
            "index": (index := self.index.stats()),
            "index_state": index["state"],
            "generation": self.index.generation,
            "watcher": self.health(),
            "rejected": [_problem(p) for p in self.context.problems.files()],
            "skipped_lines": [_problem(p) for p in self.context.problems.lines()],
            "reindex": self.reindexing,
        }

    def reconcile(self, roots: Sequence[Root] | None = None, verify: bool = False) -> Report:
        """Bring the index in line with the disk for the given roots (all by default); verify compares hashes too."""
        total = Report()
        for root in roots or self.roots.all():
            self.roots.migrated(root)
            report = self.syncer.reconcile(root, verify=verify)
            if root_available(root):
                self.typed.reconcile_status(root)
            for key, value in report.as_dict().items():
                setattr(total, key, getattr(total, key) + value)
        return total

    def prepare_notes(self) -> None:
        """Read ahead, in every available root, what the first note to today's diary needs (once, at start)."""
        today = Path("diary", f"{self.context.clock().date().isoformat()}.md")
        for root in self.roots.all():
            if root_available(root):
                self.syncer.prepare_append(root, today)

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
        missing = [str(root.path) for root in self.roots.all() if not root_available(root) or self.syncer.emptied(root)]
        if missing and self.index.stats()["files"]:
            raise BraindError("root_unavailable", f"not rebuilding while {', '.join(missing)} is unavailable")
        todo = [(root, rel) for root in self.roots.all() if root_available(root) for rel in walk(root)]
        self.reindexing = {"done": 0, "total": len(todo)}
        rebuild = self.index.rebuild()
        entries = files = 0
        try:
            for done, (root, rel) in enumerate(todo, start=1):
                loaded = self.syncer.load(root, rel)
                self.context.problems.set(loaded.path, loaded.problems)
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
