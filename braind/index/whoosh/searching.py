"""The read side of one partition: posting maps, ranking with the overlay, filter masks, selects.

A mixin of `braind.index.whoosh.index.Index`, which owns the fields declared here;
the partitioned index and `combined` call these with the partition's `reading` lock held.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from whoosh.query import And, Query, Term

from braind.errors import Unavailable
from braind.index import analysis, ranking
from braind.index.api import TOMBSTONED, FileRecord, Filters
from braind.index.whoosh import caches, postings
from braind.index.whoosh.changes import Change, extends, overlay_entries
from braind.index.whoosh.documents import (
    FP_HEAD,
    day_stamp,
    field_matches,
    file_key,
    filter_clauses,
    select_query,
    stamp,
    to_entry,
)
from braind.model.entries import Entry

_CACHE_SIZE = 64

# An uncommitted entry with the weighted texts of the entries around it in its file.
Fresh = tuple[Entry, tuple[tuple[float, str], ...]]


@dataclass(frozen=True)
class Unsearched:
    """What a search matches by hand, and the committed documents that stand aside for it."""

    entries: list[Fresh]  # the overlay's entries the searcher lacks, and held ones whose context they change
    counted: list[str]  # the texts of those the searcher's statistics do not count yet
    replaced: list[str]  # committed files the overlay replaces
    superseded: list[tuple[str, Entry]]  # committed entries (with their file) matched by hand instead
    texts: analysis.TextSet | None = None  # every text above, to find the ones holding a query word at once


NOTHING_UNSEARCHED = Unsearched([], [], [], [])


class Searching:
    """Reads that rank and select: committed documents from the searcher, uncommitted entries by hand."""

    language: analysis.Language
    _lock: threading.Lock  # the overlay and the committed records
    _search_lock: threading.Lock  # the searcher
    _pending: dict[str, Change]
    _committing: dict[str, Change]
    _records: dict[str, FileRecord]
    _version: int
    _searcher: Any
    _view: postings.SearcherView | None
    _segments: caches.SegmentCache
    _cache: dict[object, set[int]]
    _searched: dict[str, tuple[Entry, ...]]
    _unsearched: tuple[int, Unsearched]
    _mask: set[int]
    _mask_version: int

    def _overlay(self) -> dict[str, Change]:
        """A copy of the queued and committing changes by path, newest winning (caller holds _lock)."""
        return {**self._committing, **self._pending}

    @property
    def reading(self) -> threading.Lock:
        """The lock to hold around term_maps(), rank() and load(), so that all see the same searcher."""
        return self._search_lock

    def term_maps(self, terms: Sequence[analysis.Term]) -> tuple[list[ranking.TermMaps], list[ranking.Stats]]:
        """Each query word's committed postings, and its statistics counting uncommitted entries (hold `reading`)."""
        self._check_open()
        view = self._view_now()
        maps = [postings.word_postings(view, term) for term in terms]
        with self._lock:
            overlay, version = self._overlay(), self._version
        unsearched = self._unsearched_entries(overlay, version)
        counted = unsearched.counted
        documents = max(view.documents() - len(self._records), 0)
        stats = [ranking.stats_of(m, documents) for m in maps]
        if counted:
            texts = unsearched.texts
            fresh = [ranking.fresh_stats(self.language, counted, term, _scoring(texts, term)) for term in terms]
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
        unsearched = self._unsearched_entries(overlay, version)
        view = self._view_now()
        allowed = self._allowed(filters, unsearched, version)
        ranked = ranking.rank_documents(maps, weights, allowed, view.stamps(), view.neighbours(), limit, strict)
        texts = unsearched.texts or analysis.TextSet(self.language, ())
        scorer = ranking.FreshScorer(self.language, terms, weights, view.avg_length(analysis.FIELD), texts)
        for entry, context in unsearched.entries:
            if not filters.accepts(entry):
                continue
            score, held = scorer.entry(entry.text, context)
            if held == len(terms):
                ranked.full.append(ranking.Candidate(True, round(score, 9), stamp(entry), entry))
                ranked.total += 1
            elif held:
                ranked.partial_total += 1
                if not strict:
                    ranked.partial.append(ranking.Candidate(False, round(score, 9), stamp(entry), entry))
        ranked.full.sort(key=ranking.BEST, reverse=True)
        ranked.partial.sort(key=ranking.BEST, reverse=True)
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

    def prepare_appends(self, path: str) -> None:
        """Read ahead what searches need while entries appended to a file wait for their commit."""
        with self._search_lock:
            self._check_open()
            self._view_now().warm_appends()

    def warm_postings(self, count: int, long: bool = False) -> bool:
        """Decode some posting lists (`long`: common words') ahead of searches; False when done (hold `reading`)."""
        self._check_open()
        return self._view_now().warm_postings(count, long)

    def entry_documents(self) -> int:
        """How many entry documents the searcher holds (caller holds `reading`)."""
        return max(self._view_now().documents() - len(self._records), 0)

    def common_words(self) -> dict[bytes, int]:
        """The committed terms of long posting lists and their document counts (caller holds `reading`)."""
        self._check_open()
        return self._view_now().common_words()

    def word_maps(self, term: analysis.Term) -> ranking.TermMaps:
        """One query word's committed postings, not kept in the view's own cache (caller holds `reading`)."""
        return postings.word_postings(self._view_now(), term, cache=False)

    def allowed(self, filters: Filters) -> np.ndarray:
        """Which committed documents a request may see, for a partition with nothing queued (hold `reading`)."""
        return self._allowed(filters, NOTHING_UNSEARCHED, self._version)

    def entry_of(self, docnum: int) -> Entry:
        """The entry of one committed document (caller holds `reading`)."""
        return self._view_now().made(docnum, to_entry)

    def load(self, candidates: Sequence[ranking.Candidate]) -> list[Entry]:
        """The entries of candidates from rank() (caller holds `reading`)."""
        self._check_open()
        made = self._view_now().made
        return [c.ref if isinstance(c.ref, Entry) else made(c.ref, to_entry) for c in candidates]

    def _check_open(self) -> None:
        """Refuse reads on a closed index with a clear error."""
        if self._searcher is None:
            raise Unavailable("index_closed", "the index is not open")

    def _view_now(self) -> postings.SearcherView:
        """The weighted-postings view of the current searcher, made on first use after a change from the stale one."""
        if self._view is None or self._view.searcher is not self._searcher:
            previous, self._view = self._view, postings.SearcherView(self._searcher, self._segments, self._view)
            live = self._view.segment_ids()
            self._segments.keep(live)
            if previous is not None:
                postings.forget_segments(previous.segment_ids() - live)
        return self._view

    def _docset(self, key: object, query: Callable[[], Query]) -> set[int]:
        """The documents matching a filter query (made only when not cached), cached until the searcher changes."""
        found = self._cache.get(key)
        if found is None:
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            found = self._cache[key] = set(self._searcher.docs_for_query(query()))
        return found

    def _allowed(self, filters: Filters, unsearched: Unsearched, version: int) -> np.ndarray:
        """Which documents a request may see: in the window, roots and type, not tombstoned nor matched by hand."""
        view = self._view_now()
        key = (filters, version if unsearched.replaced else None)
        found = view.masks.get(key)
        if found is None:
            found = np.ones(view.size, dtype=bool)
            if filters.since is not None:  # undated entries (MEMORY.md sections) pass a window
                stamps = view.stamps()
                found &= (stamps >= day_stamp(filters.since)) | (stamps == 0)
            others = Filters(None, filters.roots, filters.type)
            if others.roots is not None or others.type is not None:
                found &= mask_of(self._docset(others, lambda: And(filter_clauses(others))), view.size)
            found &= ~mask_of(self._denied(unsearched.replaced, version), view.size)
            if len(view.masks) >= _CACHE_SIZE:
                view.masks.clear()
            view.masks[key] = found
        aside = [
            n for path, e in unsearched.superseded for n in view.entry_docs(e.fp[:FP_HEAD], file_key(path), e.line)
        ]
        if aside:  # a document or two: the mask stays cached for the notes after this one
            found = found.copy()
            found[aside] = False
        return found

    def _unsearched_entries(self, overlay: dict[str, Change], version: int) -> Unsearched:
        """The overlay's entries the searcher lacks (with their contexts), and the committed documents they replace.

        A file the searcher holds and the overlay only appends to (a note to today's diary) keeps its
        documents but its last few, whose context the appended entries change (`ranking.AFTER`): those
        and the appended entries are matched by hand. Cached per overlay version; the caller holds
        _search_lock, under which the searcher and `_searched` change together.
        """
        if self._unsearched[0] != version:
            found = Unsearched([], [], [], [])
            for path, change in overlay.items():
                held = self._searched.get(path)
                if held is not None and change.record is not None and extends(change.entries, held):
                    grown = len(change.entries) > len(held)
                    start = max(len(held) - ranking.AFTER, 0) if grown else len(held)
                    matched = change.entries[start:]
                    found.entries.extend(zip(matched, ranking.contexts(change.entries, start), strict=True))
                    found.counted.extend(e.text for e in change.entries[len(held) :])
                    found.superseded.extend((path, e) for e in held[start:])
                    continue
                found.entries.extend(zip(change.entries, ranking.contexts(change.entries), strict=True))
                found.counted.extend(e.text for e in change.entries)
                if path in self._records:
                    found.replaced.append(path)
            texts = [e.text for e, _ in found.entries] + [t for _, ctx in found.entries for _, t in ctx] + found.counted
            self._unsearched = (version, replace(found, texts=analysis.TextSet(self.language, texts)))
        return self._unsearched[1]

    def _denied(self, paths: list[str], version: int) -> set[int]:
        """Tombstoned documents and those of the committed files the overlay replaces, cached per overlay version."""
        tombstoned = self._docset(TOMBSTONED, lambda: Term("status", TOMBSTONED))
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
            fresh = [e for e in overlay_entries(overlay) if field_matches(e, field, values, prefix)]
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
            docs = self._searcher.docs_for_query(select_query(field, values, prefix))
            found = [(n, view.made(n, to_entry)) for n in docs]
            if field == "fp":  # the documents sharing the heads of the values
                found = [(n, entry) for n, entry in found if field_matches(entry, field, values, prefix)]
            view.selected[key] = found
        return found


def mask_of(docs: set[int], size: int) -> np.ndarray:
    """A set of document numbers as a mask."""
    mask = np.zeros(size, dtype=bool)
    if docs:
        mask[np.fromiter(docs, dtype=np.int64, count=len(docs))] = True
    return mask


def _scoring(texts: analysis.TextSet | None, term: analysis.Term) -> set[str] | None:
    """The uncommitted texts a query word can count in, when they were gathered."""
    return None if texts is None else texts.scoring(term)
