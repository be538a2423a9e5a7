"""How much each kind of run measures: corpus sizes and repetitions."""

from __future__ import annotations

from dataclasses import dataclass, replace

HUGE = 1_000_000
BUSY_BASELINE = 100  # entries of the ordinary day that every busy day is compared with


@dataclass(frozen=True)
class Plan:
    """The corpus sizes and the repetitions of one run."""

    name: str
    sizes: tuple[int, ...]
    recall_rounds: int  # rounds over each query class, each with fresh queries
    queries: int  # queries per class and round; every query is asked once
    cold_rounds: int  # cold starts and reindexes, for corpora up to COLD_REPEAT_MAX entries
    notes: int
    editor_rounds: int
    injects: int
    load_seconds: float
    idle_seconds: float
    idle_connections: int = 1000
    idle_recalls: int = 100  # recalls of the one more client, with and without the idle connections each
    busy_days: tuple[int, ...] = (10_000, 100_000)  # entries already in today's diary
    soak_seconds: float = 0.0  # the mixed soak; 0 leaves it out

    @property
    def distinct_queries(self) -> int:
        """Distinct queries per class: no query is repeated, so a cache of results cannot flatter recall."""
        return self.recall_rounds * self.queries

    def cold_rounds_for(self, entries: int) -> int:
        """Several up to COLD_REPEAT_MAX entries (a busy moment moves their median less); above, one: minutes each."""
        return self.cold_rounds if entries <= COLD_REPEAT_MAX else 1


COLD_REPEAT_MAX = 100_000

SMOKE = Plan("smoke", (500,), 2, 2, 1, 5, 2, 5, 0.5, 1.0, 50, 10, (200,), 5.0)
QUICK = Plan("quick", (10_000,), 10, 4, 1, 40, 8, 100, 2.0, 5.0, 1000, 40, (10_000,))
FULL = Plan("full", (10_000, 100_000), 30, 5, 3, 200, 20, 300, 10.0, 30.0)


def choose(
    smoke: bool,
    quick: bool,
    entries: list[int] | None,
    huge: bool,
    soak: float | None = None,
    busy_days: list[int] | None = None,
) -> Plan:
    """The plan for the command-line flags: a preset, then the sizes, soak and busy days asked for."""
    plan = SMOKE if smoke else QUICK if quick else FULL
    if entries:
        plan = replace(plan, sizes=tuple(entries))
    if huge and HUGE not in plan.sizes:
        plan = replace(plan, sizes=(*plan.sizes, HUGE))
    if soak is not None:
        plan = replace(plan, soak_seconds=soak)
    if busy_days:
        plan = replace(plan, busy_days=tuple(sorted(set(busy_days))))
    return plan
