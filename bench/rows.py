"""The rows of one corpus size's results, a section of the report at a time, each with its target."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from typing import Any

from bench import baselines, soak
from bench.figures import TIMES, Row, Stats, faster, fmt_n, hit_counts, latency, pick, tail, window_label
from bench.plan import BUSY_BASELINE

BIG = 100_000  # targets are stated for 100k entries; a larger corpus (1M) has targets of its own
MILLION_RATE = 1_000_000 / 180  # entries/s that index 1M entries in 3 minutes


def recall_target(days: int | None, entries: int, ours: Stats, ratio: float) -> tuple[str, bool]:
    """The target of a recall figure for its window and corpus size, and whether it is met."""
    big = entries > BIG
    if days == 30:
        target = f"p50 ≤ 2 ms, p99 ≤ 5 ms, ≥ 2{TIMES} faster than scan"
        return target, ours["p50"] <= 2 and ours["p99"] <= 5 and ratio >= 2
    if days is None and big:
        return "p99 ≤ 25 ms", ours["p99"] <= 25
    if days is None:
        return "p50 ≤ 3 ms, p99 ≤ 15 ms", ours["p50"] <= 3 and ours["p99"] <= 15
    limit = 25 if big else 15
    return f"p99 ≤ {limit} ms, ≥ 5{TIMES} faster than scan", ours["p99"] <= limit and ratio >= 5


def _matches(found: dict[str, Any]) -> str:
    """How many entries the queries found: full and partial matches, and the scan's, over how many queries."""
    ours, scan = found["braind"], found["scan"]
    partial = fmt_n(statistics.median(ours["partial_totals"]))
    sampled = "" if scan["queries"] == found["queries"] else f" (over {scan['queries']} queries)"
    scan_hits = fmt_n(statistics.median(scan["totals"]))
    hits = f"median hits {hit_counts(ours['totals'])} + {partial} partial"
    return f"{found['queries']} queries, {hits}, scan {scan_hits}{sampled}"


def recall_row(key: str, found: dict[str, Any], days: int | None, entries: int) -> Row:
    """A recall class in one window: braind, the scan, FTS5; the target of the window at this size."""
    ours, scan, fts = found["braind"], found["scan"], found["fts5"]
    ratio, said = faster(scan["p50"], ours["p50"])
    fts_name = "FTS5 (words OR-ed, BM25)" if fts is not None and fts["match"] == baselines.ANY_WORD else "FTS5"
    base_text = f"scan {latency(scan)}" + (f"; {fts_name} {latency(fts)}" if fts else "")
    ratio_text = f"{said} than scan" + (f"; {faster(fts['p50'], ours['p50'])[1]} than FTS5" if fts else "")
    target, met = recall_target(days, entries, ours, ratio)
    found_at_all = [full + partial for full, partial in zip(ours["totals"], ours["partial_totals"], strict=True)]
    return Row(
        key,
        f"recall, {window_label(days)}, {found['label']}: {_matches(found)}",
        {
            **pick(ours, "p50", "p99", "mean"),
            "hits_median": float(statistics.median(ours["totals"])),
            "hits_min": min(ours["totals"]),
            "hits_max": max(ours["totals"]),
            "partial_median": float(statistics.median(ours["partial_totals"])),
            "found_min": min(found_at_all),
        },
        latency(ours),
        {**pick(scan, "p50", "p99", "mean"), **({"fts5_p50": fts["p50"], "fts5_p99": fts["p99"]} if fts else {})},
        base_text,
        ratio,
        ratio_text,
        target,
        met,
    )


