"""Recall queries taken from real entries, with words chosen by how common they are in the corpus.

Each query's words come from one entry of the last 30 days, so every query
has at least one hit in every window. Words are ranked by document frequency.
"Common" queries (low selectivity, many hits) are words from the top 1 %;
"medium" ones all but one word from the top 1 % and one from the next 4 %;
"rare" ones (high selectivity) the entry's rarest words, from the long tail;
"Chinese" queries are two-character pieces of a Chinese entry, which braind
matches by characters. "Natural" questions are asked the way an agent asks:
two to four of one entry's content words, whatever their band, inside a
question of five to ten words whose other words are everyday ones.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from bench.corpus import Doc
from bench.vocab import FUNCTION_WORDS

WINDOW_DAYS = 30
MIN_LETTERS = 3
# Bands of the content vocabulary ranked by document frequency, as fractions of its size.
BANDS = {"common": (0.0, 0.01), "medium": (0.01, 0.05), "rare": (0.4, 1.0)}
_WORD = re.compile(r"[a-z]+")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]{2,}")
NATURAL = "natural"
# Question templates of five to ten words once filled; each {} is one content word of the entry.
TEMPLATES = (
    "what did I say about {} and {}",
    "do you remember anything about {} or {}",
    "what do we know about {} and {}",
    "have I written anything about {} with {}",
    "when did we last talk about {} {} {}",
    "what was the note about {} {} and {}",
    "tell me about {} {} and {}",
    "anything on {} {} {} or {}",
    "what did I write about {} {} {} {}",
    "remind me about {} and {} {} {}",
)


@dataclass(frozen=True)
class QueryClass:
    """Queries of one kind: how many words, which band, and the word lists."""

    key: str
    label: str
    queries: tuple[tuple[str, ...], ...]


def content_words(text: str) -> set[str]:
    """The distinct lower-case Latin words of a text that are worth searching for."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= MIN_LETTERS and w not in FUNCTION_WORDS}


def rank_words(docs: Sequence[Doc]) -> dict[str, float]:
    """Each content word's rank by document frequency, as a fraction (0 = most common)."""
    counts: Counter[str] = Counter()
    for doc in docs:
        counts.update(content_words(doc.text))
    ranked = [word for word, _ in counts.most_common()]
    return {word: i / len(ranked) for i, word in enumerate(ranked)}


def recent(docs: Sequence[Doc], today: dt.date) -> list[Doc]:
    """The entries of the last 30 days."""
    since = (today - dt.timedelta(days=WINDOW_DAYS - 1)).isoformat()
    return [doc for doc in docs if doc.date >= since]


def _in_band(words: set[str], ranks: dict[str, float], band: str) -> list[str]:
    """The words of one band, rarest last."""
    low, high = BANDS[band]
    return sorted((w for w in words if low <= ranks.get(w, 1.0) <= high), key=ranks.__getitem__)


def _pick(words: set[str], ranks: dict[str, float], band: str, size: int, rng: random.Random) -> tuple[str, ...]:
    """`size` words of one entry for a band, or () when the entry has too few."""
    common = _in_band(words, ranks, "common")
    if band == "common":
        return tuple(rng.sample(common, size)) if len(common) >= size else ()
    if band == "medium":
        middle = _in_band(words, ranks, "medium")
        return (*rng.sample(common, size - 1), rng.choice(middle)) if len(common) >= size - 1 and middle else ()
    rare = _in_band(words, ranks, "rare")
    return tuple(rare[-size:]) if len(rare) >= size else ()


def _band_queries(
    docs: Sequence[Doc], ranks: dict[str, float], band: str, size: int, rng: random.Random
) -> Iterator[tuple[str, ...]]:
    """Word tuples of one band, each from one entry."""
    for doc in docs:
        picked = _pick(content_words(doc.text), ranks, band, size, rng)
        if picked:
            yield picked


def _chinese_queries(docs: Sequence[Doc], rng: random.Random) -> Iterator[tuple[str, ...]]:
    """Two non-overlapping two-character pieces of one Chinese run of an entry."""
    for doc in docs:
        runs = [run for run in _CJK_RUN.findall(doc.text) if len(run) >= 4]
        if runs:
            run = rng.choice(runs)
            first = rng.randrange(len(run) - 3)
            second = rng.randrange(first + 2, len(run) - 1)
            yield run[first : first + 2], run[second : second + 2]


def _natural_questions(docs: Sequence[Doc], rng: random.Random) -> Iterator[tuple[str, ...]]:
    """A question template filled with as many of one entry's content words as it has slots."""
    for doc in docs:
        template = rng.choice(TEMPLATES)
        words = sorted(content_words(doc.text))
        slots = template.count("{}")
        if len(words) >= slots:
            yield tuple(template.format(*rng.sample(words, slots)).split())


def _take(found: Iterator[tuple[str, ...]], count: int) -> tuple[tuple[str, ...], ...]:
    """The first `count` distinct queries."""
    out: dict[tuple[str, ...], None] = {}
    for query in found:
        out[query] = None
        if len(out) == count:
            break
    return tuple(out)


def choose(docs: Sequence[Doc], today: dt.date, seed: int, count: int) -> list[QueryClass]:
    """Query classes: 2 and 3 words of each band, Chinese, and natural questions, `count` queries each."""
    rng = random.Random(seed)
    ranks = rank_words(docs)
    pool = recent(docs, today)
    rng.shuffle(pool)
    classes = [
        QueryClass(f"{size}w-{band}", f"{size} {band} words", _take(_band_queries(pool, ranks, band, size, rng), count))
        for size in (2, 3)
        for band in BANDS
    ]
    classes.append(QueryClass("2w-chinese", "2 Chinese words", _take(_chinese_queries(pool, rng), count)))
    questions = _take(_natural_questions(pool, rng), count)
    classes.append(QueryClass(NATURAL, "natural questions of 5 to 10 words", questions))
    empty = [c.key for c in classes if not c.queries]
    if empty:
        raise ValueError(f"the corpus has no entry to build queries for {', '.join(empty)}")
    return classes
