"""The interface services use to reach the index, and the values it answers with; nothing here needs the engine.

`SearchIndex` is what the services and the syncer call;
`braind.index.partitioned.PartitionedIndex` is the one implementation, over
Whoosh partitions (`braind.index.whoosh`), and only the daemon, which builds
it, names it. Query parsing and the search filters are the same for every
implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from braind.errors import InvalidParams
from braind.index.analysis import Language, Query
from braind.model.entries import Entry

TOMBSTONED = "tombstoned"


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


@dataclass(frozen=True)
class Filters:
    """The search filters: entry date lower bound (undated entries such as MEMORY.md sections pass), roots, type."""

    since: str | None
    roots: tuple[str, ...] | None
    type: str | None

    def accepts(self, entry: Entry) -> bool:
        """The filters applied in Python, to uncommitted entries."""
        return (
            entry.status != TOMBSTONED
            and (self.since is None or not entry.date or entry.date >= self.since)
            and (self.roots is None or entry.root in self.roots)
            and (self.type is None or entry.type == self.type)
        )


class IndexRebuild(Protocol):
    """A fresh index being built from every file while the live one keeps answering."""

    def add(self, record: FileRecord, entries: Sequence[Entry]) -> None:
        """Add one file with its entries."""

    def finish(self) -> None:
        """Swap the new index in; changes made to the live one meanwhile are kept."""

    def abort(self) -> None:
        """Discard the new index; the live one is untouched."""


class SearchIndex(Protocol):
    """What services ask of the index: queue file changes (visible at once), read files, search, select, rebuild."""

    @property
    def language(self) -> Language:
        """How text becomes terms, for queries matched outside the index."""

    @property
    def generation(self) -> int:
        """A counter that increases after every commit that changed something."""

    @property
    def version(self) -> int:
        """A counter that increases with every change to what reads see, committed or not."""

    def replace_file(self, record: FileRecord, entries: Sequence[Entry]) -> None:
        """Queue: the file's entries become exactly `entries`."""

    def remove_file(self, path: str) -> None:
        """Queue the removal of a file's entries."""

    def file_records(self) -> dict[str, FileRecord]:
        """Every indexed file's record, including queued changes."""

    def record(self, path: str) -> FileRecord | None:
        """One file's record, including queued changes (None when not indexed)."""

    def entries_for(self, path: str) -> list[Entry]:
        """The current entries of one file, by line."""

    def file_entries(self, path: str) -> tuple[Entry, ...]:
        """The current entries of one file in the order they were read."""

    def recent(self, path: str, count: int) -> list[Entry]:
        """The last `count` entries of one file, by line."""

    def prepare_appends(self, path: str) -> None:
        """Read ahead what searches need while entries appended to a file wait for their commit."""

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

    def select(self, field: str, values: Sequence[str], prefix: bool = False) -> list[Entry]:
        """Every entry, tombstoned ones included, whose field (fp, key, triggers, type, status) holds a value."""

    def stats(self) -> dict[str, Any]:
        """Counts and state for `status`."""

    def rebuild(self) -> IndexRebuild:
        """Start building a fresh index from every file while this one keeps answering."""


def parse_query(query: str, language: Language) -> Query:
    """A query's words; refuse a query with nothing to search for."""
    if not query.strip():
        raise InvalidParams("invalid_query", "the query is empty")
    parsed = language.query(query)
    if not parsed.terms:
        raise InvalidParams("invalid_query", f"the query {query!r} has no letters or digits to search for")
    return parsed


def check_limit(limit: int) -> None:
    """Refuse a limit below one."""
    if limit < 1:
        raise InvalidParams("invalid_params", f"limit must be at least 1, got {limit}")