def _build_row(key: str, what: str, ours: Stats, r: dict[str, Any]) -> Row:
    """Cold index or reindex against plain Whoosh's build rate (FTS5's shown for scale)."""
    whoosh, fts = r["whoosh_build"], r["fts5_build"]
    ratio = ours["entries_per_s"] / whoosh["entries_per_s"]
    big = r["entries"] > BIG
    return Row(
        key,
        what,
        pick(ours, "entries_per_s", "seconds", "cores_busy"),
        f"{fmt_n(ours['entries_per_s'])} entries/s ({ours['seconds']:.1f} s, {ours['cores_busy']:.1f} cores busy)",
        pick(whoosh, "entries_per_s", "seconds"),
        f"plain Whoosh {fmt_n(whoosh['entries_per_s'])}/s ({whoosh['seconds']:.1f} s); "
        f"FTS5 {fmt_n(fts['entries_per_s'])}/s",
        ratio,
        f"{ratio:.2f}{TIMES} plain Whoosh",
        f"≥ 5{TIMES} plain Whoosh" + (f", ≥ {fmt_n(MILLION_RATE)} entries/s (1M in ≤ 3 min)" if big else ""),
        ratio >= 5 and (not big or ours["entries_per_s"] >= MILLION_RATE),
    )


def _peak_row(key: str, what: str, ours: Stats, whoosh: float) -> Row:
    """Peak memory of the daemon and its worker processes while indexing, beside plain Whoosh's build."""
    tree, own = ours["tree_peak_rss_mb"], ours["peak_rss_mb"]
    return Row(
        key,
        what,
        {"mb": tree, "daemon_mb": own, "processes": ours["processes"]},
        f"{tree:.0f} MB ({ours['processes']:.0f} processes; the daemon's own VmHWM {own:.0f} MB)",
        {"mb": whoosh},
        f"plain Whoosh build {whoosh:.0f} MB (with the corpus loaded)",
        tree / whoosh,
        f"{tree / whoosh:.2f}{TIMES} plain Whoosh",
        "—",
        None,
    )


def build_rows(r: dict[str, Any]) -> Iterator[Row]:
    """Cold start and reindex: rate, then peak memory."""
    whoosh_mb = r["whoosh_build"]["peak_rss_mb"]
    yield _build_row("cold_index", "cold start: spawn → ready, reconcile + full index", r["cold_start"], r)
    yield _build_row("reindex", "`reindex` over the socket", r["reindex"], r)
    yield _peak_row("peak_rss_cold", "peak RSS during the cold start", r["cold_start"], whoosh_mb)
    yield _peak_row("peak_rss_reindex", "peak RSS during `reindex`", r["reindex"], whoosh_mb)


def recall_rows(r: dict[str, Any]) -> Iterator[Row]:
    """The round-trip floor, then every recall class in every window."""
    floor = r["round_trip"]
    yield _plain(
        "round_trip",
        "round trip: `tools`, a static answer (the floor of every call)",
        pick(floor, "p50", "p99", "mean"),
        latency(floor),
        "—",
        None,
    )
    for key, days, found in recall_figures(r):
        yield recall_row(key, found, days, r["entries"])


def recall_figures(r: dict[str, Any]) -> Iterator[tuple[str, int | None, dict[str, Any]]]:
    """Each recall figure of a run: its row key, its window in days (None: all of memory) and what was measured."""
    for name, found in r["recall"].items():
        window, cls = name.split("/")
        days = None if window == "all" else int(window.rstrip("d"))
        yield f"recall_{window}_{cls.replace('-', '_')}", days, found


def throughput_rows(r: dict[str, Any]) -> Iterator[Row]:
    """Recalls per second with 1 and 8 client processes, against the scan in as many processes."""
    for clients in (1, 8):
        ours, scan = r["throughput"][f"braind_{clients}"], r["throughput"][f"scan_{clients}"]
        ratio = ours["per_s"] / scan["per_s"]
        yield Row(
            f"throughput_{clients}",
            f"throughput, {clients} client process{'es' if clients > 1 else ''}, 30-day recall (`days: 30`)",
            pick(ours, "per_s", "p50", "p99"),
            f"{fmt_n(ours['per_s'])}/s · {latency(ours)}",
            pick(scan, "per_s", "p50", "p99"),
            f"scan {fmt_n(scan['per_s'])}/s · {latency(scan)}",
            ratio,
            f"{ratio:.1f}{TIMES} the scan's rate",
            "≥ 1,000 recalls/s, p99 ≤ 20 ms" if clients == 8 else "—",
            ours["per_s"] >= 1000 and ours["p99"] <= 20 if clients == 8 else None,
        )


