"""The recall-quality figures: hit@k overall and per category for braind and the baselines, latency, reports."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.figures import TIMES, fmt_ms, fmt_n
from bench.locomo import CATEGORIES
from bench.proc import hardware_line
from bench.quality import KS, LIMIT, SYSTEMS
from bench.stats import percentile

NAMES = {
    "braind": "braind",
    "fts5": "SQLite FTS5 BM25, words OR-ed",
    "scan": "diary plugin scan, substring AND",
}
PUBLISHED = (("basic-memory", 0.733), ("mem0 (local)", 0.791))
Rates = dict[str, float | None]


def rates(ranks: Sequence[int | None]) -> Rates:
    """hit@1, hit@5 and hit@10: the share of questions with an evidence turn in the first k hits."""
    n = len(ranks)
    return {f"hit@{k}": sum(1 for r in ranks if r is not None and r <= k) / n if n else None for k in KS}


def _ranks(questions: Sequence[dict[str, Any]], system: str) -> list[int | None]:
    """The found rank of each question for one system."""
    return [q["ranks"][system] for q in questions]


def by_category(questions: Sequence[dict[str, Any]], system: str) -> dict[str, dict[str, Any]]:
    """Question count and hit rates of every category (the five always, any other that occurs)."""
    found: dict[str, dict[str, Any]] = {}
    for category in sorted(set(CATEGORIES) | {q["category"] for q in questions}):
        asked = [q for q in questions if q["category"] == category]
        found[str(category)] = {"questions": len(asked), **rates(_ranks(asked, system))}
    return found


def latency(questions: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Recall latency over the socket as the client saw it: count, mean, p50, p95, max (ms)."""
    ordered = sorted(q["ms"] for q in questions)
    return {
        "n": float(len(ordered)),
        "mean": statistics.fmean(ordered),
        "p50": percentile(ordered, 50),
        "p95": percentile(ordered, 95),
        "max": ordered[-1],
    }


def system_figures(questions: Sequence[dict[str, Any]], system: str) -> dict[str, Any]:
    """One system's hit rates over every question and per category."""
    every = {"questions": len(questions), **rates(_ranks(questions, system))}
    return {"all": every, "categories": by_category(questions, system)}


