"""The results as rows (figure, braind, baseline, ratio, target, met), a Markdown table and a JSON file."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.proc import hardware_line

Stats = dict[str, float]
TIMES, DASH = "\u00d7", "\u2013"  # multiplication sign, en dash


@dataclass(frozen=True)
class Row:
    """One figure of braind beside its baseline, with the target from the issue."""

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


def faster(baseline_ms: float, ours_ms: float) -> tuple[float, str]:
    """How many times faster braind is (baseline / braind), and that in words."""
    ratio = baseline_ms / ours_ms if ours_ms > 0 else float("inf")
    return ratio, f"{ratio:.1f}{TIMES} faster" if ratio >= 1 else f"{1 / ratio:.1f}{TIMES} slower"


def _pick(d: dict[str, Any], *keys: str) -> Stats:
    """The numeric summary of a distribution (no lists), for the JSON rows."""
    return {k: float(d[k]) for k in keys}


def _hits(totals: list[int]) -> str:
    """The median and range of the hit totals of a query class."""
    low, high = min(totals), max(totals)
    spread = "" if low == high else f" ({fmt_n(low)}{DASH}{fmt_n(high)})"
    return fmt_n(statistics.median(totals)) + spread


def recall_row(key: str, found: dict[str, Any], days: int) -> Row:
    """A recall class in one window: braind, the scan, FTS5; target for 30 or 365 days."""
    ours, scan, fts = found["braind"], found["scan"], found["fts5"]
    ratio, said = faster(scan["p50"], ours["p50"])
    base_text = f"scan {latency(scan)}" + (f"; FTS5 {latency(fts)}" if fts else "")
    ratio_text = f"{said} than scan" + (f"; {faster(fts['p50'], ours['p50'])[1]} than FTS5" if fts else "")
    if days == 30:
        target = f"p50 ≤ 2 ms, p99 ≤ 5 ms, ≥ 2{TIMES} faster than scan"
        met = ours["p50"] <= 2 and ours["p99"] <= 5 and ratio >= 2
    else:
        target = f"p99 ≤ 15 ms, ≥ 5{TIMES} faster than scan"
        met = ours["p99"] <= 15 and ratio >= 5
    scan_hits = fmt_n(statistics.median(scan["totals"]))
    hits = f"{found['queries']} queries, median hits {_hits(ours['totals'])}, scan {scan_hits}"
    window = "30-day window (default)" if days == 30 else f"{days}-day window"
    return Row(
        key,
        f"recall, {window}, {found['label']}: {hits}",
        {
            **_pick(ours, "p50", "p99", "mean"),
            "hits_median": float(statistics.median(ours["totals"])),
            "hits_min": min(ours["totals"]),
            "hits_max": max(ours["totals"]),
        },
        latency(ours),
        _pick(scan, "p50", "p99", "mean"),
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
    return Row(
        key,
        what,
        _pick(ours, "entries_per_s", "seconds", "cores_busy"),
        f"{fmt_n(ours['entries_per_s'])} entries/s ({ours['seconds']:.1f} s, {ours['cores_busy']:.1f} cores busy)",
        _pick(whoosh, "entries_per_s", "seconds"),
        f"plain Whoosh {fmt_n(whoosh['entries_per_s'])}/s ({whoosh['seconds']:.1f} s); "
        f"FTS5 {fmt_n(fts['entries_per_s'])}/s",
        ratio,
        f"{ratio:.2f}{TIMES} plain Whoosh",
        f"≥ 2,500 entries/s, ≥ 2.5{TIMES} plain Whoosh",
        ours["entries_per_s"] >= 2500 and ratio >= 2.5,
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
        _pick(floor, "p50", "p99", "mean"),
        latency(floor),
        "—",
        None,
    )
    for name, found in r["recall"].items():
        window, cls = name.split("/")
        days = int(window.rstrip("d"))
        yield recall_row(f"recall_{days}d_{cls.replace('-', '_')}", found, days)


def throughput_rows(r: dict[str, Any]) -> Iterator[Row]:
    """Recalls per second with 1 and 8 client processes, against the scan in as many processes."""
    for clients in (1, 8):
        ours, scan = r["throughput"][f"braind_{clients}"], r["throughput"][f"scan_{clients}"]
        ratio = ours["per_s"] / scan["per_s"]
        yield Row(
            f"throughput_{clients}",
            f"throughput, {clients} client process{'es' if clients > 1 else ''}, 30-day recall",
            _pick(ours, "per_s", "p50", "p99"),
            f"{fmt_n(ours['per_s'])}/s · {latency(ours)}",
            _pick(scan, "per_s", "p50", "p99"),
            f"scan {fmt_n(scan['per_s'])}/s · {latency(scan)}",
            ratio,
            f"{ratio:.1f}{TIMES} the scan's rate",
            "≥ 500 recalls/s, p99 ≤ 20 ms" if clients == 8 else "—",
            ours["per_s"] >= 500 and ours["p99"] <= 20 if clients == 8 else None,
        )


def under_writes_rows(r: dict[str, Any]) -> Iterator[Row]:
    """Recall and inject latency while writers note as fast as they can: they must keep answering."""
    found = r.get("under_writes")
    if not found:
        return
    writers = found["note"]
    load_text = f"{writers['clients']:.0f} writer processes, {fmt_n(writers['per_s'])} notes/s"
    for kind, figure in (("braind", "recall, 30-day window"), ("inject", "`inject`, steady session")):
        ours = found[kind]
        yield _plain(
            f"under_writes_{kind}",
            f"{figure}, under write load ({load_text})",
            _pick(ours, "per_s", "p50", "p99"),
            f"{fmt_n(ours['per_s'])}/s · {latency(ours)}",
            "—",
            None,
        )
    yield _plain(
        "under_writes_note",
        "`brain_note` reply under that load (its writers)",
        _pick(writers, "per_s", "p50", "p99"),
        f"{fmt_n(writers['per_s'])}/s · {latency(writers)}",
        "—",
        None,
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
        _pick(note, "p50", "p99", "mean"),
        latency(note),
        "p99 ≤ 20 ms",
        note["p99"] <= 20,
    )
    missed = f"{note['misses']:.0f} of {note['notes']:.0f} notes not found by a recall right after the reply"
    yield _plain(
        "note_recallable",
        "note → recallable",
        _pick(note, "misses", "notes"),
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
        _pick(editor, "p50", "p99", "max", "misses"),
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
        _pick(steady, "p50", "p99", "mean"),
        latency(steady),
        "p99 ≤ 5 ms",
        steady["p99"] <= 5,
    )
    yield _plain(
        "inject_new", "`inject`, new session each time", _pick(new, "p50", "p99", "mean"), latency(new), "—", None
    )


def _rest_row(key: str, what: str, rest: Stats) -> Row:
    """Resident memory at rest, with its heap and mapped-file parts."""
    other = rest["rss_mb"] - rest["anon_mb"] - rest["file_mb"]
    text = (
        f"{rest['rss_mb']:.0f} MB (daemon heap {rest['anon_mb']:.0f} MB, mapped files {rest['file_mb']:.0f} MB; "
        f"child processes {other:.0f} MB)"
    )
    ours = _pick(rest, "rss_mb", "anon_mb", "file_mb")
    return _plain(key, what, ours, text, "≤ 150 MB", rest["rss_mb"] <= 150)


def resource_rows(r: dict[str, Any]) -> Iterator[Row]:
    """RSS at rest, after the cold start and after the workload, and idle CPU."""
    idle = r["idle"]
    yield _rest_row("rss_rest", "RSS at rest after the cold start (VmRSS)", r["rest"])
    yield _rest_row("rss_after_workload", "RSS at rest after the whole workload (reindex included)", idle)
    yield _plain(
        "idle_cpu",
        f"idle CPU over {idle['seconds']:.0f} s (all threads)",
        {"percent": idle["cpu_percent"]},
        f"{idle['cpu_percent']:.2f} % of one core",
        "< 1 % of one core",
        idle["cpu_percent"] < 1,
    )


SECTIONS: tuple[Callable[[dict[str, Any]], Iterator[Row]], ...] = (
    build_rows,
    recall_rows,
    throughput_rows,
    under_writes_rows,
    note_rows,
    editor_rows,
    inject_rows,
    resource_rows,
)


def rows(result: dict[str, Any]) -> list[Row]:
    """Every row of one corpus size, in table order."""
    return [row for section in SECTIONS for row in section(result)]


def _met(met: bool | None) -> str:
    """yes, no or a dash."""
    return "—" if met is None else "yes" if met else "**no**"


def _heading(result: dict[str, Any]) -> str:
    """The corpus a table was measured on."""
    c = result["corpus"]
    return (
        f"### {fmt_n(result['entries'])} entries ({result['plan']} run)\n\n"
        f"{c['days']} days ({c['first']} … {c['last']}), {c['files']} diary files, {c['bytes'] / 1e6:.1f} MB; "
        f"{fmt_n(c['entries_30d'])} entries in the last 30 days, {fmt_n(c['entries_365d'])} in the last 365."
    )


def table(result: dict[str, Any]) -> str:
    """The Markdown table of one corpus size."""
    lines = [
        _heading(result),
        "",
        "| figure | braind | baseline | ratio | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows(result):
        cells = (row.figure, row.braind_text, row.baseline_text, row.ratio_text, row.target, _met(row.met))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown(hardware: dict[str, Any], results: list[dict[str, Any]]) -> str:
    """The whole report: hardware line, then one table per corpus size."""
    head = f"## braind benchmark\n\n{hardware_line(hardware)}\n"
    note = (
        "Targets are the issue's, stated for 100k entries on a 2-core machine. Latencies are measured by the "
        "client process over the Unix socket; scan and FTS5 run in the client process on the same corpus.\n"
    )
    return "\n".join([head, note, *(table(r) for r in results)])


def document(hardware: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON report: hardware, the raw measurements and the rows of each corpus size."""
    return {
        "hardware": hardware,
        "runs": [{**r, "rows": [asdict(row) for row in rows(r)]} for r in results],
    }


def write(out: Path, stamp: str, hardware: dict[str, Any], results: list[dict[str, Any]]) -> tuple[Path, Path]:
    """Write results-<stamp>.md and .json into out; returns both paths."""
    md, js = out / f"results-{stamp}.md", out / f"results-{stamp}.json"
    md.write_text(markdown(hardware, results), encoding="utf-8")
    js.write_text(
        json.dumps(document(hardware, results), indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"
    )
    return md, js
