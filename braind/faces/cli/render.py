"""Human output of the CLI: status, hits, entries, and a progress bar."""

from __future__ import annotations

import time
from typing import Any, TextIO

TEXT_CHARS = 200


def plural(count: int, noun: str) -> str:
    """'1 entry', '2 entries', '0 files': the count with its noun in the right number."""
    if count == 1:
        return f"1 {noun}"
    return f"{count} {noun[:-1] + 'ies' if noun.endswith('y') and noun[-2:-1] not in 'aeiou' else noun + 's'}"


def status(s: dict[str, Any]) -> str:
    """A few readable lines about the daemon's health."""
    index, watcher = s.get("index", {}), s.get("watcher", {})
    lines = [
        f"braind {s['version']}: {s.get('state', '?')}, pid {s['pid']}, up {s['uptime']:.0f} s, config {s['config']}",
        f"index: {index.get('state')}, {plural(index.get('entries', 0), 'entry')} "
        f"in {plural(index.get('files', 0), 'file')}",
        f"watcher: {watcher.get('state')}" + (f" ({watcher['reason']})" if watcher.get("reason") else ""),
    ]
    for root in s["roots"]:
        state = "ok" if root["available"] else f"unavailable ({root['reason']})"
        lines.append(f"root [{root['realm']}] {root['path']}: {state}")
    lines += [f"rejected: {problem(p)}" for p in s["rejected"]]
    lines += [f"skipped: {problem(p)}" for p in s["skipped_lines"]]
    return "\n".join(lines)


def problem(p: dict[str, Any]) -> str:
    """path[:line]: reason: message, naming the path once even when the message starts with it."""
    where = p["path"] if p.get("line") is None else f"{p['path']}:{p['line']}"
    message = str(p["message"]).removeprefix(f"{p['path']}: ")
    return f"{where}: {p['reason']}: {message}"


def hits(result: dict[str, Any]) -> str:
    """One line per hit, best first (partial matches marked with the words they hold), the totals, any hint."""
    lines = []
    for hit in result["hits"]:
        kind = "" if hit["type"] == "note" else f" [{hit['type']}]"
        when = f"{hit['date']} {hit['time']}".strip() or "(undated)"  # MEMORY.md sections have no date
        partly = f" (partial: {', '.join(hit['matched'])})" if hit.get("match") == "partial" else ""
        lines.append(f"{when}{kind} {hit['snippet']}  ({hit['fp']}){partly}")
    total, partial = result["total"], result.get("partial_total", 0)
    summary = f"{total} {'entry holds' if total == 1 else 'entries hold'} every word"
    if partial:
        summary += f", {partial} some of them"
    lines.append(summary)
    if result.get("hint"):
        lines.append(f"hint: {result['hint']}")
    return "\n".join(lines)


def entry_line(entry: dict[str, Any]) -> str:
    """One entry on one line: fp, [type key triggers], when, text, and its state when it is not plain live."""
    tags = [entry["type"], *([f"key={entry['key']}"] if entry.get("key") else []), *entry.get("triggers", [])]
    if entry.get("realm") == "project":
        tags.append("project")
    when = f"{entry.get('date') or ''} {entry.get('time') or ''}".strip() or "(undated)"
    notes = _state_notes(entry)
    tail = f"  ({', '.join(notes)})" if notes else ""
    return f"{entry['fp']}  [{' '.join(tags)}]  {when}  {one_line(entry['text'])}{tail}"


def _state_notes(entry: dict[str, Any]) -> list[str]:
    """What sets an entry apart from a plain live one: tombstone or pin, weight, uses."""
    notes = []
    if entry.get("status") == "tombstoned":
        why = f": {entry['why']}" if entry.get("why") else ""
        by = f" → {entry['by']}" if entry.get("by") else ""
        notes.append(f"tombstoned{why}{by}")
    elif entry.get("status") == "pinned":
        notes.append("pinned")
    weight = entry.get("weight", 1)
    if weight is not None and weight != 1:
        notes.append(f"weight {weight:g}")
    if entry.get("uses"):
        notes.append(plural(entry["uses"], "use"))
    return notes


def one_line(text: str) -> str:
    """Text folded onto one line and cut at TEXT_CHARS characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= TEXT_CHARS else flat[: TEXT_CHARS - 1] + "…"


def entries_text(result: dict[str, Any], noun: str = "entry") -> str:
    """One line per entry, then how many there are (and how many were shown when --limit cut them)."""
    lines = [entry_line(e) for e in result["entries"]]
    shown, total = len(result["entries"]), result.get("total", len(result["entries"]))
    count = plural(total, noun)
    lines.append(count if shown >= total else f"{count}, {shown} shown (--limit)")
    return "\n".join(lines)


class Progress:
    """A one-line progress bar on a terminal, redrawn at most ten times a second."""

    def __init__(self, stream: TextIO, width: int = 30) -> None:
        self.stream = stream
        self.width = width
        self.last = 0.0

    def update(self, done: int, total: int, force: bool = False) -> None:
        """Redraw the bar for done of total."""
        now = time.monotonic()
        if now - self.last < 0.1 and not force:
            return
        self.last = now
        filled = self.width * done // total if total else self.width
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} files")
        self.stream.flush()

    def finish(self) -> None:
        """End the bar's line."""
        self.stream.write("\n")
        self.stream.flush()
