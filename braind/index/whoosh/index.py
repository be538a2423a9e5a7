"""The full-text index: a rebuildable cache of every entry, behind one small interface.

Nothing else in braind imports Whoosh but its helpers (analysis, postings,
writer). Changes are queued and committed by a background thread; until a
change is committed (and while it is being committed) it lives in an in-memory
overlay that search() and file_records() consult first, so a write is visible
to the next read. Committed documents of overlaid files are masked out of
Whoosh results, so an entry is never seen twice or stale. A commit writes only
the entries that changed: appending a line to a busy day costs one document.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import operator
import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from whoosh import index as whoosh_index
from whoosh.columns import NumericColumn
from whoosh.fields import COLUMN, ID, KEYWORD, STORED, TEXT, Schema
from whoosh.filedb.filestore import FileStorage
from whoosh.query import And, Every, Not, NullQuery, Or, Prefix, Query, Term, TermRange

from braind.errors import InvalidParams, Unavailable
from braind.index import analysis, manifest, ranking
from braind.index.whoosh import postings
from braind.index.whoosh.writer import open_writer
from braind.model.entries import Entry

SCHEMA_VERSION = 6

log = logging.getLogger(__name__)

_INDEX = "index"
_MANIFEST = "manifest.json"
_OLD = "index.old-"
_NEW = "index.new-"
_TRASH = "index.trash-"
_KEEP_OLD = 2
_LOCK_TIMEOUT = 10.0
_MAX_BACKOFF = 64
_CACHE_SIZE = 64
_FILE = "file"
_TOMBSTONED = "tombstoned"
_LIVE = "live"
_FP_HEAD = 3  # characters of fp indexed: a few thousand terms, not one per entry
_LINE = operator.attrgetter("line")
_KNOWN_FILES = 16  # files whose committed entries are remembered: their next change is diffed without reading them
CONTEXT_ENTRIES = ranking.CONTEXT_ENTRIES


@dataclass(frozen=True)
class FileRecord:
    """What the index knows about one memory file, to tell whether it changed."""

    root: str
    path: str  # absolute
    size: int
    mtime_ns: int
    sha256: str


@dataclass(frozen=True)
class Hit:
    """One search result: the entry, its relevance, a snippet, and which query words it holds."""

    entry: Entry
    score: float
    snippet: str
    match: str = "all"  # "all" when it holds every query word, else "partial"
    matched: tuple[str, ...] = ()


@dataclass(frozen=True)
class Found:
    """What a search found: the hits, how many entries hold all words and how many some, and words none holds."""

    hits: list[Hit]
    total: int
    partial_total: int = 0
    unmatched: tuple[str, ...] = ()


# The committed entries of recently written files, by path.
Known = dict[str, tuple[Entry, ...]]

# An uncommitted entry with the texts of the entries just before it in its file.
Fresh = tuple[Entry, tuple[str, ...]]


@dataclass(frozen=True)
class _Change:
    """A queued change to one file: its new record and entries, or None when removed."""

    record: FileRecord | None
    entries: tuple[Entry, ...] = ()


class Text(TEXT):
    """The entry text: analysed, stored, scored; frequencies without positions (see analysis.Counts)."""

    def __init__(self, languages: tuple[str, ...] = analysis.DEFAULT_LANGUAGES, stored: bool = True) -> None:
        super().__init__(analyzer=analysis.analyzer(languages), stored=stored, phrase=False)
        self.format = analysis.Counts()


def make_schema(languages: tuple[str, ...] = analysis.DEFAULT_LANGUAGES) -> Schema:
    """One document per entry, plus one per file so that entries and records commit together.

    Only what is searched or filtered on is indexed (each indexed field costs
    indexing speed); fp is not stored because Entry derives it.
    """
    return Schema(
        path=ID(stored=True),
        root=ID(stored=True),
        type=ID(stored=True),
        status=ID(stored=True),  # left out when live, so only the exceptions are posted
        date=ID(stored=True),
        stamp=COLUMN(NumericColumn("q")),
        text=Text(languages),
        file_key=COLUMN(NumericColumn("q")),  # which file, and where in it: an entry's neighbours, for ranking
        file_line=COLUMN(NumericColumn("i")),
        triggers=KEYWORD(stored=True),
        fp_head=ID,  # fp's first characters; select() checks the whole fp, which stored fields derive
        key=ID(stored=True),
        realm=STORED,
        kind=STORED,
        line=STORED,
        time=STORED,
        occurrence=STORED,
        entry_path=STORED,
        record=ID,  # only on file documents
        size=STORED,
        mtime_ns=STORED,
        sha256=STORED,
        count=STORED,
    )


def _stamp(entry: Entry) -> int:
    """yyyymmddHHMM as an integer, the tie-breaker that puts newer entries first."""
    digits = entry.date.replace("-", "") + (entry.time.replace(":", "") or "0000")
    return int(digits) if digits.isascii() and digits.isdigit() and len(digits) == 12 else 0


def _entry_doc(path: str, entry: Entry) -> dict[str, Any]:
    """The Whoosh document of one entry; empty optional fields are left out."""
    doc: dict[str, Any] = {
        "file_key": file_key(path),
        "file_line": entry.line,
        "path": path,
        "root": entry.root,
        "type": entry.type,
        "status": None if entry.status == _LIVE else entry.status,
        "date": entry.date,
        "stamp": _stamp(entry),
        "text": entry.text,
        "triggers": " ".join(entry.triggers),
        "fp_head": entry.fp[:_FP_HEAD],
        "realm": entry.realm,
        "kind": entry.kind,
        "key": entry.key,
        "line": entry.line,
        "time": entry.time,
        "occurrence": entry.occurrence,
        "entry_path": None if entry.path == path else entry.path,
    }
    return {name: value for name, value in doc.items() if value is not None and value != ""}


def _file_doc(record: FileRecord, count: int) -> dict[str, Any]:
    """The Whoosh document that stores a file's record and its number of entries."""
    return {
        "record": _FILE,
        "kind": _FILE,
        "root": record.root,
        "path": record.path,
        "size": record.size,
        "mtime_ns": record.mtime_ns,
        "sha256": record.sha256,
        "count": count,
        "stamp": 0,  # every segment needs the sort column, even one holding only file records
    }


