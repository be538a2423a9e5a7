"""The benchmark suite still works: a smoke run writes a complete report. No timing is asserted."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
CLASSES = ("2w_common", "2w_medium", "2w_rare", "3w_common", "3w_medium", "3w_rare", "2w_chinese")
FIGURES = (
    "cold_index",
    "reindex",
    "peak_rss_cold",
    "peak_rss_reindex",
    "round_trip",
    *(f"recall_{days}d_{cls}" for days in (30, 365) for cls in CLASSES),
    "throughput_1",
    "throughput_8",
    "under_writes_braind",
    "under_writes_inject",
    "under_writes_note",
    "note_reply",
    "note_recallable",
    "editor_recallable",
    "inject_steady",
    "inject_new",
    "rss_rest",
    "rss_after_workload",
    "idle_cpu",
)
HEADER = "| figure | braind | baseline | ratio | target | met |"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output directory of one `python -m bench --smoke` run (the real daemon on a tiny corpus)."""
    out = tmp_path_factory.mktemp("bench")
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return out


def only(out: Path, pattern: str) -> Path:
    """The one file of a run matching a glob."""
    found = list(out.glob(pattern))
    assert len(found) == 1, found
    return found[0]


def is_number(value: Any) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def rows(out: Path) -> dict[str, dict[str, Any]]:
    """The rows of the smoke run's only corpus size, by key."""
    document = json.loads(only(out, "results-*.json").read_text(encoding="utf-8"))
    assert len(document["runs"]) == 1
    return {row["key"]: row for row in document["runs"][0]["rows"]}


def test_the_json_has_every_figure(smoke: Path) -> None:
    assert sorted(rows(smoke)) == sorted(FIGURES)


def test_every_figure_has_numeric_values(smoke: Path) -> None:
    for key, row in rows(smoke).items():
        assert row["braind"], key
        assert all(is_number(v) for v in row["braind"].values()), (key, row["braind"])
        if row["baseline"] is not None:
            assert all(is_number(v) for v in row["baseline"].values()), (key, row["baseline"])
            assert is_number(row["ratio"]), (key, row["ratio"])
        assert row["met"] in (True, False, None), key


def test_recall_rows_compare_with_the_scan_and_report_hits(smoke: Path) -> None:
    for key, row in rows(smoke).items():
        if key.startswith("recall_"):
            assert row["braind"]["hits_min"] >= 1, key  # every query is taken from an entry in the window
            assert "scan" in row["baseline_text"], key


def test_the_json_names_the_hardware(smoke: Path) -> None:
    hardware = json.loads(only(smoke, "results-*.json").read_text(encoding="utf-8"))["hardware"]
    assert {"cpu", "cores", "ram_gb", "python", "date"} <= set(hardware)


def test_the_markdown_table_has_a_line_per_figure(smoke: Path) -> None:
    text = only(smoke, "results-*.md").read_text(encoding="utf-8")
    assert HEADER in text
    table = [line for line in text.splitlines() if line.startswith("| ") and line != HEADER]
    assert len(table) == len(FIGURES)
    assert all(line.count(" | ") == 5 for line in table)


def test_the_corpus_is_cached_for_the_next_run(smoke: Path) -> None:
    corpus = only(smoke, "corpus-500-*")
    assert (corpus / "corpus.json").is_file()
    assert any((corpus / "root" / "diary").glob("*.md"))
