"""LoCoMo-format conversations: sessions of dated turns, and questions naming the turns that answer them.

A file is one JSON object with `speaker_a`, `speaker_b`, `session_N` (a list of
`{"speaker", "dia_id", "text"}` turns, some with `blip_caption`),
`session_N_date_time` (`"1:56 pm on 8 May, 2023"`) and `qa` (`{"question",
"evidence": ["D1:3", ...], "category": 1-5}`). Only these keys are read. The
public release's single file, a list of `{"sample_id", "conversation", "qa"}`
with the speakers and sessions under `conversation`, is read as well.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
LAST_MINUTE = 23 * 60 + 59
_SESSION = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D\d+:\d+")
_FOLD = re.compile(r"[\s\x00-\x1f\x7f-\x9f]+")  # newlines, tabs and other control characters


class NotLocomo(ValueError):
    """A file that is not a conversation in the LoCoMo format."""


@dataclass(frozen=True)
class Turn:
    """One turn as it becomes a diary entry: its session's date, a time of day, the entry's text."""

    dia_id: str
    day: dt.date
    time: str
    text: str


@dataclass(frozen=True)
class Question:
    """One question as written, its category and the turns that hold its answer."""

    text: str
    category: int
    evidence: tuple[str, ...]

    @property
    def label(self) -> str:
        """The category's number and name."""
        return f"{self.category} {CATEGORIES.get(self.category, 'other')}"


@dataclass(frozen=True)
class Conversation:
    """The turns of every session in order, and the questions about them."""

    name: str
    speakers: tuple[str, str]
    sessions: int
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]

    @property
    def last_day(self) -> dt.date:
        """The date of the latest session."""
        return max(turn.day for turn in self.turns)

    @property
    def first_day(self) -> dt.date:
        """The date of the earliest session."""
        return min(turn.day for turn in self.turns)


def session_start(stamp: str) -> dt.datetime:
    """When a session began, from its `session_N_date_time` ("1:56 pm on 8 May, 2023")."""
    try:
        return dt.datetime.strptime(" ".join(stamp.split()), "%I:%M %p on %d %B, %Y")
    except ValueError:
        raise NotLocomo(f"session time {stamp!r} is not like '1:56 pm on 8 May, 2023'") from None


def turn_time(start: dt.datetime, index: int) -> str:
    """The time of a session's index-th turn: one minute after the one before, never past 23:59 of its day."""
    minute = min(start.hour * 60 + start.minute + index, LAST_MINUTE)
    return f"{minute // 60:02d}:{minute % 60:02d}"


def fold(text: str) -> str:
    """One line: newlines, tabs and control characters become single spaces."""
    return _FOLD.sub(" ", text).strip()


def entry_text(turn: dict[str, Any]) -> str:
    """`Speaker: text`, with ` [shared a photo: caption]` when the turn shared one."""
    text = f"{fold(str(turn['speaker']))}: {fold(str(turn['text']))}"
    caption = turn.get("blip_caption")
    return f"{text} [shared a photo: {fold(str(caption))}]" if caption else text


def evidence_ids(evidence: Any) -> tuple[str, ...]:
    """Every dia_id an evidence list names (a few list two in one string, "D8:6; D9:17")."""
    if not isinstance(evidence, list):
        raise NotLocomo("a question's evidence is not a list")
    return tuple(found for item in evidence for found in _DIA_ID.findall(str(item)))


def session_numbers(raw: dict[str, Any]) -> list[int]:
    """The numbers of the sessions that have turns, in order."""
    found = (_SESSION.fullmatch(key) for key in raw)
    return sorted(int(m[1]) for m in found if m and isinstance(raw[m[0]], list))


def turns(raw: dict[str, Any]) -> Iterator[Turn]:
    """Every turn of every session, in session order."""
    for number in session_numbers(raw):
        start = session_start(str(raw.get(f"session_{number}_date_time", "")))
        for index, turn in enumerate(raw[f"session_{number}"]):
            yield Turn(str(turn["dia_id"]), start.date(), turn_time(start, index), entry_text(turn))


def questions(raw: dict[str, Any]) -> Iterator[Question]:
    """Every question of `qa`, in order, text untouched."""
    for qa in raw.get("qa", []):
        yield Question(str(qa["question"]), int(qa["category"]), evidence_ids(qa.get("evidence", [])))


def parse(name: str, raw: Any) -> Conversation:
    """A conversation from a decoded LoCoMo object."""
    if not isinstance(raw, dict) or "speaker_a" not in raw or "qa" not in raw:
        raise NotLocomo(f"{name}: not a LoCoMo conversation: no speaker_a and qa")
    try:
        found = tuple(turns(raw))
        asked = tuple(questions(raw))
    except (KeyError, TypeError, ValueError) as exc:
        raise NotLocomo(f"{name}: not a LoCoMo conversation: malformed turn or question: {exc}") from None
    if not found:
        raise NotLocomo(f"{name}: not a LoCoMo conversation: no session has any turns")
    speakers = (str(raw["speaker_a"]), str(raw.get("speaker_b", "")))
    return Conversation(name, speakers, len(session_numbers(raw)), found, asked)


def flatten(raw: Any) -> Any:
    """One object with the sessions and `qa` side by side, also when the sessions sit under `conversation`."""
    if isinstance(raw, dict) and isinstance(raw.get("conversation"), dict):
        return {**raw["conversation"], "qa": raw.get("qa", [])}
    return raw


def load(path: Path, name: str) -> list[Conversation]:
    """The conversations of one LoCoMo-format file (one, or the list of a release), labelled after name."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise NotLocomo(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise NotLocomo(f"{path}: not JSON: {exc}") from None
    if not isinstance(raw, list):
        return [parse(name, flatten(raw))]
    if not raw:
        raise NotLocomo(f"{path}: not a LoCoMo conversation: an empty list")
    return [parse(_label(name, item, i), flatten(item)) for i, item in enumerate(raw, 1)]


def _label(name: str, item: Any, number: int) -> str:
    """A conversation of a list: the file's label and its sample_id (or its place in the list)."""
    sample = item.get("sample_id") if isinstance(item, dict) else None
    return f"{name}#{sample if sample is not None else number}"