def _entry(stored: dict[str, Any]) -> Entry:
    """Rebuild an Entry from a document's stored fields (empty fields were left out)."""
    return Entry(
        root=stored.get("root", ""),
        realm=stored.get("realm", ""),
        path=stored.get("entry_path", stored["path"]),
        line=stored.get("line", 0),
        date=stored.get("date", ""),
        time=stored.get("time", ""),
        text=stored.get("text", ""),
        kind=stored.get("kind", "diary"),
        type=stored.get("type", "note"),
        key=stored.get("key"),
        triggers=tuple(stored.get("triggers", "").split()),
        status=stored.get("status", "live"),
        occurrence=stored.get("occurrence", 0),
    )


def file_key(path: str) -> int:
    """A number naming a file, the same in every segment and process (a hash, not Python's salted one)."""
    return int.from_bytes(hashlib.blake2b(path.encode("utf-8", "surrogateescape"), digest_size=8).digest()) >> 2


def _record(stored: dict[str, Any]) -> FileRecord:
    """Rebuild a FileRecord from a file document's stored fields."""
    return FileRecord(stored["root"], stored["path"], stored["size"], stored["mtime_ns"], stored["sha256"])


def _write_batch(ix: Any, batch: dict[str, _Change], known: Known | None = None) -> None:
    """Apply file changes to an index in one commit; `known` holds the committed entries of recently written files."""
    known = {} if known is None else known
    old = {path: known.pop(path, None) for path in batch}  # unknown until this commit succeeds
    writer = open_writer(ix, timeout=_LOCK_TIMEOUT)
    try:
        searcher = writer.searcher()  # the writer's own: closed with it
        for path, change in batch.items():
            _apply_change(writer, searcher, path, change, old[path])
    except BaseException:
        writer.cancel()
        raise
    writer.commit()
    _remember(known, batch)


def _remember(known: Known, batch: dict[str, _Change]) -> None:
    """Remember the entries just committed for the files of a batch, forgetting the least recently written."""
    known.update((path, change.entries) for path, change in batch.items() if change.record is not None)
    while len(known) > _KNOWN_FILES:
        del known[next(iter(known))]


def _apply_change(writer: Any, searcher: Any, path: str, change: _Change, old: tuple[Entry, ...] | None) -> None:
    """Make a file's documents match a change, adding and deleting only the entries that differ.

    An appended line costs one entry document and the file's record document, not the whole file again.
    """
    if change.record is None:
        writer.delete_by_term("path", path, searcher=searcher)
        return
    found = None if old is None else _known_diff(searcher, path, old, change.entries)
    added, stale = found or _read_diff(searcher, path, change.entries)
    writer.add_document(**_file_doc(change.record, len(change.entries)))
    for entry in added:
        writer.add_document(**_entry_doc(path, entry))
    for docnum in stale:
        writer.delete_document(docnum)


def _known_diff(
    searcher: Any, path: str, old: Sequence[Entry], new: Sequence[Entry]
) -> tuple[list[Entry], list[int]] | None:
    """Entries to add and documents to delete, reading only the gone entries' documents (by fingerprint head).

    None when one of them is missing: the index does not hold what was remembered, so every document is read.
    """
    added, gone = _diff(old, new)
    stale = list(searcher.docs_for_query(And([Term("path", path), Term("record", _FILE)])))
    if gone:
        heads = Or([Term("fp_head", head) for head in sorted({entry.fp[:_FP_HEAD] for entry in gone})])
        for docnum in searcher.docs_for_query(And([Term("path", path), heads])):
            entry = _entry(searcher.stored_fields(docnum))
            if gone[entry] > 0:
                gone[entry] -= 1
                stale.append(docnum)
    return None if +gone else (added, stale)


def _read_diff(searcher: Any, path: str, new: Sequence[Entry]) -> tuple[list[Entry], list[int]]:
    """Entries to add and documents to delete, reading every committed document of the file."""
    records, committed = _committed_docs(searcher, path)
    added, gone = _diff([entry for entry, docs in committed.items() for _ in docs], new)
    return added, records + [committed[entry].pop() for entry in gone.elements()]


