"""A mixed soak: client processes calling what agents call, for minutes, with throughput and RSS over time.

Each client draws its next call at random: 30 % notes, 50 % recalls of all of
memory, 10 % `inject` of its own session (a new turn each time), 10 % appends
to a MEMORY.md section of its own. MEMORY.md is injected whole, so it has a
budget: when an append is refused for it, the client deletes its section
(approved) and goes on, as an agent tidying its notes would.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import multiprocessing
import random
import threading
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from bench import proc
from bench.load import START_TIMEOUT_S, LoadFailed
from bench.stats import summarize
from braind.errors import BraindError
from braind.rpc.client import Client

CLIENTS = 4
MIX = {"note": 30, "recall": 50, "inject": 10, "root": 10}
LABELS = {"note": "note", "recall": "recall", "inject": "inject", "root": "MEMORY.md append"}
WINDOW_S = 15.0
WARM_UP_S = 60.0
SHORT = 5  # a soak shorter than four windows is cut into this many
TABLE_ROWS = 12
Query = tuple[str, ...]
Sample = tuple[float, str, float, str]  # when the call began (monotonic), kind, ms, error reason or ""


@dataclass(frozen=True)
class SoakSpec:
    """What every soak client runs, and for how long."""

    socket: str
    queries: tuple[Query, ...]
    seconds: float
    seed: int


class Agent:
    """One client's calls, on one kept connection."""

    def __init__(self, spec: SoakSpec, index: int) -> None:
        self.client = Client(Path(spec.socket), timeout=60)
        self.queries = spec.queries
        self.index = index
        self.section = f"Soak {index}"

    def call(self, kind: str, n: int) -> None:
        """The n-th call of this client, of one kind."""
        words = " ".join(self.queries[(n + self.index) % len(self.queries)])
        if kind == "note":
            self.client.call("brain_note", text=f"Soak {self.index} note {n}: {words}")
        elif kind == "recall":
            self.client.call("brain_recall", query=words)
        elif kind == "inject":
            self.client.call("inject", session=f"soak-{self.index}", turn=n + 1)
        else:
            self.append(f"soak {n}: {words}")

    def append(self, text: str) -> None:
        """Append to this client's MEMORY.md section; at the budget, delete the section instead."""
        try:
            self.client.call("memory_write_root", section=self.section, content=text)
        except BraindError as err:
            if err.reason != "budget_exceeded":
                raise
            self.client.call("memory_correct", scope="root", section=self.section, approved=True)


def worker(spec: SoakSpec, index: int, barrier: Barrier, results: Queue[tuple[list[Sample], str]]) -> None:
    """Run one client; a failure breaks the barrier and is reported instead of hanging the others."""
    try:
        results.put((_calls(spec, index, barrier), ""))
    except BaseException:
        barrier.abort()
        results.put(([], traceback.format_exc()))
        raise


def _calls(spec: SoakSpec, index: int, barrier: Barrier) -> list[Sample]:
    """Call at random by the mix until the time is up; an error reply is kept as the call's outcome."""
    agent = Agent(spec, index)
    rng = random.Random(spec.seed * 1000 + index)
    kinds, weights = list(MIX), list(MIX.values())
    agent.client.call("tools")
    barrier.wait(START_TIMEOUT_S)
    deadline = time.monotonic() + spec.seconds
    samples: list[Sample] = []
    while (began := time.monotonic()) < deadline:
        kind = rng.choices(kinds, weights)[0]
        reason = ""
        try:
            agent.call(kind, len(samples))
        except BraindError as err:
            reason = err.reason
        samples.append((began, kind, (time.monotonic() - began) * 1000, reason))
    return samples


def window_s(seconds: float) -> float:
    """15 s windows; a short soak (a smoke run) is cut into five."""
    return WINDOW_S if seconds >= 4 * WINDOW_S else seconds / SHORT


def edges(seconds: float) -> list[float]:
    """Where the windows of a soak begin and end, in seconds from its start; the last window may be shorter."""
    step = window_s(seconds)
    count = max(1, math.ceil(seconds / step - 1e-9))
    return [min(i * step, seconds) for i in range(count + 1)]


def warm_up_s(seconds: float) -> float:
    """The first minute, or the first fifth of a shorter soak."""
    return min(WARM_UP_S, seconds / SHORT)


