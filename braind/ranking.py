"""How recall ranks: entries holding every query word first, then the best of those holding some.

Relevance is BM25 with the statistics of every partition a query covers (so a
word rare in one year but common over the years weighs what it weighs over
the years): for each query word, its exact stem, the longer words it begins
(weighted `PREFIX_WEIGHT`) and its occurrences in the entries just before (the
context, weighted `CONTEXT_WEIGHT`, which lifts a short answer whose words sit
in the question above it). Newer entries break ties. Nothing here touches the
search engine: the engine hands over, per word and field, the documents that
hold it with their term weights as arrays, and this module combines them for
a whole partition at once with NumPy (a count of words held and a score per
document number), then picks the best few.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from braind.analysis import Context, Language, Query, Term, bigrams

Postings = tuple[np.ndarray, np.ndarray]  # sorted distinct document numbers, and a weight for each

PREFIX_WEIGHT = 0.1  # a longer word the query word begins is weaker evidence than the word itself
CONTEXT_WEIGHT = 0.5  # the entries just before an entry count half
PHRASE_BONUS = 1.0  # each pair of query words standing together in the entry, stopwords too
_TIE = 1e-9


@dataclass
class TermMaps:
    """One query word's postings in one partition: its stem, the longer words it begins, and its context."""

    exact: Postings
    longer: Postings
    context: Postings

    def holders(self) -> np.ndarray:
        """The documents whose own text holds the word."""
        if not len(self.longer[0]):
            return self.exact[0]
        if not len(self.exact[0]):
            return self.longer[0]
        return np.union1d(self.exact[0], self.longer[0])

    def holds(self, docnum: int) -> bool:
        """Whether a document's own text holds the word."""
        return _member(self.exact[0], docnum) or _member(self.longer[0], docnum)


def _member(ids: np.ndarray, docnum: int) -> bool:
    """Whether a sorted array holds a number."""
    at = int(np.searchsorted(ids, docnum))
    return at < len(ids) and int(ids[at]) == docnum


@dataclass(frozen=True)
class TermWeights:
    """One query word's idf in each of its fields over the whole window, times its field's weight."""

    exact: float
    longer: float
    context: float


@dataclass(frozen=True)
class Stats:
    """How many documents hold a word in each field, in one partition or summed over a window."""

    documents: int
    exact: int
    longer: int
    context: int

    def __add__(self, other: Stats) -> Stats:
        return Stats(
            self.documents + other.documents,
            self.exact + other.exact,
            self.longer + other.longer,
            self.context + other.context,
        )


def idf(holding: int, documents: int) -> float:
    """BM25's inverse document frequency, never negative (the Lucene form: plus one inside the log)."""
    return math.log(1 + (documents - holding + 0.5) / (holding + 0.5))


def weights_of(stats: Stats) -> TermWeights:
    """A word's weights from its statistics over the window."""
    n = max(stats.documents, 1)
    return TermWeights(
        idf(stats.exact, n), PREFIX_WEIGHT * idf(stats.longer, n), CONTEXT_WEIGHT * idf(stats.context, n)
    )


def stats_of(maps: TermMaps, documents: int) -> Stats:
    """A word's statistics in one partition."""
    return Stats(documents, len(maps.exact[0]), len(maps.longer[0]), len(maps.context[0]))


@dataclass(order=True)
class Candidate:
    """A document or uncommitted entry that may be a hit; ordered full matches first, then score, then newer."""

    full: bool
    score: float
    stamp: int
    ref: Any = field(compare=False)  # a committed document number or an uncommitted Entry
    source: Any = field(default=None, compare=False)  # whatever can load it (a partition)


@dataclass
class Ranked:
    """One partition's best candidates and how many matched fully and partly."""

    full: list[Candidate]
    partial: list[Candidate]
    total: int
    partial_total: int


def rank_documents(
    maps: Sequence[TermMaps],
    weights: Sequence[TermWeights],
    allowed: np.ndarray,
    stamps: np.ndarray,
    limit: int,
    strict: bool,
) -> Ranked:
    """The best `limit` full matches and (unless strict) the best `limit` partial ones of one partition; counts.

    `allowed` says which document numbers the request may see (window, roots, type, not tombstoned).
    """
    size = len(allowed)
    holders = [m.holders() for m in maps]
    count = np.bincount(np.concatenate(holders), minlength=size) if holders else np.zeros(size, np.int64)
    full = np.flatnonzero((count == len(maps)) & allowed)
    partial = np.flatnonzero((count > 0) & (count < len(maps)) & allowed) if len(maps) > 1 else full[:0]
    if not len(full) and (strict or not len(partial)):
        return Ranked([], [], 0, len(partial))
    score = _scores(maps, weights, size)
    top_full = _top(full, score, stamps, limit, True)
    top_partial = [] if strict else _top(partial, score, stamps, limit, False)
    return Ranked(top_full, top_partial, len(full), len(partial))