def _extends(new: Sequence[Entry], old: Sequence[Entry]) -> bool:
    """Whether `new` is the very entry objects of `old` followed by more: an append, checked without comparing."""
    return len(new) >= len(old) and all(map(operator.is_, old, new))


def _searched_after(searched: dict[str, tuple[Entry, ...]], batch: dict[str, _Change]) -> dict[str, tuple[Entry, ...]]:
    """What a searcher holds of recently committed files once a batch is committed: the newest few files."""
    found = {path: entries for path, entries in searched.items() if path not in batch}
    found.update((path, change.entries) for path, change in batch.items() if change.record is not None)
    return dict(list(found.items())[-_KNOWN_FILES:])


def _diff(old: Sequence[Entry], new: Sequence[Entry]) -> tuple[list[Entry], Counter[Entry]]:
    """The new entries not among the old ones, and the old ones no longer there (each as often as it occurs)."""
    if _extends(new, old):  # an append: the old entries, then more
        return list(new[len(old) :]), Counter()
    gone = Counter(old)
    added = []
    for entry in new:
        if gone[entry] > 0:
            gone[entry] -= 1
        else:
            added.append(entry)
    return added, +gone


def _committed_docs(searcher: Any, path: str) -> tuple[list[int], dict[Entry, list[int]]]:
    """A file's committed record documents, and its entry documents by entry."""
    records: list[int] = []
    entries: dict[Entry, list[int]] = {}
    for docnum in searcher.document_numbers(path=path):
        stored = searcher.stored_fields(docnum)
        if stored.get("kind") == _FILE:
            records.append(docnum)
        else:
            entries.setdefault(_entry(stored), []).append(docnum)
    return records, entries


def add_file(writer: Any, record: FileRecord, entries: Sequence[Entry]) -> None:
    """Add the documents of one file: its record, then its entries."""
    writer.add_document(**_file_doc(record, len(entries)))
    for entry in entries:
        writer.add_document(**_entry_doc(record.path, entry))


def _utc_stamp() -> str:
    """A sortable UTC timestamp for directory names."""
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")


@dataclass(frozen=True)
class Filters:
    """The search filters: entry date lower bound (undated entries such as MEMORY.md sections pass), roots, type."""

    since: str | None
    roots: tuple[str, ...] | None
    type: str | None

    def accepts(self, entry: Entry) -> bool:
        """The filters applied in Python, to uncommitted entries."""
        return (
            entry.status != _TOMBSTONED
            and (self.since is None or not entry.date or entry.date >= self.since)
            and (self.roots is None or entry.root in self.roots)
            and (self.type is None or entry.type == self.type)
        )

    def clauses(self) -> list[Query]:
        """The filters as Whoosh queries."""
        clauses: list[Query] = []
        if self.since is not None:
            clauses.append(Or([TermRange("date", self.since, None), Not(Every("date"))]))
        if self.roots is not None:
            clauses.append(Or([Term("root", root) for root in self.roots]) if self.roots else NullQuery)
        if self.type is not None:
            clauses.append(Term("type", self.type))
        return clauses