def under_writes_rows(r: dict[str, Any]) -> Iterator[Row]:
    """Recall and inject latency while writers note as fast as they can: they must keep answering."""
    found = r.get("under_writes")
    if not found:
        return
    writers = found["note"]
    load_text = f"{writers['clients']:.0f} writer processes, {fmt_n(writers['per_s'])} notes/s"
    recall, inject = found["braind"], found["inject"]
    figure = f"recall, 30-day window (`days: 30`), under write load ({load_text})"
    yield _rate_row("under_writes_braind", figure, recall, "p99 ≤ 10 ms", recall["p99"] <= 10)
    figure = f"`inject`, steady session, under write load ({load_text})"
    yield _rate_row("under_writes_inject", figure, inject, "—", None)
    figure, target = "`brain_note` reply under that load (its writers)", "p99 ≤ 30 ms, ≥ 200 notes/s in total"
    yield _rate_row("under_writes_note", figure, writers, target, writers["p99"] <= 30 and writers["per_s"] >= 200)


def _rate_row(key: str, figure: str, ours: Stats, target: str, met: bool | None) -> Row:
    """Calls per second and latency of one kind of client under load, with no baseline."""
    return _plain(
        key, figure, pick(ours, "per_s", "p50", "p99"), f"{fmt_n(ours['per_s'])}/s · {latency(ours)}", target, met
    )


def _plain(key: str, figure: str, ours: Stats, text: str, target: str, met: bool | None) -> Row:
    """A row with no baseline."""
    return Row(key, figure, ours, text, None, "—", None, "—", target, met)


def note_rows(r: dict[str, Any]) -> Iterator[Row]:
    """brain_note reply latency, and whether each note was recallable on reply."""
    note = r["note"]
    yield _plain(
        "note_reply",
        "`brain_note` reply",
        pick(note, "p50", "p99", "mean"),
        latency(note),
        "p99 ≤ 20 ms",
        note["p99"] <= 20,
    )
    missed = f"{note['misses']:.0f} of {note['notes']:.0f} notes not found by a recall right after the reply"
    yield _plain(
        "note_recallable",
        "note → recallable",
        pick(note, "misses", "notes"),
        missed,
        "recallable on reply (0 misses)",
        note["misses"] == 0,
    )


def editor_rows(r: dict[str, Any]) -> Iterator[Row]:
    """An editor's append to today's diary until recall finds it."""
    editor = r["editor"]
    text = f"{latency(editor)} · {editor['misses']:.0f} missed"
    yield _plain(
        "editor_recallable",
        "editor append to today's diary → recallable (polled)",
        pick(editor, "p50", "p99", "max", "misses"),
        text,
        "p99 ≤ 1 s",
        editor["p99"] <= 1000 and editor["misses"] == 0,
    )


def inject_rows(r: dict[str, Any]) -> Iterator[Row]:
    """inject for a steady session and for a new session each time."""
    steady, new = r["inject"]["steady"], r["inject"]["new"]
    yield _plain(
        "inject_steady",
        f"`inject`, steady session ({r['inject']['bytes']:.0f} bytes)",
        pick(steady, "p50", "p99", "mean"),
        latency(steady),
        "p99 ≤ 5 ms",
        steady["p99"] <= 5,
    )
    yield _plain(
        "inject_new", "`inject`, new session each time", pick(new, "p50", "p99", "mean"), latency(new), "—", None
    )


def _rest_row(key: str, what: str, rest: Stats, entries: int) -> Row:
    """Resident memory at rest, with its heap and mapped-file parts."""
    other = rest["rss_mb"] - rest["anon_mb"] - rest["file_mb"]
    text = (
        f"{rest['rss_mb']:.0f} MB (daemon heap {rest['anon_mb']:.0f} MB, mapped files {rest['file_mb']:.0f} MB; "
        f"child processes {other:.0f} MB)"
    )
    ours = pick(rest, "rss_mb", "anon_mb", "file_mb")
    limit = 300 if entries > BIG else 150
    return _plain(key, what, ours, text, f"≤ {limit} MB", rest["rss_mb"] <= limit)


