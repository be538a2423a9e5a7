"""The results as a Markdown table per corpus size, a scaling table, and a JSON file."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import soak
from bench.figures import fmt_ms, fmt_n, latency, pick, window_label
from bench.proc import hardware_line
from bench.rows import recall_figures, rows


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
    return "\n".join(lines) + "\n" + (soak_table(result["soak"]) if result.get("soak") else "")


def soak_table(found: dict[str, Any]) -> str:
    """The soak over time: throughput, the mix, errors, the worst p99 and the daemon's RSS, a row per few windows."""
    merged = soak.table_windows(found["windows"])
    lines = [
        "",
        f"#### Mixed soak over time ({found['clients']:.0f} clients, {found['seconds']:g} s; "
        f"rows of {merged[0]['seconds']:g} s)",
        "",
        "| from | calls/s | notes | recalls | injects | MEMORY.md appends | errors | worst p99 | RSS at the end |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for w in merged:
        counts = " | ".join(fmt_n(w[kind]) for kind in (*soak.MIX, "errors"))
        lines.append(
            f"| {w['start_s']:g} s | {fmt_n(w['per_s'])} | {counts} | {fmt_ms(w['p99'])} | {w['rss_mb']:.0f} MB |"
        )
    return "\n".join(lines) + "\n"


def scaling(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every recall figure and steady `inject` at each corpus size of the run (p50, p99): how cost grows."""
    figures: dict[str, dict[str, Any]] = {}
    for r in results:
        size = str(r["entries"])
        for key, days, found in recall_figures(r):
            figure = figures.setdefault(key, {"key": key, "figure": f"recall, {window_label(days)}, {found['label']}"})
            figure.setdefault("sizes", {})[size] = pick(found["braind"], "p50", "p99")
        inject = figures.setdefault("inject_steady", {"key": "inject_steady", "figure": "`inject`, steady session"})
        inject.setdefault("sizes", {})[size] = pick(r["inject"]["steady"], "p50", "p99")
    return list(figures.values())


def scaling_table(results: list[dict[str, Any]]) -> str:
    """The scaling figures as one Markdown table, a column per corpus size."""
    sizes = [str(r["entries"]) for r in results]
    lines = [
        "### Scaling: p50 · p99 by corpus size",
        "",
        "| figure | " + " | ".join(f"{fmt_n(int(n))} entries" for n in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for figure in scaling(results):
        cells = [latency(figure["sizes"][n]) if n in figure["sizes"] else "—" for n in sizes]
        lines.append(f"| {figure['figure']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown(hardware: dict[str, Any], results: list[dict[str, Any]]) -> str:
    """The whole report: hardware line, one table per corpus size, then the scaling table."""
    head = f"## braind benchmark\n\n{hardware_line(hardware)}\n"
    note = (
        "Targets are stated for 100k entries on a 2-core machine, with their own for larger corpora (1M) where "
        "they differ. Latencies are measured by the client process over the Unix socket; scan and FTS5 run in "
        "the client process on the same corpus.\n"
    )
    return "\n".join([head, note, *(table(r) for r in results), scaling_table(results)])


def document(hardware: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON report: hardware, the raw measurements and the rows of each corpus size, and the scaling figures."""
    return {
        "hardware": hardware,
        "runs": [{**r, "rows": [asdict(row) for row in rows(r)]} for r in results],
        "scaling": scaling(results),
    }


def write(out: Path, stamp: str, hardware: dict[str, Any], results: list[dict[str, Any]]) -> tuple[Path, Path]:
    """Write results-<stamp>.md and .json into out; returns both paths."""
    md, js = out / f"results-{stamp}.md", out / f"results-{stamp}.json"
    md.write_text(markdown(hardware, results), encoding="utf-8")
    js.write_text(
        json.dumps(document(hardware, results), indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"
    )
    return md, js