class Index:
    """The on-disk index plus the overlay of queued changes; safe to use from many threads."""

    def __init__(
        self,
        state_dir: Path,
        identity: str,
        commit_ms: int = 500,
        languages: tuple[str, ...] = analysis.DEFAULT_LANGUAGES,
    ) -> None:
        self._state_dir = Path(state_dir)
        self._dir = self._state_dir / _INDEX
        self._identity = identity
        self._commit_s = commit_ms / 1000
        self.languages = tuple(languages)
        self.language = analysis.language(self.languages)
        self._schema = make_schema(self.languages)
        self._ix: Any = None
        self._searcher: Any = None
        self._records: dict[str, FileRecord] = {}
        self._counts: dict[str, int] = {}
        self._pending: dict[str, _Change] = {}
        self._committing: dict[str, _Change] = {}
        self._known: tuple[Any, Known] = (None, {})  # the open Whoosh index, and what commits wrote to it
        self._rebuild: Rebuild | None = None
        self._cache: dict[object, set[int]] = {}
        self._view: postings.SearcherView | None = None
        self._segments = postings.SegmentCache()  # per-segment arrays and lexicons that outlive searchers
        self._searched: dict[str, tuple[Entry, ...]] = {}  # what the searcher holds of recently committed files
        self._unsearched: tuple[int, list[Fresh], list[str]] = (
            -1,
            [],
            [],
        )  # see _unsearched_entries()
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
        self._prepare_state_dir()
        problem = self._check_manifest()
        if problem is None:
            try:
                self._load()
                return False
            except Exception as exc:  # any failure to read a cache means: rebuild it
                problem = f"unreadable ({type(exc).__name__}: {exc})"
        level = logging.INFO if problem == "missing" else logging.WARNING
        log.log(level, "index %s is %s; starting a fresh one", self._dir, problem)
        self._discard()
        self._create()
        return True

    def _prepare_state_dir(self) -> None:
        """Create the state directory private to the user, and sweep leftovers of a crash."""
        self._state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self._state_dir.stat().st_mode & 0o077:
            os.chmod(self._state_dir, 0o700)
        for path in self._state_dir.iterdir():
            if path.name.startswith((_NEW, _TRASH)):
                shutil.rmtree(path, ignore_errors=True)

    def _manifest(self) -> dict[str, Any]:
        """What the manifest of a compatible index says."""
        return {
            "schema_version": SCHEMA_VERSION,
            "analyzer_version": analysis.ANALYZER_VERSION,
            "languages": list(self.languages),
            "identity": self._identity,
        }

    def _check_manifest(self) -> str | None:
        """Why the existing index cannot be used, or None when it looks compatible."""
        if not self._dir.is_dir():
            return "missing"
        return manifest.problem(self._state_dir / _MANIFEST, self._manifest())

    def _write_manifest(self) -> None:
        """Write the manifest atomically next to the index directory."""
        manifest.write(self._state_dir / _MANIFEST, self._manifest())

    def _load(self) -> None:
        """Open the existing index and read every file record, which also proves it readable."""
        ix = open_whoosh(self._dir)
        searcher = ix.searcher()
        try:
            records, counts = _read_records(searcher)
        except BaseException:
            searcher.close()
            raise
        self._ix, self._searcher = ix, searcher
        self._records, self._counts = records, counts
        self._cache, self._view, self._searched = {}, None, {}

    def _discard(self) -> None:
        """Move an unusable index aside for inspection, keeping only the newest few."""
        if self._dir.exists():
            aside = self._state_dir / (_OLD + _utc_stamp())
            os.replace(self._dir, aside)
            log.warning("moved the old index to %s", aside)
        old = sorted(p for p in self._state_dir.iterdir() if p.name.startswith(_OLD))
        for path in old[:-_KEEP_OLD]:
            shutil.rmtree(path, ignore_errors=True)

    def _create(self) -> None:
        """Create an empty index and its manifest, then open it."""
        self._dir.mkdir(mode=0o700)
        whoosh_index.create_in(str(self._dir), self._schema)
        self._write_manifest()
        self._load()

    def damage(self) -> str | None:
        """Why the index on disk can no longer be used (checked while running), or None when it reads."""
        problem = self._check_manifest()
        if problem is not None:
            return problem
        try:
            searcher = open_whoosh(self._dir).searcher()
            try:
                _read_records(searcher)
            finally:
                searcher.close()
        except Exception as exc:  # whatever Whoosh raises on a damaged file
            return f"unreadable ({type(exc).__name__}: {exc})"
        return None

    def reset(self) -> None:
        """Move a damaged index aside and start an empty one; queued changes stay queued."""
        with self._commit_lock, self._search_lock:
            old = self._searcher
            self._prepare_state_dir()
            self._discard()
            self._create()
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
                _write_batch(self._ix, batch, self._known_entries())
                self._publish(batch)
            except BaseException:
                self._restore_batch(batch)  # re-applying a batch is harmless: it is diffed against what is committed
                raise

    def _known_entries(self) -> Known:
        """The entries recent commits wrote, for the Whoosh index open now: a reopened or swapped one starts unknown."""
        if self._known[0] is not self._ix:
            self._known = (self._ix, {})
        return self._known[1]

    def _remembered(self, path: str) -> tuple[Entry, ...] | None:
        """A file's committed entries when a recent commit to the open index wrote them, else None."""
        ix, known = self._known
        return known.get(path) if ix is self._ix else None

    def _take_batch(self) -> dict[str, _Change]:
        """Move the queue to the committing snapshot, which stays visible until published."""
        with self._lock:
            batch, self._pending = self._pending, {}
            self._committing = batch
            self._version += 1
            return batch

    def _restore_batch(self, batch: dict[str, _Change]) -> None:
        """Put a failed batch back in the queue, under any newer changes."""
        with self._lock:
            self._pending = {**batch, **self._pending}
            self._committing = {}
            self._version += 1

    def _publish(self, batch: dict[str, _Change]) -> None:
        """Swap in a new searcher and drop the snapshot it now contains, atomically for readers."""
        # A fresh searcher, not Searcher.refresh(): in this Whoosh release refresh() keeps
        # readers of merged-away segments, which duplicates documents after a merge.
        searcher = self._ix.searcher()
        with self._search_lock:
            old, self._searcher, self._cache, self._view = self._searcher, searcher, {}, None
            with self._lock:
                for path, change in batch.items():
                    self._apply_record(path, change)
                self._searched = _searched_after(self._searched, batch)
                self._committing = {}
                self._version += 1
                self._generation += 1
        old.close()

    def _apply_record(self, path: str, change: _Change) -> None:
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
        self._queue(record.path, _Change(record, tuple(entries)))

    def remove_file(self, path: str) -> None:
        """Queue the removal of a file's documents; hidden from reads at once."""
        self._queue(path, _Change(None))

    def _queue(self, path: str, change: _Change) -> None:
        """Record a change in the overlay (and in a running rebuild's log) and wake the committer."""
        with self._lock:
            self._pending[path] = change
            self._version += 1
            if self._rebuild is not None:
                self._rebuild._log[path] = change
        self._wake.set()

    # -- reads -------------------------------------------------------------------

    def _overlay(self) -> dict[str, _Change]:
        """A copy of the queued and committing changes by path, newest winning (caller holds _lock)."""
        return {**self._committing, **self._pending}

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
            docs = self._searcher.documents(path=path)
            return tuple(sorted((_entry(doc) for doc in docs if doc.get("kind") != _FILE), key=_LINE))

    def _held_entries(self, path: str) -> tuple[Entry, ...] | None:
        """A file's entries from a queued change (loaders build them in file order) or a recent commit, else None."""
        with self._lock:
            change = self._pending.get(path)
            change = self._committing.get(path) if change is None else change
        if change is not None:
            return change.entries
        return self._remembered(path)

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
            ranked = self.rank(terms, maps, [ranking.weights_of(st) for st in stats], filters, limit, strict)
            chosen = (ranked.full + ranked.partial)[:limit]
            loaded = self.load(chosen)
        found = finish_hits(self.language, parsed, [(c, e, maps) for c, e in zip(chosen, loaded, strict=True)])
        return make_found(self.language, found, terms, stats, ranked, snippet_chars)

    @property
    def reading(self) -> threading.Lock:
        """The lock to hold around term_maps(), rank() and load(), so that all see the same searcher."""
        return self._search_lock

    def term_maps(self, terms: Sequence[analysis.Term]) -> tuple[list[ranking.TermMaps], list[ranking.Stats]]:
        """Each query word's committed postings, and its statistics counting uncommitted entries (hold `reading`)."""
        self._check_open()
        view = self._view_now()
        maps = [_term_maps(view, term) for term in terms]
        with self._lock:
            overlay, version = self._overlay(), self._version
        unsearched, _ = self._unsearched_entries(overlay, version)
        documents = max(view.documents() - len(self._records), 0)
        stats = [ranking.stats_of(m, documents) for m in maps]
        if unsearched:
            fresh = [ranking.fresh_stats(self.language, [e.text for e, _ in unsearched], term) for term in terms]
            stats = [st + more for st, more in zip(stats, fresh, strict=True)]
        return maps, stats

    def rank(
        self,
        terms: Sequence[analysis.Term],
        maps: Sequence[ranking.TermMaps],
        weights: Sequence[ranking.TermWeights],
        filters: Filters,
        limit: int,
        strict: bool,
    ) -> ranking.Ranked:
        """The best full and partial matches, uncommitted entries included (caller holds `reading`)."""
        self._check_open()
        with self._lock:
            overlay, version = self._overlay(), self._version
        unsearched, replaced = self._unsearched_entries(overlay, version)
        view = self._view_now()
        allowed = self._allowed(filters, replaced, version)
        ranked = ranking.rank_documents(maps, weights, allowed, view.stamps(), view.neighbours(), limit, strict)
        norm = view.avg_length(analysis.FIELD)
        for entry, context in unsearched:
            if not filters.accepts(entry):
                continue
            score, held = ranking.score_entry(self.language, entry.text, context, terms, weights, norm)
            if held == len(terms):
                ranked.full.append(ranking.Candidate(True, round(score, 9), _stamp(entry), entry))
                ranked.total += 1
            elif held:
                ranked.partial_total += 1
                if not strict:
                    ranked.partial.append(ranking.Candidate(False, round(score, 9), _stamp(entry), entry))
        ranked.full.sort(reverse=True)
        ranked.partial.sort(reverse=True)
        return ranked

    def quiet(self) -> bool:
        """Whether no change is queued or being committed: what the searcher holds is all there is."""
        with self._lock:
            return not self._pending and not self._committing

    def view(self) -> postings.SearcherView:
        """The current searcher's view (caller holds `reading`)."""
        self._check_open()
        return self._view_now()

    def warm(self) -> None:
        """Read the searcher's per-segment lexicons and per-document arrays now (caller holds `reading`)."""
        self._check_open()
        self._view_now().warm()

    def entry_documents(self) -> int:
        """How many entry documents the searcher holds (caller holds `reading`)."""
        return max(self._view_now().documents() - len(self._records), 0)

    def word_maps(self, term: analysis.Term) -> ranking.TermMaps:
        """One query word's committed postings, not kept in the view's own cache (caller holds `reading`)."""
        return _term_maps(self._view_now(), term, cache=False)

    def allowed(self, filters: Filters) -> np.ndarray:
        """Which committed documents a request may see, for a partition with nothing queued (hold `reading`)."""
        return self._allowed(filters, [], self._version)

    def entry_of(self, docnum: int) -> Entry:
        """The entry of one committed document (caller holds `reading`)."""
        return self._view_now().made(docnum, _entry)

    def load(self, candidates: Sequence[ranking.Candidate]) -> list[Entry]:
        """The entries of candidates from rank() (caller holds `reading`)."""
        self._check_open()
        made = self._view_now().made
        return [c.ref if isinstance(c.ref, Entry) else made(c.ref, _entry) for c in candidates]

    def _check_open(self) -> None:
        """Refuse reads on a closed index with a clear error."""
        if self._searcher is None:
            raise Unavailable("index_closed", "the index is not open")

    def _view_now(self) -> postings.SearcherView:
        """The weighted-postings view of the current searcher, made on first use after a change."""
        if self._view is None or self._view.searcher is not self._searcher:
            self._view = postings.SearcherView(self._searcher, self._segments)
            self._segments.keep(self._view.segment_ids())
        return self._view

    def _docset(self, key: object, query: Callable[[], Query]) -> set[int]:
        """The documents matching a filter query (made only when not cached), cached until the searcher changes."""
        found = self._cache.get(key)
        if found is None:
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            found = self._cache[key] = set(self._searcher.docs_for_query(query()))
        return found

    def _allowed(self, filters: Filters, replaced: list[str], version: int) -> np.ndarray:
        """Which documents a request may see: in the window, roots and type, not tombstoned nor replaced."""
        view = self._view_now()
        key = (filters, version if replaced else None)
        found = view.masks.get(key)
        if found is None:
            found = np.ones(view.size, dtype=bool)
            if filters.since is not None:  # undated entries (MEMORY.md sections) pass a window
                stamps = view.stamps()
                found &= (stamps >= _stamp_of(filters.since)) | (stamps == 0)
            others = Filters(None, filters.roots, filters.type)
            if others.roots is not None or others.type is not None:
                found &= _mask_of(self._docset(others, lambda: And(others.clauses())), view.size)
            found &= ~_mask_of(self._denied(replaced, version), view.size)
            if len(view.masks) >= _CACHE_SIZE:
                view.masks.clear()
            view.masks[key] = found
        return found

    def _unsearched_entries(self, overlay: dict[str, _Change], version: int) -> tuple[list[Fresh], list[str]]:
        """The overlay's entries the searcher lacks (with their contexts), and the committed files they replace.

        A file the searcher holds and the overlay only appends to (a note to today's diary) keeps its
        documents, and only the appended entries are matched by hand. Cached per overlay version; the
        caller holds _search_lock, under which the searcher and `_searched` change together.
        """
        if self._unsearched[0] != version:
            entries: list[Fresh] = []
            replaced: list[str] = []
            for path, change in overlay.items():
                held = self._searched.get(path)
                if held is not None and change.record is not None and _extends(change.entries, held):
                    appended = change.entries[len(held) :]
                    entries += zip(appended, contexts(change.entries, len(held)), strict=True)
                    continue
                entries += list(zip(change.entries, contexts(change.entries), strict=True))
                if path in self._records:
                    replaced.append(path)
            self._unsearched = (version, entries, replaced)
        return self._unsearched[1], self._unsearched[2]

    def _denied(self, paths: list[str], version: int) -> set[int]:
        """Tombstoned documents and those of the committed files the overlay replaces, cached per overlay version."""
        tombstoned = self._docset(_TOMBSTONED, lambda: Term("status", _TOMBSTONED))
        if not paths:
            return tombstoned
        if self._mask_version != version:
            view = self._view_now()
            replaced = {n for path in paths for n in view.term_docs("path", path)}
            self._mask, self._mask_version = tombstoned | replaced, version
        return self._mask

    def select(self, field: str, values: Sequence[str], prefix: bool = False) -> list[Entry]:
        """Every entry, tombstoned ones included, whose field holds one of the values (or starts with one)."""
        if not values:
            return []
        with self._search_lock:
            self._check_open()
            with self._lock:
                overlay = self._overlay()
            fresh = [e for e in _overlay_entries(overlay) if _field_matches(e, field, values, prefix)]
            overlaid = [path for path in overlay if path in self._records]
            view = self._view_now()
            replaced = {n for path in overlaid for n in view.term_docs("path", path)}
            selected = self._selected(field, tuple(values), prefix)
            committed = [entry for n, entry in selected if n not in replaced]
        return fresh + committed

    def _selected(self, field: str, values: tuple[str, ...], prefix: bool) -> list[tuple[int, Entry]]:
        """Committed documents and entries of a select(), cached per searcher: typed memory asks often."""
        view = self._view_now()
        key = (field, values, prefix)
        found = view.selected.get(key)
        if found is None:
            if len(view.selected) >= _CACHE_SIZE:
                view.selected.clear()
            docs = self._searcher.docs_for_query(_select_query(field, values, prefix))
            found = [(n, view.made(n, _entry)) for n in docs]
            if field == "fp":  # the documents sharing the heads of the values
                found = [(n, entry) for n, entry in found if _field_matches(entry, field, values, prefix)]
            view.selected[key] = found
        return found

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
            self._rebuild = Rebuild(self, self._state_dir / (_NEW + _utc_stamp()), self._schema)
            for path, (record, entries) in (since or {}).items():
                self._rebuild._log[path] = _Change(record, tuple(entries))
            # Queued changes are re-applied at the end too, like those made during the build.
            self._rebuild._log.update(self._overlay())
            return self._rebuild

    def _finish_rebuild(self, rebuild: Rebuild) -> None:
        """Swap the rebuilt index in after re-applying the changes made while it was built."""
        with self._commit_lock:
            with self._lock:
                changes, self._rebuild = dict(rebuild._log), None
            if changes:
                _write_batch(rebuild._ix, changes)
            with self._search_lock:
                self._swap(rebuild._directory)
        log.debug("index rebuilt: %d files, %d entries", rebuild.files, rebuild.entries)

    def _swap(self, directory: Path) -> None:
        """Replace the live index directory by the rebuilt one (caller holds the locks)."""
        trash = self._state_dir / (_TRASH + _utc_stamp())
        old = self._searcher
        if self._dir.exists():  # gone when it was deleted under the running daemon
            os.replace(self._dir, trash)
        os.replace(directory, self._dir)
        self._write_manifest()
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