def figures(questions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Every figure of a run over all its conversations."""
    systems = {s: system_figures(questions, s) for s in SYSTEMS}
    ours, fts = systems["braind"]["all"]["hit@5"], systems["fts5"]["all"]["hit@5"]
    return {
        "questions": len(questions),
        "without_evidence": sum(1 for q in questions if not q["evidence"]),
        "systems": systems,
        "ratio_hit5_braind_fts5": ours / fts if ours is not None and fts else None,
        "latency_ms": latency(questions),
        "published": [{"system": name, "hit@5": value, "measured_here": False} for name, value in PUBLISHED],
    }


def per_conversation(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each conversation's setup with every system's hit rates on its own questions."""
    return [{**r["setup"], **{s: rates(_ranks(r["questions"], s)) for s in SYSTEMS}} for r in results]


def fmt_rate(value: float | None) -> str:
    """A hit rate with three decimals, or a dash when there was no question."""
    return "—" if value is None else f"{value:.3f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def overall_table(found: dict[str, Any]) -> list[str]:
    """hit@1/5/10 of braind and the baselines, then the published figures."""
    rows = [[NAMES[s], *(fmt_rate(found["systems"][s]["all"][f"hit@{k}"]) for k in KS)] for s in SYSTEMS]
    for published in found["published"]:
        label = f"{published['system']}: published figure, not measured here"
        rows.append([label, "—", fmt_rate(published["hit@5"]), "—"])
    return _table(["system", "hit@1", "hit@5", "hit@10"], rows)


def ratio_line(found: dict[str, Any]) -> str:
    """braind's hit@5 over FTS5's."""
    ratio = found["ratio_hit5_braind_fts5"]
    return "braind / FTS5 at hit@5: " + ("— (FTS5 found nothing)" if ratio is None else f"{ratio:.2f}{TIMES}")


def category_table(found: dict[str, Any]) -> list[str]:
    """Per category and over all: the question count, braind's hit@1/5/10 and the baselines' hit@5."""
    keys = [*found["systems"]["braind"]["categories"], "all"]
    header = ["category", "questions", "braind hit@1", "braind hit@5", "braind hit@10", "FTS5 hit@5", "scan hit@5"]
    return _table(header, [_category_row(found["systems"], key) for key in keys])


def _category_row(systems: dict[str, Any], key: str) -> list[str]:
    """One category's row ("all" for every question)."""
    ours = _of(systems, "braind", key)
    label = key if key == "all" else f"{key} {CATEGORIES.get(int(key), 'other')}"
    baselines = [fmt_rate(_of(systems, s, key)["hit@5"]) for s in ("fts5", "scan")]
    return [label, fmt_n(ours["questions"]), *(fmt_rate(ours[f"hit@{k}"]) for k in KS), *baselines]


def _of(systems: dict[str, Any], system: str, key: str) -> dict[str, Any]:
    """One system's figures for a category, or over every question for "all"."""
    found: dict[str, Any] = systems[system]["all"] if key == "all" else systems[system]["categories"][key]
    return found


def conversation_table(conversations: Sequence[dict[str, Any]]) -> list[str]:
    """Per conversation: its size and span, and each system's hit@5."""
    rows = [
        [
            c["file"],
            f"{fmt_n(c['entries'])} ({fmt_n(c['indexed'])} indexed)",
            fmt_n(c["questions"]),
            f"{c['days']} ({c['first']} … {c['last']})",
            *(fmt_rate(c[s]["hit@5"]) for s in SYSTEMS),
        ]
        for c in conversations
    ]
    header = ["conversation", "entries", "questions", "days", "braind hit@5", "FTS5 hit@5", "scan hit@5"]
    return _table(header, rows)


def latency_table(found: dict[str, Any]) -> list[str]:
    """braind's recall latency over the socket."""
    ms = found["latency_ms"]
    row = [f"`brain_recall`, {fmt_n(ms['n'])} questions", *(fmt_ms(ms[k]) for k in ("mean", "p50", "p95", "max"))]
    return _table(["recall latency, client side", "mean", "p50", "p95", "max"], [row])


def _intro(found: dict[str, Any], conversations: Sequence[dict[str, Any]], scan_days: int) -> str:
    """What was measured, in words."""
    files = ", ".join(c["file"] for c in conversations)
    entries = sum(c["entries"] for c in conversations)
    return (
        f"{len(conversations)} conversations ({files}): {fmt_n(entries)} diary entries, "
        f"{fmt_n(found['questions'])} questions. Each conversation is its own memory root and daemon, its last "
        f"session dated yesterday. braind: `brain_recall` over the socket, each question as written, limit {LIMIT}, "
        f"the daemon's default window ({_window(scan_days)}). Baselines on the same entries, all of "
        "each conversation: SQLite FTS5 BM25 (default `unicode61` tokenizer, the question's words quoted and "
        "OR-ed) and the diary plugin's scan (every whitespace-separated word as a case-insensitive substring, "
        "newest first). A question is found at k when one of its evidence turns is among the first k hits"
        + _without_evidence(found["without_evidence"])
    )


def _window(scan_days: int) -> str:
    """The daemon's default recall window in words."""
    return "all of memory" if scan_days == 0 else f"`recall.scan_days` {scan_days}: the last {scan_days} days"


def _without_evidence(count: int) -> str:
    """The end of the intro: how many questions cannot be found because they name no turn."""
    if count == 0:
        return "."
    said = "questions name no evidence and count" if count > 1 else "question names no evidence and counts"
    return f"; {count} {said} as not found."


def markdown(doc: dict[str, Any]) -> str:
    """The whole report: machine line, setup, then the tables."""
    found, conversations = doc["figures"], doc["conversations"]
    parts = [
        "## braind recall quality (LoCoMo format)",
        hardware_line(doc["hardware"]),
        _intro(found, conversations, doc["scan_days"]),
        "\n".join(overall_table(found)),
        ratio_line(found),
        "\n".join(category_table(found)),
        "\n".join(conversation_table(conversations)),
        "\n".join(latency_table(found)),
    ]
    return "\n\n".join(parts) + "\n"


def document(hardware: dict[str, Any], results: Sequence[dict[str, Any]], scan_days: int) -> dict[str, Any]:
    """The JSON report: the machine, every figure, each conversation, and each question's ranks."""
    questions = [q for r in results for q in r["questions"]]
    return {
        "hardware": hardware,
        "limit": LIMIT,
        "scan_days": scan_days,
        "figures": figures(questions),
        "conversations": per_conversation(results),
        "questions": questions,
    }


def write(out: Path, stamp: str, doc: dict[str, Any]) -> tuple[Path, Path]:
    """Write quality-<stamp>.md and .json into out; returns both paths."""
    md, js = out / f"quality-{stamp}.md", out / f"quality-{stamp}.json"
    md.write_text(markdown(doc), encoding="utf-8")
    js.write_text(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    return md, js
