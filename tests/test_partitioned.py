"""The time-partitioned index: routing, windowed search, merging, rebuilds in worker processes."""

from __future__ import annotations

import datetime as dt
import gc
import json
import pickle
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from whoosh import index as whoosh_index

from braind.errors import InvalidParams
from braind.index import analysis, rebuilding
from braind.index.api import FileRecord
from braind.index.partitioned import PartitionedIndex
from braind.index.rebuilding import OTHER, partition_key
from braind.model.entries import Entry
from tests.conftest import wait_until

ROOT = "/r"


def day_file(date: str, *texts: str) -> tuple[FileRecord, list[Entry]]:
    """A diary day with one entry per text, as sync would load it."""
    path = f"{ROOT}/diary/{date}.md"
    entries = [
        Entry(root=ROOT, realm="user", path=path, line=n, date=date, time=f"{n % 24:02d}:00", text=text)
        for n, text in enumerate(texts, start=1)
    ]
    return FileRecord(ROOT, path, len(texts), 1, "0" * 64), entries


@pytest.fixture
def index(tmp_path: Path) -> Iterator[PartitionedIndex]:
    """An open, started partitioned index in a temp state dir."""
    ix = PartitionedIndex(tmp_path / "state", "test", commit_ms=20)
    assert ix.open() is True
    ix.start()
    yield ix
    ix.close()


def test_partition_key_routes_diary_days_by_year() -> None:
    assert partition_key("/r/diary/2026-11-30.md") == "2026"
    assert partition_key("/p/.agents/.memory/diary/2025-01-02.md") == "2025"
    assert partition_key("/r/MEMORY.md") == OTHER
    assert partition_key("/r/logs/2026-11-30.md") == OTHER


def test_search_merges_partitions_and_respects_the_window(index: PartitionedIndex) -> None:
    for date in ("2024-01-15", "2026-10-30", "2026-11-29"):
        index.replace_file(*day_file(date, f"oolong tea on {date}", "coffee only"))
    found = index.search("oolong tea", since="2026-10-01")
    hits, total = found.hits, found.total
    assert total == 2 and [h.entry.date for h in hits] == ["2026-11-29", "2026-10-30"]
    index.commit()
    found = index.search("oolong tea", since="2026-10-01")
    hits, total = found.hits, found.total
    assert total == 2 and [h.entry.date for h in hits] == ["2026-11-29", "2026-10-30"]
    assert index.search("oolong", since=None, limit=1).total == 3
    assert len(index.search("oolong", limit=1).hits) == 1
    assert index.stats()["partitions"] == 2 and index.stats()["entries"] == 6  # two years


def test_empty_query_refused_even_with_no_partitions(index: PartitionedIndex) -> None:
    with pytest.raises(InvalidParams):
        index.search("   ")


def test_remove_and_entries_for_route_to_the_right_partition(index: PartitionedIndex) -> None:
    record, entries = day_file("2026-11-01", "first", "second")
    index.replace_file(record, entries)
    assert [e.text for e in index.entries_for(record.path)] == ["first", "second"]
    index.remove_file(record.path)
    assert index.entries_for(record.path) == [] and record.path not in index.file_records()
    index.remove_file("/r/diary/1999-01-01.md")  # no such partition: nothing to do


def test_one_record_agrees_with_all_records_queued_committed_and_removed(index: PartitionedIndex) -> None:
    """record(path) is the single-path form of file_records(), overlay included."""
    record, entries = day_file("2026-11-02", "one")
    assert index.record(record.path) is None and index.record("/r/diary/1999-01-01.md") is None
    index.replace_file(record, entries)
    assert index.record(record.path) == record == index.file_records()[record.path]
    index.commit()
    assert index.record(record.path) == record
    index.remove_file(record.path)
    assert index.record(record.path) is None and record.path not in index.file_records()


@pytest.mark.parametrize("parallel", [False, True])
def test_rebuild_replaces_everything_and_keeps_concurrent_writes(tmp_path: Path, parallel: bool) -> None:
    ix = PartitionedIndex(tmp_path / "s", "test", commit_ms=20, parallel_min_entries=0 if parallel else 10**9)
    ix.open()
    ix.start()
    try:
        ix.replace_file(*day_file("2025-06-01", "stale entry gone after rebuild"))
        ix.commit()
        rebuild = ix.rebuild()
        for date in ("2026-11-01", "2026-11-02", "2025-07-07"):
            rebuild.add(*day_file(date, f"rebuilt walnut {date}"))
        ix.replace_file(*day_file("2026-11-03", "written during the rebuild walnut"))
        assert ix.search("stale", since=None).total == 1  # the live index keeps answering
        rebuild.finish()
        assert ix.search("stale", since=None).total == 0
        assert ix.search("walnut", since=None).total == 4
        assert ix.stats()["state"] == "ready"
    finally:
        ix.close()