class Rebuild:
    """A fresh index being built from every file while the live one keeps answering.

    Files are either added here, or the whole directory is built by another
    process (see `directory` and `build_directory`) before finish() is called.
    """

    def __init__(self, index: Index, directory: Path, schema: Schema) -> None:
        self._index = index
        self._directory = directory
        self._schema = schema
        self._log: dict[str, _Change] = {}  # changes to re-apply at the swap, by path
        self.files = self.entries = 0
        self._ix: Any = None
        self._writer: Any = None
        self._ended = False
        directory.mkdir(mode=0o700)

    @property
    def directory(self) -> Path:
        """Where the new index is being built."""
        return self._directory

    def add(self, record: FileRecord, entries: Sequence[Entry]) -> None:
        """Add one file with its entries to the new index."""
        if self._writer is None:
            self._ix = whoosh_index.create_in(str(self._directory), self._schema)
            self._writer = open_writer(self._ix)
        add_file(self._writer, record, entries)
        self.files += 1
        self.entries += len(entries)

    def late(self, record: FileRecord, entries: Sequence[Entry]) -> None:
        """A file for a directory being built elsewhere: written in at the swap, unless changed meanwhile."""
        with self._index._lock:
            self._log.setdefault(record.path, _Change(record, tuple(entries)))

    def finish(self) -> None:
        """Swap the new index in; changes made to the live index meanwhile are kept."""
        if self._ended:
            raise RuntimeError("this rebuild has already ended")
        try:
            if self._writer is not None:
                self._writer.commit()
                self._writer = None
            elif not whoosh_index.exists_in(str(self._directory)):
                whoosh_index.create_in(str(self._directory), self._schema)
            self._ix = open_whoosh(self._directory)
            self._ended = True
            self._index._finish_rebuild(self)
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Discard the new index; safe to call more than once."""
        self._ended = True
        if self._writer is not None:
            self._writer.cancel()
            self._writer = None
        self._index._abort_rebuild(self)
        shutil.rmtree(self._directory, ignore_errors=True)


def open_whoosh(directory: Path) -> Any:
    """Open an index without mmap: a segment truncated under a mapping would kill the daemon with SIGBUS."""
    return FileStorage(str(directory), supports_mmap=False).open_index()


def build_directory(
    directory: Path,
    files: Sequence[tuple[FileRecord, Sequence[Entry]]],
    languages: tuple[str, ...] = analysis.DEFAULT_LANGUAGES,
) -> int:
    """Build a complete index in an empty directory in one commit (run in a worker process)."""
    ix = whoosh_index.create_in(str(directory), make_schema(languages))
    writer = open_writer(ix)
    try:
        for record, entries in files:
            add_file(writer, record, entries)
    except BaseException:
        writer.cancel()
        raise
    writer.commit()
    return sum(len(entries) for _, entries in files)


def _read_records(searcher: Any) -> tuple[dict[str, FileRecord], dict[str, int]]:
    """Every file record and entry count stored in an index."""
    records: dict[str, FileRecord] = {}
    counts: dict[str, int] = {}
    for doc in searcher.documents(record=_FILE):
        records[doc["path"]] = _record(doc)
        counts[doc["path"]] = doc.get("count", 0)
    return records, counts


def parse_query(query: str, language: analysis.Language) -> analysis.Query:
    """A query's words; refuse a query with nothing to search for."""
    if not query.strip():
        raise InvalidParams("invalid_query", "the query is empty")
    parsed = language.query(query)
    if not parsed.terms:
        raise InvalidParams("invalid_query", f"the query {query!r} has no letters or digits to search for")
    return parsed


