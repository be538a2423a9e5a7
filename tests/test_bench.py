"""The benchmark suite works: a smoke run and a recall-quality run write complete reports. No timing is asserted."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import corpus, locomo, plan, queries, soak
from bench import quality as quality_run

REPO = Path(__file__).resolve().parent.parent
CLASSES = ("2w_common", "2w_medium", "2w_rare", "3w_common", "3w_medium", "3w_rare", "2w_chinese")
WINDOWS = ("30d", "365d", "all")
RECALL = (*(f"recall_{window}_{cls}" for window in WINDOWS for cls in CLASSES), "recall_all_natural")
SMOKE_BUSY_DAY = plan.SMOKE.busy_days[0]
FIGURES = (
    "cold_index",
    "reindex",
    "peak_rss_cold",
    "peak_rss_reindex",
    "round_trip",
    *RECALL,
    "throughput_1",
    "throughput_8",
    "under_writes_braind",
    "under_writes_inject",
    "under_writes_note",
    "idle_connections",
    "idle_connections_recall",
    "note_reply",
    "note_recallable",
    "editor_recallable",
    "inject_steady",
    "inject_new",
    *(f"busy_day_{SMOKE_BUSY_DAY}_{kind}" for kind in ("note", "inject", "recall")),
    "soak_throughput",
    "soak_rss",
    "soak_latency",
    "rss_rest",
    "rss_after_workload",
    "idle_cpu",
)
HEADER = "| figure | braind | baseline | ratio | target | met |"
SCALING = "### Scaling: p50 · p99 by corpus size"
SOAK = "#### Mixed soak over time"


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


def document(out: Path) -> dict[str, Any]:
    """The JSON report of the smoke run."""
    found: dict[str, Any] = json.loads(only(out, "results-*.json").read_text(encoding="utf-8"))
    assert len(found["runs"]) == 1
    return found


def rows(out: Path) -> dict[str, dict[str, Any]]:
    """The rows of the smoke run's only corpus size, by key."""
    return {row["key"]: row for row in document(out)["runs"][0]["rows"]}


