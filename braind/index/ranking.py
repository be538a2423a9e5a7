"""How recall ranks: entries holding every query word first, then the best of those holding some.

Relevance is BM25 with the statistics of every partition a query covers (so a
word rare in one year but common over the years weighs what it weighs over
the years): for each query word, its exact stem and the longer words it begins
(weighted `PREFIX_WEIGHT`). To an entry's own score is added a part of the
scores of the entries around it in its file (its context, `CONTEXT`): the two
before it lift a short answer whose words sit in the question above it, the
one after it a statement whose words the reply below it repeats. Newer
entries break ties. Nothing here touches the search engine: the engine hands
over, per word and field, the documents that hold it with their term weights
as arrays, and this module combines them for
a whole partition at once with NumPy (the words each document holds, a bit
each, and a score per document number), then picks the best few; a hit's
held words come with it.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import itertools
import math
import operator
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from braind.index.analysis import Language, Query, Term, TextSet, bigrams
from braind.model.entries import Entry

Postings = tuple[np.ndarray, np.ndarray]  # sorted distinct document numbers, and a weight for each

PREFIX_WEIGHT = 0.1  # a longer word the query word begins is weaker evidence than the word itself
K1, B = 0.9, 0.4  # BM25's saturation and length normalisation, for short texts
# The entries around an entry that make its context, as (step in its file, weight): before it half, after a quarter.
CONTEXT = ((-1, 0.5), (-2, 0.5), (1, 0.25))
AFTER = max(0, *(step for step, _ in CONTEXT))  # how many entries after an entry its context reaches
PHRASE_BONUS = 1.0  # each pair of query words standing together in the entry, stopwords too
# Candidates a search looks at, at least: the phrase bonus, known only once an entry is loaded, may lift one
# past the `limit`-th into the first `limit`; so any smaller limit shows the first hits of a recall's default page.
DEPTH = 20
# An entry's own score times 1 + COORDINATION x (words it holds - 1) / (query words - 1): of two entries
# matching part of a question, the one holding more of its words is likelier the answer than one holding
# a single rare word (hit@5 on the LoCoMo development set 0.730 -> 0.75, no conversation worse).
COORDINATION = 1.0
_TIE = 1e-9
SAMPLED = 64  # past this many scores per hit wanted, the best are found above a floor taken from a sample
_SCRATCH = threading.local()  # a thread's arrays lent to its searches, zeros between them (see _lent)
# The narrowest unsigned type that holds a bit for each query word; past 64 words they are counted.
_BIT_TYPES = ((8, np.uint8), (16, np.uint16), (32, np.uint32), (64, np.uint64))


@dataclass
class TermMaps:
    """One query word's postings in one partition: its stem and the longer words it begins."""

    exact: Postings
    longer: Postings

    def holders(self) -> np.ndarray:
        """The documents whose own text holds the word."""
        if not len(self.longer[0]):
            return self.exact[0]
        if not len(self.exact[0]):
            return self.longer[0]
        return np.union1d(self.exact[0], self.longer[0])


@dataclass(frozen=True)
class TermWeights:
    """One query word's idf over the whole window, for its stem and for the longer words it begins."""

    exact: float
    longer: float


@dataclass(frozen=True)
class Stats:
    """How many documents hold a word's stem, and longer words it begins, in one partition or a whole window."""

    documents: int
    exact: int
    longer: int

    def __add__(self, other: Stats) -> Stats:
        return Stats(self.documents + other.documents, self.exact + other.exact, self.longer + other.longer)


def idf(holding: int, documents: int) -> float:
    """BM25's inverse document frequency, never negative (the Lucene form: plus one inside the log)."""
    return math.log(1 + (documents - holding + 0.5) / (holding + 0.5))


def weights_of(stats: Stats) -> TermWeights:
    """A word's weights from its statistics over the window."""
    n = max(stats.documents, 1)
    return TermWeights(idf(stats.exact, n), PREFIX_WEIGHT * idf(stats.longer, n))


def stats_of(maps: TermMaps, documents: int) -> Stats:
    """A word's statistics in one partition."""
    return Stats(documents, len(maps.exact[0]), len(maps.longer[0]))


@dataclass(order=True)
class Candidate:
    """A document or uncommitted entry that may be a hit; ordered full matches first, then score, then newer."""

    full: bool
    score: float
    stamp: int
    ref: Any = field(compare=False)  # a committed document number or an uncommitted Entry
    source: Any = field(default=None, compare=False)  # whatever can load it (a partition)
    held: int | None = field(default=None, compare=False)  # the query words its text holds, bit i for word i