def _stamp_of(date: str) -> int:
    """The smallest stamp of a day."""
    return int(date.replace("-", "")) * 10000


def _mask_of(docs: set[int], size: int) -> np.ndarray:
    """A set of document numbers as a mask."""
    mask = np.zeros(size, dtype=bool)
    if docs:
        mask[np.fromiter(docs, dtype=np.int64, count=len(docs))] = True
    return mask


def _term_maps(view: postings.SearcherView, term: analysis.Term, cache: bool = True) -> ranking.TermMaps:
    """One query word's postings in one searcher: its stem and the longer words it begins."""
    if term.cjk:
        run = term.keys[0]
        mode = postings.PREFIX if len(run) == 1 else postings.EXACT if len(run) == 2 else postings.RUN
        return ranking.TermMaps(view.weights(analysis.FIELD, run, mode, cache), _NOTHING)
    exact = _best_of([view.weights(analysis.FIELD, key, postings.EXACT, cache) for key in term.keys])
    longer = _best_of([view.weights(analysis.FIELD, key, postings.LONGER, cache) for key in term.keys])
    return ranking.TermMaps(exact, longer)


_NOTHING: ranking.Postings = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))


def _best_of(lists: Sequence[ranking.Postings]) -> ranking.Postings:
    """One list of several (a word's stems in several languages), the best weight of each document."""
    if len(lists) == 1:
        return lists[0]
    ids = np.concatenate([found for found, _ in lists])
    weights = np.concatenate([weight for _, weight in lists])
    order = np.lexsort((-weights, ids))  # by document, best weight first
    ids, weights = ids[order], weights[order]
    first = np.ones(len(ids), dtype=bool)
    first[1:] = ids[1:] != ids[:-1]
    return ids[first], weights[first]


