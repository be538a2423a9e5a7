"""MEMORY.md sections and logfiles: tolerant reading, exact writing, edits of one unit.

A file is handled as its list of lines (split on "\\n", a carriage return kept
on the line it ends), so an edit touches only the unit it addresses and every
other byte a person wrote stays as it was. A *unit* is a MEMORY.md section
(``## name`` and the lines up to the next ``##``) or a logfile entry
(``## [title] YYYY-MM-DD HH:MM`` and its body). Text before the first ``##``
(other than a ``# heading``) is a *preamble*: indexed, never addressed.

A logfile starts with YAML frontmatter (name, type, description), one blank
line and a ``# heading``. Older and hand-written shapes are read too: no
frontmatter, frontmatter that is not YAML (reported, not fatal), entry
headings without brackets (``## title 2026-01-02 10:00``), without a stamp
(``## [title]``) or free text (``## anything``).
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml

from braind.errors import Ambiguous, ForbiddenHeading, NotFound, Rejected
from braind.model.entries import Entry
from braind.model.lines import Problem, conflicts, line_problem

LOG_TYPES = ("user", "feedback", "project", "situation", "reference")
DEFAULT_LOG_TYPE = "project"
NO_DESCRIPTION = "(no description)"
STAMP_FORMAT = "%Y-%m-%d %H:%M"

_H1 = re.compile(r"#(?:[ \t]+(.*?))?[ \t]*")
_H2 = re.compile(r"##(?:[ \t]+(.*?))?[ \t]*")
_HEADING_LINE = re.compile(r" {0,3}#{1,2}(?:[ \t].*)?")
_DESCRIPTION_LINE = re.compile(r"^description[ \t]*:[ \t]*(\S.*?)[ \t]*\r?$", re.MULTILINE)
_STAMP = r"(?P<date>\d{4}-\d{2}-\d{2}) (?P<time>\d{2}:\d{2})"
_ENTRY_HEADINGS = (
    re.compile(rf"\[(?P<title>.*)\] {_STAMP}"),
    re.compile(_STAMP),
    re.compile(rf"(?P<title>.+?) {_STAMP}"),
    re.compile(r"\[(?P<title>.*)\]"),
)
_AT = re.compile(r"\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2})?")


@dataclass(frozen=True)
class Unit:
    """One unit of a file; start is the heading's index (0-based), end the next heading's."""

    title: str
    start: int
    end: int
    stamp: str = ""
    date: str = ""
    time: str = ""
    heading: bool = True


@dataclass(frozen=True)
class LogMeta:
    """What a logfile's frontmatter says, with fallbacks for files that say less."""

    type: str = DEFAULT_LOG_TYPE
    description: str = NO_DESCRIPTION


@dataclass
class Parsed:
    """A MEMORY.md or logfile split into units, with the lines skipped and the problems found."""

    lines: list[str]
    units: list[Unit]
    meta: LogMeta | None = None
    skip: set[int] = field(default_factory=set)
    problems: list[tuple[int, str, str]] = field(default_factory=list)
    conflicted: frozenset[int] = frozenset()  # lines of git merge conflicts: never text, never headings


def nfc(text: str) -> str:
    """Unicode NFC, so names typed on another system compare equal."""
    return unicodedata.normalize("NFC", text)


def bare(line: str) -> str:
    """A line without the carriage return of a CRLF file."""
    return line[:-1] if line.endswith("\r") else line


def heading2(line: str) -> str | None:
    """The text of a `## ` heading line, or None for any other line."""
    match = _H2.fullmatch(bare(line))
    return None if match is None else (match[1] or "")


def heading1(line: str) -> str | None:
    """The text of a `# ` heading line, or None for any other line."""
    match = _H1.fullmatch(bare(line))
    return None if match is None else (match[1] or "")


# -- reading -------------------------------------------------------------------


def parse_memory(text: str, max_line_bytes: int) -> Parsed:
    """MEMORY.md: a preamble, then one unit per `## name` section."""
    parsed = Parsed(text.split("\n"), [])
    _check_lines(parsed, max_line_bytes)
    parsed.units = _units(parsed.lines, 0, _section, parsed.conflicted)
    return parsed


