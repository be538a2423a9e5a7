"""Throughput: N client processes, each with its own connection, recalling as fast as they can.

Processes, not threads: Python clients in one process would serialise on
their own GIL and measure the client, not the daemon. The same harness runs
the scan baseline in N processes, so both sides get the same cores.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import multiprocessing
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from bench import baselines
from bench.stats import summarize
from braind.rpc.client import Client

START_TIMEOUT_S = 120.0
Query = tuple[str, ...]
Result = tuple[list[float], float, str, str]  # latencies (ms), seconds, error traceback or "", kind


@dataclass(frozen=True)
class LoadSpec:
    """What every client process runs: braind recalls or baseline scans, for how long."""

    kind: str  # "braind" (recall), "scan", "note" (a writer) or "inject"
    socket: str
    root: str
    today: str
    days: int
    queries: tuple[Query, ...]
    seconds: float


def _braind_runner(spec: LoadSpec) -> Callable[[Query], Any]:
    """One kept connection; a recall of the window per query."""
    client = Client(Path(spec.socket), timeout=60)
    return lambda words: client.call("brain_recall", query=" ".join(words), days=spec.days)


def _note_runner(spec: LoadSpec) -> Callable[[Query], Any]:
    """A writer: one brain_note per query, as an agent saving what it learned."""
    client = Client(Path(spec.socket), timeout=60)
    return lambda words: client.call("brain_note", text="under load " + " ".join(words))


def _inject_runner(spec: LoadSpec) -> Callable[[Query], Any]:
    """A steady session asking for its block every turn while others write."""
    client = Client(Path(spec.socket), timeout=60)
    return lambda words: client.call("inject", session="bench-under-load")


def _scan_runner(spec: LoadSpec) -> Callable[[Query], Any]:
    """The diary plugin's linear scan of the same window."""
    root, today = Path(spec.root), dt.date.fromisoformat(spec.today)
    return lambda words: baselines.scan(root, words, spec.days, today)


RUNNERS: dict[str, Callable[[LoadSpec], Callable[[Query], Any]]] = {
    "braind": _braind_runner,
    "scan": _scan_runner,
    "note": _note_runner,
    "inject": _inject_runner,
}


class LoadFailed(RuntimeError):
    """A client process failed."""


def worker(spec: LoadSpec, offset: int, barrier: Barrier, results: Queue[Result], kind: str = "") -> None:
    """Run one client; a failure breaks the barrier and is reported instead of hanging the others."""
    try:
        latencies, seconds, error = _client(spec, offset, barrier)
        results.put((latencies, seconds, error, kind or spec.kind))
    except BaseException:
        barrier.abort()
        results.put(([], 0.0, traceback.format_exc(), kind or spec.kind))
        raise


def _client(spec: LoadSpec, offset: int, barrier: Barrier) -> tuple[list[float], float, str]:
    """Warm up, wait for every client, then recall in a loop until the time is up."""
    run = RUNNERS[spec.kind](spec)
    run(spec.queries[offset % len(spec.queries)])
    barrier.wait(START_TIMEOUT_S)
    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + spec.seconds
    i = offset
    while (now := time.perf_counter()) < deadline:
        run(spec.queries[i % len(spec.queries)])
        latencies.append((time.perf_counter() - now) * 1000)
        i += 1
    return latencies, time.perf_counter() - started, ""


def run(spec: LoadSpec, clients: int) -> dict[str, float]:
    """Run `clients` processes at once; recalls per second in total and the latency distribution."""
    return run_mixed([(spec, clients)])[spec.kind]


def run_mixed(groups: list[tuple[LoadSpec, int]]) -> dict[str, dict[str, float]]:
    """Run every group's processes at once; per kind, calls per second in total and the latency distribution."""
    ctx = multiprocessing.get_context("spawn")
    total = sum(clients for _, clients in groups)
    barrier = ctx.Barrier(total + 1)
    results: Queue[Result] = ctx.Queue()
    procs: list[tuple[str, Any]] = []
    for spec, clients in groups:
        for i in range(clients):
            offset = i * len(spec.queries) // clients  # each client starts elsewhere
            procs.append((spec.kind, ctx.Process(target=worker, args=(spec, offset, barrier, results, spec.kind))))
    for _, proc in procs:
        proc.start()
    try:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(START_TIMEOUT_S)
        seconds = max(spec.seconds for spec, _ in groups)
        out = [results.get(timeout=seconds + START_TIMEOUT_S) for _ in procs]
    finally:
        for _, proc in procs:
            proc.join(START_TIMEOUT_S)
    errors = [error for _, _, error, _ in out if error]
    if errors:
        raise LoadFailed(f"{len(errors)} of {total} clients failed:\n{errors[0]}")
    found: dict[str, dict[str, float]] = {}
    for spec, clients in groups:
        mine = [(samples, secs) for samples, secs, _, kind in out if kind == spec.kind]
        latencies = [ms for samples, _ in mine for ms in samples]
        elapsed = max(secs for _, secs in mine)
        found[spec.kind] = {
            "clients": float(clients),
            "per_s": len(latencies) / elapsed,
            **summarize(latencies).as_dict(),
        }
    return found