def markdown_table(text: str, heading: str) -> list[str]:
    """The body lines of the first Markdown table after a line starting with `heading` (or the header itself)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("|---"))
    end = next((i for i in range(first + 1, len(lines)) if not lines[i].startswith("| ")), len(lines))
    return lines[first + 1 : end]


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
            assert row["braind"]["found_min"] >= 1, key  # every query is taken from an entry in the window
            assert "scan" in row["baseline_text"], key
            if key != "recall_all_natural":  # a word query's own entry holds every word: a full match
                assert row["braind"]["hits_min"] >= 1, key


def test_natural_questions_are_compared_with_fts5_words_or_ed(smoke: Path) -> None:
    row = rows(smoke)["recall_all_natural"]
    assert "FTS5 (words OR-ed, BM25)" in row["baseline_text"]
    assert is_number(row["baseline"]["fts5_p50"]) and is_number(row["braind"]["partial_median"])
    assert "partial" in row["figure"]


def test_natural_questions_hold_content_words_of_one_recent_entry(smoke: Path) -> None:
    root = only(smoke, "corpus-500-*") / "root"
    recent = queries.recent(corpus.load(root), dt.date.today())
    [natural] = [c for c in queries.choose(corpus.load(root), dt.date.today(), 1, 8) if c.key == queries.NATURAL]
    patterns = [re.compile(re.escape(t).replace(re.escape("{}"), "([a-z]+)")) for t in queries.TEMPLATES]
    assert len(natural.queries) == 8
    for question in natural.queries:
        assert 5 <= len(question) <= 10, question
        [words] = [m.groups() for p in patterns if (m := p.fullmatch(" ".join(question)))]
        assert 2 <= len(words) <= 4
        assert any(set(words) <= queries.content_words(doc.text) for doc in recent), question


def test_the_idle_connections_are_all_accounted_for(smoke: Path) -> None:
    found = document(smoke)["runs"][0]["idle_connections"]
    assert found["connections"] == plan.SMOKE.idle_connections
    assert found["connected"] + sum(found["connect_errors"].values()) == found["connections"]
    assert found["held"] + found["refused"] == found["connected"]
    assert 0 <= found["answered"] <= found["held"]
    assert found["recall_without"]["served"] == found["recall_without"]["n"] == plan.SMOKE.idle_recalls
    assert all(is_number(found["with"][k]) for k in ("rss_mb", "threads", "fds"))


def test_busy_days_make_every_call_on_the_ordinary_and_the_busy_day(smoke: Path) -> None:
    days = document(smoke)["runs"][0]["busy_days"]
    assert sorted(days, key=int) == [str(plan.BUSY_BASELINE), str(SMOKE_BUSY_DAY)]
    for name, day in days.items():
        assert day["entries"] == int(name)
        assert all(day[kind]["n"] == 60 for kind in ("note", "inject", "recall")), name
        assert len(day["recall"]["totals"]) == 60


def test_the_soak_reports_throughput_and_rss_over_time(smoke: Path) -> None:
    found = document(smoke)["runs"][0]["soak"]
    windows = found["windows"]
    assert len(windows) == soak.SHORT and len(found["memory"]) == soak.SHORT + 1
    assert sum(w["calls"] for w in windows) <= found["calls"]
    assert all(w["rss_mb"] > 0 and is_number(w["per_s"]) for w in windows)
    assert sum(w[kind] for w in windows for kind in soak.MIX) == sum(w["calls"] for w in windows)
    table = markdown_table(only(smoke, "results-*.md").read_text(encoding="utf-8"), SOAK)
    assert len(table) == soak.SHORT and all(line.count(" | ") == 8 for line in table)


def test_the_scaling_table_has_every_recall_figure_and_inject(smoke: Path) -> None:
    scaling = {figure["key"]: figure for figure in document(smoke)["scaling"]}
    assert sorted(scaling) == sorted((*RECALL, "inject_steady"))
    assert all(is_number(f["sizes"]["500"]["p50"]) and is_number(f["sizes"]["500"]["p99"]) for f in scaling.values())
    table = markdown_table(only(smoke, "results-*.md").read_text(encoding="utf-8"), SCALING)
    assert len(table) == len(scaling)
    assert all(line.count(" | ") == 1 for line in table)


def test_the_json_names_the_hardware(smoke: Path) -> None:
    hardware = json.loads(only(smoke, "results-*.json").read_text(encoding="utf-8"))["hardware"]
    assert {"cpu", "cores", "ram_gb", "python", "date"} <= set(hardware)


def test_the_markdown_table_has_a_line_per_figure(smoke: Path) -> None:
    text = only(smoke, "results-*.md").read_text(encoding="utf-8")
    table = markdown_table(text, HEADER)
    assert len(table) == len(FIGURES)
    assert all(line.count(" | ") == 5 for line in table)


def test_the_corpus_is_cached_for_the_next_run(smoke: Path) -> None:
    corpus = only(smoke, "corpus-500-*")
    assert (corpus / "corpus.json").is_file()
    assert any((corpus / "root" / "diary").glob("*.md"))


def test_soak_and_busy_day_flags_change_the_plan_and_the_presets_keep_the_soak_off() -> None:
    assert plan.QUICK.soak_seconds == plan.FULL.soak_seconds == 0
    chosen = plan.choose(False, True, None, False, 600.0, [3000, 500, 3000])
    assert chosen.soak_seconds == 600 and chosen.busy_days == (500, 3000) and chosen.sizes == (10_000,)
    assert plan.choose(False, False, None, True).sizes == (10_000, 100_000, plan.HUGE)


def test_the_soak_counts_each_call_in_the_window_it_began_in() -> None:
    samples = [(t / 10, kind, 1.0 + t, "") for t, kind in zip(range(600), itertools.cycle(soak.MIX), strict=False)]
    samples.append((59.9, "root", 5.0, "busy"))
    memory = [{"at_s": at, "rss_mb": 100.0 + at, "threads": 5.0} for at in soak.edges(60)]
    found = soak.summary(samples, memory, 60)
    assert [w["start_s"] for w in found["windows"]] == [0, 15, 30, 45]
    assert [w["calls"] for w in found["windows"]] == [150, 150, 150, 151]
    assert found["windows"][-1]["errors"] == 1 and found["errors"] == {"busy": 1}
    assert found["first_per_s"] == 10 and found["last_per_s"] == 121 / 12  # the first and the last 12 s
    assert found["rss_warm_mb"] == 115 and found["rss_end_mb"] == found["rss_max_mb"] == 160
    shown = ("start_s", "seconds", "per_s", *soak.MIX, "errors", "p99", "rss_mb")
    assert soak.table_windows(found["windows"]) == [{k: w[k] for k in shown} for w in found["windows"]]


# The recall-quality run: `python -m bench quality` on the hand-written LoCoMo-format fixture.

LOCOMO = REPO / "fixtures" / "locomo"
SYSTEMS = ("braind", "fts5", "scan")
KS = ("hit@1", "hit@5", "hit@10")
CATEGORY_LABELS = ("1 multi-hop", "2 temporal", "3 open-domain", "4 single-hop", "5 adversarial")


@pytest.fixture(scope="module")
def quality(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output directory of one `python -m bench quality fixtures/locomo/*.json` run (the real daemon)."""
    out = tmp_path_factory.mktemp("quality")
    run = subprocess.run(
        [sys.executable, "-m", "bench", "quality", *map(str, sorted(LOCOMO.glob("*.json"))), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert "## braind recall quality" in run.stdout
    return out


def quality_json(out: Path) -> dict[str, Any]:
    """The JSON report of the quality run."""
    document: dict[str, Any] = json.loads(only(out, "quality-*.json").read_text(encoding="utf-8"))
    return document


def fixture_questions() -> list[dict[str, Any]]:
    """Every question of the fixture's conversations, as written in the files."""
    return [qa for path in sorted(LOCOMO.glob("*.json")) for qa in json.loads(path.read_text(encoding="utf-8"))["qa"]]


def is_rate(value: Any) -> bool:
    """A hit rate: a number from 0 to 1."""
    return is_number(value) and 0 <= value <= 1


def test_quality_reports_every_hit_rate_of_every_system(quality: Path) -> None:
    systems = quality_json(quality)["figures"]["systems"]
    assert sorted(systems) == sorted(SYSTEMS)
    for name, found in systems.items():
        assert found["all"]["questions"] == len(fixture_questions()), name
        assert all(is_rate(found["all"][k]) for k in KS), (name, found["all"])


def test_quality_reports_every_category_with_its_count(quality: Path) -> None:
    asked = fixture_questions()
    for name, found in quality_json(quality)["figures"]["systems"].items():
        assert sorted(found["categories"]) == ["1", "2", "3", "4", "5"], name
        for category, figures in found["categories"].items():
            assert figures["questions"] == sum(1 for qa in asked if str(qa["category"]) == category) > 0
            assert all(is_rate(figures[k]) for k in KS), (name, category, figures)


def test_quality_reports_latency_ratio_and_published_figures(quality: Path) -> None:
    figures = quality_json(quality)["figures"]
    latency = figures["latency_ms"]
    assert latency["n"] == len(fixture_questions())
    assert all(is_number(latency[k]) and latency[k] > 0 for k in ("mean", "p50", "p95", "max"))
    assert is_number(figures["ratio_hit5_braind_fts5"]) and figures["ratio_hit5_braind_fts5"] >= 0
    published = {p["system"]: p for p in figures["published"]}
    assert published["basic-memory"]["hit@5"] == 0.733 and published["mem0 (local)"]["hit@5"] == 0.791
    assert not any(p["measured_here"] for p in published.values())
    assert figures["without_evidence"] == sum(1 for qa in fixture_questions() if not qa["evidence"]) == 1


def test_quality_lists_each_question_with_its_found_ranks(quality: Path) -> None:
    listed = quality_json(quality)["questions"]
    assert sorted(q["question"] for q in listed) == sorted(qa["question"] for qa in fixture_questions())
    for q in listed:
        assert q["category"] in (1, 2, 3, 4, 5)
        assert sorted(q["ranks"]) == sorted(SYSTEMS)
        assert all(rank is None or rank in range(1, 11) for rank in q["ranks"].values()), q


def test_quality_maps_the_baselines_hits_back_to_their_turns(quality: Path) -> None:
    ranks = {q["question"]: q["ranks"] for q in quality_json(quality)["questions"]}
    # Written without a question mark, so every word is a substring of the one turn that answers it.
    assert ranks["When did Kofi repaint the shed"]["scan"] == 1
    assert ranks["What did Biscuit learn to jump into"]["scan"] == 1
    assert ranks["What did Biscuit learn to jump into"]["fts5"] == 1  # 'biscuit' and 'jump' are in no other turn
    assert ranks["What is the name of Kofi's choir?"] == dict.fromkeys(SYSTEMS)  # it names no evidence


def test_quality_writes_every_entry_and_the_daemon_indexes_them(quality: Path) -> None:
    conversations = {c["file"]: c for c in quality_json(quality)["conversations"]}
    assert sorted(conversations) == ["allotment.json", "harbour.json"]
    assert conversations["harbour.json"]["entries"] == 27 and conversations["allotment.json"]["entries"] == 18
    for name, c in conversations.items():
        assert c["indexed"] == c["entries"] and c["skipped_lines"] == 0 and c["rejected_files"] == 0, name
        assert all(is_rate(c[s][k]) for s in SYSTEMS for k in KS), name


def test_quality_markdown_has_the_overall_category_and_latency_tables(quality: Path) -> None:
    text = only(quality, "quality-*.md").read_text(encoding="utf-8")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    systems = ("braind", "SQLite FTS5 BM25, words OR-ed", "diary plugin scan, substring AND")
    for label in (*systems, *CATEGORY_LABELS, "all"):
        assert label in rows, label
        assert rows[label].count(" | ") >= 3, rows[label]
    assert "basic-memory: published figure, not measured here" in rows
    assert "mem0 (local): published figure, not measured here" in rows
    assert "braind / FTS5 at hit@5: " in text
    assert any(label.startswith("`brain_recall`, 23 questions") for label in rows)
    assert "cores" in text.splitlines()[2]  # the machine line


def test_quality_refuses_a_file_that_is_not_a_conversation(tmp_path: Path) -> None:
    bad = tmp_path / "notes.json"
    bad.write_text('{"title": "not a conversation"}', encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "bench", "quality", str(bad), "--out", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert "not a LoCoMo conversation" in run.stderr
    assert not (tmp_path / "out").exists()


# The LoCoMo format as the quality run reads and writes it.


def test_session_times_read_the_twelve_hour_clock() -> None:
    assert locomo.session_start("1:56 pm on 8 May, 2023") == dt.datetime(2023, 5, 8, 13, 56)
    assert locomo.session_start("12:09 am on 13 September, 2023") == dt.datetime(2023, 9, 13, 0, 9)
    assert locomo.session_start("12:24 pm on 7 April, 2023") == dt.datetime(2023, 4, 7, 12, 24)
    with pytest.raises(locomo.NotLocomo):
        locomo.session_start("yesterday")


def test_each_turn_is_a_minute_later_and_stays_on_its_day() -> None:
    start = dt.datetime(2024, 4, 2, 23, 58)
    assert [locomo.turn_time(start, i) for i in range(4)] == ["23:58", "23:59", "23:59", "23:59"]
    assert locomo.turn_time(dt.datetime(2024, 4, 2, 9, 59), 1) == "10:00"


def test_an_entry_names_its_speaker_folds_lines_and_tells_of_a_photo() -> None:
    turn = {"speaker": "Kofi", "dia_id": "D3:6", "text": "Yes!\nLet's meet\tat nine."}
    assert locomo.entry_text(turn) == "Kofi: Yes! Let's meet at nine."
    shared = {**turn, "text": "Look.", "blip_caption": "a photo of a\ngreen shed"}
    assert locomo.entry_text(shared) == "Kofi: Look. [shared a photo: a photo of a green shed]"


def test_evidence_may_name_two_turns_in_one_string() -> None:
    assert locomo.evidence_ids(["D1:7; D2:4", "D3:1"]) == ("D1:7", "D2:4", "D3:1")
    assert locomo.evidence_ids([]) == ()


def test_the_root_keeps_the_gaps_between_sessions_and_maps_lines_to_turns(tmp_path: Path) -> None:
    [conversation] = locomo.load(LOCOMO / "harbour.json", "harbour")
    last = dt.date(2030, 1, 31)
    entries = quality_run.write_root(conversation, tmp_path / "root", last)
    files = sorted(p.name for p in (tmp_path / "root" / "diary").iterdir())
    gaps = [(dt.date(2024, 4, 20) - dt.date(2024, m, d)).days for m, d in ((3, 3), (3, 17), (4, 2), (4, 20))]
    assert files == [f"{last - dt.timedelta(days=gap)}.md" for gap in gaps]
    assert len(entries) == 27
    first = (tmp_path / "root" / "diary" / files[0]).read_text(encoding="utf-8").splitlines()
    assert first[1] == (
        "[09:16] Tomasz: Great, thanks. I finally bought a kayak! It's bright orange and fits on the car roof. "
        "[shared a photo: a photo of an orange kayak on top of a car]"
    )
    by_place = {e.place: e.dia_id for e in entries}
    assert by_place[(files[0][:10], 2)] == "D1:2"
    assert by_place[(files[2][:10], 3)] == "D3:3"


def test_a_release_file_lists_conversations_with_their_sessions_nested(tmp_path: Path) -> None:
    one = json.loads((LOCOMO / "harbour.json").read_text(encoding="utf-8"))
    nested = {"sample_id": "conv-7", "conversation": {k: v for k, v in one.items() if k != "qa"}, "qa": one["qa"]}
    release = tmp_path / "release.json"
    release.write_text(json.dumps([nested, {**nested, "sample_id": None}]), encoding="utf-8")
    found = locomo.load(release, "release.json")
    assert [c.name for c in found] == ["release.json#conv-7", "release.json#2"]
    [alone] = locomo.load(LOCOMO / "harbour.json", "harbour.json")
    assert found[0].turns == alone.turns and found[0].questions == alone.questions
    release.write_text("[]", encoding="utf-8")
    with pytest.raises(locomo.NotLocomo):
        locomo.load(release, "release.json")


def test_a_found_rank_is_the_first_evidence_hit() -> None:
    assert quality_run.found_rank(["D1:1", None, "D2:4", "D1:7"], ("D1:7", "D2:4")) == 3
    assert quality_run.found_rank(["D1:1"], ("D2:4",)) is None
    assert quality_run.found_rank(["D1:1"], ()) is None
