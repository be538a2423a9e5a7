"""The entry model and the diary line grammar: parse(render(entry)) == entry.

A diary line is ``[HH:MM] text``. A typed entry carries one metadata group
right after the time, a bracket whose first word is a type::

    [14:05] [decision key=db file:app.py tool:pytest err:E42] Use Postgres.

The group holds the type, then an optional ``key=K``, then triggers
(``file:``, ``tool:``, ``err:``), separated by single spaces and followed by
one space. A plain note has no group; a note whose text itself starts with a
bracket whose first word is a type is rendered with an explicit ``[note]``
so it reads back unchanged. A bracket that is not valid metadata (its first
word is not a type, or a later word is not a key or trigger, as in
``[note to self]``) is part of the text: nothing a person types is dropped.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field, replace
from typing import Any

TYPES = ("note", "fact", "decision", "error", "workflow")
TRIGGER_KINDS = ("file", "tool", "err")
REALMS = ("user", "project")
KINDS = ("diary", "section", "logentry")

_TIME = r"(?:[01]\d|2[0-3]):[0-5]\d"
_LINE = re.compile(rf"^\[(?P<time>{_TIME})\] (?P<rest>.*)$", re.DOTALL)
_GROUP = re.compile(r"^\[(?P<meta>[^\[\]]*)\](?: (?P<text>.*))?$", re.DOTALL)
_TOKEN = re.compile(r"^[^\s\[\]]+$")
# Category Cc but tab, and lone surrogates (Cs): one regex, as this runs on every line read.
CONTROL_OR_SURROGATE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class GrammarError(ValueError):
    """A diary line that does not follow the entry grammar."""


@dataclass(frozen=True)
class Meta:
    """The typed part of an entry: type, key and triggers."""

    type: str = "note"
    key: str | None = None
    triggers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Line:
    """One parsed diary line: time, metadata and text."""

    time: str
    text: str
    meta: Meta = field(default_factory=Meta)


@dataclass(frozen=True, slots=True)
class Entry:
    """One unit of memory as indexed: where it lives and what it says (slots: a busy day holds many)."""

    root: str
    realm: str
    path: str
    line: int
    date: str
    time: str
    text: str
    kind: str = "diary"
    type: str = "note"
    key: str | None = None
    triggers: tuple[str, ...] = ()
    status: str = "live"
    occurrence: int = 0
    _fp: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def fp(self) -> str:
        """A stable short fingerprint: same place in the root and content, same fp, wherever the root is."""
        found = self._fp
        if found is None:  # computed once (functools.cached_property would serialise every thread on one lock)
            rel = self.path[len(self.root) + 1 :] if self.path.startswith(self.root + "/") else self.path
            found = fingerprint(self.realm, rel, self.date, self.time, self.text, self.occurrence)
            object.__setattr__(self, "_fp", found)
        return found

    def __reduce__(self) -> tuple[Callable[..., Entry], tuple[Any, ...]]:
        """Pickled as its values in order: a rebuild hands every entry to a worker process."""
        # dataclasses' own way looks every field up again for each entry: 5.4 µs to pickle one, here 1.2
        fields = (self.root, self.realm, self.path, self.line, self.date, self.time, self.text, self.kind)
        return _unpickled, (*fields, self.type, self.key, self.triggers, self.status, self.occurrence, self._fp)


def _unpickled(*values: Any) -> Entry:
    """An entry from __reduce__'s values, its fingerprint kept when it was computed."""
    entry = Entry(*values[:-1])
    if values[-1] is not None:
        object.__setattr__(entry, "_fp", values[-1])
    return entry


def fingerprint(realm: str, path: str, date: str, time: str, text: str, occurrence: int) -> str:
    """Hash what identifies an entry, not its line number, so edits above it keep it."""
    raw = "\x1f".join((realm, path, date, time, text, str(occurrence)))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:12]


def check_token(kind: str, value: str) -> str:
    """A key or trigger value: one word with no brackets or control characters."""
    if not _TOKEN.match(value) or _CONTROL.search(value):
        raise GrammarError(f"invalid {kind} {value!r}: one word, no brackets")
    return value


def check_trigger(trigger: str) -> str:
    """A trigger is ``file:``, ``tool:`` or ``err:`` followed by a non-empty word."""
    kind, sep, name = trigger.partition(":")
    if not sep or kind not in TRIGGER_KINDS or not name:
        raise GrammarError(f"invalid trigger {trigger!r}: use file:<name>, tool:<name> or err:<code>")
    return check_token("trigger", trigger)