def _scores(maps: Sequence[TermMaps], weights: Sequence[TermWeights], size: int) -> np.ndarray:
    """Every document's score: each word's weights in its text and context, times the word's idfs."""
    ids: list[np.ndarray] = []
    values: list[np.ndarray] = []
    for term_maps, term_weights in zip(maps, weights, strict=True):
        for (found, weight), scale in (
            (term_maps.exact, term_weights.exact),
            (term_maps.longer, term_weights.longer),
            (term_maps.context, term_weights.context),
        ):
            if len(found):
                ids.append(found)
                values.append(weight * scale)
    if not ids:
        return np.zeros(size)
    return np.bincount(np.concatenate(ids), weights=np.concatenate(values), minlength=size)


def _top(docs: np.ndarray, score: np.ndarray, stamps: np.ndarray, limit: int, full: bool) -> list[Candidate]:
    """The `limit` best documents, newer first among equal scores (rounded, so sums in another order tie)."""
    scores = np.round(score[docs], 9)
    if len(docs) > limit:
        cut = np.partition(scores, len(scores) - limit)[len(scores) - limit] - _TIE
        keep = scores >= cut
        docs, scores = docs[keep], scores[keep]
    order = np.lexsort((stamps[docs], scores))[::-1][:limit]
    return [Candidate(full, float(scores[i]), int(stamps[docs[i]]), int(docs[i])) for i in order]


def score_entry(
    language: Language,
    text: str,
    context: Context,
    terms: Sequence[Term],
    weights: Sequence[TermWeights],
    norms: tuple[float, float],
) -> tuple[float, int]:
    """An uncommitted entry's score, as its document would get it once committed, and how many words it holds.

    `norms` are BM25's length normalisation bases (average text and context lengths) of its partition.
    """
    from braind.postings import K1, B  # the engine's BM25 parameters, one source for both paths

    counts = language.term_counts(text)
    context_counts = language.context_counts(context) if context else {}
    text_norm = K1 * (1 - B + B * sum(counts.values()) / (norms[0] or 1))
    context_norm = K1 * (1 - B + B * sum(context_counts.values()) / (norms[1] or 1))
    total, held = 0.0, 0
    for term, term_weights in zip(terms, weights, strict=True):
        exact, longer = _frequencies(counts, term)
        held += language.holds(text, term)
        total += term_weights.exact * _saturate(exact, text_norm, K1) + term_weights.longer * _saturate(
            longer, text_norm, K1
        )
        total += term_weights.context * _saturate(_frequencies(context_counts, term)[0], context_norm, K1)
    return total, held


def fresh_stats(language: Language, texts: Sequence[str], term: Term) -> Stats:
    """A word's statistics among uncommitted entries, counted as their documents will count it."""
    exact = longer = 0
    for text in texts:
        frequencies = _frequencies(language.term_counts(text), term)
        exact, longer = exact + (frequencies[0] > 0), longer + (frequencies[1] > 0)
    return Stats(len(texts), exact, longer, 0)


def _frequencies(counts: dict[str, int], term: Term) -> tuple[int, int]:
    """How often a text holds a word's stem exactly, and words it begins."""
    if term.cjk:
        run = term.keys[0]
        if len(run) == 1:
            return sum(n for t, n in counts.items() if t.startswith(run)), 0
        return min(counts.get(pair, 0) for pair in bigrams(run)), 0
    exact = max(counts.get(key, 0) for key in term.keys)
    longer = sum(n for t, n in counts.items() if t not in term.keys and t.startswith(term.keys))
    return exact, longer


def _saturate(frequency: int, norm: float, k1: float) -> float:
    """BM25's saturated term frequency."""
    return (k1 + 1) * frequency / (frequency + norm) if frequency else 0.0


def phrase_bonus(language: Language, text: str, query: Query) -> float:
    """A bonus for each pair of consecutive query words (stopwords too) that stand together in the text."""
    words = [term.keys[0] for term in query.terms if not term.cjk]
    pairs = set(itertools.pairwise(words))
    return PHRASE_BONUS * sum(language.stand_together(text, first, second) for first, second in pairs)


def held_words(language: Language, text: str, terms: Sequence[Term]) -> list[str]:
    """The query words a text holds, as the query wrote them."""
    return [term.word for term in terms if language.holds(text, term)]