BEST = operator.attrgetter("full", "score", "stamp")  # the order of candidates as a sort key, compared in C


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
    neighbours: Sequence[np.ndarray],
    limit: int,
    strict: bool,
) -> Ranked:
    """The best `limit` full matches and (unless strict) the best `limit` partial ones of one partition; counts.

    `allowed` says which document numbers the request may see (window, roots, type, not tombstoned);
    `neighbours` give, for each document and each step of `CONTEXT`, the entry that far from it in its file
    (the number of documents, one past the last, for none).
    Partial matches are not ranked when `limit` documents match fully: no partial one is shown then.
    """
    size = len(allowed)
    held = _held(maps, size)
    holding = np.flatnonzero(held != 0)  # of a bool array: several times faster
    text = _scores(maps, weights, size)
    with _returned(holding, held, text):
        docs = holding[allowed[holding]]
        words = held[docs]
        is_full = words == _every(len(maps), held.dtype)
        full = docs[is_full]
        if not len(full) and (strict or not len(docs)):
            return Ranked([], [], 0, len(docs))
        _coordinate(text, holding, held[holding], len(maps))
        counted = held.dtype == np.int64  # past 64 words: counts, not bits
        full_held = None if counted else int(_every(len(maps), held.dtype))
        top_full = _top(full, _with_context(full, text, neighbours), stamps, limit, True, full_held)
        top_partial: list[Candidate] = []
        if not strict and len(full) < limit:  # only then can a partial match be shown
            partial, partial_held = docs[~is_full], None if counted else words[~is_full]
            top_partial = _top(partial, _with_context(partial, text, neighbours), stamps, limit, False, partial_held)
        return Ranked(top_full, top_partial, len(full), len(docs) - len(full))


@contextlib.contextmanager
def _returned(written: np.ndarray, *lent: np.ndarray) -> Iterator[None]:
    """Arrays lent by this thread's scratch (`_lent`), zeros again where written once the search is done."""
    try:
        yield
    finally:
        for array in lent:
            array[written] = 0


def _held(maps: Sequence[TermMaps], size: int) -> np.ndarray:
    """The query words each document's own text holds: bit i for word i, or (past 64 words) how many."""
    dtype = next((kind for bits, kind in _BIT_TYPES if len(maps) <= bits), None)
    if dtype is None:  # count each word's documents, deduplicated
        return np.bincount(np.concatenate([m.holders() for m in maps]), minlength=size).astype(np.int64)
    held = _lent(size, dtype)
    for bit, term_maps in enumerate(maps):
        flag = held.dtype.type(1 << bit)
        for ids in (term_maps.exact[0], term_maps.longer[0]):
            if len(ids):
                held[ids] |= flag
    return held


def _lent(size: int, dtype: type[np.generic]) -> np.ndarray:
    """`size` zeros of a type from this thread's scratch: a fresh array of a million faults in each page.

    The borrower zeroes what it wrote before this thread's next search (rank_documents does).
    """
    kept: dict[type[np.generic], np.ndarray] = _SCRATCH.__dict__.setdefault("arrays", {})
    array = kept.get(dtype)
    if array is None or len(array) < size:
        array = kept[dtype] = np.zeros(size, dtype=dtype)
    return array[:size]


def _every(count: int, dtype: np.dtype[Any]) -> Any:
    """What `_held` gives a document holding every one of `count` words."""
    return count if dtype == np.int64 else dtype.type((1 << count) - 1)


def _with_context(docs: np.ndarray, text: np.ndarray, neighbours: Sequence[np.ndarray]) -> np.ndarray:
    """The scores of some documents: their own plus their context's, each neighbour weighted as `CONTEXT` says."""
    score: np.ndarray = text.take(docs)  # take: a gather several tenths faster than indexing
    for around, (_, weight) in zip(neighbours, CONTEXT, strict=True):  # summed as FreshScorer sums
        score += weight * text.take(around.take(docs))  # none there: the zero one past the last document
    return score


def _scores(maps: Sequence[TermMaps], weights: Sequence[TermWeights], size: int) -> np.ndarray:
    """Every document's own score: each word's weights in its text, times the word's idfs; then a zero."""
    text = _lent(size + 1, np.float64)
    for term_maps, term_weights in zip(maps, weights, strict=True):
        for (found, weight), scale in (
            (term_maps.exact, term_weights.exact),
            (term_maps.longer, term_weights.longer),
        ):
            if len(found):
                text[found] += weight * scale  # a list's numbers are distinct
    return text