def parse_logfile(text: str, max_line_bytes: int) -> Parsed:
    """A logfile: frontmatter (tolerated when missing or broken), `# heading`, entries."""
    parsed = Parsed(text.split("\n"), [])
    _check_lines(parsed, max_line_bytes)
    start, data = _frontmatter(parsed)
    parsed.meta = _log_meta(parsed, data, start, text)
    parsed.units = _units(parsed.lines, start, _entry, parsed.conflicted)
    for unit in parsed.units:
        if unit.stamp and not unit.date:
            message = f"{unit.stamp} is not a real date and time; the entry is read without one"
            parsed.problems.append((unit.start + 1, "invalid_date", message))
    return parsed


def _check_lines(parsed: Parsed, max_line_bytes: int) -> None:
    """Overlong lines, lines with control characters and git conflicts are skipped and reported, as in a diary."""
    found = conflicts(parsed.lines)
    parsed.conflicted = found.hidden()
    parsed.skip |= parsed.conflicted
    parsed.problems += [(index + 1, "conflict_markers", message) for index, message in found.markers]
    for number, line in enumerate(parsed.lines, start=1):
        problem = line_problem(bare(line), max_line_bytes)
        if problem is not None and number - 1 not in parsed.conflicted:
            parsed.skip.add(number - 1)
            parsed.problems.append((number, *problem))


def _frontmatter(parsed: Parsed) -> tuple[int, dict[str, Any] | None]:
    """Where the body starts and the frontmatter mapping (None when absent or unreadable)."""
    lines = parsed.lines
    if not lines or bare(lines[0]) != "---":
        return 0, None
    for close in range(1, len(lines)):
        if bare(lines[close]) in ("---", "..."):
            return close + 1, _load_yaml(parsed, lines[1:close])
    parsed.problems.append((1, "bad_frontmatter", "the frontmatter opened on line 1 is never closed with ---"))
    return 0, None


def _load_yaml(parsed: Parsed, lines: list[str]) -> dict[str, Any] | None:
    """Parse frontmatter with yaml.safe_load; anything but a mapping is reported and ignored."""
    try:
        data = yaml.safe_load("\n".join(bare(line) for line in lines))
    except Exception as exc:  # untrusted input: any parser failure is a report, never a crash
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        parsed.problems.append((line, "bad_frontmatter", f"the frontmatter is not valid YAML: {_first_line(exc)}"))
        return None
    if data is None:
        return {}
    if not isinstance(data, dict):
        parsed.problems.append((1, "bad_frontmatter", "the frontmatter must be 'key: value' lines"))
        return None
    return data


def _first_line(exc: Exception) -> str:
    """The first line of an exception's message, for a one-line report."""
    text = str(getattr(exc, "problem", None) or exc)
    return text.splitlines()[0] if text else type(exc).__name__


def _log_meta(parsed: Parsed, data: dict[str, Any] | None, start: int, text: str) -> LogMeta:
    """Type and description, falling back to the defaults, a `description:` line or the `# heading`."""
    kind = _scalar(parsed, data, "type")
    if kind is not None and kind not in LOG_TYPES:
        problem = f"unknown type {kind!r} (one of {', '.join(LOG_TYPES)}); read as {DEFAULT_LOG_TYPE!r}"
        parsed.problems.append((_key_line(parsed.lines, "type"), "bad_frontmatter", problem))
        kind = None
    description = _scalar(parsed, data, "description") or _loose_description(parsed, data, start, text)
    return LogMeta(kind or DEFAULT_LOG_TYPE, description or NO_DESCRIPTION)


def _scalar(parsed: Parsed, data: dict[str, Any] | None, key: str) -> str | None:
    """One frontmatter value as a one-line string; a list or mapping is reported and ignored."""
    value = None if data is None else data.get(key)
    if value is None:
        return None
    if isinstance(value, dict | list | set):
        parsed.problems.append((_key_line(parsed.lines, key), "bad_frontmatter", f"{key} must be a single value"))
        return None
    return " ".join(str(value).split()) or None


def _key_line(lines: list[str], key: str) -> int:
    """The 1-based line of a frontmatter key, for reports (1 when it cannot be found)."""
    return next((n for n, line in enumerate(lines[:64], start=1) if line.startswith(key + ":")), 1)


def _loose_description(parsed: Parsed, data: dict[str, Any] | None, start: int, text: str) -> str | None:
    """Without usable frontmatter a `description:` line anywhere; else the first `# heading` of the body."""
    match = _DESCRIPTION_LINE.search(text) if data is None else None
    if match:
        return match[1]
    return next((h for line in parsed.lines[start:] if (h := heading1(line))), None)