def resource_rows(r: dict[str, Any]) -> Iterator[Row]:
    """RSS at rest, after the cold start and after the workload, and idle CPU."""
    idle = r["idle"]
    yield _rest_row("rss_rest", "RSS at rest after the cold start (VmRSS)", r["rest"], r["entries"])
    yield _rest_row("rss_after_workload", "RSS at rest after the whole workload (reindex included)", idle, r["entries"])
    yield _plain(
        "idle_cpu",
        f"idle CPU over {idle['seconds']:.0f} s (all threads)",
        {"percent": idle["cpu_percent"]},
        f"{idle['cpu_percent']:.2f} % of one core",
        "< 1 % of one core",
        idle["cpu_percent"] < 1,
    )


def idle_connection_rows(r: dict[str, Any]) -> Iterator[Row]:
    """What the daemon held of many idle connections and what that cost it; one more client's recalls meanwhile."""
    found = r["idle_connections"]
    before, during = found["without"], found["with"]
    held = (
        f"{fmt_n(found['held'])} of {fmt_n(found['connections'])} held open (refused or closed: "
        f"{_reasons(found['reasons'])}); "
        f"{found['answered']:.0f} answered a request afterwards"
    )
    cost = f"daemon {during['rss_mb']:.0f} MB, {during['threads']:.0f} threads, {during['fds']:.0f} fds"
    all_held = found["held"] == found["answered"] == found["connections"]
    rss_ratio = during["rss_mb"] / before["rss_mb"]
    yield Row(
        "idle_connections",
        f"{fmt_n(found['connections'])} idle connections (default `server.max_connections`)",
        {**pick(found, "connections", "held", "refused", "answered"), **during},
        f"{held}; {cost}",
        dict(before),
        f"without them: {before['rss_mb']:.0f} MB, {before['threads']:.0f} threads, {before['fds']:.0f} fds",
        rss_ratio,
        f"{rss_ratio:.2f}{TIMES} the RSS without",
        f"every one held; RSS ≤ 1.1{TIMES} without",
        all_held and rss_ratio <= 1.1,
    )
    yield _idle_recall_row(found["recall_without"], found["recall_with"], found["connections"])


def _reasons(counts: dict[str, int]) -> str:
    """Counts by reason, as `936 busy, 5 closed`, or `none`."""
    return ", ".join(f"{n} {why}" for why, n in sorted(counts.items())) or "none"


def _idle_recall_row(without: dict[str, Any], with_idle: dict[str, Any], count: float) -> Row:
    """One more client's recalls with the idle connections open, against the same client's without them."""
    figure = f"recall of all of memory by one more client, {fmt_n(count)} idle connections open"
    calls = with_idle["served"] + with_idle["refused"]
    refused = f"{with_idle['refused']:.0f} of {calls:.0f} calls refused ({_reasons(with_idle['reasons'])})"
    target = f"served every call; p50 ≤ 1.5{TIMES}, p99 ≤ 2{TIMES} without"
    if not with_idle["served"]:
        ours = pick(with_idle, "served", "refused")
        text = f"{refused}; the same client without them {latency(without)}"
        return Row("idle_connections_recall", figure, ours, text, None, "—", None, "—", target, False)
    ratio, said = faster(without["p50"], with_idle["p50"])
    met = (
        not with_idle["refused"] and with_idle["p50"] <= 1.5 * without["p50"] and with_idle["p99"] <= 2 * without["p99"]
    )
    return Row(
        "idle_connections_recall",
        figure,
        pick(with_idle, "p50", "p99", "served", "refused"),
        f"{latency(with_idle)} · {refused}",
        pick(without, "p50", "p99"),
        f"without them {latency(without)}",
        ratio,
        f"{said} than without",
        target,
        bool(met),
    )


