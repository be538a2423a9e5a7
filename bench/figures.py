"""What a report is made of: a row (figure, braind, baseline, ratio, target, met) and how its numbers read."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

Stats = dict[str, float]
TIMES, DASH = "\u00d7", "\u2013"  # multiplication sign, en dash


@dataclass(frozen=True)
class Row:
    """One figure of braind beside its baseline, with its target."""

    key: str
    figure: str
    braind: Stats
    braind_text: str
    baseline: Stats | None
    baseline_text: str
    ratio: float | None
    ratio_text: str
    target: str
    met: bool | None


def fmt_ms(ms: float) -> str:
    """A duration in ms with sensible precision."""
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    return f"{ms:.2f} ms" if ms < 10 else f"{ms:.0f} ms" if ms >= 100 else f"{ms:.1f} ms"


def fmt_n(value: float) -> str:
    """A count or rate with thousands separators."""
    return f"{value:,.0f}"


def latency(d: Stats) -> str:
    """p50 and p99 of a distribution."""
    return f"p50 {fmt_ms(d['p50'])} · p99 {fmt_ms(d['p99'])}"


def tail(d: Stats) -> str:
    """p50, p95 and p99 of a distribution."""
    return f"p50 {fmt_ms(d['p50'])} · p95 {fmt_ms(d['p95'])} · p99 {fmt_ms(d['p99'])}"


def faster(baseline_ms: float, ours_ms: float) -> tuple[float, str]:
    """How many times faster braind is (baseline / braind), and that in words."""
    ratio = baseline_ms / ours_ms if ours_ms > 0 else float("inf")
    return ratio, f"{ratio:.1f}{TIMES} faster" if ratio >= 1 else f"{1 / ratio:.1f}{TIMES} slower"


def pick(d: dict[str, Any], *keys: str) -> Stats:
    """The numeric summary of a distribution (no lists), for the JSON rows."""
    return {k: float(d[k]) for k in keys}


def hit_counts(totals: list[int]) -> str:
    """The median and range of the hit totals of a query class."""
    low, high = min(totals), max(totals)
    spread = "" if low == high else f" ({fmt_n(low)}{DASH}{fmt_n(high)})"
    return fmt_n(statistics.median(totals)) + spread


def window_label(days: int | None) -> str:
    """A recall window in words."""
    return "all of memory (default)" if days is None else f"{days}-day window (`days: {days}`)"