def _units(
    lines: list[str], start: int, make: Callable[[str, int, int], Unit], conflicted: frozenset[int]
) -> list[Unit]:
    """The preamble (if it holds text) and one unit per `##` heading from line `start` on (not inside a conflict)."""
    heads = [i for i in range(start, len(lines)) if i not in conflicted and heading2(lines[i]) is not None]
    stops = [*heads[1:], len(lines)][: len(heads)]
    units = [make(heading2(lines[h]) or "", h, end) for h, end in zip(heads, stops, strict=True)]
    preamble = _preamble(lines, start, heads[0] if heads else len(lines))
    return ([preamble] if preamble else []) + units


def _preamble(lines: list[str], start: int, stop: int) -> Unit | None:
    """The text before the first `##`, leaving out blank lines and `# heading` lines."""
    for i in range(start, stop):
        if bare(lines[i]).strip() and heading1(lines[i]) is None:
            return Unit("", i, stop, heading=False)
    return None


def _section(title: str, start: int, end: int) -> Unit:
    """A MEMORY.md section unit."""
    return Unit(title.strip(), start, end)


def _entry(title: str, start: int, end: int) -> Unit:
    """A logfile entry unit: title and stamp read from any of the heading shapes."""
    for pattern in _ENTRY_HEADINGS:
        match = pattern.fullmatch(title)
        if match:
            found = match.groupdict()
            date, time = found.get("date") or "", found.get("time") or ""
            stamp = f"{date} {time}" if date else ""
            valid = bool(stamp) and _valid_stamp(stamp)
            return Unit((found.get("title") or "").strip(), start, end, stamp, *((date, time) if valid else ("", "")))
    return Unit(title.strip(), start, end)


def _valid_stamp(stamp: str) -> bool:
    """True for a real calendar date and time."""
    try:
        dt.datetime.strptime(stamp, STAMP_FORMAT)
    except ValueError:
        return False
    return True


def unit_text(parsed: Parsed, unit: Unit) -> str:
    """What is indexed for a unit: its title, then its body lines (skipped lines left out)."""
    head = [unit.title] if unit.heading and unit.title else []
    first = unit.start + 1 if unit.heading else unit.start
    body = [
        bare(parsed.lines[i])
        for i in range(first, unit.end)
        if i not in parsed.skip and (unit.heading or heading1(parsed.lines[i]) is None)
    ]
    return "\n".join(head + body).strip()


def to_entries(parsed: Parsed, root: str, realm: str, path: str, kind: str) -> list[Entry]:
    """Every unit with text as an Entry; a section's key is its name."""
    seen: dict[tuple[str, str, str], int] = {}
    out: list[Entry] = []
    for unit in parsed.units:
        text = unit_text(parsed, unit)
        if not text:
            continue
        occurrence = seen.get((unit.date, unit.time, text), 0)
        seen[(unit.date, unit.time, text)] = occurrence + 1
        key = unit.title if kind == "section" and unit.heading and unit.title else None
        out.append(
            Entry(root, realm, path, unit.start + 1, unit.date, unit.time, text, kind, key=key, occurrence=occurrence)
        )
    return out


def section_names(parsed: Parsed) -> list[str]:
    """The names of MEMORY.md's sections, in file order."""
    return [u.title for u in parsed.units if u.heading]


# -- content -------------------------------------------------------------------