def busy_day_rows(r: dict[str, Any]) -> Iterator[Row]:
    """Note, inject right after it and recall on each busy day, against the same calls on an ordinary day."""
    days = r["busy_days"]
    ordinary = days[str(BUSY_BASELINE)]
    recall_limit = 25 if r["entries"] > BIG else 15
    targets = {
        "note": ("p99 ≤ 20 ms", 20.0),
        "inject": ("p99 ≤ 5 ms", 5.0),
        "recall": (f"p99 ≤ {recall_limit} ms", recall_limit),
    }
    calls = {
        "note": "`brain_note`",
        "inject": "`inject` right after a note (timed alone)",
        "recall": "recall of all of memory",
    }
    for name, day in days.items():
        if name == str(BUSY_BASELINE):
            continue
        for kind, what in calls.items():
            ours, base = day[kind], ordinary[kind]
            ratio = ours["p99"] / base["p99"]
            target, limit = targets[kind]
            yield Row(
                f"busy_day_{name}_{kind}",
                f"busy day, {fmt_n(day['entries'])} entries in today's diary (ready in {day['ready_s']:.1f} s): {what}",
                pick(ours, "p50", "p95", "p99"),
                tail(ours),
                pick(base, "p50", "p95", "p99"),
                f"a day of {BUSY_BASELINE} entries {tail(base)}",
                ratio,
                f"p99 {ratio:.1f}{TIMES} the ordinary day's",
                target + ", no cliff",
                ours["p99"] <= limit,
            )


def soak_rows(r: dict[str, Any]) -> Iterator[Row]:
    """The mixed soak: the last minute's throughput against the first, RSS at the end against after warm-up."""
    found = r.get("soak")
    if not found:
        return
    minute = "minute" if found["warm_up_s"] == soak.WARM_UP_S else f"{found['warm_up_s']:g} s"
    ratio = found["last_per_s"] / found["first_per_s"]
    errors = sum(found["errors"].values())
    mix = "30 % notes, 50 % recall, 10 % inject, 10 % MEMORY.md appends"
    what = f"mixed soak, {found['clients']:.0f} clients, {found['seconds']:g} s ({mix})"
    yield Row(
        "soak_throughput",
        what,
        {**pick(found, "per_s", "last_per_s", "calls"), "errors": float(errors)},
        f"last {minute} {fmt_n(found['last_per_s'])} calls/s; {fmt_n(found['per_s'])}/s overall, {errors} errors",
        {"per_s": found["first_per_s"]},
        f"first {minute} {fmt_n(found['first_per_s'])} calls/s",
        ratio,
        f"{ratio:.2f}{TIMES} the first {minute}",
        f"≥ 0.8{TIMES} the first {minute}, no errors",
        ratio >= 0.8 and errors == 0,
    )
    growth = found["rss_end_mb"] / found["rss_warm_mb"]
    yield Row(
        "soak_rss",
        "daemon RSS over the soak",
        {"mb": found["rss_end_mb"], "max_mb": found["rss_max_mb"]},
        f"{found['rss_end_mb']:.0f} MB at the end (at most {found['rss_max_mb']:.0f} MB)",
        {"mb": found["rss_warm_mb"]},
        f"{found['rss_warm_mb']:.0f} MB after warm-up ({found['rss_start_mb']:.0f} MB at the start)",
        growth,
        f"{growth:.2f}{TIMES} after warm-up",
        f"flat after warm-up (≤ 1.1{TIMES})",
        growth <= 1.1,
    )
    by_kind = found["latency"]
    yield _plain(
        "soak_latency",
        "latency of each kind of call over the soak",
        {f"{kind}_{p}": by_kind[kind][p] for kind in by_kind for p in ("p50", "p99")},
        "; ".join(f"{soak.LABELS[kind]} {latency(by_kind[kind])}" for kind in by_kind),
        "—",
        None,
    )


SECTIONS: tuple[Callable[[dict[str, Any]], Iterator[Row]], ...] = (
    build_rows,
    recall_rows,
    throughput_rows,
    under_writes_rows,
    idle_connection_rows,
    note_rows,
    editor_rows,
    inject_rows,
    busy_day_rows,
    soak_rows,
    resource_rows,
)


def rows(result: dict[str, Any]) -> list[Row]:
    """Every row of one corpus size, in table order."""
    return [row for section in SECTIONS for row in section(result)]
