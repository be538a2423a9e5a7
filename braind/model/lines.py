"""Lines of memory files: what makes one unusable (too long, a control character, a git conflict marker),
the Problem that reports a refused file or a skipped line, and text made safe to print."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from braind.model.entries import CONTROL_OR_SURROGATE


@dataclass(frozen=True)
class Problem:
    """A rejected file (line None) or a skipped line, as `status` and `check` list them."""

    path: str
    line: int | None
    reason: str
    message: str

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return printable(f"{where}: {self.reason}: {self.message}")

    def to_wire(self) -> dict[str, Any]:
        """The problem as `status` and `check --json` carry it: a hostile file name cannot break the JSON."""
        path, message = printable(self.path), printable(self.message)
        return {"path": path, "line": self.line, "reason": self.reason, "message": message}


_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def printable(text: str) -> str:
    """Text safe on one log line and in UTF-8 JSON: undecodable name bytes as \\xNN, control characters escaped."""
    if text.isprintable():
        return text
    return "".join(_escape(c) if unicodedata.category(c) in _UNPRINTABLE else c for c in text)


def _escape(char: str) -> str:
    """One character as a Python escape; a byte that was not UTF-8 (surrogateescape) as the byte."""
    if "\udc80" <= char <= "\udcff":
        return f"\\x{ord(char) - 0xDC00:02x}"
    return char.encode("unicode_escape").decode("ascii")


_CONFLICT_OPEN = re.compile(r"<{7}(?:[ \t].*)?")
_CONFLICT_MIDDLE = re.compile(r"={7}|\|{7}(?:[ \t].*)?")
_CONFLICT_CLOSE = re.compile(r">{7}(?:[ \t].*)?")


@dataclass(frozen=True)
class Conflicts:
    """The git merge conflicts of a file, by 0-based line index."""

    markers: tuple[tuple[int, str], ...] = ()  # (line index, what the report says about it)
    region: frozenset[int] = frozenset()  # every line of a complete conflict, markers included

    def hidden(self) -> frozenset[int]:
        """Lines that are never memory text: the markers and the whole of each complete conflict."""
        return self.region | {index for index, _ in self.markers}

    def problems(self, path: str) -> list[Problem]:
        """One `conflict_markers` problem per marker line."""
        return [Problem(path, index + 1, "conflict_markers", message) for index, message in self.markers]


def conflicts(lines: list[str]) -> Conflicts:
    """Find `<<<<<<<` … `=======` … `>>>>>>>` from a git merge (`=======` and `|||||||` only inside one)."""
    markers: list[int] = []
    spans: list[tuple[int, int]] = []
    opened: int | None = None
    for index, line in enumerate(lines):
        raw = line.removesuffix("\r")
        if _CONFLICT_OPEN.fullmatch(raw):
            opened = index
        elif _CONFLICT_CLOSE.fullmatch(raw):
            if opened is not None:
                spans.append((opened, index))
            opened = None
        elif opened is None or not _CONFLICT_MIDDLE.fullmatch(raw):
            continue
        markers.append(index)
    region = frozenset(i for start, end in spans for i in range(start, end + 1))
    return Conflicts(tuple((i, _conflict_message(i, spans)) for i in markers), region)


def _conflict_message(index: int, spans: list[tuple[int, int]]) -> str:
    """What a marker line's report says: which lines are left out until the merge is resolved."""
    for start, end in spans:
        if start <= index <= end:
            return (
                f"git merge conflict marker; lines {start + 1}-{end + 1} are not indexed, and braind does not "
                "rewrite the file, until the conflict is resolved in an editor"
            )
    return "git merge conflict marker without its other half; the line is not indexed"


def line_problem(raw: str, max_line_bytes: int) -> tuple[str, str] | None:
    """Length and character checks on one raw line, before the grammar."""
    size = len(raw.encode("utf-8", "surrogatepass"))
    if size > max_line_bytes:
        return "line_too_long", f"{size} bytes, over files.max_line_bytes={max_line_bytes}"
    if CONTROL_OR_SURROGATE.search(raw):
        return "control_char", "control character in line"
    return None
