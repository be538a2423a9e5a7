"""A search's hits in their final order: full matches first, a phrase bonus within each group, held words, snippets.

The same for every index implementation: nothing here needs the engine.
"""

from __future__ import annotations

from collections.abc import Sequence

from braind.index import analysis, ranking
from braind.index.api import Found, Hit
from braind.model.entries import Entry


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
    chosen: Sequence[tuple[ranking.Candidate, Entry]],
) -> list[tuple[Entry, float, bool, tuple[str, ...]]]:
    """The chosen hits in their final order: full matches first, a phrase bonus within each group; with held words."""
    out = []
    pairs = ranking.phrase_pairs(query)
    for candidate, entry in chosen:
        bonus = ranking.phrase_bonus(language, entry.text, pairs)
        words = _held(language, query.required, candidate, entry)
        out.append((candidate.full, candidate.score + bonus, candidate.stamp, entry, words))
    out.sort(key=lambda item: (item[0], round(item[1], 9), item[2]), reverse=True)
    return [(entry, score, full, words) for full, score, _, entry, words in out]


def _held(
    language: analysis.Language,
    terms: Sequence[analysis.Term],
    candidate: ranking.Candidate,
    entry: Entry,
) -> tuple[str, ...]:
    """The query words a hit holds: from ranking's bits for a document, from its text for an uncommitted entry."""
    if candidate.full:
        return tuple(term.word for term in terms)
    if candidate.held is not None:
        return ranking.held_of(candidate.held, terms)
    return tuple(ranking.held_words(language, entry.text, terms))


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