def make_meta(type: str = "note", key: str | None = None, triggers: tuple[str, ...] = ()) -> Meta:
    """Validate and build a Meta from user-supplied values."""
    if type not in TYPES:
        raise GrammarError(f"invalid type {type!r}: one of {', '.join(TYPES)}")
    if key is not None:
        check_token("key", key)
    return Meta(type, key, tuple(check_trigger(t) for t in triggers))


def _parse_meta(meta: str) -> Meta | None:
    """Read a metadata group, or None when the bracket is just text."""
    words = meta.split(" ")
    if not words or words[0] not in TYPES:
        return None
    key = None
    triggers: list[str] = []
    for word in words[1:]:
        if word.startswith("key=") and key is None and not triggers:
            key = check_token("key", word[4:])
        else:
            triggers.append(check_trigger(word))
    return Meta(words[0], key, tuple(triggers))


def _meta_or_text(meta: str) -> Meta | None:
    """A bracket that is not valid metadata (`[note to self]`) is kept as text, never dropped."""
    try:
        return _parse_meta(meta)
    except GrammarError:
        return None


def check_text(text: str) -> str:
    """Entry text: non-empty, no surrounding space, no control character but tab."""
    if not text or text != text.strip():
        raise GrammarError("entry text must be non-empty with no leading or trailing space")
    if CONTROL_OR_SURROGATE.search(text):
        raise GrammarError("control character in entry text")
    return text


def parse_line(raw: str) -> Line:
    """Parse one diary line (without its newline) into time, meta and text."""
    match = _LINE.match(raw)
    if not match:
        raise GrammarError("expected '[HH:MM] text'")
    time, rest = match["time"], match["rest"]
    meta = Meta()
    group = _GROUP.match(rest)
    if group:
        parsed = _meta_or_text(group["meta"])
        if parsed is not None:
            meta, rest = parsed, group["text"] or ""
    text = rest.strip()
    if not text:
        raise GrammarError("empty entry text")
    return Line(time, check_text(text), meta)


def render_meta(meta: Meta) -> str:
    """The metadata group for a typed entry, empty for a plain note."""
    words = [meta.type] + ([f"key={meta.key}"] if meta.key else []) + list(meta.triggers)
    return "[" + " ".join(words) + "]"


def render_line(line: Line) -> str:
    """Render a diary line so that parse_line gives the same Line back; refuse what would not."""
    if not re.fullmatch(_TIME, line.time):
        raise GrammarError(f"invalid time {line.time!r}: expected HH:MM")
    check_text(line.text)
    make_meta(line.meta.type, line.meta.key, line.meta.triggers)
    plain = line.meta == Meta()
    needs_group = not plain or _looks_like_group(line.text)
    body = f"{render_meta(line.meta)} {line.text}" if needs_group else line.text
    return f"[{line.time}] {body}"


def _looks_like_group(text: str) -> bool:
    """True when plain text starts with a bracket that parse_line would read as metadata."""
    group = _GROUP.match(text)
    return group is not None and group["meta"].split(" ")[0] in TYPES


def occurrences(entries: Sequence[Entry], texts: Set[str] | None = None) -> dict[tuple[str, str], int]:
    """How often each (time, text) occurs among entries (only texts in `texts`, when given)."""
    seen: dict[tuple[str, str], int] = {}
    for entry in entries:
        if texts is None or entry.text in texts:
            seen[(entry.time, entry.text)] = seen.get((entry.time, entry.text), 0) + 1
    return seen


def diary_entries(
    root: str,
    realm: str,
    path: str,
    date: str,
    lines: list[tuple[int, Line]],
    before: Sequence[Entry] = (),
    seen: dict[tuple[str, str], int] | None = None,
) -> list[Entry]:
    """Turn parsed lines of one diary day (after the entries `before` them) into entries with stable fingerprints.

    `seen` may count the (time, text) pairs of `before` already (it is updated); else they are counted.
    """
    if seen is None:
        seen = occurrences(before, {line.text for _, line in lines})
    out = []
    for number, line in lines:
        occurrence = seen.get((line.time, line.text), 0)
        seen[(line.time, line.text)] = occurrence + 1
        out.append(
            Entry(
                root=root,
                realm=realm,
                path=path,
                line=number,
                date=date,
                time=line.time,
                text=line.text,
                kind="diary",
                type=line.meta.type,
                key=line.meta.key,
                triggers=line.meta.triggers,
                occurrence=occurrence,
            )
        )
    return out


def with_status(entry: Entry, status: str) -> Entry:
    """A copy of an entry with another status (live, tombstoned, pinned)."""
    return replace(entry, status=status)
