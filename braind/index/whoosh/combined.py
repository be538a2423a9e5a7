"""Settled partitions searched as one: old years of diary, one pass instead of one per year.

A search of all of memory covers every year; each partition has a fixed cost
per query (its postings, its masks, its ranking pass), so at a million entries
over decades the fixed costs add up to more than the work. Years that are not
being written to (no queued change) rarely change, so their searchers' arrays
are put end to end once (document numbers shifted by each partition's offset)
and ranked as one; what a query reads of them (each word's postings) is kept
within a budget. A change to one of them makes the next search rebuild the
whole, which is rare: old days are edited seldom.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from braind.index import analysis, ranking
from braind.index.whoosh import caches, neighbours
from braind.model.entries import Entry

if TYPE_CHECKING:
    from braind.index.api import Filters
    from braind.index.whoosh.index import Index

WORDS_BYTES = 48 << 20  # concatenated postings of query words kept
WARM_WORDS = 32  # the most common words put end to end ahead of any search
WARM_WORDS_BYTES = WORDS_BYTES // 4  # and at most this much of the budget, the rest left to what searches ask
MIN_PARTS = 2  # fewer settled partitions gain nothing from being combined


class Combined:
    """Several partitions' searchers as one document-number space (their locks held by the caller)."""

    def __init__(self, parts: Sequence[tuple[str, Index]]) -> None:
        self.names = [name for name, _ in parts]  # the partitions' keys, for their filters
        self.parts = [part for _, part in parts]
        self.key: Hashable = key_of(self.parts)
        views = [part.view() for part in self.parts]
        self._views = views
        self._offsets = list(np.cumsum([0] + [view.size for view in views[:-1]]))
        self.size = sum(view.size for view in views)
        self.documents = sum(part.entry_documents() for part in self.parts)
        self._stamps = np.concatenate([view.stamps() for view in views])
        self._neighbours = [
            np.concatenate(
                [
                    _shifted(view.neighbours()[step], view.size, offset, self.size)
                    for view, offset in zip(views, self._offsets, strict=True)
                ]
            )
            for step in range(len(ranking.CONTEXT))
        ]
        self._words = caches.ArrayCache(WORDS_BYTES)
        self._masks: dict[Hashable, np.ndarray] = {}

    def term_maps(self, terms: Sequence[analysis.Term]) -> tuple[list[ranking.TermMaps], list[ranking.Stats]]:
        """Each query word's postings over every partition, and its statistics."""
        maps = [self._term_maps(term) for term in terms]
        return maps, [ranking.stats_of(m, self.documents) for m in maps]

    def _term_maps(self, term: analysis.Term) -> ranking.TermMaps:
        """One word's postings, its partitions' lists put end to end (each partition read once per word)."""
        exact_ids, exact, longer_ids, longer = self._words.get((term.cjk, term.keys), lambda: self._joined(term))
        return ranking.TermMaps((exact_ids, exact), (longer_ids, longer))

    def common_words(self, language: analysis.Language) -> list[analysis.Term]:
        """The most common words of these years as query words of one language, most common first.

        A word's lists in every year are long, and putting them end to end is what a search of all of
        memory pays the first time it asks for the word (a third of a million postings at 1M entries:
        some 40 ms). Stopwords, which a question does not require, and CJK runs are left out.
        """
        counts: Counter[bytes] = Counter()
        for part in self.parts:
            counts.update(part.common_words())
        skip = language.stopwords | {key for word in language.stopwords for key in language.stems(word)}
        chosen: list[analysis.Term] = []
        for term, _ in counts.most_common():
            word = term.decode("utf-8", "replace")
            if word not in skip and analysis.split(word) == ([word], []):
                chosen.append(analysis.Term(word, False, (word,)))
            if len(chosen) == WARM_WORDS:
                break
        return chosen

    def warm_word(self, term: analysis.Term) -> bool:
        """Put a word's lists end to end ahead of searches; False once WARM_WORDS_BYTES are held."""
        if self._words.held >= WARM_WORDS_BYTES:
            return False
        self._term_maps(term)
        return True

    def _joined(self, term: analysis.Term) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A word's postings from every partition, document numbers shifted to this space."""
        found = [part.word_maps(term) for part in self.parts]
        exact = _concatenated([m.exact for m in found], self._offsets)
        longer = _concatenated([m.longer for m in found], self._offsets)
        return exact[0], exact[1], longer[0], longer[1]

    def rank(
        self,
        maps: Sequence[ranking.TermMaps],
        weights: Sequence[ranking.TermWeights],
        filters: Sequence[Filters],
        limit: int,
        strict: bool,
    ) -> ranking.Ranked:
        """The best full and partial matches; `filters` holds each partition's own."""
        allowed = self._allowed(filters)
        return ranking.rank_documents(maps, weights, allowed, self._stamps, self._neighbours, limit, strict)

    def _allowed(self, filters: Sequence[Filters]) -> np.ndarray:
        """Which documents the request may see, the partitions' masks put end to end."""
        key = tuple(filters)
        found = self._masks.get(key)
        if found is None:
            if len(self._masks) >= 16:
                self._masks.clear()
            found = self._masks[key] = np.concatenate(
                [part.allowed(part_filters) for part, part_filters in zip(self.parts, filters, strict=True)]
            )
        return found

    def load(self, candidates: Sequence[ranking.Candidate]) -> list[Entry]:
        """The entries of candidates from rank()."""
        return [self._load(int(c.ref)) for c in candidates]

    def _load(self, docnum: int) -> Entry:
        """One document's entry, from its partition."""
        at = bisect.bisect_right(self._offsets, docnum) - 1
        return self.parts[at].entry_of(docnum - int(self._offsets[at]))


def _concatenated(lists: Sequence[ranking.Postings], offsets: Sequence[int]) -> ranking.Postings:
    """Partitions' postings end to end, each one's document numbers shifted by its offset."""
    ids = np.concatenate([ids + offset for (ids, _), offset in zip(lists, offsets, strict=True)])
    return ids, np.concatenate([weights for _, weights in lists])


def _shifted(before: np.ndarray, size: int, offset: int, total: int) -> np.ndarray:
    """A partition's neighbour numbers in the combined space (its `size`, no entry before, becomes `total`)."""
    return np.where(before < size, before + offset, total).astype(neighbours.NUMBERS)


def key_of(parts: Sequence[Any]) -> Hashable:
    """What a combined view was made of: its partitions at their generations."""
    return tuple((id(part), part.generation) for part in parts)