def _coordinate(text: np.ndarray, docs: np.ndarray, held: np.ndarray, words: int) -> None:
    """Weigh the own scores of the documents holding query words by how many they hold (see COORDINATION)."""
    if words > 1 and len(docs):
        if held.dtype.itemsize <= 2:  # one look-up per document in a table of every mask
            text[docs] *= _factors(words, held.dtype.itemsize)[held]
        else:
            text[docs] *= coordination(held if held.dtype == np.int64 else np.bitwise_count(held), words)


@functools.cache
def _factors(words: int, itemsize: int) -> np.ndarray:
    """The coordination factor of each mask of `itemsize` bytes, computed as `_coordinate` computes it."""
    masks = np.arange(1 << (8 * itemsize), dtype=np.dtype(f"uint{8 * itemsize}"))
    factors: np.ndarray = np.asarray(coordination(np.bitwise_count(masks), words))
    return factors


def coordination(held: Any, words: int) -> Any:
    """The factor of an entry's own score for holding `held` of a query's `words` words (numbers or arrays)."""
    return 1 + COORDINATION * (held - 1) / (words - 1) if words > 1 else 1.0


def _top(
    docs: np.ndarray, score: np.ndarray, stamps: np.ndarray, limit: int, full: bool, held: np.ndarray | int | None
) -> list[Candidate]:
    """The `limit` best documents (`score` holds theirs), newer first among equal scores (rounded: sums tie).

    `held` is each document's held words, the same for all, or None when they are counts, not bits.
    """
    if len(docs) > limit:  # the best few and whatever ties them, chosen before rounding: a generous cut
        keep = _best(score, limit)
        docs, score = docs[keep], score[keep]
        held = held[keep] if isinstance(held, np.ndarray) else held
    scores = np.round(score, 9)
    order = np.lexsort((stamps[docs], scores))[::-1][:limit]
    each = held[order].tolist() if isinstance(held, np.ndarray) else [held] * len(order)
    return [
        Candidate(full, float(scores[i]), int(stamps[docs[i]]), int(docs[i]), held=words)
        for i, words in zip(order, each, strict=True)
    ]


