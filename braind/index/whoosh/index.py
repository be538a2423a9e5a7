"""One partition of the index: its Whoosh index, the overlay of queued changes, the committer, and reads.

Nothing else in braind imports Whoosh but this package; services reach the index
through `braind.index.api`. Writes are queued in an overlay that reads see at
once and a committer thread writes in batches; a search ranks committed
documents from posting arrays (`postings`, `braind.index.ranking`) and the
overlay's entries by hand, so a note is recallable the moment it is queued.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from braind.index import analysis, ranking
from braind.index.api import FileRecord, Filters, Found, check_limit, parse_query
from braind.index.hits import finish_hits, make_found
from braind.index.whoosh import caches, compat, postings
from braind.index.whoosh.changes import Change, Known, remember_searched, searched_after, write_batch
from braind.index.whoosh.documents import (
    FILE,
    make_schema,
    read_records,
    to_entry,
)
from braind.index.whoosh.rebuild import Rebuild
from braind.index.whoosh.searching import NOTHING_UNSEARCHED, Searching
from braind.index.whoosh.store import Store
from braind.model.entries import Entry

log = logging.getLogger(__name__)

_MAX_BACKOFF = 64
_CACHE_SIZE = 64
_LINE = operator.attrgetter("line")


class Index(Searching):
    """The on-disk index plus the overlay of queued changes; safe to use from many threads."""

    def __init__(
        self,
        state_dir: Path,
        identity: str,
        commit_ms: int = 500,
        languages: tuple[str, ...] = analysis.DEFAULT_LANGUAGES,
    ) -> None:
        self._commit_s = commit_ms / 1000
        self.languages = tuple(languages)
        self.language = analysis.language(self.languages)
        self._schema = make_schema(self.languages)
        self._store = Store(Path(state_dir), identity, self.languages, self._schema)
        self._ix: Any = None
        self._searcher: Any = None
        self._records: dict[str, FileRecord] = {}
        self._counts: dict[str, int] = {}
        self._pending: dict[str, Change] = {}
        self._committing: dict[str, Change] = {}
        self._known: tuple[Any, Known] = (None, {})  # the open Whoosh index, and what commits wrote to it
        self._rebuild: Rebuild | None = None
        self._cache: dict[object, set[int]] = {}
        self._view: postings.SearcherView | None = None  # once stale, what the next searcher's view carries over
        self._segments = caches.SegmentCache()  # per-segment arrays and lexicons that outlive searchers
        self._searched: dict[str, tuple[Entry, ...]] = {}  # what the searcher holds of recently committed or read files
        self._unsearched = (-1, NOTHING_UNSEARCHED)  # see _unsearched_entries()
        self._mask: set[int] = set()
        self._mask_version = -1
        self._roots: tuple[int, frozenset[str]] = (-1, frozenset())
        self._version = 0
        self._generation = 0
        self._lock = threading.Lock()  # the overlay and the committed records
        self._search_lock = threading.Lock()  # the searcher (Whoosh searchers are not thread-safe)
        self._commit_lock = threading.Lock()  # one writer at a time
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # -- opening -----------------------------------------------------------------

    def open(self) -> bool:
        """Open the index, or start a fresh one; True means the caller must reconcile everything."""
        compat.check_version()
        self._store.prepare()
        problem = self._store.problem()
        if problem is None:
            try:
                self._load()
                return False
            except Exception as exc:  # any failure to read a cache means: rebuild it
                problem = f"unreadable ({type(exc).__name__}: {exc})"
        level = logging.INFO if problem == "missing" else logging.WARNING
        log.log(level, "index %s is %s; starting a fresh one", self._store.dir, problem)
        self._store.discard()
        self._store.create()
        self._load()
        return True

    def _load(self) -> None:
        """Open the existing index and read every file record, which also proves it readable."""
        ix = self._store.open()
        searcher = ix.searcher()
        try:
            records, counts = read_records(searcher)
        except BaseException:
            searcher.close()
            raise
        self._ix, self._searcher = ix, searcher
        self._records, self._counts = records, counts
        self._cache, self._view, self._searched = {}, None, {}

    def damage(self) -> str | None:
        """Why the index on disk can no longer be used (checked while running), or None when it reads."""
        return self._store.damage()

    def reset(self) -> None:
        """Move a damaged index aside and start an empty one; queued changes stay queued."""
        with self._commit_lock, self._search_lock:
            old = self._searcher
            self._store.prepare()
            self._store.discard()
            self._store.create()
            self._load()
            with self._lock:
                self._generation += 1
                self._version += 1
        with contextlib.suppress(Exception):
            old.close()

    # -- the committer -----------------------------------------------------------

    def start(self) -> None:
        """Start the background thread that commits queued changes every commit_ms at most."""
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="braind-index-commit", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """Commit whenever something is queued, no more often than commit_ms; back off on errors."""
        last, failures = 0.0, 0
        while self._wake.wait() and not self._stopping.is_set():
            delay = last + self._commit_s * min(2**failures, _MAX_BACKOFF) - time.monotonic()
            if delay > 0 and self._stopping.wait(delay):
                return
            self._wake.clear()
            if self._stopping.is_set():  # close() may have set the wake-up just cleared
                return
            try:
                self.commit()
                failures = 0
            except Exception:
                log.exception("index commit failed; will retry")
                failures += 1
                self._wake.set()
            last = time.monotonic()

    def close(self) -> None:
        """Stop the committer, commit what is queued and release the index files."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._rebuild is not None:
            self._rebuild.abort()
        if self._ix is None:
            return
        try:
            self.commit()
        finally:
            with self._search_lock:
                self._searcher.close()
                self._ix = self._searcher = None

    def commit(self) -> None:
        """Commit the queued changes now; they stay visible throughout."""
        with self._commit_lock:
            batch = self._take_batch()
            if not batch:
                return
            try:
                write_batch(self._ix, batch, self._known_for(batch))
                self._publish(batch)
            except BaseException:
                self._restore_batch(batch)  # re-applying a batch is harmless: it is diffed against what is committed
                raise

    def _known_entries(self) -> Known:
        """The entries recent commits wrote, for the Whoosh index open now: a reopened or swapped one starts unknown."""
        if self._known[0] is not self._ix:
            self._known = (self._ix, {})
        return self._known[1]

    def _known_for(self, batch: dict[str, Change]) -> Known:
        """The known committed entries, with those of the batch's files that a read of the searcher already holds.

        The searcher is the last commit's, which the writer starts from: a busy day read once for a note
        is not read again for the commit that follows it.
        """
        known = self._known_entries()
        with self._lock:
            for path in batch.keys() - known.keys():
                held = self._searched.get(path)
                if held is not None:
                    known[path] = held
        return known

    def _remembered(self, path: str) -> tuple[Entry, ...] | None:
        """A file's committed entries when a recent commit to the open index wrote them, else None."""
        ix, known = self._known
        return known.get(path) if ix is self._ix else None

    def _take_batch(self) -> dict[str, Change]:
        """Move the queue to the committing snapshot, which stays visible until published."""
        with self._lock:
            batch, self._pending = self._pending, {}
            self._committing = batch
            self._version += 1
            return batch

    def _restore_batch(self, batch: dict[str, Change]) -> None:
        """Put a failed batch back in the queue, under any newer changes."""
        with self._lock:
            self._pending = {**batch, **self._pending}
            self._committing = {}
            self._version += 1

    def _publish(self, batch: dict[str, Change]) -> None:
        """Swap in a new searcher and drop the snapshot it now contains, atomically for readers."""
        searcher = compat.searcher_keeping(self._ix, self._searcher)  # the readers of untouched segments kept
        self._read_new_segments(searcher)
        with self._search_lock:
            old, self._searcher, self._cache = self._searcher, searcher, {}  # the view goes stale: see _view_now()
            with self._lock:
                for path, change in batch.items():
                    self._apply_record(path, change)
                self._searched = searched_after(self._searched, batch)
                self._committing = {}
                self._version += 1
                self._generation += 1
        compat.close_unshared(old, searcher)

    def _read_new_segments(self, searcher: Any) -> None:
        """Read what the first search would of the segments a commit wrote or merged, here in the committer.

        A merge can make a segment of the whole partition: reading its term table is tens of
        milliseconds, which the first search after the commit would otherwise wait for.
        """
        try:
            postings.read_segments(searcher, self._segments, (analysis.FIELD, postings.HEADS), self._searcher)
        except Exception:  # only a read ahead: the search reads the segment itself, and reports what is wrong
            log.debug("could not read new segments ahead", exc_info=True)

    def _apply_record(self, path: str, change: Change) -> None:
        """Update the committed record table after a change is committed."""
        if change.record is None:
            self._records.pop(path, None)
            self._counts.pop(path, None)
        else:
            self._records[path] = change.record
            self._counts[path] = len(change.entries)

    def alive(self) -> bool:
        """True while the index is open and its committer (once started) is running."""
        return self._ix is not None and (self._thread is None or self._thread.is_alive())

    @property
    def generation(self) -> int:
        """A counter that increases after every commit, to wait for one."""
        return self._generation

    # -- writes ------------------------------------------------------------------

    def replace_file(self, record: FileRecord, entries: Sequence[Entry]) -> None:
        """Queue: the file's documents become exactly `entries`; visible to reads at once."""
        self._queue(record.path, Change(record, tuple(entries)))

    def remove_file(self, path: str) -> None:
        """Queue the removal of a file's documents; hidden from reads at once."""
        self._queue(path, Change(None))

    def _queue(self, path: str, change: Change) -> None:
        """Record a change in the overlay (and in a running rebuild's log) and wake the committer."""
        with self._lock:
            self._pending[path] = change
            self._version += 1
            if self._rebuild is not None:
                self._rebuild.changes[path] = change
        self._wake.set()

    # -- reads -------------------------------------------------------------------

    def file_records(self) -> dict[str, FileRecord]:
        """Every indexed file's record, including queued changes."""
        with self._lock:
            records = dict(self._records)
            for path, change in self._overlay().items():
                if change.record is None:
                    records.pop(path, None)
                else:
                    records[path] = change.record
        return records

    def record(self, path: str) -> FileRecord | None:
        """One file's record, including queued changes (None when not indexed)."""
        with self._lock:
            change = self._pending.get(path) or self._committing.get(path)
            return change.record if change is not None else self._records.get(path)

    def roots(self) -> frozenset[str]:
        """The roots of every file in this index, queued changes included; kept until the next change."""
        with self._lock:
            version, found = self._roots
            if version != self._version:
                found = frozenset(record.root for record in self._records.values()) | {
                    change.record.root for change in self._overlay().values() if change.record is not None
                }
                self._roots = (self._version, found)
        return found

    def entries_for(self, path: str) -> list[Entry]:
        """The current entries of one file, by line, including queued changes."""
        return sorted(self.file_entries(path), key=_LINE)

    def recent(self, path: str, count: int) -> list[Entry]:
        """The last `count` entries of one file, by line: what a day's diary shows of itself, whatever its size."""
        return sorted(self.file_entries(path)[-count:], key=_LINE) if count > 0 else []

    def file_entries(self, path: str) -> tuple[Entry, ...]:
        """The current entries of one file in the order they were read (file order), as held, without a copy.

        A queued change or what the last commits wrote needs no searcher, so a note does not wait for a search.
        """
        held = self._held_entries(path)
        if held is not None:
            return held
        with self._search_lock:
            self._check_open()
            held = self._held_entries(path)  # a commit may have published it meanwhile
            if held is not None:
                return held
            read = compat.StoredFields(self._searcher)
            docs = map(read, self._searcher.document_numbers(path=path))
            entries = tuple(sorted((to_entry(doc) for doc in docs if doc.get("kind") != FILE), key=_LINE))
            with self._lock:  # the searcher holds these until a commit changes the file: read them once
                self._searched = remember_searched(self._searched, path, entries)
            return entries

    def _held_entries(self, path: str) -> tuple[Entry, ...] | None:
        """A file's entries from a queued change (loaders build them in file order) or a recent read, else None."""
        with self._lock:
            change = self._pending.get(path)
            change = self._committing.get(path) if change is None else change
            searched = self._searched.get(path)
        if change is not None:
            return change.entries
        return searched if searched is not None else self._remembered(path)

    def search(
        self,
        query: str,
        *,
        since: str | None = None,
        roots: Sequence[str] | None = None,
        type: str | None = None,
        limit: int = 20,
        snippet_chars: int = 240,
        strict: bool = False,
    ) -> Found:
        """Entries holding every query word first, then (unless strict) the best holding some; with the totals."""
        parsed = parse_query(query, self.language)
        check_limit(limit)
        filters = Filters(since, None if roots is None else tuple(roots), type)
        terms = parsed.required
        with self.reading:
            maps, stats = self.term_maps(terms)
            weights = [ranking.weights_of(st) for st in stats]
            ranked = self.rank(terms, maps, weights, filters, max(limit, ranking.DEPTH), strict)
            chosen = ranking.reachable(ranked.full, ranked.partial, limit, ranking.most_bonus(parsed))
            loaded = self.load(chosen)
        found = finish_hits(self.language, parsed, list(zip(chosen, loaded, strict=True)))[:limit]
        return make_found(self.language, found, terms, stats, ranked, snippet_chars)

    def stats(self) -> dict[str, Any]:
        """Counts and state for `status`: entries and files include queued changes."""
        with self._lock:
            counts = dict(self._counts)
            for path, change in self._overlay().items():
                counts.pop(path, None)
                if change.record is not None:
                    counts[path] = len(change.entries)
            queued = len(self._pending) + len(self._committing)
            state = "closed" if self._ix is None else "rebuilding" if self._rebuild else "ready"
        with self._search_lock:
            segments = len(list(self._searcher.reader().leaf_readers())) if self._searcher else 0
        return {
            "entries": sum(counts.values()),
            "files": len(counts),
            "queued": queued,
            "segments": segments,
            "state": state,
        }

    # -- rebuild -----------------------------------------------------------------

    def rebuild(self, since: Mapping[str, tuple[FileRecord | None, Sequence[Entry]]] | None = None) -> Rebuild:
        """Start building a fresh index beside the live one, which keeps answering.

        `since`: changes made to this index after a larger rebuild began and before this one
        did (already committed, maybe), re-applied at the swap like those made from now on.
        """
        with self._lock:
            if self._rebuild is not None:
                raise RuntimeError("a rebuild is already running")
            rebuild = Rebuild(
                self._store.new_directory(), self._schema, self._lock, self._finish_rebuild, self._abort_rebuild
            )
            for path, (record, entries) in (since or {}).items():
                rebuild.changes[path] = Change(record, tuple(entries))
            # Queued changes are re-applied at the end too, like those made during the build.
            rebuild.changes.update(self._overlay())
            self._rebuild = rebuild
            return self._rebuild

    def _finish_rebuild(self, rebuild: Rebuild) -> None:
        """Swap the rebuilt index in after re-applying the changes made while it was built."""
        with self._commit_lock:
            with self._lock:
                changes, self._rebuild = dict(rebuild.changes), None
            if changes:
                write_batch(rebuild.ix, changes)
            with self._search_lock:
                self._swap(rebuild.directory)
        log.debug("index rebuilt: %d files, %d entries", rebuild.files, rebuild.entries)

    def _swap(self, directory: Path) -> None:
        """Replace the live index directory by the rebuilt one (caller holds the locks)."""
        old = self._searcher
        trash = self._store.swap_in(directory)
        with self._lock:
            self._load()
            self._generation += 1
            self._version += 1
        old.close()
        shutil.rmtree(trash, ignore_errors=True)

    def _abort_rebuild(self, rebuild: Rebuild) -> None:
        """Forget a rebuild; the live index is untouched."""
        with self._lock:
            if self._rebuild is rebuild:
                self._rebuild = None