def contexts(entries: Sequence[Entry], start: int = 0) -> list[tuple[str, ...]]:
    """The texts of the entries just before each entry of a file (from `start` on), reading only those."""
    return [tuple(e.text for e in entries[max(0, i - CONTEXT_ENTRIES) : i]) for i in range(start, len(entries))]


def _select_query(field: str, values: Sequence[str], prefix: bool) -> Query:
    """select()'s query; for fp, the heads of the values, which find every match and a few others."""
    if field == "fp":
        heads = {value[:_FP_HEAD] for value in values}
        return Or([Term("fp_head", h) if len(h) == _FP_HEAD else Prefix("fp_head", h) for h in sorted(heads)])
    kind = Prefix if prefix else Term
    return Or([kind(field, value) for value in values])


def _field_matches(entry: Entry, field: str, values: Sequence[str], prefix: bool) -> bool:
    """The Python form of select()'s query, for uncommitted entries."""
    if field == "triggers":
        held: Sequence[str] = entry.triggers
    else:
        value = getattr(entry, field)
        held = () if value is None else (value,)
    if prefix:
        return any(h.startswith(v) for h in held for v in values)
    return any(h in values for h in held)


def _overlay_entries(overlay: dict[str, _Change]) -> Iterator[Entry]:
    """Every entry of the overlaid files."""
    for change in overlay.values():
        yield from change.entries


