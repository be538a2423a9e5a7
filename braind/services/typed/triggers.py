"""Trigger recall: a turn's signals become trigger strings, which pick typed memories to inject.

Signals are ``{"cwd": path, "tools": [{"tool": name, "files": [...],
"error": code}, ...]}``, oldest call first; only the last 12 calls count.
Each call gives ``tool:<name>``, ``file:<basename>`` for every file (and
``file:<path relative to cwd>`` when the file lies below cwd) and
``err:<code>``; cwd itself gives ``file:<its last component>``, so an entry
can be tied to a project directory. A string that cannot be a trigger (with a
space or a bracket) is left out. The same signals always give the same
triggers, in the same order, and so the same block.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from braind.errors import InvalidParams
from braind.model.entries import Entry, GrammarError, check_trigger
from braind.model.fence import fence
from braind.services.inject import Part

MAX_TOOL_CALLS = 12
PRIORITY = {"workflow": 0, "error": 1, "decision": 2, "fact": 3, "note": 4}
_MAX_FILES = 64


def signal_triggers(signals: Mapping[str, Any] | None) -> list[str]:
    """The trigger strings of a turn's signals, oldest first, each once."""
    if not signals:
        return []
    if not isinstance(signals, Mapping):
        raise InvalidParams("invalid_params", "signals must be an object {cwd, tools}")
    cwd = _optional_str(signals, "cwd", "signals.cwd")
    tools = signals.get("tools") or []
    if not isinstance(tools, list):
        raise InvalidParams("invalid_params", "signals.tools must be a list of {tool, files, error}")
    found: list[str] = []
    if cwd:
        found.append("file:" + posixpath.basename(cwd.rstrip("/")))
    for call in tools[-MAX_TOOL_CALLS:]:
        found += _call_triggers(call, cwd)
    return list(dict.fromkeys(t for t in found if _valid(t)))


def cwd_triggers(signals: Mapping[str, Any] | None) -> set[str]:
    """The trigger the working directory gives (left out of workflow chains: every turn has it)."""
    cwd = signals.get("cwd") if isinstance(signals, Mapping) else None
    return {"file:" + posixpath.basename(cwd.rstrip("/"))} if isinstance(cwd, str) and cwd else set()


def _call_triggers(call: Any, cwd: str | None) -> list[str]:
    """The triggers of one tool call: its tool, the files it touched, its error code."""
    if not isinstance(call, Mapping):
        raise InvalidParams("invalid_params", "each of signals.tools must be an object {tool, files, error}")
    out: list[str] = []
    tool = _optional_str(call, "tool", "signals.tools[].tool")
    if tool:
        out.append(f"tool:{tool}")
    files = call.get("files") or []
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise InvalidParams("invalid_params", "signals.tools[].files must be a list of paths")
    for path in files[:_MAX_FILES]:
        out += _file_triggers(path, cwd)
    error = call.get("error")
    if isinstance(error, bool) or not isinstance(error, str | int | type(None)):
        raise InvalidParams("invalid_params", "signals.tools[].error must be an error code (string or integer)")
    if error is not None and str(error):
        out.append(f"err:{error}")
    return out


def _file_triggers(path: str, cwd: str | None) -> list[str]:
    """file:<basename>, and file:<path below cwd> when it differs."""
    if cwd and not posixpath.isabs(path):
        path = posixpath.join(cwd, path)
    path = posixpath.normpath(path)
    out = [f"file:{posixpath.basename(path)}"]
    if cwd:
        rel = posixpath.relpath(path, posixpath.normpath(cwd))
        if not rel.startswith("..") and rel != posixpath.basename(path):
            out.append(f"file:{rel}")
    return out


def _optional_str(obj: Mapping[str, Any], key: str, shown: str) -> str | None:
    """A string field that may be missing."""
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidParams("invalid_params", f"{shown} must be a string")
    return value


def _valid(trigger: str) -> bool:
    """True when the string follows the trigger grammar (entries can carry it)."""
    try:
        check_trigger(trigger)
    except GrammarError:
        return False
    return True


@dataclass(frozen=True)
class Chosen:
    """A typed memory picked for injection, and why."""

    entry: Entry
    matched: tuple[str, ...]
    weight: float = 1.0

    def reason(self) -> str:
        """Why it was chosen: pinned, and the triggers that matched."""
        words = (["pinned"] if self.entry.status == "pinned" else []) + [f"matched {' '.join(self.matched)}"]
        return "; ".join(words)

    def line(self) -> str:
        """The injected line: type, key, text and reason."""
        key = f" key={self.entry.key}" if self.entry.key else ""
        return f"- [{self.entry.type}{key}] {fence(self.entry.text)} ({self.reason()})"


def rank(candidates: Sequence[Chosen]) -> list[Chosen]:
    """Pinned first, then workflow > error > decision > fact > note, heavier, newer; fp breaks ties."""
    return sorted(
        candidates,
        key=lambda c: (
            c.entry.status != "pinned",
            PRIORITY.get(c.entry.type, len(PRIORITY)),
            -c.weight,
            _negated(c.entry.date + c.entry.time),
            c.entry.fp,
        ),
    )


def _negated(stamp: str) -> tuple[int, ...]:
    """A sort key that puts later stamps first."""
    return tuple(-ord(ch) for ch in stamp)


def choose(
    entries: Sequence[Entry], triggers: Sequence[str], weights: Mapping[str, float], max_entries: int, max_chars: int
) -> list[Chosen]:
    """The live entries matching the triggers, ranked, within the entry and character budgets."""
    wanted = set(triggers)
    seen: set[str] = set()
    candidates = []
    for entry in entries:
        matched = tuple(t for t in entry.triggers if t in wanted)
        if matched and entry.status != "tombstoned" and entry.fp not in seen:
            seen.add(entry.fp)
            candidates.append(Chosen(entry, matched, weights.get(entry.fp, 1.0)))
    chosen: list[Chosen] = []
    used = 0
    for candidate in rank(candidates):
        size = len(candidate.line()) + 1
        if len(chosen) >= max_entries or used + size > max_chars:
            continue
        chosen.append(candidate)
        used += size
    return chosen


def triggered_part(chosen: Sequence[Chosen], dropped: int = 0) -> Part | None:
    """The injected section of typed memories picked by this turn's triggers."""
    if not chosen:
        return None
    lines = ["## Typed memories matched by this turn's activity", *(c.line() for c in chosen)]
    return Part("triggered", "\n".join(lines) + "\n", len(chosen), dropped)