@pytest.mark.parametrize("parallel", [False, True])
def test_writes_committed_before_their_partition_starts_rebuilding_are_kept(tmp_path: Path, parallel: bool) -> None:
    ix = PartitionedIndex(tmp_path / "s", "test", commit_ms=20, parallel_min_entries=0 if parallel else 10**9)
    ix.open()
    ix.start()
    try:
        rebuild = ix.rebuild()
        rebuild.add(*day_file("2026-11-01", "rebuilt walnut"))
        written = ix.generation
        ix.replace_file(*day_file("2026-11-03", "written during the rebuild walnut"))
        ix.remove_file(f"{ROOT}/diary/2026-11-01.md")  # read by the rebuild, then removed
        wait_until(lambda: ix.generation > written)  # committed before the month's rebuild starts
        rebuild.finish()
        assert [h.entry.text for h in ix.search("walnut", since=None).hits] == ["written during the rebuild walnut"]
    finally:
        ix.close()


@pytest.mark.parametrize("parallel", [False, True])
def test_a_year_read_in_pickled_chunks_is_built_whole_and_in_order(
    tmp_path: Path, parallel: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rebuilding, "CHUNK_ENTRIES", 3)  # every few entries, the chunk so far is pickled
    ix = PartitionedIndex(tmp_path / "s", "test", parallel_min_entries=0 if parallel else 10**9)
    ix.open()
    try:
        rebuild = ix.rebuild()
        days = [f"2025-03-{day:02d}" for day in range(1, 11)]
        for day in days:
            rebuild.add(*day_file(day, f"medlar {day} morning", f"medlar {day} evening"))
        rebuild.add(*day_file("2026-01-01", "medlar new year"))
        rebuild.finish()
        found = ix.search("medlar", since=None, limit=50)
        assert found.total == 21 and ix.stats()["entries"] == 21
        assert sorted((h.entry.date, h.entry.line) for h in found.hits if h.entry.date < "2026") == [
            (day, line) for day in days for line in (1, 2)
        ]
    finally:
        ix.close()