def make_found(
    language: analysis.Language,
    found: Sequence[tuple[Entry, float, bool, tuple[str, ...]]],
    terms: Sequence[analysis.Term],
    stats: Sequence[ranking.Stats],
    ranked: ranking.Ranked,
    snippet_chars: int,
) -> Found:
    """The result of a search: its hits with snippets, the totals, and the words no entry holds."""
    held = {word for _, _, _, words in found for word in words}
    unmatched = tuple(
        t.word for t, st in zip(terms, stats, strict=True) if not st.exact and not st.longer and t.word not in held
    )
    return Found(hits(language, found, terms, snippet_chars), ranked.total, ranked.partial_total, unmatched)


def finish_hits(
    language: analysis.Language,
    query: analysis.Query,
    chosen: Sequence[tuple[ranking.Candidate, Entry, Sequence[ranking.TermMaps]]],
) -> list[tuple[Entry, float, bool, tuple[str, ...]]]:
    """The chosen hits in their final order: full matches first, a phrase bonus within each group; with held words."""
    out = []
    for candidate, entry, maps in chosen:
        bonus = ranking.phrase_bonus(language, entry.text, query)
        words = _held(language, query.required, candidate, entry, maps)
        out.append((candidate.full, candidate.score + bonus, candidate.stamp, entry, words))
    out.sort(key=lambda item: (item[0], round(item[1], 9), item[2]), reverse=True)
    return [(entry, score, full, words) for full, score, _, entry, words in out]


def _held(
    language: analysis.Language,
    terms: Sequence[analysis.Term],
    candidate: ranking.Candidate,
    entry: Entry,
    maps: Sequence[ranking.TermMaps],
) -> tuple[str, ...]:
    """The query words a hit holds: from the postings for a document, from its text for an uncommitted entry."""
    if candidate.full:
        return tuple(term.word for term in terms)
    if isinstance(candidate.ref, Entry):
        return tuple(ranking.held_words(language, entry.text, terms))
    return tuple(t.word for t, m in zip(terms, maps, strict=True) if m.holds(candidate.ref))


def hits(
    language: analysis.Language,
    found: Sequence[tuple[Entry, float, bool, tuple[str, ...]]],
    terms: Sequence[analysis.Term],
    snippet_chars: int,
) -> list[Hit]:
    """Search results with their snippets."""
    return [
        Hit(entry, score, language.snippet(entry.text, terms, snippet_chars), "all" if full else "partial", words)
        for entry, score, full, words in found
    ]


def check_limit(limit: int) -> None:
    """Refuse a limit below one."""
    if limit < 1:
        raise InvalidParams("invalid_params", f"limit must be at least 1, got {limit}")
