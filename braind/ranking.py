"""How recall ranks: entries holding every query word first, then the best of those holding some.

Relevance is BM25 with the statistics of every partition a query covers (so a
word rare in one month but common over the years weighs what it weighs over
the years): for each query word, its exact stem, the longer words it begins
(weighted `PREFIX_WEIGHT`) and its occurrences in the entries just before (the
context, weighted `CONTEXT_WEIGHT`, which lifts a short answer whose words sit
in the question above it). Newer entries break ties. Nothing here touches the
search engine: the engine hands over one map of document → term weight per
word and field, and this module combines them.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from braind.analysis import Language, Query, Term, bigrams

Scores = dict[int, float]

PREFIX_WEIGHT = 0.1  # a longer word the query word begins is weaker evidence than the word itself
CONTEXT_WEIGHT = 0.5  # the entries just before an entry count half
PHRASE_BONUS = 0.5  # each pair of query words standing together in the entry, stopwords included
EXACT_BELOW = 5000  # partial candidates scored one by one below this; above it, terms by descending bound
_POOL = 40  # text-only candidates per partition kept for the full score when pruning
_TIE = 1e-9


@dataclass
class TermMaps:
    """One query word's postings in one partition: its stem, the longer words it begins, and its context."""

    exact: Scores
    longer: Scores
    context: Scores

    def holders(self) -> set[int]:
        """The documents whose own text holds the word."""
        return self.exact.keys() | self.longer.keys()

    def text_score(self, docnum: int, weights: TermWeights) -> float:
        """The word's weight in a document's own text."""
        return weights.exact * self.exact.get(docnum, 0.0) + weights.longer * self.longer.get(docnum, 0.0)

    def score(self, docnum: int, weights: TermWeights) -> float:
        """The word's weight in a document, its context included."""
        return self.text_score(docnum, weights) + weights.context * self.context.get(docnum, 0.0)

    def text_bound(self, weights: TermWeights) -> float:
        """The most the word adds to any document's text score."""
        return weights.exact * max(self.exact.values(), default=0.0) + weights.longer * max(
            self.longer.values(), default=0.0
        )


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
    return Stats(documents, len(maps.exact), len(maps.longer), len(maps.context))


@dataclass(order=True)
class Candidate:
    """A document or uncommitted entry that may be a hit; ordered full matches first, then score, then newer."""

    full: bool
    score: float
    stamp: int
    ref: Any = field(compare=False)  # a committed document number or an uncommitted Entry
    source: Any = field(default=None, compare=False)  # whatever can load it (a partition)

    def rounded(self) -> tuple[bool, float, int]:
        """The order key, scores rounded so that sums equal but for the order of additions tie."""
        return self.full, round(self.score, 9), self.stamp


@dataclass
class Ranked:
    """One partition's best candidates and how many matched fully and partly."""

    full: list[Candidate]
    partial: list[Candidate]
    total: int
    partial_total: int


def full_documents(maps: Sequence[TermMaps]) -> set[int]:
    """Documents whose text holds every word."""
    ordered = sorted((m.holders() for m in maps), key=len)
    found = ordered[0]
    for other in ordered[1:]:
        found &= other
    return found


def rank_documents(
    maps: Sequence[TermMaps],
    weights: Sequence[TermWeights],
    keep: Callable[[set[int]], set[int]],
    limit: int,
    stamp: Callable[[int], int],
    strict: bool,
) -> Ranked:
    """The best `limit` full matches and (unless strict) the best `limit` partial ones of one partition; counts.

    `keep` narrows a set of documents to those the request may see (window, roots, type, not tombstoned).
    """
    full = keep(full_documents(maps))
    top_full = _best(full, maps, weights, limit, stamp, True)
    partial = keep(set().union(*(m.holders() for m in maps))) - full if len(maps) > 1 else set()
    if strict:
        return Ranked(top_full, [], len(full), len(partial))
    if len(partial) > EXACT_BELOW:
        chosen: Iterable[int] = _pruned(partial, maps, weights, max(limit, _POOL))
    else:
        chosen = partial
    return Ranked(top_full, _best(chosen, maps, weights, limit, stamp, False), len(full), len(partial))


def _best(
    docs: Iterable[int],
    maps: Sequence[TermMaps],
    weights: Sequence[TermWeights],
    limit: int,
    stamp: Callable[[int], int],
    full: bool,
) -> list[Candidate]:
    """The `limit` best documents by their whole score (context included), newer first on ties."""
    pairs = list(zip(maps, weights, strict=True))
    scored = [(sum(m.score(n, w) for m, w in pairs), n) for n in docs]
    if len(scored) > limit:
        cutoff = heapq.nlargest(limit, scored)[-1][0] - _TIE
        scored = [pair for pair in scored if pair[0] >= cutoff]
    ranked = sorted((Candidate(full, round(score, 9), stamp(n), n) for score, n in scored), reverse=True)
    return ranked[:limit]


def _pruned(docs: set[int], maps: Sequence[TermMaps], weights: Sequence[TermWeights], pool: int) -> list[int]:
    """The `pool` documents of `docs` with the best text scores, words taken by descending bound.

    Once the pool's weakest score beats all that the words not yet taken could add, no document
    outside it can enter: the remaining words are only looked up for the documents in it.
    """
    order = sorted(zip(maps, weights, strict=True), key=lambda pair: -pair[0].text_bound(pair[1]))
    rest = sum(m.text_bound(w) for m, w in order)
    acc: Scores = {}
    admitting = True
    for term_maps, term_weights in order:
        rest -= term_maps.text_bound(term_weights)
        if admitting:
            for docnum in term_maps.holders() & docs:
                acc[docnum] = acc.get(docnum, 0.0) + term_maps.text_score(docnum, term_weights)
            if len(acc) > pool:
                floor = heapq.nlargest(pool, acc.values())[-1]
                if floor > rest:
                    admitting = False
                    acc = {n: s for n, s in acc.items() if s + rest >= floor}
        else:
            for docnum in acc:
                acc[docnum] += term_maps.text_score(docnum, term_weights)
    return heapq.nlargest(pool, acc, key=acc.__getitem__)


def score_entry(
    language: Language,
    text: str,
    context: str,
    terms: Sequence[Term],
    weights: Sequence[TermWeights],
    norms: tuple[float, float],
) -> tuple[float, int]:
    """An uncommitted entry's score, as its document would get it once committed, and how many words it holds.

    `norms` are BM25's length normalisation bases (average text and context lengths) of its partition.
    """
    from braind.postings import K1, B  # the engine's BM25 parameters, one source for both paths

    counts = language.term_counts(text)
    context_counts = language.term_counts(context) if context else {}
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
    if not pairs:
        return 0.0
    return PHRASE_BONUS * len(pairs & language.adjacent_pairs(text))


def held_words(language: Language, text: str, terms: Sequence[Term]) -> list[str]:
    """The query words a text holds, as the query wrote them."""
    return [term.word for term in terms if language.holds(text, term)]
