"""Measurements of the running daemon, made from this process over its real socket."""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import os
import random
import string
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from bench import proc
from bench.daemon import BenchDaemon
from bench.stats import summarize
from braind.rpc.client import Client

EDITOR_TIMEOUT_S = 5.0
EDITOR_POLL_S = 0.005
SETTLE_S = 1.0
WARM_POLL_S = 0.1
SLOWEST = 5  # the slowest queries of each class are kept in the JSON, to profile them


@contextlib.contextmanager
def without_collector_pauses() -> Iterator[None]:
    """Time calls with this process's garbage collector held off, after one collection.

    The bench process holds the whole corpus: one full collection of it takes about 90 ms at 100k
    entries, and it struck the same query of every run, counted as that call's latency.
    """
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def ms_since(started: float) -> float:
    """Milliseconds elapsed since a perf_counter reading."""
    return (time.perf_counter() - started) * 1000


def call_ms(client: Client, method: str, **params: Any) -> tuple[float, Any]:
    """Call a method; its latency in ms and its result."""
    started = time.perf_counter()
    result = client.call(method, **params)
    return ms_since(started), result


def token(rng: random.Random) -> str:
    """A made-up word that occurs nowhere else, to find one entry by."""
    return "zq" + "".join(rng.choices(string.ascii_lowercase, k=10))


def cold_start(
    daemon: BenchDaemon, timeout: float, watch: Callable[[], AbstractContextManager[None]] = nullcontext
) -> dict[str, float]:
    """Spawn on a root with no index and wait until ready (inside `watch`): wall time, entries/s, memory, CPU."""
    started = daemon.spawn()
    with watch(), proc.TreeSampler(daemon.pid) as sampled:
        ready = daemon.wait_ready(timeout)
    seconds = ready - started
    entries = int(daemon.call("status")["index"]["entries"])
    return {
        "seconds": seconds,
        "entries": float(entries),
        "entries_per_s": entries / seconds,
        **_usage(daemon.pid, sampled, 0.0, seconds),
    }


def _usage(pid: int, sampled: proc.TreeSampler, cpu_before: float, seconds: float) -> dict[str, float]:
    """Peak memory of the daemon alone and with its worker processes, and the cores it kept busy."""
    own = proc.peak_rss_mb(pid)
    return {
        "peak_rss_mb": own,
        "tree_peak_rss_mb": max(own, sampled.peak_mb),
        "processes": float(sampled.processes),
        "cores_busy": (proc.cpu_seconds(pid, children=True) - cpu_before) / seconds,
    }


def reindex(client: Client, pid: int) -> dict[str, float]:
    """One `reindex` over the socket: wall time, entries/s, memory and CPU."""
    cpu = proc.cpu_seconds(pid, children=True)
    with proc.TreeSampler(pid) as sampled:
        ms, result = call_ms(client, "reindex")
    seconds = ms / 1000
    entries = result["entries"]
    return {
        "seconds": seconds,
        "entries": float(entries),
        "entries_per_s": entries / seconds,
        **_usage(pid, sampled, cpu, seconds),
    }


def recall(client: Client, queries: Sequence[tuple[str, ...]], days: int | None) -> dict[str, Any]:
    """Latency of each query, asked once; the full and partial match totals and the slowest queries."""
    params = {} if days is None else {"days": days}
    timed = [call_ms(client, "brain_recall", query=" ".join(q), **params) for q in queries]
    slowest = sorted(zip(timed, queries, strict=True), key=lambda pair: -pair[0][0])[:SLOWEST]
    return {
        **summarize([ms for ms, _ in timed]).as_dict(),
        "totals": [r["total"] for _, r in timed],
        "partial_totals": [r.get("partial_total", 0) for _, r in timed],
        "slowest": [
            {"query": " ".join(q), "ms": ms, "total": r["total"], "partial_total": r.get("partial_total", 0)}
            for (ms, r), q in slowest
        ],
    }


def round_trip(client: Client, count: int) -> dict[str, float]:
    """Latency of `tools`, a static answer: the floor under every other call."""
    return summarize([call_ms(client, "tools")[0] for _ in range(count)]).as_dict()


