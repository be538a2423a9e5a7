"""One corpus size, end to end: baselines, cold starts, then every measurement of the running daemon."""

from __future__ import annotations

import datetime as dt
import itertools
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

from bench import baselines, busy, connections, corpus, load, measure, proc, queries, soak
from bench.daemon import BenchDaemon
from bench.plan import BUSY_BASELINE, Plan
from bench.profile import Profiler
from bench.stats import summarize
from braind.rpc.client import Client

WINDOWS: tuple[int | None, ...] = (30, 365, None)  # None: all of memory, recall's default
LOAD_WINDOW = 30  # the window of the throughput and write-load clients, and of their scan
WRITERS = 4  # note writers beside one recalling and one injecting client
BASELINE_BUDGET_S = 10.0  # seconds a baseline may spend on one query class; slow ones are sampled
MIN_BASELINE_QUERIES = 3
Query = tuple[str, ...]


def say(message: str) -> None:
    """Progress on stderr, so that stdout carries only the table."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@contextmanager
def timed_phase(phases: dict[str, float], name: str) -> Iterator[None]:
    """Time a phase of the run and announce it."""
    say(name)
    started = time.perf_counter()
    yield
    phases[name] = round(time.perf_counter() - started, 2)


def _median_of(rounds: Sequence[dict[str, float]]) -> dict[str, float]:
    """The median of each figure over rounds, plus how many rounds there were."""
    keys = rounds[0].keys()
    return {**{k: float(statistics.median(r[k] for r in rounds)) for k in keys}, "rounds": float(len(rounds))}


def window_name(days: int | None) -> str:
    """How a window is named in the results: `30d`, `365d` or `all`."""
    return "all" if days is None else f"{days}d"


def scan_latency(root: Path, qs: Sequence[Query], days: int | None, today: dt.date) -> dict[str, Any]:
    """Baseline (a): latency of the plugin's scan over the same queries and window, each once (sampled when slow)."""
    timed = within_budget(qs, lambda q: baselines.scan(root, q, days, today))
    return {
        **summarize([ms for ms, _ in timed]).as_dict(),
        "queries": len(timed),
        "totals": [found[1] for _, found in timed],
    }


def fts_latency(fts: baselines.Fts5, qs: Sequence[Query], since: str, any_word: bool) -> dict[str, Any]:
    """Baseline (b): FTS5 with the same window, each query once: words AND-ed as prefixes, or OR-ed for questions."""
    if any_word:
        timed = within_budget(qs, fts.recall_any)
        totals = [fts.total_any(q) for q in qs[: len(timed)]]
    else:
        timed = within_budget(qs, lambda q: fts.recall(q, since))
        totals = [fts.total(q, since) for q in qs[: len(timed)]]
    match = baselines.ANY_WORD if any_word else baselines.EVERY_WORD
    return {**summarize([ms for ms, _ in timed]).as_dict(), "queries": len(timed), "totals": totals, "match": match}


def within_budget(qs: Sequence[Query], call: Callable[[Query], Any]) -> list[tuple[float, Any]]:
    """Time `call` on each query until BASELINE_BUDGET_S is spent, after at least MIN_BASELINE_QUERIES."""
    timed: list[tuple[float, Any]] = []
    spent = 0.0
    for q in qs:
        if len(timed) >= MIN_BASELINE_QUERIES and spent >= BASELINE_BUDGET_S * 1000:
            break
        timed.append(_timed(partial(call, q)))
        spent += timed[-1][0]
    return timed


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    """Milliseconds one call takes, and its result."""
    started = time.perf_counter()
    result = call()
    return measure.ms_since(started), result


