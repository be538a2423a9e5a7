"""Recall quality on LoCoMo-format conversations: each one a memory root, its questions asked as written.

Every turn becomes one diary entry on its session's date, the dates shifted so
that the last session was yesterday. The real daemon indexes the root; each
question goes to `brain_recall` over the socket, and to the baselines on the
same entries. A question is found at k when one of its evidence turns is
among the first k hits.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import baselines, locomo, measure
from bench.baselines import Place
from bench.daemon import BenchDaemon, DaemonFailed
from bench.run import say
from braind.errors import BraindError

LIMIT = 10
KS = (1, 5, 10)
SYSTEMS = ("braind", "fts5", "scan")
READY_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Entry:
    """A written diary entry: where it is, what it says, which turn it was."""

    place: Place
    text: str
    dia_id: str


def write_root(conversation: locomo.Conversation, root: Path, last_day: dt.date) -> list[Entry]:
    """Write every turn as `[HH:MM] text` into diary/<date>.md, the last session on last_day; the entries in order."""
    shift = last_day - conversation.last_day
    days: dict[str, list[locomo.Turn]] = {}
    for turn in conversation.turns:
        days.setdefault((turn.day + shift).isoformat(), []).append(turn)
    (root / "diary").mkdir(parents=True)
    entries: list[Entry] = []
    for date, day in sorted(days.items()):
        text = "".join(f"[{turn.time}] {turn.text}\n" for turn in day)
        (root / "diary" / f"{date}.md").write_text(text, encoding="utf-8")
        entries += [Entry((date, line), turn.text, turn.dia_id) for line, turn in enumerate(day, 1)]
    return entries


def found_rank(hits: Sequence[str | None], evidence: Sequence[str]) -> int | None:
    """The 1-based rank of the first hit that is an evidence turn, or None."""
    return next((rank for rank, dia_id in enumerate(hits, 1) if dia_id in evidence), None)


def hit_place(hit: dict[str, Any]) -> Place:
    """The diary date and line of a recall hit."""
    return Path(hit["path"]).stem, int(hit["line"])


class ConversationRun:
    """One conversation: its root, its daemon, its baselines, a rank per question and system."""

    def __init__(self, conversation: locomo.Conversation, base: Path, today: dt.date) -> None:
        self.conversation = conversation
        self.base = base
        self.root = base / "root"
        self.entries = write_root(conversation, self.root, today - dt.timedelta(days=1))
        self.turn_at = {entry.place: entry.dia_id for entry in self.entries}
        self.shift_days = (today - dt.timedelta(days=1) - conversation.last_day).days

    def run(self) -> dict[str, Any]:
        """Ask every question of braind and the baselines; the conversation's setup and per-question ranks."""
        asked = self.conversation.questions
        recalled, latencies, status = self._braind([q.text for q in asked])
        ranked = {
            "braind": [[self.turn_at.get(hit_place(h)) for h in hits] for hits in recalled],
            "fts5": self._fts5(asked),
            "scan": [[self.turn_at.get(p) for p in baselines.scan_all(self.root, q.text, LIMIT)] for q in asked],
        }
        per_question = [
            {
                "conversation": self.conversation.name,
                "question": q.text,
                "category": q.category,
                "evidence": list(q.evidence),
                "ranks": {system: found_rank(ranked[system][i], q.evidence) for system in SYSTEMS},
                "ms": latencies[i],
            }
            for i, q in enumerate(asked)
        ]
        return {"setup": self._setup(status), "questions": per_question}

    def _fts5(self, asked: Sequence[locomo.Question]) -> list[list[str | None]]:
        """Baseline: FTS5 BM25 over the same entries, in the same order."""
        fts = baselines.Fts5Ranked([(entry.place, entry.text) for entry in self.entries])
        try:
            return [[self.turn_at.get(p) for p in fts.search(q.text, LIMIT)] for q in asked]
        finally:
            fts.close()

    def _braind(self, asked: Sequence[str]) -> tuple[list[list[dict[str, Any]]], list[float], dict[str, Any]]:
        """Start the daemon on the written root, ask each question once on a kept connection, stop it."""
        daemon = BenchDaemon(self.base, self.root, "daemon")
        try:
            daemon.spawn()
            daemon.wait_ready(READY_TIMEOUT_S)
            with daemon.client() as client:
                status = client.call("status")
                measure.warm_up(client, None)
                with measure.without_collector_pauses():
                    timed = [measure.call_ms(client, "brain_recall", query=q, limit=LIMIT) for q in asked]
        except BraindError as exc:
            raise DaemonFailed(f"{exc}; log tail:\n{daemon.log_tail()}") from exc
        finally:
            daemon.remove()
        return [r["hits"] for _, r in timed], [ms for ms, _ in timed], status

    def _setup(self, status: dict[str, Any]) -> dict[str, Any]:
        """What was written and what the daemon indexed of it."""
        c = self.conversation
        return {
            "file": c.name,
            "speakers": list(c.speakers),
            "sessions": c.sessions,
            "entries": len(self.entries),
            "indexed": int(status["index"]["entries"]),
            "skipped_lines": len(status["skipped_lines"]),
            "rejected_files": len(status["rejected"]),
            "questions": len(c.questions),
            "days": (c.last_day - c.first_day).days + 1,
            "first": self.entries[0].place[0],
            "last": self.entries[-1].place[0],
            "shift_days": self.shift_days,
        }


def run_all(conversations: Sequence[locomo.Conversation]) -> list[dict[str, Any]]:
    """Each conversation in a fresh temp dir under /tmp (short socket paths), one after the other."""
    today = dt.date.today()
    results = []
    for conversation in conversations:
        say(f"{conversation.name}: {len(conversation.turns)} turns, {len(conversation.questions)} questions")
        with tempfile.TemporaryDirectory(prefix="bq", dir="/tmp") as tmp:
            results.append(ConversationRun(conversation, Path(tmp), today).run())
    return results