def warm_up(client: Client, days: int | None) -> None:
    """One recall of a word no query uses, so the first timed query does not open the searchers."""
    client.call("brain_recall", query="zzwarmup", **({} if days is None else {"days": days}))


def note(client: Client, count: int, rng: random.Random) -> dict[str, Any]:
    """brain_note reply latency, and whether a recall right after the reply finds the note."""
    samples: list[float] = []
    misses = 0
    for i in range(count):
        word = token(rng)
        samples.append(call_ms(client, "brain_note", text=f"Benchmark note {i}: {word} was written")[0])
        misses += client.call("brain_recall", query=word, days=1)["total"] < 1
    return {**summarize(samples).as_dict(), "misses": float(misses), "notes": float(count)}


def _append(path: Path, line: str) -> float:
    """Append one line as an editor's `>>` would; returns the perf_counter time after the close."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    return time.perf_counter()


def _until_recalled(client: Client, word: str, since: float) -> float | None:
    """Poll recall until it finds the word; ms since `since`, or None after the timeout."""
    while time.perf_counter() - since < EDITOR_TIMEOUT_S:
        if client.call("brain_recall", query=word, days=1)["total"] > 0:
            return ms_since(since)
        time.sleep(EDITOR_POLL_S)
    return None


def editor(client: Client, diary: Path, rounds: int, rng: random.Random) -> dict[str, Any]:
    """Append to today's diary file like an editor, then poll recall until the line is found."""
    samples: list[float] = []
    misses = 0
    for _ in range(rounds):
        word = token(rng)
        now = dt.datetime.now().astimezone()
        written = _append(diary / f"{now.date().isoformat()}.md", f"[{now:%H:%M}] Typed in an editor: {word}")
        found = _until_recalled(client, word, written)
        misses += found is None
        samples.append(EDITOR_TIMEOUT_S * 1000 if found is None else found)
    return {**summarize(samples).as_dict(), "misses": float(misses)}


def inject(client: Client, count: int, rng: random.Random) -> dict[str, Any]:
    """inject for one steady session (increasing turns) and for a new session every time."""
    tag = token(rng)
    steady = [call_ms(client, "inject", session=f"steady-{tag}", turn=turn) for turn in range(count)]
    fresh = [call_ms(client, "inject", session=f"new-{tag}-{i}", turn=1) for i in range(count)]
    return {
        "steady": summarize([ms for ms, _ in steady]).as_dict(),
        "new": summarize([ms for ms, _ in fresh]).as_dict(),
        "bytes": float(steady[-1][1]["bytes"]),
        "empty": float(sum(1 for _, r in steady + fresh if r["skipped"])),
    }


def warmed(client: Client, timeout: float) -> float:
    """Wait until the daemon has read ahead what its first searches would (status: not warming); seconds waited."""
    started = time.monotonic()
    while client.call("status")["index"].get("warming") and time.monotonic() - started < timeout:
        time.sleep(WARM_POLL_S)
    return time.monotonic() - started


def index_state(client: Client, state_dir: Path) -> dict[str, float]:
    """Index segments and entries (from status) and the index's size on disk."""
    index = client.call("status")["index"]
    return {"segments": float(index["segments"]), "entries": float(index["entries"]), "disk_mb": _du(state_dir)}


def _du(directory: Path) -> float:
    """MiB of the regular files below a directory; files removed meanwhile (a commit) are skipped."""
    size = 0
    for dirpath, _, names in os.walk(directory):
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                size += os.lstat(os.path.join(dirpath, name)).st_size
    return size / 2**20


def idle(pid: int, seconds: float) -> dict[str, float]:
    """CPU used by the daemon (all threads) over a window with no requests, as % of one core; RSS after."""
    time.sleep(SETTLE_S)
    cpu, started = proc.cpu_seconds(pid), time.perf_counter()
    time.sleep(seconds)
    used, elapsed = proc.cpu_seconds(pid) - cpu, time.perf_counter() - started
    return {"seconds": elapsed, "cpu_percent": used / elapsed * 100, **at_rest(pid)}


def at_rest(pid: int) -> dict[str, float]:
    """Resident memory of the daemon (and any worker left), split into heap and mapped files."""
    return {"rss_mb": proc.tree_rss_mb(pid), **proc.rss_split_mb(pid)}