class SizeRun:
    """Everything measured on one corpus size, in a temp dir under /tmp (short socket paths)."""

    def __init__(self, n: int, plan: Plan, out: Path, seed: int, profile: bool = False) -> None:
        self.n, self.plan, self.out, self.seed = n, plan, out, seed
        self.profiler = Profiler(out if profile else None, str(n))
        self.today = dt.date.today()
        self.rng = random.Random(seed)
        self.phases: dict[str, float] = {}
        self.results: dict[str, Any] = {"entries": n, "plan": plan.name, "phases": self.phases}

    @contextmanager
    def phase(self, name: str, profiled: str | None = None) -> Iterator[None]:
        """Announce and time a phase; profile the daemon meanwhile when asked to."""
        with timed_phase(self.phases, f"{self.n} entries: {name}"):
            if profiled is None:
                yield
            else:
                with self.profiler.phase(self.daemon, profiled, gil=profiled != "writes"):
                    yield

    def run(self) -> dict[str, Any]:
        """Generate or reuse the corpus, then measure; returns every figure."""
        with self.phase("corpus"):
            self.corpus = corpus.ensure(self.out, self.n, self.seed, self.today)
            self.docs = corpus.load(self.corpus.root)
            self.classes = queries.choose(self.docs, self.today, self.seed, self.plan.distinct_queries)
        self.results["corpus"] = self._describe()
        with tempfile.TemporaryDirectory(prefix="bb", dir="/tmp") as tmp:
            self._in(Path(tmp))
        return self.results

    def _describe(self) -> dict[str, Any]:
        """The corpus's size, span and windows, and the queries chosen."""
        info = {k: v for k, v in asdict(self.corpus).items() if k != "root"}
        for days in (30, 365):
            since = (self.today - dt.timedelta(days=days - 1)).isoformat()
            info[f"entries_{days}d"] = sum(1 for d in self.docs if d.date >= since)
        info["queries"] = {c.key: [" ".join(q) for q in c.queries] for c in self.classes}
        return info

    def _in(self, base: Path) -> None:
        """Baselines first (the daemon is not running), then the daemon."""
        self._build_baselines(base)
        root = base / "root"
        shutil.copytree(self.corpus.root, root)
        daemon = self._cold_starts(base, root)
        try:
            with daemon.client() as client:
                self.daemon = daemon
                self._with_daemon(daemon, client, root)
        finally:
            daemon.remove()
            self.fts.close()

    def _build_baselines(self, base: Path) -> None:
        """Plain Whoosh (in a child process) and FTS5 build the same entries."""
        with self.phase("baseline builds (plain Whoosh, FTS5)"):
            self.results["whoosh_build"] = baselines.whoosh_build(self.corpus.root, base / "whoosh")
            shutil.rmtree(base / "whoosh")
            self.fts = baselines.Fts5(base / "fts5.db")
            seconds = self.fts.build(self.docs)
            self.results["fts5_build"] = {"seconds": seconds, "entries_per_s": len(self.docs) / seconds}

    def _cold_starts(self, base: Path, root: Path) -> BenchDaemon:
        """Start the daemon on the corpus with no index, `cold_rounds` times; the last one keeps running."""
        rounds = self.plan.cold_rounds_for(self.n)
        found = []
        with self.phase(f"cold start x{rounds}"):
            for i in range(rounds - 1):
                daemon = BenchDaemon(base, root, f"cold{i}")
                try:
                    found.append(measure.cold_start(daemon, self._start_timeout()))
                finally:
                    daemon.remove()
            daemon = BenchDaemon(base, root, "live")
            try:
                watch = partial(self.profiler.phase, daemon, "cold-start")
                found.append(measure.cold_start(daemon, self._start_timeout(), watch))
            except BaseException:
                daemon.remove()
                raise
        self.results["cold_start"] = _median_of(found)
        return daemon

    def _start_timeout(self, more: int = 0) -> float:
        """Seconds a start that indexes the corpus (and `more` entries) may take: generous, at 100 entries/s."""
        return max(120.0, (self.n + more) / 100)

    def _with_daemon(self, daemon: BenchDaemon, client: Client, root: Path) -> None:
        """Every measurement of the running daemon, the idle window after them; then the soak and the busy days."""
        self.results["warmed_s"] = measure.warmed(client, self._start_timeout())
        time.sleep(measure.SETTLE_S)
        self.results["rest"] = measure.at_rest(daemon.pid)
        index = {"ready": measure.index_state(client, daemon.state)}
        self._reindex(client)
        self.results["rewarmed_s"] = measure.warmed(client, self._start_timeout())
        index["reindexed"] = measure.index_state(client, daemon.state)
        self._recall(client)
        self._throughput(daemon)
        self._under_writes(daemon)
        self._idle_connections(daemon)
        self._writes(client, root)
        index["written"] = measure.index_state(client, daemon.state)
        self.results["index"] = index
        with self.phase(f"idle {self.plan.idle_seconds:g} s", "idle"):
            self.results["idle"] = measure.idle(daemon.pid, self.plan.idle_seconds)
        self.results["peak_rss_mb"] = proc.peak_rss_mb(daemon.pid)
        if self.plan.soak_seconds > 0:
            self._soak(daemon)
        self._busy_days(daemon, root)

    def _reindex(self, client: Client) -> None:
        """`reindex` over the socket, `cold_rounds` times."""
        rounds = self.plan.cold_rounds_for(self.n)
        with self.phase(f"reindex x{rounds}", "reindex"):
            self.results["reindex"] = _median_of([measure.reindex(client, self.daemon.pid) for _ in range(rounds)])

    def _recall(self, client: Client) -> None:
        """Every query class in every window: braind, the scan and FTS5."""
        found: dict[str, Any] = {}
        with self.phase("recall", "recall"), measure.without_collector_pauses():
            self.results["round_trip"] = measure.round_trip(client, self.plan.injects)
            for days in WINDOWS:
                measure.warm_up(client, days)
                for cls in self.classes:
                    if days is None or cls.key != queries.NATURAL:
                        found[f"{window_name(days)}/{cls.key}"] = self._recall_class(client, cls, days)
        self.results["recall"] = found

    def _recall_class(self, client: Client, cls: queries.QueryClass, days: int | None) -> dict[str, Any]:
        """One query class in one window; FTS5 is left out for Chinese (its tokenizer keeps CJK runs whole)."""
        since = "" if days is None else (self.today - dt.timedelta(days=days - 1)).isoformat()
        natural = cls.key == queries.NATURAL
        return {
            "label": cls.label,
            "queries": len(cls.queries),
            "braind": measure.recall(client, cls.queries, days),
            "scan": scan_latency(self.corpus.root, cls.queries, days, self.today),
            "fts5": None if "chinese" in cls.key else fts_latency(self.fts, cls.queries, since, natural),
        }

    def _interleaved(self, natural: bool) -> tuple[Query, ...]:
        """The classes' queries taken in turn, one of each class at a time; natural questions only when asked."""
        chosen = [c.queries for c in self.classes if natural or c.key != queries.NATURAL]
        return tuple(q for mixed in itertools.zip_longest(*chosen) for q in mixed if q is not None)

    def _load_spec(self, kind: str, daemon: BenchDaemon) -> load.LoadSpec:
        """What load clients of one kind run: the word classes' queries interleaved, the 30-day window."""
        root, today, qs = str(self.corpus.root), self.today.isoformat(), self._interleaved(False)
        return load.LoadSpec(kind, str(daemon.socket), root, today, LOAD_WINDOW, qs, self.plan.load_seconds)

    def _throughput(self, daemon: BenchDaemon) -> None:
        """1 and 8 client processes recalling the 30-day window, braind and the scan."""
        found: dict[str, Any] = {}
        with self.phase("throughput", "throughput"):
            for kind in ("braind", "scan"):
                spec = self._load_spec(kind, daemon)
                for clients in (1, 8):
                    found[f"{kind}_{clients}"] = load.run(spec, clients)
        self.results["throughput"] = found

    def _under_writes(self, daemon: BenchDaemon) -> None:
        """Recall and inject, one client each, while WRITERS processes write notes as fast as they can."""
        groups = [(self._load_spec(kind, daemon), n) for kind, n in (("note", WRITERS), ("braind", 1), ("inject", 1))]
        with self.phase(f"recall and inject under {WRITERS} writers", "under_writes"):
            self.results["under_writes"] = load.run_mixed(groups)

    def _idle_connections(self, daemon: BenchDaemon) -> None:
        """One more client's recalls of all of memory, without and then with many idle connections open."""
        count, recalls = self.plan.idle_connections, self.plan.idle_recalls
        qs = list(itertools.islice(itertools.cycle(self._interleaved(True)), 2 * recalls))
        with self.phase(f"{count} idle connections", "idle-connections"):
            self.results["idle_connections"] = connections.measure_idle(daemon.socket, daemon.pid, count, qs)

    def _soak(self, daemon: BenchDaemon) -> None:
        """The mixed soak on the running daemon, after everything else it measures."""
        spec = soak.SoakSpec(str(daemon.socket), self._interleaved(True), self.plan.soak_seconds, self.seed)
        with self.phase(f"soak {self.plan.soak_seconds:g} s, {soak.CLIENTS} clients", "soak"):
            self.results["soak"] = soak.run(spec, daemon.pid)

    def _busy_days(self, daemon: BenchDaemon, root: Path) -> None:
        """The daemon started again on an ordinary day, then on each busy day; note, inject and recall on each."""
        found: dict[str, Any] = {}
        for entries in dict.fromkeys((BUSY_BASELINE, *self.plan.busy_days)):
            with self.phase(f"busy day of {entries:,} entries"):
                daemon.stop()
                busy.write_day(root, entries, self.seed + entries)
                started = daemon.relaunch()
                ready = daemon.wait_ready(self._start_timeout(entries))
                profiled = self.profiler.phase(daemon, f"busy-{entries}")
                with profiled, daemon.client() as client, measure.without_collector_pauses():
                    measure.warmed(client, self._start_timeout(entries))
                    calls = busy.calls(client, self._interleaved(True), self.rng)
                found[str(entries)] = {"entries": entries, "ready_s": ready - started, **calls}
        self.results["busy_days"] = found

    def _writes(self, client: Client, root: Path) -> None:
        """brain_note, editor appends and inject."""
        with self.phase("note, editor, inject", "writes"), measure.without_collector_pauses():
            self.results["note"] = measure.note(client, self.plan.notes, self.rng)
            self.results["editor"] = measure.editor(client, root / "diary", self.plan.editor_rounds, self.rng)
            self.results["inject"] = measure.inject(client, self.plan.injects, self.rng)
