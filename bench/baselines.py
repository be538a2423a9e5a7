"""The baselines braind is compared with, run on the same corpus in the same run.

(a) the original diary plugin: a linear scan of the window's diary files with
case-insensitive substring AND; (b) SQLite FTS5 from the standard library,
queried in-process: the floor of a C full-text engine, words AND-ed as
prefixes, or for questions OR-ed and ranked by BM25; (c) plain Whoosh with
default writer settings, for the build rate. The recall-quality run asks whole
questions of (a) over all of a root and of (d), FTS5 BM25 with the words OR-ed.
"""

from __future__ import annotations

import bisect
import datetime as dt
import multiprocessing
import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import corpus, proc

LIMIT = 20
EVERY_WORD, ANY_WORD = "every word as a prefix", "any word, BM25"  # how FTS5 was asked, in the results
Place = tuple[str, int]  # an entry's diary date and line number


def window_paths(root: Path, days: int | None, today: dt.date) -> list[Path]:
    """The diary files of the last `days` calendar days (None: every day), newest first, as the plugin listed them."""
    since = "" if days is None else (today - dt.timedelta(days=days - 1)).isoformat()
    diary = root / "diary"
    names = sorted((n for n in os.listdir(diary) if n.endswith(".md") and n[:10] >= since), reverse=True)
    return [diary / name for name in names]


def scan(root: Path, words: Sequence[str], days: int | None, today: dt.date) -> tuple[list[str], int]:
    """Baseline (a): lines of the window holding every word as a case-insensitive substring."""
    needles = [word.lower() for word in words]
    hits: list[str] = []
    for path in window_paths(root, days, today):
        text = path.read_text(encoding="utf-8")
        hits += [line for line in text.splitlines() if all(n in line.lower() for n in needles)]
    return hits[:LIMIT], len(hits)


def scan_all(root: Path, question: str, limit: int) -> list[Place]:
    """Baseline (a) over all of a root: lines holding every whitespace-separated word, newest first."""
    needles = [word.lower() for word in question.split()]
    hits: list[Place] = []
    if not needles:
        return hits
    for path in sorted((root / "diary").glob("*.md"), reverse=True):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number in range(len(lines), 0, -1):
            if all(n in lines[number - 1].lower() for n in needles):
                hits.append((path.stem, number))
                if len(hits) == limit:
                    return hits
    return hits


def fts5_available() -> bool:
    """True when this Python's SQLite has FTS5 compiled in."""
    try:
        sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    return True


class Fts5:
    """Baseline (b): the corpus in an SQLite FTS5 table, queried in this process.

    Entries are inserted oldest first, so a date window is also a rowid range,
    which FTS5 applies inside the index instead of filtering every match.
    """

    def __init__(self, path: Path) -> None:
        self.dates: list[str] = []
        self.db = sqlite3.connect(str(path))
        self.db.execute(
            "CREATE VIRTUAL TABLE entries USING fts5("
            "text, date UNINDEXED, time UNINDEXED, tokenize='unicode61 remove_diacritics 2')"
        )

    def build(self, docs: Sequence[corpus.Doc]) -> float:
        """Insert every entry in one transaction; returns the seconds taken."""
        ordered = sorted(docs, key=lambda d: (d.date, d.time))
        started = time.perf_counter()
        with self.db:
            self.db.executemany(
                "INSERT INTO entries(rowid, text, date, time) VALUES (?, ?, ?, ?)",
                ((i, d.text, d.date, d.time) for i, d in enumerate(ordered)),
            )
        self.dates = [d.date for d in ordered]
        return time.perf_counter() - started

    def _first(self, since: str) -> int:
        """The first rowid of the window."""
        return bisect.bisect_left(self.dates, since)

    def recall(self, words: Sequence[str], since: str) -> list[tuple[Any, ...]]:
        """The best LIMIT entries since a date holding every word as a prefix, ranked by BM25."""
        return self.db.execute(
            "SELECT date, time, text FROM entries WHERE entries MATCH ? AND rowid >= ? AND date >= ? "
            "ORDER BY rank LIMIT ?",
            (_match(words), self._first(since), since, LIMIT),
        ).fetchall()

    def total(self, words: Sequence[str], since: str) -> int:
        """How many entries since a date match (not timed)."""
        row = self.db.execute(
            "SELECT count(*) FROM entries WHERE entries MATCH ? AND date >= ?", (_match(words), since)
        ).fetchone()
        return int(row[0])

    def recall_any(self, words: Sequence[str]) -> list[tuple[Any, ...]]:
        """The best LIMIT entries of all of memory holding any of the words, ranked by BM25: a question's floor."""
        return self.db.execute(
            "SELECT date, time, text FROM entries WHERE entries MATCH ? ORDER BY rank LIMIT ?",
            (any_word(" ".join(words)), LIMIT),
        ).fetchall()

    def total_any(self, words: Sequence[str]) -> int:
        """How many entries hold any of the words (not timed)."""
        row = self.db.execute("SELECT count(*) FROM entries WHERE entries MATCH ?", (any_word(" ".join(words)),))
        return int(row.fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        self.db.close()


def _match(words: Sequence[str]) -> str:
    """An FTS5 query: every word as a quoted prefix, AND-ed."""
    return " AND ".join('"' + word.replace('"', '""') + '"*' for word in words)


class Fts5Ranked:
    """Baseline (d): entries in an in-memory FTS5 table (default tokenizer), questions' words OR-ed, BM25 first."""

    def __init__(self, entries: Sequence[tuple[Place, str]]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE entries USING fts5(text, date UNINDEXED, line UNINDEXED)")
        with self.db:
            self.db.executemany(
                "INSERT INTO entries(rowid, text, date, line) VALUES (?, ?, ?, ?)",
                ((i, text, date, line) for i, ((date, line), text) in enumerate(entries)),
            )

    def search(self, question: str, limit: int) -> list[Place]:
        """The best `limit` entries for a question; ties go to the later entry."""
        query = any_word(question)
        if not query:
            return []
        rows = self.db.execute(
            "SELECT date, line FROM entries WHERE entries MATCH ? ORDER BY bm25(entries), rowid DESC LIMIT ?",
            (query, limit),
        ).fetchall()
        return [(str(date), int(line)) for date, line in rows]

    def close(self) -> None:
        """Close the database."""
        self.db.close()


def any_word(question: str) -> str:
    """An FTS5 query: each whitespace-separated word that has a letter or digit, quoted, OR-ed."""
    words = (word for word in question.split() if any(c.isalnum() for c in word))
    return " OR ".join('"' + word.replace('"', '""') + '"' for word in words)


def whoosh_build(root: Path, directory: Path) -> dict[str, float]:
    """Baseline (c), in a child process: plain Whoosh indexes the corpus with default settings."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(_whoosh_child, (str(root), str(directory)))


def _whoosh_child(root: str, directory: str) -> dict[str, float]:
    """Load the corpus, then time a StandardAnalyzer index built with ix.writer() and one commit."""
    from whoosh import index
    from whoosh.fields import ID, STORED, TEXT, Schema

    docs = corpus.load(Path(root))
    Path(directory).mkdir()
    schema = Schema(text=TEXT(stored=True), date=ID(stored=True), time=STORED)
    ix = index.create_in(directory, schema)
    started = time.perf_counter()
    writer = ix.writer()
    for doc in docs:
        writer.add_document(text=doc.text, date=doc.date, time=doc.time)
    writer.commit()
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "entries": float(len(docs)),
        "entries_per_s": len(docs) / seconds,
        "peak_rss_mb": proc.peak_rss_mb(os.getpid()),
    }
