"""Name rules of the layered memory: logfile names, section names, entry titles, one-line labels.

A logfile name becomes a file name (``logs/<name>.md``), so it must be safe as
one on every system a root may be copied to; section names and titles only
live inside a file, so they just have to stay on one heading line.
"""

from __future__ import annotations

import unicodedata

from braind.errors import InvalidName

MAX_NAME = 64
MAX_DESCRIPTION = 256
MAX_HEADING = 128
_FORBIDDEN = frozenset('/\\:*?"<>|')
_CONTROL = ("Cc", "Cf", "Cs", "Co", "Cn")
RULES = (
    "names are 1 to 64 characters (Chinese and other scripts are fine) with no path separators, "
    'no : * ? " < > |, no control characters and no leading or trailing dot or space; a trailing .md is dropped'
)


def logfile_name(raw: object) -> str:
    """The name of a logfile as tools accept it: NFC, `.md` dropped, safe as a file name."""
    if not isinstance(raw, str):
        raise InvalidName(f"a logfile name must be a string; {RULES}", name=repr(raw))
    name = unicodedata.normalize("NFC", raw)
    if name[-3:].lower() == ".md":
        name = name[:-3]
    problem = _name_problem(name)
    if problem:
        raise InvalidName(f"invalid logfile name {raw!r}: {problem}; {RULES}", name=raw)
    return name


def _name_problem(name: str) -> str | None:
    """Why a (normalised) name is not a valid logfile name, or None."""
    if not name:
        return "it is empty"
    if len(name) > MAX_NAME:
        return f"it is {len(name)} characters long, over {MAX_NAME}"
    bad = sorted(set(name) & _FORBIDDEN)
    if bad:
        return f"it contains {' '.join(bad)}"
    if has_control(name):
        return "it contains a control character"
    if name != name.strip() or name.startswith(".") or name.endswith("."):
        return "it starts or ends with a dot or a space"
    return None


def has_control(text: str) -> bool:
    """True when text holds a control, format, surrogate or unassigned character (tabs and newlines too)."""
    return any(unicodedata.category(c) in _CONTROL for c in text)


def section_name(raw: object, what: str = "section") -> str:
    """A MEMORY.md section name or an entry title: one short line that cannot fake a heading."""
    label = one_line(raw, what, MAX_NAME)
    if label.startswith("#"):
        raise InvalidName(f"a {what} must not start with '#': {raw!r}", name=raw)
    return label


def one_line(raw: object, what: str, limit: int) -> str:
    """An NFC label of 1 to limit characters on one line, without surrounding spaces or control characters."""
    if not isinstance(raw, str):
        raise InvalidName(f"the {what} must be a string", name=repr(raw))
    label = unicodedata.normalize("NFC", raw)
    if not label or len(label) > limit:
        raise InvalidName(f"the {what} must be 1 to {limit} characters, got {len(label)}", name=raw)
    if has_control(label):
        raise InvalidName(f"the {what} must be one line without control characters: {raw!r}", name=raw)
    if label != label.strip():
        raise InvalidName(f"the {what} must not start or end with a space: {raw!r}", name=raw)
    return label


def folded(raw: object, what: str, limit: int) -> str:
    """A description or heading given with newlines: whitespace folded to single spaces, then one_line."""
    if isinstance(raw, str):
        raw = " ".join(raw.split())
    return one_line(raw, what, limit)
