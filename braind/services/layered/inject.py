"""The layered parts of the injection block, their budget, and the per-session snapshot.

Order (docs/memory.md, What the block holds): SOUL.md verbatim, then one fenced <memory> block holding
MEMORY.md (`<root>`), the diary, and the logfile catalogue (`<home>`, then
`<project>`). The budget is the whole block as the agent receives it: every
line of it counts, the fence and its notice, the part tags, headings, hints,
day headings, notices and the blank lines between parts included, and its
characters are all the characters of the text, newlines included.

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
from braind.model.entries import Entry
from braind.model.fence import CLOSE, OPEN, fence
from braind.services.inject import WHEN, Part, assemble, diary_lines, lines_part

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
    """What lines cost: one line each, their characters plus a newline each."""
    return Cost(len(lines), sum(len(line) + 1 for line in lines))


def text_cost(text: str) -> Cost:
    """What a text of whole lines (each ending in a newline) costs."""
    return Cost(text.count("\n"), len(text))


# The blank line between two parts of the block (and between SOUL.md and the fence).
SEPARATOR = Cost(1, 1)
# The fence around the parts: its two opening lines and a blank line, and the closing line. Every
# part is counted with the separator before it, which the first part does not have: hence the minus.
FENCE = Cost(OPEN.count("\n") + 1, len(OPEN) + 1) + Cost(1, len(CLOSE) + 1) + Cost(-1, -1)
DIARY_HEADING = "## Diary (recent days)"


def part_cost(part: Part | None) -> Cost:
    """What a fenced part adds to the block: its text and the blank line before it."""
    return text_cost(part.text) + SEPARATOR if part is not None else Cost()


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
    """Build a session's snapshot: SOUL and MEMORY whole, catalogue lines while the whole block fits."""
    soul_part = Part("soul", "\n".join(soul) + "\n", 0, 0) if soul else None
    root_part = _root_part(root[0], root[1], budget) if root and root[1] else None
    used = FENCE + (text_cost(soul_part.text) + SEPARATOR if soul_part else Cost()) + part_cost(root_part)
    shown = [layer for layer in layers if layer.lines]
    # Every catalogue keeps its frame (tags, hint, notice), so the agent always learns that logfiles exist:
    # the frames of the later layers are set aside before a layer takes lines.
    frames = [part_cost(_catalogue_part(layer, 0, budget)) for layer in shown]
    parts: list[Part] = []
    for n, layer in enumerate(shown):
        part = _fitting_catalogue(layer, sum(frames[n + 1 :], used), budget)
        used += part_cost(part)
        parts.append(part)
    return Snapshot(soul_part, root_part, tuple(parts), used)


def _fitting_catalogue(layer: Layer, used: Cost, budget: InjectConfig) -> Part:
    """The layer's catalogue with as many lines, newest first, as fit after `used` (its frame at least)."""
    left = Cost(budget.max_lines - used.lines, budget.max_chars - used.chars)
    keep = 0
    lines_cost = Cost()
    for line in layer.lines:
        lines_cost += cost([line])
        if not (lines_cost + SEPARATOR).fits(_as_budget(left)):
            break
        keep += 1
    while keep > 0 and not part_cost(_catalogue_part(layer, keep, budget)).fits(_as_budget(left)):
        keep -= 1
    return _catalogue_part(layer, keep, budget)


def _as_budget(left: Cost) -> InjectConfig:
    """A remaining cost as a budget to check against."""
    return replace(InjectConfig(), max_lines=left.lines, max_chars=left.chars)


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
    """The whole block of one turn: the frozen parts, then triggered memories and the diary in what is left."""
    left = Cost(budget.max_lines - snapshot.used.lines, budget.max_chars - snapshot.used.chars)
    triggered = fit_lines(triggered, left) if triggered else None
    used = part_cost(triggered)
    diary_fit = fit_diary(diary, budget.max_bytes, Cost(left.lines - used.lines, left.chars - used.chars))
    fenced = [p for p in (snapshot.root, triggered, diary_fit, *snapshot.catalogue) if p is not None]
    block = assemble(fenced)
    soul = snapshot.soul
    text = soul.text + ("\n" + block if block else "") if soul else block
    return text, [p for p in (soul, *fenced) if p is not None]


def fit_lines(part: Part, left: Cost) -> Part | None:
    """A part of one heading and one line per entry, cut to its first lines that fit in `left`."""
    lines = part.text.split("\n")[:-1]
    keep = len(lines)
    while keep > 1 and not (cost(lines[:keep]) + SEPARATOR).fits(_as_budget(left)):
        keep -= 1
    if keep <= 1:
        return None  # a heading without one of its lines says nothing
    if keep == len(lines):
        return part
    cut = len(lines) - keep
    return Part(part.name, "\n".join(lines[:keep]) + "\n", part.entries - cut, part.dropped + cut)


def fit_diary(entries: Sequence[Entry], max_bytes: int, left: Cost) -> Part | None:
    """The diary part within inject.max_bytes and what is left of the whole block, newest lines kept.

    Lines are taken until the block's budget is full or until they hold more characters than
    max_bytes (so more bytes too): diary_part would cut every line after that, however busy the day.
    Counted in plain numbers, each line rendered once: a steady session's block is made again after
    every note.
    """
    ordered = sorted(entries, key=WHEN)
    start = cost([DIARY_HEADING]) + SEPARATOR
    lines, chars, days = start.lines, start.chars, set()
    taken: list[Entry] = []
    for entry in reversed(ordered):
        lines += 1
        chars += len(entry.time) + len(entry.text) + 4  # "[", "] " and the newline; fence() may lengthen it
        if "<" in entry.text:
            chars += len(fence(entry.text)) - len(entry.text)
        if entry.date not in days:
            lines += 1
            chars += len(entry.date) + 5  # "### " and the newline
            days.add(entry.date)
        if lines > left.lines or chars > left.chars:
            break
        taken.append(entry)
        if chars - SEPARATOR.chars > max_bytes:  # the part's text is longer than max_bytes already
            break
    part = lines_part(diary_lines(taken[::-1]), max_bytes) if taken else None
    return replace(part, dropped=len(ordered) - part.entries) if part else None


class Snapshots:
    """The snapshots of the most recent sessions (an LRU, so memory stays bounded)."""

    def __init__(self, capacity: int = SNAPSHOTS) -> None:
        self._items: OrderedDict[Hashable, Snapshot] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

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