def run(spec: SoakSpec, pid: int) -> dict[str, Any]:
    """Run the clients against the daemon `pid`, sampling its memory every window; the time series and summary."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(CLIENTS + 1)
    results: Queue[tuple[list[Sample], str]] = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(spec, i, barrier, results)) for i in range(CLIENTS)]
    for process in procs:
        process.start()
    try:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(START_TIMEOUT_S)
        started = time.monotonic()
        memory = _sample_memory(pid, started, spec.seconds)
        out = [results.get(timeout=spec.seconds + START_TIMEOUT_S) for _ in procs]
    finally:
        for process in procs:
            process.join(START_TIMEOUT_S)
    errors = [error for _, error in out if error]
    if errors:
        raise LoadFailed(f"{len(errors)} of {CLIENTS} soak clients failed:\n{errors[0]}")
    samples = sorted(sample for found, _ in out for sample in found)
    return summary([(t - started, kind, ms, reason) for t, kind, ms, reason in samples], memory, spec.seconds)


def _sample_memory(pid: int, started: float, seconds: float) -> list[dict[str, float]]:
    """The daemon's RSS and threads at the start and at the end of every window."""
    found: list[dict[str, float]] = []
    for at in edges(seconds):
        time.sleep(max(0.0, started + at - time.monotonic()))
        found.append({"at_s": at, "rss_mb": proc.tree_rss_mb(pid), "threads": float(proc.threads(pid))})
    return found


def _rate(samples: Sequence[Sample], low: float, high: float) -> float:
    """Calls per second begun in [low, high)."""
    return sum(1 for t, _, _, _ in samples if low <= t < high) / (high - low)


def _window(samples: Sequence[Sample], low: float, high: float, rss: float) -> dict[str, float]:
    """Throughput, the mix, errors and the latency tail of one window, and the RSS at its end."""
    mine = [s for s in samples if low <= s[0] < high]
    kinds = Counter(kind for _, kind, _, _ in mine)
    tail = summarize([ms for _, _, ms, _ in mine]).as_dict() if mine else {"p50": 0.0, "p99": 0.0}
    return {
        "start_s": low,
        "seconds": high - low,
        "calls": float(len(mine)),
        "per_s": len(mine) / (high - low),
        **{kind: float(kinds[kind]) for kind in MIX},
        "errors": float(sum(1 for s in mine if s[3])),
        "p50": tail["p50"],
        "p99": tail["p99"],
        "rss_mb": rss,
    }


def summary(samples: Sequence[Sample], memory: Sequence[dict[str, float]], seconds: float) -> dict[str, Any]:
    """The windows, the first and the last minute's rates, RSS after warm-up and at the end, latency by kind."""
    warm = warm_up_s(seconds)
    spans = itertools.pairwise(edges(seconds))
    windows = [_window(samples, low, high, memory[i + 1]["rss_mb"]) for i, (low, high) in enumerate(spans)]
    after = [m["rss_mb"] for m in memory if m["at_s"] >= warm]
    reasons = Counter(reason for _, _, _, reason in samples if reason)
    by_kind = {kind: [ms for _, k, ms, _ in samples if k == kind] for kind in MIX}
    return {
        "seconds": seconds,
        "clients": float(CLIENTS),
        "window_s": window_s(seconds),
        "warm_up_s": warm,
        "calls": float(len(samples)),
        "per_s": len(samples) / seconds,
        "first_per_s": _rate(samples, 0.0, warm),
        "last_per_s": _rate(samples, seconds - warm, seconds),
        "rss_start_mb": memory[0]["rss_mb"],
        "rss_warm_mb": after[0],
        "rss_end_mb": after[-1],
        "rss_max_mb": max(after),
        "errors": dict(reasons),
        "latency": {kind: summarize(found).as_dict() for kind, found in by_kind.items() if found},
        "windows": windows,
        "memory": list(memory),
    }


def table_windows(windows: Sequence[dict[str, float]]) -> list[dict[str, float]]:
    """The windows merged into at most TABLE_ROWS rows for the Markdown table (the JSON keeps every window)."""
    size = math.ceil(len(windows) / TABLE_ROWS)
    merged = []
    for i in range(0, len(windows), size):
        group = windows[i : i + size]
        seconds = sum(w["seconds"] for w in group)
        calls = sum(w["calls"] for w in group)
        merged.append(
            {
                "start_s": group[0]["start_s"],
                "seconds": seconds,
                "per_s": calls / seconds,
                **{kind: sum(w[kind] for w in group) for kind in (*MIX, "errors")},
                "p99": max(w["p99"] for w in group),
                "rss_mb": group[-1]["rss_mb"],
            }
        )
    return merged