def check_content(content: object, max_bytes: int) -> list[str]:
    """Content for a unit as lines: no control characters, no `#`/`##` heading line, within max_bytes."""
    if not isinstance(content, str):
        raise Rejected("invalid_text", "content must be a string")
    if "\0" in content:
        raise Rejected("nul_byte", "content contains a NUL byte")
    size = len(content.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise Rejected("too_large", f"content is {size} bytes, over note.max_bytes={max_bytes}")
    lines = _trimmed(content.replace("\r\n", "\n").split("\n"))
    if not lines:
        raise Rejected("empty", "content is empty")
    if any(unicodedata.category(c) in ("Cc", "Cs") and c != "\t" for line in lines for c in line):
        raise Rejected("control_char", "content contains a control character (only tabs and newlines are allowed)")
    _refuse_headings(lines)
    return lines


def is_empty(content: object) -> bool:
    """True when content asks for a deletion: missing, or only whitespace."""
    return content is None or (isinstance(content, str) and not content.strip())


def _trimmed(lines: list[str]) -> list[str]:
    """Lines without trailing spaces, and without blank lines at the start or the end."""
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def _refuse_headings(lines: list[str]) -> None:
    """A line starting with `#` or `##` would fake a file heading or split a unit; `###` is fine."""
    for number, line in enumerate(lines, start=1):
        if _HEADING_LINE.fullmatch(line):
            raise ForbiddenHeading(
                f"line {number} of the content starts with '#' or '##' ({line!r}): that would split the file's "
                "sections or entries; use '###' headings inside a unit",
                line=number,
            )


# -- edits ---------------------------------------------------------------------


def append_section(text: str, name: str, content: list[str]) -> tuple[str, bool]:
    """MEMORY.md with content appended to section `name`, or a new section at the end; True when created."""
    parsed = parse_memory(text, 1 << 30)
    matches = [u for u in parsed.units if u.heading and nfc(u.title) == name]
    if not matches:
        return _add_section(text, name, content), True
    lines = parsed.lines
    at = body_end(lines, matches[-1])
    cr = _cr(lines)
    return _joined([*lines[:at], *(line + cr for line in content), *lines[at:]], at == len(lines)), False


def _add_section(text: str, name: str, content: list[str]) -> str:
    """Text with a new `## name` section at the end, after a blank line."""
    nl = "\r\n" if _cr(text.split("\n")) else "\n"
    block = nl.join([f"## {name}", *content]) + nl
    if not text.strip():
        return block
    if not text.endswith("\n"):
        text += nl
    if not text.endswith(nl + nl):
        text += nl
    return text + block


def body_end(lines: list[str], unit: Unit) -> int:
    """The index after a unit's last non-blank line; its trailing blank lines separate it from the next."""
    end = unit.end
    while end > unit.start + 1 and not bare(lines[end - 1]).strip():
        end -= 1
    return end


def replace_unit(lines: list[str], unit: Unit, content: list[str]) -> str:
    """The file with a unit's body replaced; its heading and the blank lines after it stay."""
    cr, end = _cr(lines), body_end(lines, unit)
    first = unit.start + 1 if unit.heading else unit.start
    return _joined([*lines[:first], *(line + cr for line in content), *lines[end:]], end == len(lines))


def delete_unit(lines: list[str], unit: Unit) -> str:
    """The file without a unit (heading, body and the blank lines after it)."""
    rest = [*lines[: unit.start], *lines[unit.end :]]
    if unit.end == len(lines):
        while len(rest) >= 2 and rest[-1] == "" and not bare(rest[-2]).strip():
            rest.pop()
    return _joined(rest, unit.end == len(lines))


def _cr(lines: list[str]) -> str:
    """'\\r' when the file uses CRLF line endings (judged by its first line), else ''."""
    return "\r" if lines and lines[0].endswith("\r") else ""


def _joined(lines: list[str], end_written: bool) -> str:
    """Lines back into text; when the edit reached the end of the file, it ends with a newline."""
    text = "\n".join(lines)
    return text + "\n" if end_written and text and not text.endswith("\n") else text


def find_section(parsed: Parsed, name: str) -> Unit:
    """The one section named `name`, or else the one whose name starts with it."""
    named = [u for u in parsed.units if u.heading]
    pool = [u for u in named if nfc(u.title) == name] or [u for u in named if nfc(u.title).startswith(name)]
    if not pool:
        names = section_names(parsed)
        listing = ", ".join(names) or "none yet"
        raise NotFound(f"no section '## {name}' in MEMORY.md (sections: {listing})", sections=names)
    if len(pool) > 1:
        matches = [{"section": u.title, "line": u.start + 1} for u in pool]
        shown = ", ".join(f"{m['section']} (line {m['line']})" for m in matches)
        advice = _section_advice(name, pool)
        raise Ambiguous(f"{name!r} matches {len(pool)} sections: {shown}; {advice}", matches=matches)
    return pool[0]


def _section_advice(name: str, pool: list[Unit]) -> str:
    """How to pick one of several sections."""
    if all(nfc(u.title) == name for u in pool):
        return "sections with the same name cannot be told apart: merge or rename them in an editor"
    return "pass the full section name, or a longer prefix that matches only one"


def find_entry(parsed: Parsed, title: str | None, at: str | None, where: str) -> Unit:
    """The one entry with this title (exact, else by prefix) and, when given, this stamp."""
    pool = [u for u in parsed.units if u.heading]
    if title is not None:
        exact = [u for u in pool if nfc(u.title) == title]
        pool = exact or ([u for u in pool if nfc(u.title).startswith(title)] if title else [])
    if at is not None:
        pool = [u for u in pool if u.stamp == at or u.stamp.startswith(at + " ")]
    if not pool:
        known = _entry_list(u for u in parsed.units if u.heading)
        listing = "; ".join(_shown(m) for m in known) or "it has no entries yet"
        raise NotFound(f"no entry{_address(title, at)} in {where} (entries: {listing})", entries=known)
    if len(pool) > 1:
        matches = _entry_list(pool)
        listing = "; ".join(_shown(m) for m in matches)
        raise Ambiguous(
            f"{len(pool)} entries{_address(title, at)} in {where}: {listing}; {_entry_advice(pool)}", matches=matches
        )
    return pool[0]


def _entry_list(units: Iterable[Unit]) -> list[dict[str, Any]]:
    """Entries as the error data lists them."""
    return [{"title": u.title, "at": u.stamp, "line": u.start + 1} for u in units]


def _shown(match: dict[str, Any]) -> str:
    """One entry for a message: title @ stamp (line)."""
    return f"{match['title'] or '(untitled)'} @ {match['at'] or 'no date'} (line {match['line']})"


def _address(title: str | None, at: str | None) -> str:
    """The address in words, for messages."""
    return (f" titled {title!r}" if title is not None else "") + (f" at {at}" if at is not None else "")


def _entry_advice(pool: list[Unit]) -> str:
    """How to pick one of several entries."""
    stamps = {u.stamp for u in pool}
    if len(stamps) == len(pool) and "" not in stamps:
        return 'pass at="YYYY-MM-DD HH:MM" (one of the stamps above) to choose one'
    return (
        'give the full title (title="" for an untitled entry) and at="YYYY-MM-DD HH:MM"; entries with the same '
        "title and minute must be edited by hand"
    )


def check_at(at: object) -> str:
    """An `at` stamp: YYYY-MM-DD HH:MM, or YYYY-MM-DD for any entry of that day."""
    if not isinstance(at, str) or not _AT.fullmatch(at):
        raise Rejected("invalid_at", f"at must be 'YYYY-MM-DD HH:MM' or 'YYYY-MM-DD', got {at!r}")
    return at


# -- new files and entries -----------------------------------------------------


def render_logfile(name: str, kind: str, description: str, heading: str) -> str:
    """A new, empty logfile: frontmatter, exactly one blank line, the `# heading`."""
    front = "".join(_yaml_line(k, v) for k, v in (("name", name), ("type", kind), ("description", description)))
    return f"---\n{front}---\n\n# {heading}\n"


def _yaml_line(key: str, value: str) -> str:
    """One `key: value` line, quoted only when YAML would read the value as something else."""
    return yaml.safe_dump({key: value}, allow_unicode=True, default_flow_style=False, width=1 << 20)


def entry_heading(title: str | None, stamp: str) -> str:
    """The heading the tool writes for an entry: `## [title] stamp`, or `## stamp` without a title."""
    return f"## [{title}] {stamp}" if title else f"## {stamp}"


def entry_chunk(text: str, heading: str, content: list[str]) -> str:
    """What an append writes after the file's current text (append_line adds the final newline)."""
    crlf = _cr(text.split("\n")) == "\r"
    nl = "\r\n" if crlf else "\n"
    lead = "" if not text.strip() or text.endswith(("\n\n", "\r\n\r\n")) else nl
    return lead + nl.join([heading, *content]) + ("\r" if crlf else "")


def load(
    kind: str, text: str, max_line_bytes: int, root: str, realm: str, path: str
) -> tuple[list[Entry], list[Problem]]:
    """The entries and problems of a layered file of the given kind (SOUL.md has no entries)."""
    if kind == "soul":
        return [], []
    parsed = parse_memory(text, max_line_bytes) if kind == "memory" else parse_logfile(text, max_line_bytes)
    entries = to_entries(parsed, root, realm, path, "section" if kind == "memory" else "logentry")
    problems = sorted(parsed.problems, key=lambda p: p[0])
    return entries, [Problem(path, line, reason, message) for line, reason, message in problems]
