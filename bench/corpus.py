"""Deterministic synthetic memory roots: diary days of realistic size, cached on disk between runs.

A corpus of N entries is generated from a seed, newest day first, ending
today. Words follow Zipf's law; each run of an entry's words is about one
topic, whose words then co-occur as they do in a real diary. The content
depends only on the day's offset from the end, so a cached corpus from an
earlier day is brought up to date by renaming its files.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import random
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.vocab import chinese_vocabulary, latin_vocabulary, topic_popularity, topics
from braind.model.entries import TYPES, Meta, render_meta

VERSION = 1
MANIFEST = "corpus.json"
MIN_CHARS, MAX_CHARS = 50, 400
SHARE_CHINESE, SHARE_MIXED, SHARE_TYPED = 0.10, 0.05, 0.05
DAY_MEDIAN, DAY_SIGMA, DAY_MIN, DAY_MAX = 55, 0.8, 3, 300
SKIP_DAY = 0.12
TOPIC_SHARE = 0.4
ZH_COMMA, ZH_STOP = "\uff0c", "\u3002"  # full-width comma and full stop
TYPED = ("fact", "decision", "error", "workflow")
_ENTRY = re.compile(rf"^\[(?P<time>\d\d:\d\d)\] (?:\[(?:{'|'.join(TYPES)})(?: [^\]]*)?\] )?(?P<text>.+)$", re.M)
TOOLS = ("pytest", "git", "docker", "make", "vim", "alembic", "npm", "cargo")


@dataclass(frozen=True)
class Doc:
    """One diary entry as the baselines see it."""

    date: str
    time: str
    text: str


@dataclass(frozen=True)
class Corpus:
    """A generated memory root and what it holds."""

    root: Path
    entries: int
    days: int
    files: int
    bytes: int
    first: str
    last: str


class Generator:
    """Draws diary entries from the seeded vocabularies."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.latin = latin_vocabulary(self.rng)
        self.chinese = chinese_vocabulary(self.rng)
        self.topics = topics(self.rng, self.latin)
        self.popularity = topic_popularity()

    def day_counts(self, n: int) -> list[int]:
        """Entries per day, newest day first; today and yesterday are never empty."""
        counts: list[int] = []
        left = n
        while left > 0:
            if len(counts) > 1 and self.rng.random() < SKIP_DAY:
                counts.append(0)
                continue
            size = int(self.rng.lognormvariate(math.log(DAY_MEDIAN), DAY_SIGMA))
            counts.append(min(left, max(DAY_MIN, min(DAY_MAX, size))))
            left -= counts[-1]
        return counts

    def times(self, k: int) -> list[str]:
        """k sorted times of day between 06:00 and 23:59."""
        minutes = sorted(self.rng.randrange(6 * 60, 24 * 60) for _ in range(k))
        return [f"{m // 60:02d}:{m % 60:02d}" for m in minutes]

    def text(self) -> str:
        """One entry's text: Latin, Chinese or mixed script."""
        roll = self.rng.random()
        if roll < SHARE_CHINESE:
            return self.chinese_text()
        if roll < SHARE_CHINESE + SHARE_MIXED:
            return self.latin_text(mixed=True)
        return self.latin_text(mixed=False)

    def latin_text(self, mixed: bool) -> str:
        """Words up to a target length, capitalised, with the odd comma, number or Chinese word."""
        target = int(self.rng.triangular(MIN_CHARS, MAX_CHARS, 120))
        out: list[str] = []
        length = 0
        while length < target:
            for word in self._latin_words(target // 4 + 2, mixed):
                if length >= target or length + len(word) + 1 > MAX_CHARS - 1:
                    return _sentence(out, length)
                out.append(word)
                length += len(word) + 1
        return _sentence(out, length)

    def _latin_words(self, k: int, mixed: bool) -> list[str]:
        """k tokens of a Latin entry, drawn in one go: words (some of one topic), numbers, commas, Chinese."""
        topic = self.topics[int(self.popularity.draw(self.rng, 1)[0])]
        words = [
            topical if roll < TOPIC_SHARE else word
            for word, topical, roll in zip(
                self.latin.draw(self.rng, k), topic.draw(self.rng, k), self._rolls(k), strict=True
            )
        ]
        chinese = self.chinese.draw(self.rng, k) if mixed else words
        return [_token(word, zh, roll, mixed) for word, zh, roll in zip(words, chinese, self._rolls(k), strict=True)]

    def _rolls(self, k: int) -> list[float]:
        """k uniform random numbers in [0, 1)."""
        return [self.rng.random() for _ in range(k)]

    def chinese_text(self) -> str:
        """Chinese words run together, with commas every few words and a full stop."""
        target = int(self.rng.triangular(MIN_CHARS, 220, 60))
        text = ""
        while len(text) < target:
            clause = "".join(self.chinese.draw(self.rng, self.rng.randint(3, 9)))
            text += clause + ZH_COMMA
        return text[: MAX_CHARS - 1].rstrip(ZH_COMMA) + ZH_STOP

    def meta(self) -> Meta:
        """The type, key and triggers of a typed entry, or a plain note."""
        if self.rng.random() >= SHARE_TYPED:
            return Meta()
        kind = self.rng.choice(TYPED)
        key = f"k{self.rng.randrange(1000)}" if self.rng.random() < 0.5 else None
        return Meta(kind, key, tuple(self._triggers()))

    def _triggers(self) -> Iterator[str]:
        """Zero to three triggers naming files, tools and error codes."""
        for _ in range(self.rng.randint(0, 3)):
            roll = self.rng.random()
            if roll < 0.4:
                yield f"file:{self.latin.draw(self.rng, 1)[0]}.py"
            elif roll < 0.7:
                yield f"tool:{self.rng.choice(TOOLS)}"
            else:
                yield f"err:E{self.rng.randrange(1000, 9999)}"

    def day(self, k: int) -> str:
        """The text of one diary file with k entries."""
        return "".join(_line(time, self.meta(), self.text()) for time in self.times(k))

    def day_until(self, k: int, last: dt.time) -> str:
        """One diary file with k entries timed from midnight to `last`, as a day that is still going on."""
        end = last.hour * 60 + last.minute
        minutes = sorted(self.rng.randrange(end + 1) for _ in range(k))
        return "".join(_line(f"{m // 60:02d}:{m % 60:02d}", self.meta(), self.text()) for m in minutes)


def _line(time: str, meta: Meta, text: str) -> str:
    """A diary line in braind's grammar; generated text never starts with a bracket, so no group is needed."""
    return f"[{time}] {text}\n" if meta == Meta() else f"[{time}] {render_meta(meta)} {text}\n"


def _token(word: str, chinese: str, roll: float, mixed: bool) -> str:
    """One token chosen by a random roll: mostly the word, sometimes a number, a comma or a Chinese word."""
    if mixed and roll < 0.3:
        return chinese
    if roll > 0.97:
        return str(int(roll * 1e6) % 10000)
    return word + "," if roll > 0.92 else word


def _sentence(words: list[str], length: int) -> str:
    """Join words into a sentence that starts with a capital and ends with a full stop."""
    text = " ".join(words).rstrip(",")
    text = text[:1].upper() + text[1:]
    return text + "." if length < MAX_CHARS else text


def generate(directory: Path, n: int, seed: int, end: dt.date) -> None:
    """Write a corpus of n entries ending on `end` into directory/root/diary, with its manifest."""
    gen = Generator(seed)
    diary = directory / "root" / "diary"
    diary.mkdir(parents=True)
    counts = gen.day_counts(n)
    for offset, k in enumerate(counts):
        if k:
            day = end - dt.timedelta(days=offset)
            (diary / f"{day.isoformat()}.md").write_text(gen.day(k), encoding="utf-8")
    manifest = {"version": VERSION, "entries": n, "seed": seed, "end": end.isoformat(), "days": len(counts)}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def _manifest(directory: Path) -> dict[str, object] | None:
    """The manifest of a cached corpus, or None when there is no usable one."""
    try:
        found = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and found.get("version") == VERSION else None


def shift(directory: Path, old_end: dt.date, new_end: dt.date) -> None:
    """Move every day of a cached corpus forward so that it ends on new_end."""
    delta = new_end - old_end
    diary = directory / "root" / "diary"
    for path in sorted(diary.iterdir(), reverse=True):
        day = dt.date.fromisoformat(path.stem) + delta
        path.rename(diary / f"{day.isoformat()}.md")
    manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    manifest["end"] = new_end.isoformat()
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def ensure(out: Path, n: int, seed: int, today: dt.date) -> Corpus:
    """The cached corpus of n entries for seed, generated or brought up to today first when needed."""
    directory = out / f"corpus-{n}-{seed}"
    manifest = _manifest(directory)
    if manifest is None or dt.date.fromisoformat(str(manifest["end"])) > today:
        shutil.rmtree(directory, ignore_errors=True)
        partial = out / f".corpus-{n}-{seed}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        generate(partial, n, seed, today)
        os.replace(partial, directory)
    elif str(manifest["end"]) != today.isoformat():
        shift(directory, dt.date.fromisoformat(str(manifest["end"])), today)
    return describe(directory / "root", n)


def describe(root: Path, n: int) -> Corpus:
    """Size and date span of a corpus root."""
    files = sorted((root / "diary").iterdir())
    size = sum(p.stat().st_size for p in files)
    first, last = files[0].stem, files[-1].stem
    days = (dt.date.fromisoformat(last) - dt.date.fromisoformat(first)).days + 1
    return Corpus(root, n, days, len(files), size, first, last)


def load(root: Path) -> list[Doc]:
    """Every entry of a corpus root, oldest first, with the text braind indexes."""
    docs: list[Doc] = []
    for path in sorted((root / "diary").iterdir()):
        for match in _ENTRY.finditer(path.read_text(encoding="utf-8")):
            docs.append(Doc(path.stem, match["time"], match["text"]))
    return docs
