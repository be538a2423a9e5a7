"""The layered parts of the injection block, their budget, and the per-session snapshot.

Order (SPEC §3): SOUL.md verbatim, then one fenced <memory> block holding
MEMORY.md (`<root>`), the diary, and the logfile catalogue (`<home>`, then
`<project>`). The budget counts the memory itself, line by line: SOUL.md,
MEMORY.md, diary lines and catalogue lines (characters include each line's
newline). The frame braind adds around them (the fence and its notice, the
part tags and headings, day headings, notices) is not counted.

Priority follows the layers: SOUL.md and MEMORY.md are never cut (a warning
says when MEMORY.md alone is over budget); the catalogue fills what is left,
home before project, so the project catalogue loses its oldest lines first,
then home; the diary, which changes every turn, gets what the frozen parts
leave, newest lines kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace

from braind.config import InjectConfig
from braind.entries import Entry
from braind.inject import Part, assemble, diary_part, fence

SNAPSHOTS = 256
_TAGS = ("root", "home", "project")


@dataclass(frozen=True)
class Cost:
    """Counted lines and characters of memory text."""

    lines: int = 0
    chars: int = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.lines + other.lines, self.chars + other.chars)

    def fits(self, budget: InjectConfig) -> bool:
        """True when within inject.max_lines and inject.max_chars."""
        return self.lines <= budget.max_lines and self.chars <= budget.max_chars


def cost(lines: Sequence[str]) -> Cost:
    """What lines of memory cost: one line each, their characters plus a newline each."""
    return Cost(len(lines), sum(len(line) + 1 for line in lines))


@dataclass(frozen=True)
class Layer:
    """One logfile catalogue: its scope (home or project), directory and lines, newest first."""

    scope: str
    path: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Snapshot:
    """What a session's first block fixed: SOUL, MEMORY, the catalogue, and what they cost."""

    soul: Part | None
    root: Part | None
    catalogue: tuple[Part, ...]
    used: Cost


def shield(text: str) -> str:
    """Memory text that can close neither the fence nor one of the layer tags."""
    text = fence(text)
    for tag in _TAGS:
        text = text.replace(f"</{tag}", f"<\\/{tag}")
    return text


def text_lines(text: str | None) -> list[str]:
    """A file's text as lines without carriage returns or trailing blank lines."""
    if text is None or not text.strip():
        return []
    return [line.removesuffix("\r") for line in text.rstrip().split("\n")]


def freeze(
    soul: list[str], root: tuple[str, list[str]] | None, layers: Sequence[Layer], budget: InjectConfig
) -> Snapshot:
    """Build a session's snapshot: SOUL and MEMORY whole, catalogue lines while they fit."""
    used = cost(soul) + (cost(root[1]) if root else Cost())
    parts: list[Part] = []
    for layer in layers:
        keep = _fitting(layer.lines, used, budget)
        used += cost(layer.lines[:keep])
        if layer.lines:
            parts.append(_catalogue_part(layer, keep, budget))
    soul_part = Part("soul", "\n".join(soul) + "\n", 0, 0) if soul else None
    root_part = _root_part(root[0], root[1], budget) if root and root[1] else None
    return Snapshot(soul_part, root_part, tuple(parts), used)


def _fitting(lines: Sequence[str], used: Cost, budget: InjectConfig) -> int:
    """How many lines, newest first, still fit after `used`."""
    keep = 0
    for line in lines:
        used += cost([line])
        if not used.fits(budget):
            break
        keep += 1
    return keep


def _root_part(path: str, lines: list[str], budget: InjectConfig) -> Part:
    """MEMORY.md whole, with a warning when it alone is over the budget."""
    body = [f'<root path="{shield(path)}">', *(shield(line) for line in lines)]
    size = cost(lines)
    if not size.fits(budget):
        body.append(
            f"(Warning: MEMORY.md is {size.lines} lines / {size.chars} characters, over the injection budget of "
            f"{budget.max_lines} lines / {budget.max_chars} characters; it is injected in full, never cut. "
            "Shorten its longest sections with memory_correct.)"
        )
    return Part("root", "\n".join([*body, "</root>"]) + "\n", sum(1 for line in lines if line.startswith("## ")), 0)


def _catalogue_part(layer: Layer, keep: int, budget: InjectConfig) -> Part:
    """A catalogue: a hint, the kept lines, and a notice saying how many of the oldest were left out."""
    dropped = len(layer.lines) - keep
    body = [
        f'<{layer.scope} path="{shield(layer.path)}">',
        f"Logfiles, newest first: name [type] description. Read one with memory_recall scope={layer.scope} name=NAME.",
        *(shield(line) for line in layer.lines[:keep]),
    ]
    if dropped:
        body.append(
            f"({dropped} oldest {layer.scope} logfiles not shown: the injection budget of {budget.max_lines} lines / "
            f"{budget.max_chars} characters is full; memory_recall scope={layer.scope} lists them all.)"
        )
    return Part(layer.scope, "\n".join([*body, f"</{layer.scope}>"]) + "\n", keep, dropped)


def compose(
    snapshot: Snapshot, diary: Sequence[Entry], budget: InjectConfig, triggered: Part | None = None
) -> tuple[str, list[Part]]:
    """The whole block of one turn: the frozen parts and triggered memories, the diary fitted into what is left."""
    used = snapshot.used + (Cost(triggered.entries, len(triggered.text)) if triggered else Cost())
    left = Cost(budget.max_lines - used.lines, budget.max_chars - used.chars)
    diary_fit = fit_diary(diary, budget.max_bytes, left)
    fenced = [p for p in (snapshot.root, triggered, diary_fit, *snapshot.catalogue) if p is not None]
    block = assemble(fenced)
    soul = snapshot.soul
    text = soul.text + ("\n" + block if block else "") if soul else block
    return text, [p for p in (soul, *fenced) if p is not None]


def fit_diary(entries: Sequence[Entry], max_bytes: int, left: Cost) -> Part | None:
    """The diary part within inject.max_bytes and what is left of the total, newest lines kept."""
    ordered = sorted(entries, key=lambda e: (e.date, e.time, e.line))
    keep, used = 0, Cost()
    for entry in reversed(ordered):
        used += cost([f"[{entry.time}] {fence(entry.text)}"])
        if used.lines > left.lines or used.chars > left.chars:
            break
        keep += 1
    part = diary_part(ordered[len(ordered) - keep :], max_bytes) if keep else None
    return replace(part, dropped=len(ordered) - part.entries) if part else None


class Snapshots:
    """The snapshots of the most recent sessions (an LRU, so memory stays bounded)."""

    def __init__(self, capacity: int = SNAPSHOTS) -> None:
        self._items: OrderedDict[Hashable, Snapshot] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], Snapshot]) -> Snapshot:
        """The session's snapshot, made by `make` the first time (the first block of a session fixes it)."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                found = self._items[key] = make()
                if len(self._items) > self._capacity:
                    self._items.popitem(last=False)
            self._items.move_to_end(key)
            return found
