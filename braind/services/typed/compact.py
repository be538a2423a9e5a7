"""Compaction: the five rules of the typed memory, as decisions that can be shown before they are applied.

1. A newer entry with the same key tombstones the older ones (per root).
2. A fact unused for ``compact.fact_ttl_days`` with at most one use is tombstoned.
3. A workflow, error or decision unused for ``compact.deweight_days`` has its
   weight halved (once per period: not again until another period passes).
4. Error and decision entries are never removed automatically (rule 1 keeps them too).
5. Every eviction and de-weighting is written to ``compact.log``.

Pinned entries are never touched. "Unused" counts from the last use (an
entry returned by recall or injected by a trigger), or from when the entry
was written if it was never used. `plan` is pure, so a fake clock tests it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from braind.config import CompactConfig
from braind.files.state import Mark
from braind.model.entries import Entry

NEVER_REMOVED = ("error", "decision")
DEWEIGHTED = ("workflow", "error", "decision")


@dataclass(frozen=True)
class Decision:
    """What one rule does (or would do) to one entry."""

    entry: Entry
    rule: int
    action: str  # tombstone, deweight or keep
    detail: str
    weight: float | None = None

    def as_dict(self) -> dict[str, object]:
        """The decision as the wire carries it."""
        out: dict[str, object] = {
            "fp": self.entry.fp,
            "rule": self.rule,
            "action": self.action,
            "type": self.entry.type,
            "key": self.entry.key,
            "text": self.entry.text,
            "detail": self.detail,
        }
        if self.weight is not None:
            out["weight"] = self.weight
        return out


def plan(
    entries: Sequence[Entry], mark: Callable[[Entry], Mark], now: dt.datetime, config: CompactConfig
) -> list[Decision]:
    """Every decision the rules take on the given live entries at `now`, in rule order."""
    now = now if now.tzinfo else now.astimezone()
    live = [e for e in entries if e.status == "live"]
    decisions = _same_key(live)
    evicted = {d.entry.fp for d in decisions if d.action == "tombstone"}
    for entry in live:
        if entry.fp in evicted:
            continue
        found = _expired_fact(entry, mark(entry), now, config) or _deweight(entry, mark(entry), now, config)
        if found is not None:
            decisions.append(found)
    return decisions


def _same_key(entries: Sequence[Entry]) -> list[Decision]:
    """Rule 1 (and 4): in each root, only the newest entry of a key stays live."""
    groups: dict[tuple[str, str], list[Entry]] = {}
    for entry in entries:
        if entry.key:
            groups.setdefault((entry.root, entry.key), []).append(entry)
    decisions = []
    for (_, key), group in sorted(groups.items()):
        group.sort(key=lambda e: (e.date, e.time, e.path, e.line))
        newest = group[-1]
        for old in group[:-1]:
            if old.type in NEVER_REMOVED:
                detail = f"same key {key} as newer {newest.fp}, kept: {old.type} entries are never removed (rule 4)"
                decisions.append(Decision(old, 4, "keep", detail))
            else:
                decisions.append(Decision(old, 1, "tombstone", f"superseded by {newest.fp} (key {key})"))
    return decisions


def _idle_days(entry: Entry, mark: Mark, now: dt.datetime) -> float | None:
    """Days since the entry was last used, or written when never used; None when undated."""
    last = _parse(mark.last_used) if mark.last_used else _written(entry, now)
    if last is None:
        return None
    return (now - last).total_seconds() / 86400


def _expired_fact(entry: Entry, mark: Mark, now: dt.datetime, config: CompactConfig) -> Decision | None:
    """Rule 2: a fact unused for fact_ttl_days with at most one use."""
    idle = _idle_days(entry, mark, now)
    if entry.type != "fact" or idle is None or idle < config.fact_ttl_days or mark.uses > 1:
        return None
    detail = f"fact unused for {int(idle)} days (limit {config.fact_ttl_days}) with {mark.uses} use(s)"
    return Decision(entry, 2, "tombstone", detail)


def _deweight(entry: Entry, mark: Mark, now: dt.datetime, config: CompactConfig) -> Decision | None:
    """Rule 3: halve the weight of long-unused workflows, errors and decisions, once per period."""
    idle = _idle_days(entry, mark, now)
    if entry.type not in DEWEIGHTED or idle is None or idle < config.deweight_days:
        return None
    last_weighed = max((_parse(c.get("at")) for c in mark.changes if c["op"] == "weight"), default=None, key=_key)
    if last_weighed is not None and (now - last_weighed).total_seconds() / 86400 < config.deweight_days:
        return None
    weight = mark.weight / 2
    detail = (
        f"{entry.type} unused for {int(idle)} days (limit {config.deweight_days}): weight {mark.weight:g} → {weight:g}"
    )
    return Decision(entry, 3, "deweight", detail, weight)


def _written(entry: Entry, now: dt.datetime) -> dt.datetime | None:
    """When a dated entry was written, in now's timezone."""
    if not entry.date:
        return None
    try:
        stamp = dt.datetime.fromisoformat(f"{entry.date}T{entry.time or '00:00'}")
    except ValueError:
        return None
    return stamp.replace(tzinfo=now.tzinfo) if now.tzinfo else stamp


def _parse(value: object) -> dt.datetime | None:
    """A state timestamp (UTC, ISO 8601) as an aware datetime."""
    if not isinstance(value, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _key(value: dt.datetime | None) -> dt.datetime:
    """Sort None first."""
    return value or dt.datetime.min.replace(tzinfo=dt.UTC)
