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
from braind.client import Client

START_TIMEOUT_S = 120.0
Query = tuple[str, ...]
Result = tuple[list[float], float, str]  # latencies (ms), seconds, error traceback or ""


@dataclass(frozen=True)
class LoadSpec:
    """What every client process runs: braind recalls or baseline scans, for how long."""

    kind: str  # "braind" or "scan"
    socket: str
    root: str
    today: str
    days: int
    queries: tuple[Query, ...]
    seconds: float


def _braind_runner(spec: LoadSpec) -> Callable[[Query], Any]:
    """One kept connection; a recall of the default window per query."""
    client = Client(Path(spec.socket), timeout=60)
    return lambda words: client.call("brain_recall", query=" ".join(words))


def _scan_runner(spec: LoadSpec) -> Callable[[Query], Any]:
    """The diary plugin's linear scan of the same window."""
    root, today = Path(spec.root), dt.date.fromisoformat(spec.today)
    return lambda words: baselines.scan(root, words, spec.days, today)


class LoadFailed(RuntimeError):
    """A client process failed."""


def worker(spec: LoadSpec, offset: int, barrier: Barrier, results: Queue[Result]) -> None:
    """Run one client; a failure breaks the barrier and is reported instead of hanging the others."""
    try:
        results.put(_client(spec, offset, barrier))
    except BaseException:
        barrier.abort()
        results.put(([], 0.0, traceback.format_exc()))
        raise


def _client(spec: LoadSpec, offset: int, barrier: Barrier) -> Result:
    """Warm up, wait for every client, then recall in a loop until the time is up."""
    run = _braind_runner(spec) if spec.kind == "braind" else _scan_runner(spec)
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
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(clients + 1)
    results: Queue[Result] = ctx.Queue()
    offsets = [i * len(spec.queries) // clients for i in range(clients)]  # each client starts elsewhere
    procs = [ctx.Process(target=worker, args=(spec, offset, barrier, results)) for offset in offsets]
    for proc in procs:
        proc.start()
    try:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(START_TIMEOUT_S)
        out = [results.get(timeout=spec.seconds + START_TIMEOUT_S) for _ in procs]
    finally:
        for proc in procs:
            proc.join(START_TIMEOUT_S)
    errors = [error for _, _, error in out if error]
    if errors:
        raise LoadFailed(f"{len(errors)} of {clients} {spec.kind} clients failed:\n{errors[0]}")
    latencies = [ms for samples, _, _ in out for ms in samples]
    elapsed = max(seconds for _, seconds, _ in out)
    return {"clients": float(clients), "per_s": len(latencies) / elapsed, **summarize(latencies).as_dict()}
