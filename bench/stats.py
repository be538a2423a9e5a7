"""Latency distributions: percentiles over the samples of repeated rounds."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Dist:
    """A summary of samples in milliseconds: count, p50, p95, p99, mean, min, max."""

    n: int
    p50: float
    p95: float
    p99: float
    mean: float
    min: float
    max: float

    def as_dict(self) -> dict[str, float]:
        """The summary as plain numbers for the JSON report."""
        return {key: float(value) for key, value in asdict(self).items()}


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) of sorted samples, interpolated between neighbours."""
    if not ordered:
        raise ValueError("no samples")
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(samples: Sequence[float]) -> Dist:
    """Summarise latency samples (ms)."""
    ordered = sorted(samples)
    return Dist(
        len(ordered),
        percentile(ordered, 50),
        percentile(ordered, 95),
        percentile(ordered, 99),
        statistics.fmean(ordered),
        ordered[0],
        ordered[-1],
    )
