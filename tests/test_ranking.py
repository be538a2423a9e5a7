"""Ranking a partition finds exactly the hits a plain sort of every document's score finds, ties and all."""

from __future__ import annotations

import numpy as np
import pytest

from braind.index import ranking


def _lists(rng: np.random.Generator, size: int, share: float) -> ranking.Postings:
    """A word's postings: sorted distinct documents, and weights from a few values so that sums tie."""
    ids = np.flatnonzero(rng.random(size) < share)
    return ids, rng.choice(np.array([0.5, 1.0, 1.25, 2.0], dtype=np.float32), len(ids))


Case = tuple[list[ranking.TermMaps], list[ranking.TermWeights], np.ndarray, np.ndarray, list[np.ndarray]]


def _case(seed: int, size: int, words: int) -> Case:
    """Random postings for `words` words, a mask of allowed documents, stamps with repeats, and neighbours."""
    rng = np.random.default_rng(seed)
    maps = [ranking.TermMaps(_lists(rng, size, rng.uniform(0.05, 0.6)), _lists(rng, size, 0.02)) for _ in range(words)]
    weights = [ranking.TermWeights(float(rng.choice([1.0, 2.5])), 0.1) for _ in range(words)]
    allowed = rng.random(size) < 0.9
    stamps = rng.integers(0, size // 50 + 2, size)
    files = np.sort(rng.choice(np.arange(1, size), size // 40, replace=False))  # where each file begins
    first = np.zeros(size, dtype=np.int64)
    first[files] = files
    first = np.maximum.accumulate(first)
    last = np.append(files, size)[np.searchsorted(files, np.arange(size), side="right")] - 1
    neighbours = []
    for step in ranking.steps():
        near = np.arange(size) + step
        neighbours.append(np.where((near >= first) & (near <= last), near, size).astype(np.int32))
    return maps, weights, allowed, stamps, neighbours


def _sorted(case: Case, limit: int, strict: bool) -> ranking.Ranked:
    """The hits by the definition: every document scored, each group sorted whole."""
    maps, weights, allowed, stamps, neighbours = case
    size = len(allowed)
    text = np.zeros(size + 1)
    held = np.zeros(size, dtype=np.int64)
    for bit, (term_maps, term_weights) in enumerate(zip(maps, weights, strict=True)):
        for (ids, weight), scale in ((term_maps.exact, term_weights.exact), (term_maps.longer, term_weights.longer)):
            text[ids] += weight * scale
            held[ids] |= 1 << bit
    count = np.bitwise_count(held)
    holding = held != 0
    if len(maps) > 1:
        text[:size][holding] *= ranking.coordination(count[holding], len(maps))
    score = text[:size].copy()
    for around, (_, weight) in zip(neighbours, ranking.CONTEXT, strict=True):
        score += weight * text[around]
    every = (1 << len(maps)) - 1
    groups = []
    for full in (True, False):
        docs = np.flatnonzero(allowed & holding & ((held == every) == full))
        scores = np.round(score[docs], 9)
        order = np.lexsort((stamps[docs], scores))[::-1][:limit]
        found = [(float(scores[i]), int(docs[i])) for i in order]
        groups.append([ranking.Candidate(full, s, int(stamps[d]), d, held=int(held[d])) for s, d in found])
    full_total = int(np.sum(allowed & (held == every)))
    partial_total = int(np.sum(allowed & holding)) - full_total
    shown = [] if strict or full_total >= limit else groups[1]
    return ranking.Ranked(groups[0] if full_total else [], shown, full_total, partial_total)


def _fields(found: list[ranking.Candidate]) -> list[tuple[bool, float, int, int, int | None]]:
    return [(c.full, c.score, c.stamp, c.ref, c.held) for c in found]


@pytest.mark.parametrize("words", [1, 2, 3, 9])
@pytest.mark.parametrize("limit", [1, 20, 200])
@pytest.mark.parametrize("seed", range(4))
def test_the_best_of_a_partition_are_those_a_whole_sort_finds(seed: int, limit: int, words: int) -> None:
    size = 60_000 if seed % 2 else 3_000  # long enough that the best are found above a sampled floor, and not
    case = _case(seed * 10 + words, size, words)
    for strict in (False, True):
        got = ranking.rank_documents(*case, limit, strict)
        want = _sorted(case, limit, strict)
        assert (got.total, got.partial_total) == (want.total, want.partial_total)
        assert _fields(got.full) == _fields(want.full)
        assert _fields(got.partial) == _fields(want.partial)
        assert strict or len(got.full) + len(got.partial) > 0


def test_the_best_are_found_when_they_tie_at_the_cut_and_the_sample_misses_them() -> None:
    size, limit = 40_000, 20
    ids = np.arange(size)
    weight = np.full(size, 1.0, dtype=np.float32)
    best = np.arange(1, 40 * 32, 32)  # 40 documents tied for first place, none where the sample looks
    weight[best] = 2.0
    maps = [ranking.TermMaps((ids, weight), (ids[:0], weight[:0]))]
    weights = [ranking.TermWeights(1.0, 0.1)]
    allowed = np.ones(size, dtype=bool)
    stamps = np.zeros(size, dtype=np.int64)
    stamps[best] = np.arange(len(best))
    neighbours = [np.full(size, size, dtype=np.int32) for _ in ranking.CONTEXT]
    case: Case = (maps, weights, allowed, stamps, neighbours)
    got = ranking.rank_documents(*case, limit, False)
    assert [c.ref for c in got.full] == list(best[::-1][:limit])
    assert _fields(got.full) == _fields(_sorted(case, limit, False).full)


def test_a_score_just_below_the_cut_is_kept_when_the_sample_holds_the_cut() -> None:
    score = np.ones(40_000)
    score[::32][:30] = 2.0  # the sample's 20th best is the whole array's: 2.0
    score[33] = 2.0 - 5e-9  # rounds to 2.0, so a newer stamp may still carry it into the first 20
    kept = ranking._best(score, 20)
    assert 33 in kept
    assert list(kept) == list(np.flatnonzero(score >= 2.0 - 1e-8))
