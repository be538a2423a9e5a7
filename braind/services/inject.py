"""The per-turn injection block: recent memory, fenced as untrusted reference data."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

from braind.model.entries import Entry
from braind.model.fence import CLOSE, OPEN, fence

ELLIPSIS = "…"


@dataclass(frozen=True)
class Part:
    """One section of the block, with what it cost and what was left out."""

    name: str
    text: str
    entries: int
    dropped: int

    def describe(self) -> dict[str, object]:
        """The part as the wire reports it."""
        size = len(self.text.encode("utf-8"))
        return {"name": self.name, "bytes": size, "entries": self.entries, "dropped": self.dropped}


def diary_part(entries: Sequence[Entry], max_bytes: int) -> Part | None:
    """Recent diary lines grouped by day, newest kept when over the byte budget."""
    return lines_part(diary_lines(sorted(entries, key=WHEN)), max_bytes)


WHEN = attrgetter("date", "time", "line")  # the order of diary lines: by day, time, then place in the file


def diary_lines(ordered: Sequence[Entry]) -> list[tuple[str, str]]:
    """Each entry as its day and the line the block shows for it."""
    return [(e.date, f"[{e.time}] {fence(e.text)}") for e in ordered]


def lines_part(lines: list[tuple[str, str]], max_bytes: int) -> Part | None:
    """The diary part of rendered lines (oldest first), newest kept when over the byte budget."""
    kept = _newest_within(lines, max_bytes)
    if not kept:
        return None
    text = "## Diary (recent days)\n" + _by_day(kept)
    return Part("diary", text, len(kept), len(lines) - len(kept))


def _newest_within(lines: list[tuple[str, str]], budget: int) -> list[tuple[str, str]]:
    """Keep the newest lines whose day headings and text fit the budget."""
    kept: list[tuple[str, str]] = []
    used = len(b"## Diary (recent days)\n")
    days: set[str] = set()
    for date, line in reversed(lines):
        size = len(line) if line.isascii() else len(line.encode("utf-8"))
        cost = size + 1 + (0 if date in days else len(f"### {date}\n"))
        if used + cost > budget:
            if not kept:
                kept.append((date, truncate_bytes(line, budget - used - len(f"### {date}\n") - 1)))
            break
        used += cost
        days.add(date)
        kept.append((date, line))
    return [k for k in reversed(kept) if k[1]]


def _by_day(lines: list[tuple[str, str]]) -> str:
    """Render lines under one `### date` heading per day."""
    out: list[str] = []
    current = None
    for date, line in lines:
        if date != current:
            out.append(f"### {date}")
            current = date
        out.append(line)
    return "\n".join(out) + "\n"


def truncate_bytes(text: str, budget: int) -> str:
    """Cut text to at most budget UTF-8 bytes, never inside a character, marking the cut."""
    if budget <= 0:
        return ""
    data = text.encode("utf-8")
    if len(data) <= budget:
        return text
    room = budget - len(ELLIPSIS.encode("utf-8"))
    return data[: max(room, 0)].decode("utf-8", "ignore") + ELLIPSIS if room > 0 else ""


def assemble(parts: Sequence[Part]) -> str:
    """The whole block: the fence around every non-empty part."""
    body = "\n".join(p.text for p in parts)
    return f"{OPEN}\n{body}{CLOSE}\n" if body else ""


class TurnLedger:
    """Remembers which (session, turn) pairs were served, so each is injected once."""

    def __init__(self, capacity: int = 65536) -> None:
        self._seen: OrderedDict[tuple[str, str | int], None] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def first(self, session: str, turn: str | int) -> bool:
        """Record the pair; True only the first time it is seen (1 and "1" are different turns)."""
        key = (session, turn)
        with self._lock:
            if key in self._seen:
                return False
            self._seen[key] = None
            if len(self._seen) > self._capacity:
                self._seen.popitem(last=False)
            return True