def test_a_worker_builds_with_the_collector_paused_and_turns_it_back_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job a worker process runs: the collector paused for the build, on again after it, also after a failure."""
    record, entries = day_file("2025-03-01", "medlar morning", "medlar evening")
    chunk = pickle.dumps([(record, tuple(entries))])
    build, collecting = rebuilding.build_directory, []

    def observed(directory: Path, files: Any, languages: tuple[str, ...]) -> int:
        collecting.append(gc.isenabled())
        return build(directory, files, languages)

    monkeypatch.setattr(rebuilding, "build_directory", observed)
    collecting_before = gc.isenabled()
    try:
        (tmp_path / "ix").mkdir()
        assert rebuilding._build_job(str(tmp_path / "ix"), [chunk], analysis.DEFAULT_LANGUAGES) == 2
        assert gc.isenabled()
        with pytest.raises(FileNotFoundError):  # a build that fails (no directory to build in)
            rebuilding._build_job(str(tmp_path / "missing"), [chunk], analysis.DEFAULT_LANGUAGES)
        assert gc.isenabled()
        assert collecting == [False, False]
    finally:
        gc.enable() if collecting_before else gc.disable()
    with whoosh_index.open_dir(str(tmp_path / "ix")).searcher() as searcher:
        assert sorted(doc.get("text", "") for doc in searcher.documents()) == ["", "medlar evening", "medlar morning"]


def test_a_month_handed_to_a_worker_still_gets_files_that_arrive_late(tmp_path: Path) -> None:
    ix = PartitionedIndex(tmp_path / "s", "test", parallel_min_entries=0)
    ix.open()
    try:
        rebuild = ix.rebuild()
        dates = ["2026-10-30", "2026-11-01", "2026-10-31", "2026-11-02", "2026-09-01"]
        for date in dates:
            rebuild.add(*day_file(date, f"quince {date}"))
        rebuild.finish()
        found = ix.search("quince", since=None)
        hits, total = found.hits, found.total
        assert total == 5 and sorted(h.entry.date for h in hits) == sorted(dates)
        assert ix.stats()["entries"] == 5
    finally:
        ix.close()


def test_reopen_keeps_data_and_a_bad_layout_is_moved_aside(tmp_path: Path) -> None:
    state = tmp_path / "s"
    ix = PartitionedIndex(state, "test")
    ix.open()
    ix.replace_file(*day_file("2026-11-01", "persistent pear"))
    ix.close()
    again = PartitionedIndex(state, "test")
    assert again.open() is False and again.search("pear").total == 1
    again.close()
    manifest = json.loads((state / "manifest.json").read_text())
    (state / "manifest.json").write_text(json.dumps({**manifest, "layout_version": 0}))
    third = PartitionedIndex(state, "test")
    assert third.open() is True and third.search("pear").total == 0
    third.close()
    assert [p.name for p in state.iterdir() if p.name.startswith("partitions.old-")]


def test_one_corrupt_partition_is_rebuilt_alone(tmp_path: Path) -> None:
    state = tmp_path / "s"
    ix = PartitionedIndex(state, "test")
    ix.open()
    ix.replace_file(*day_file("2025-10-01", "last year plum"))
    ix.replace_file(*day_file("2026-11-01", "november plum"))
    ix.close()
    (state / "partitions" / "2025" / "manifest.json").write_text("{garbage")
    again = PartitionedIndex(state, "test")
    assert again.open() is True
    assert [h.entry.text for h in again.search("plum").hits] == ["november plum"]
    again.close()


def test_state_dir_is_private(tmp_path: Path) -> None:
    state = tmp_path / "s"
    PartitionedIndex(state, "t").open()
    assert state.stat().st_mode & 0o777 == 0o700


def test_date_window_is_by_entry_date(index: PartitionedIndex) -> None:
    today = dt.date.today()
    old = (today - dt.timedelta(days=40)).isoformat()
    index.replace_file(*day_file(old, "ancient quince"))
    since = (today - dt.timedelta(days=29)).isoformat()
    assert index.search("quince", since=since).total == 0
    assert index.search("quince", since=old).total == 1


def test_roots_filter_still_applies_when_a_partition_mixes_roots(index: PartitionedIndex) -> None:
    record, entries = day_file("2026-11-02", "shared fig")
    index.replace_file(record, entries)
    other = "/p/.agents/.memory"
    path = f"{other}/diary/2026-11-02.md"
    project_entry = Entry(
        root=other, realm="project", path=path, line=1, date="2026-11-02", time="10:00", text="project fig"
    )
    index.replace_file(FileRecord(other, path, 1, 1, "0" * 64), [project_entry])
    index.commit()
    assert [h.entry.text for h in index.search("fig", roots=[ROOT]).hits] == ["shared fig"]
    assert index.search("fig", roots=[ROOT, other]).total == 2
    assert index.search("fig", since="2026-11-03").total == 0


def _answers(index: PartitionedIndex, queries: list[str]) -> list[tuple[Any, ...]]:
    """Everything a search shows, for comparing two ways of answering it."""
    out = []
    for query in queries:
        found = index.search(query, limit=50)
        hits = [(h.entry.path, h.entry.line, round(h.score, 5), h.match, h.matched) for h in found.hits]
        out.append((query, found.total, found.partial_total, hits))
    return out


def test_settled_years_searched_as_one_answer_as_each_alone(index: PartitionedIndex, monkeypatch: Any) -> None:
    rng = random.Random(4)
    words = ["harbour", "kafka", "oolong", "tea", "lighthouse", "museum", "乌龙茶", "deploy", "deployed"]
    for year in (2019, 2021, 2022, 2024, 2026):
        for day in ("01-10", "06-03", "11-21"):
            texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 5))) for _ in range(12)]
            index.replace_file(*day_file(f"{year}-{day}", *texts))
    index.commit()
    queries = ["harbour museum", "oolong tea kafka", "deploy", "乌龙茶 lighthouse", "What about the museum?"]
    combined = _answers(index, queries)
    assert index._combined is not None and len(index._combined.parts) == 4  # 2019-2024; 2026 is the newest
    monkeypatch.setattr("braind.index.partitioned.MIN_PARTS", 1000)
    assert _answers(index, queries) == combined
    monkeypatch.undo()
    index.replace_file(*day_file("2021-06-03", "an edited day about the harbour museum"))
    found = index.search("edited harbour museum")
    assert found.hits[0].entry.text == "an edited day about the harbour museum"  # while queued: searched alone
    index.commit()
    assert index.search("edited harbour museum").hits[0].entry.text == "an edited day about the harbour museum"
    assert index._combined is not None and len(index._combined.parts) == 4  # rebuilt with the new searcher


def test_a_started_index_reads_its_lexicons_and_arrays_before_the_first_search(tmp_path: Path) -> None:
    first = PartitionedIndex(tmp_path / "state", "test")
    first.open()
    for year in (2024, 2025, 2026):
        first.replace_file(*day_file(f"{year}-03-01", "oolong tea", "harbour"))
    first.close()
    again = PartitionedIndex(tmp_path / "state", "test")
    assert again.open() is False
    again.start()
    try:
        parts = again._all()

        def warmed() -> bool:
            return all(part._view is not None and part._view._neighbours is not None for part in parts)

        wait_until(warmed, 15, "every partition warmed")
        assert again.search("oolong").total == 3
    finally:
        again.close()


def _tabled(index: PartitionedIndex, complete: bool = False) -> int:
    """How many segments of the index's partitions have their posting table (`complete`: holding every list)."""
    from braind.index import analysis

    count = 0
    for part in index._all():
        with part.reading:
            view = part.view()
            found = [view._segments.find(sub.reader(), "table", analysis.FIELD) for sub, _ in view._leaves]
            count += sum(table is not None and (table.complete or not complete) for table in found)
    return count