def _best(score: np.ndarray, limit: int) -> np.ndarray:
    """Where the `limit` best scores are, with whatever lies within `10 * _TIE` of the `limit`-th, in order.

    Of a long array, the `limit`-th best of a sample (every 32nd score, so at least `2 * limit` of them)
    is a floor that the whole array's `limit`-th best cannot be below: only the few scores above it
    are partitioned.
    """
    if len(score) < SAMPLED * limit:
        return np.flatnonzero(score >= _cut(score, limit))
    above = np.flatnonzero(score >= _cut(score[:: SAMPLED // 2], limit))
    kept: np.ndarray = above[score[above] >= _cut(score[above], limit)]
    return kept


def _cut(score: np.ndarray, limit: int) -> float:
    """The `limit`-th best score, less what a sum's rounding may take from a score that ties it."""
    return float(np.partition(score, len(score) - limit)[len(score) - limit]) - 10 * _TIE


def reachable(full: Sequence[Candidate], partial: Sequence[Candidate], limit: int, bonus: float) -> list[Candidate]:
    """The candidates that can end among the first `limit` once each gets its phrase bonus (at most `bonus`).

    Full matches come first, then partial ones, each group by score. Past the `limit`-th candidate, only
    those of its group whose score is within `bonus` of its score can still overtake it, up to `DEPTH`.
    """
    depth = max(limit, DEPTH)
    ordered = heapq.nlargest(depth, full, BEST)
    ordered += heapq.nlargest(max(depth - len(ordered), 0), partial, BEST)
    if len(ordered) <= limit:
        return ordered
    last = ordered[limit - 1]
    return ordered[:limit] + [c for c in ordered[limit:] if c.full == last.full and c.score + bonus >= last.score]


def held_of(held: int, terms: Sequence[Term]) -> tuple[str, ...]:
    """The query words of a bit mask from ranking, as the query wrote them."""
    return tuple(term.word for bit, term in enumerate(terms) if held >> bit & 1)


class FreshScorer:
    """Scores uncommitted entries as their documents would score once committed, each text weighed once a search.

    An entry's context is the texts of the entries around it with their weights, so most texts of a
    run of appended entries are weighed four times over; `norm` is the partition's average text length.
    Which texts hold which query word is found for all of them at once (`texts`): an entry that holds
    none is passed over, and a text that can score for none weighs nothing, without a look at its words.
    """

    def __init__(
        self, language: Language, terms: Sequence[Term], weights: Sequence[TermWeights], norm: float, texts: TextSet
    ) -> None:
        self._language, self._terms, self._weights, self._norm = language, terms, weights, norm
        self._scores: dict[str, float] = {}
        self._holding = [texts.holding(term) for term in terms]
        self._scoring: set[str] = set().union(*(texts.scoring(term) for term in terms))

    def entry(self, text: str, context: Sequence[tuple[float, str]]) -> tuple[float, int]:
        """An entry's score with its context's, and how many query words it holds (0 and 0 when it holds none)."""
        held = sum(text in holding for holding in self._holding)
        if not held:
            return 0.0, 0
        total = self._text(text)
        for weight, other in context:
            if other in self._scoring:
                total += weight * self._text(other)
        return total, held

    def _text(self, text: str) -> float:
        """BM25 of a text's own words, weighed once."""
        score = self._scores.get(text)
        if score is None:
            score = self._scores[text] = _text_score(self._language, text, self._terms, self._weights, self._norm)
        return score


def _text_score(
    language: Language, text: str, terms: Sequence[Term], weights: Sequence[TermWeights], norm: float
) -> float:
    """BM25 of a text's own words, weighed by how many of them it holds (as committed documents are)."""
    counts = language.cached_counts(text)
    length_norm = K1 * (1 - B + B * sum(counts.values()) / (norm or 1))
    total, held = 0.0, 0
    for term, term_weights in zip(terms, weights, strict=True):
        exact, longer = _frequencies(language, text, counts, term)
        total += term_weights.exact * _saturate(exact, length_norm, K1)
        total += term_weights.longer * _saturate(longer, length_norm, K1)
        held += exact > 0 or longer > 0
    return total * coordination(held, len(terms)) if held else total


def fresh_stats(language: Language, texts: Sequence[str], term: Term, scoring: set[str] | None = None) -> Stats:
    """A word's statistics among uncommitted entries, counted as their documents will count it.

    `scoring`, when given, holds every text that can count (TextSet.scoring): the others are not looked at.
    """
    exact = longer = 0
    for text in texts:
        if scoring is not None and text not in scoring:
            continue
        frequencies = _frequencies(language, text, language.cached_counts(text), term)
        exact, longer = exact + (frequencies[0] > 0), longer + (frequencies[1] > 0)
    return Stats(len(texts), exact, longer)


def _frequencies(language: Language, text: str, counts: dict[str, int], term: Term) -> tuple[int, int]:
    """How often a text holds a word's stem exactly, and words it begins (a text without it told in C)."""
    if term.cjk:
        run = term.keys[0]
        if len(run) == 1:
            return sum(n for t, n in counts.items() if t.startswith(run)), 0
        return min(counts.get(pair, 0) for pair in bigrams(run)), 0
    if not language.holds(text, term):
        return 0, 0
    exact = max(counts.get(key, 0) for key in term.keys)
    longer = sum(n for t, n in counts.items() if t not in term.keys and t.startswith(term.keys))
    return exact, longer


def _saturate(frequency: int, norm: float, k1: float) -> float:
    """BM25's saturated term frequency."""
    return (k1 + 1) * frequency / (frequency + norm) if frequency else 0.0


def phrase_pairs(query: Query) -> tuple[tuple[str, str], ...]:
    """The pairs of consecutive query words (stopwords too) whose standing together earns the phrase bonus."""
    words = [term.keys[0] for term in query.terms if not term.cjk]
    return tuple(dict.fromkeys(itertools.pairwise(words)))


def most_bonus(query: Query) -> float:
    """The largest phrase bonus an entry can get for a query: every pair standing together."""
    return PHRASE_BONUS * len(phrase_pairs(query))


def phrase_bonus(language: Language, text: str, pairs: Sequence[tuple[str, str]]) -> float:
    """A bonus for each pair of consecutive query words that stand together in the text."""
    return PHRASE_BONUS * language.pairs_together(text, pairs)


def held_words(language: Language, text: str, terms: Sequence[Term]) -> list[str]:
    """The query words a text holds, as the query wrote them."""
    return [term.word for term in terms if language.holds(text, term)]


def contexts(entries: Sequence[Entry], start: int = 0) -> list[tuple[tuple[float, str], ...]]:
    """The weighted texts of the entries around each entry of a file (from `start` on), as `CONTEXT` says."""
    count = len(entries)
    return [
        tuple((weight, entries[i + step].text) for step, weight in CONTEXT if 0 <= i + step < count)
        for i in range(start, count)
    ]


def steps() -> list[int]:
    """Where each neighbour of `CONTEXT` sits from an entry in its file."""
    return [step for step, _ in CONTEXT]