@pytest.mark.parametrize("long_list", [None, 0])
def test_a_started_index_tables_its_postings_ahead_of_searches_and_again_after_a_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, long_list: int | None
) -> None:
    """Every list, short or long (0: every list is long, added after all the short ones), before any search."""
    from braind.index.whoosh import postings, tables

    if long_list is not None:
        monkeypatch.setattr(tables, "LONG_LIST", long_list)

    first = PartitionedIndex(tmp_path / "state", "test")
    first.open()
    word = f"warmword{random.randrange(10**9)}"  # a word no other test decodes
    for year in (2024, 2025, 2026):
        first.replace_file(*day_file(f"{year}-03-01", f"{word} tea", "harbour"))
    first.close()
    again = PartitionedIndex(tmp_path / "state", "test")
    warmed: list[int] = []
    again.on_warmed = lambda: warmed.append(_tabled(again))
    again.open()
    again.start()
    try:
        assert again.stats()["warming"] is True  # from the start on, until the warmer is through
        wait_until(lambda: _tabled(again) == 3, 15, "a posting table for each partition's segment")
        wait_until(lambda: again.stats()["warming"] is False, 15, "status no longer says warming")
        wait_until(lambda: warmed == [3], 15, "told once, when every table is built")
        assert _tabled(again, complete=True) == 3
        assert again.search(word).total == 3
        assert not [key for key in list(postings._POSTINGS._lists) if key[2] == word.encode()]  # nothing decoded
        rebuild = again.rebuild()
        for year in (2024, 2025, 2026):
            rebuild.add(*day_file(f"{year}-03-01", f"{word} tea again", "harbour"))
        rebuild.finish()
        assert again.stats()["warming"] is True
        wait_until(lambda: _tabled(again) == 3, 15, "the rebuilt segments tabled")
        wait_until(lambda: warmed == [3, 3], 15, "told again after the rebuild's warm-up")
        assert [h.entry.text for h in again.search(word).hits] == [f"{word} tea again"] * 3
    finally:
        again.close()


@pytest.mark.parametrize(("budget", "long_tabled"), [(None, True), (1, True), (None, False)])
def test_a_started_index_puts_the_settled_years_most_common_words_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int | None, long_tabled: bool
) -> None:
    """What a search of all of memory pays the first time it asks for a common word, paid ahead; stopwords are not.

    Also when the tables leave the long lists out (their budget spent, as at a million entries).
    """
    from braind.index.whoosh import combined, postings, tables

    monkeypatch.setattr(tables, "LONG_LIST", 3)  # lists of more than 3 postings are a common word's
    if budget is not None:
        monkeypatch.setattr(combined, "WARM_WORDS_BYTES", budget)  # the first word fills it
    if not long_tabled:
        tabling = postings.SearcherView.warm_postings
        monkeypatch.setattr(
            postings.SearcherView, "warm_postings", lambda view, count, long=False: not long and tabling(view, count)
        )
    first = PartitionedIndex(tmp_path / "state", "test")
    first.open()
    for year in (2022, 2023, 2024, 2026):
        texts = ["the harbour museum"] * 4 + ["the harbour at dawn"] * 2 + ["the oolong tea", "a kafka broker"]
        first.replace_file(*day_file(f"{year}-03-01", *texts))
    first.close()
    again = PartitionedIndex(tmp_path / "state", "test")
    warmed = threading.Event()
    again.on_warmed = warmed.set
    again.open()
    again.start()
    try:
        assert warmed.wait(15)
        settled = again._combined
        assert settled is not None and len(settled.parts) == 3  # 2022-2024; 2026 is the newest
        joined = list(settled._words._lists)
        expected = [(False, ("harbour",))] if budget else [(False, ("harbour",)), (False, ("museum",))]
        assert joined == expected  # most common first; `the` and the words of short lists left out
        queries = ["harbour museum", "What about the harbour?", "oolong tea"]
        answers = _answers(again, queries)
        assert answers[0][1] == 16 and answers[1][1] == 24
        monkeypatch.setattr("braind.index.partitioned.MIN_PARTS", 1000)  # each year searched alone
        assert _answers(again, queries) == answers
    finally:
        again.close()
