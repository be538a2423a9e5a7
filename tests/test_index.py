"""The index against real Whoosh in a temp dir: matching, read-your-writes, recovery, rebuild, threads."""

from __future__ import annotations

import json
import os
import random
import stat
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from whoosh import index as whoosh_index
from whoosh.codec.whoosh3 import W3TermInfo
from whoosh.fields import UnknownFieldError
from whoosh.filedb.filestore import FileStorage
from whoosh.formats import Existence, Frequency
from whoosh.query import And, Prefix, Term
from whoosh.system import pack_uint

from braind.errors import InvalidParams, Unavailable
from braind.index import analysis, ranking
from braind.index.api import FileRecord
from braind.index.whoosh import changes, compat, postings
from braind.index.whoosh import pool as pool_module
from braind.index.whoosh import writer as writer_module
from braind.index.whoosh.changes import add_file, write_batch
from braind.index.whoosh.documents import SCHEMA_VERSION, make_schema
from braind.index.whoosh.index import Index
from braind.index.whoosh.pool import Postings
from braind.index.whoosh.store import open_whoosh
from braind.index.whoosh.writer import BLOCK_LIMIT, INLINE_LIMIT, Codec, open_writer
from braind.model.entries import Entry
from tests.conftest import wait_until

EN = analysis.language()
K1, B = postings.K1, postings.B
ROOT = "/mem/user"
OTHER = "/mem/project"


def entry(text: str, line: int = 1, date: str = "2026-01-10", time: str = "10:00", **kw: Any) -> Entry:
    """An entry of the diary file of its date."""
    kw.setdefault("root", ROOT)
    return Entry(realm="user", path=f"diary/{date}.md", line=line, date=date, time=time, text=text, **kw)


def record(name: str, root: str = ROOT) -> FileRecord:
    """A file record for a path under a root."""
    return FileRecord(root=root, path=f"{root}/{name}", size=1, mtime_ns=1, sha256="0" * 64)


def put(index: Index, name: str, *entries: Entry, root: str = ROOT) -> FileRecord:
    """Queue one file with its entries."""
    rec = record(name, root)
    index.replace_file(rec, entries)
    return rec


def texts(index: Index, query: str, **kw: Any) -> list[str]:
    """The texts of the hits of a query, best first."""
    return [hit.entry.text for hit in index.search(query, **kw).hits]


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def index(state: Path) -> Iterator[Index]:
    ix = Index(state, "identity-1")
    assert ix.open() is True
    yield ix
    ix.close()


Settle = Callable[[Index], None]


@pytest.fixture(params=["queued", "committed"])
def settle(request: pytest.FixtureRequest) -> Settle:
    """Leave writes queued, or commit them: searches must answer the same either way."""
    return Index.commit if request.param == "committed" else lambda index: None


# -- matching ---------------------------------------------------------------------


@pytest.mark.parametrize("committed", [False, True])
@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("乌龙茶", True),
        ("茶", True),
        ("饮料 乌龙", True),
        ("龙乌", False),
        ("データ", True),
        ("ベース", True),
        ("서버", True),
        ("배포", True),
        ("api限流", True),
        ("限流", True),
        ("API 限流", True),
        ("CAFÉ", True),
        ("cafe", True),
        ("deploy", True),
        ("DEPLOYS", True),
        ("ployed", False),
        ("deploy missing", False),
    ],
)
def test_matching(index: Index, committed: bool, query: str, found: bool) -> None:
    put(
        index,
        "diary/2026-01-10.md",
        entry("我最喜欢的饮料是乌龙茶", 1),
        entry("データベースの移行 and 서버 배포", 2),
        entry("hit the API限流 again", 3),
        entry("the Café deployed twice, deploys daily", 4),
    )
    if committed:
        index.commit()
    assert (index.search(query).total > 0) is found


def test_full_matches_come_first_then_partial_ones_with_the_words_they_hold(index: Index, settle: Settle) -> None:
    put(index, "diary/2026-01-10.md", entry("alpha beta", 1), entry("gamma only", 2), entry("beta only", 3))
    put(index, "diary/2026-01-11.md", entry("alpha alone here", date="2026-01-11"))
    settle(index)
    found = index.search("alpha beta")
    assert [(h.entry.text, h.match, h.matched) for h in found.hits[:1]] == [("alpha beta", "all", ("alpha", "beta"))]
    assert sorted((h.entry.text, h.match, h.matched) for h in found.hits[1:]) == [
        ("alpha alone here", "partial", ("alpha",)),
        ("beta only", "partial", ("beta",)),
    ]
    assert (found.total, found.partial_total) == (1, 2)


def test_strict_needs_every_word(index: Index, settle: Settle) -> None:
    put(index, "diary/2026-01-10.md", entry("alpha beta", 1), entry("alpha only", 2), entry("beta only", 3))
    settle(index)
    found = index.search("alpha beta", strict=True)
    assert [h.entry.text for h in found.hits] == ["alpha beta"] and (found.total, found.partial_total) == (1, 2)


def test_a_partial_match_never_outranks_a_full_one(index: Index, settle: Settle) -> None:
    rare = [entry("zeta zeta zeta zeta", n) for n in range(1, 6)]
    put(index, "diary/2026-01-10.md", *rare, entry("a common word", 6))
    put(index, "diary/2026-01-11.md", *(entry(f"common {n}", n, date="2026-01-11") for n in range(1, 30)))
    put(index, "diary/2026-01-12.md", entry("common word zeta", 1, date="2026-01-12"))  # no context to lift it
    settle(index)
    hits = index.search("zeta common").hits
    assert [h.match for h in hits] == ["all"] + ["partial"] * (len(hits) - 1)
    assert hits[0].entry.text == "common word zeta" and hits[0].score < hits[1].score  # scores less, yet first


def test_index_and_python_matcher_agree(index: Index) -> None:
    rng = random.Random(7)
    alphabet = ["de", "ploy", "ca", "fé", "CA", " ", " ", "乌", "龙", "茶", "ー", "데", "-"]
    corpus = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(150)]
    put(index, "diary/2026-01-10.md", *(entry(t, i) for i, t in enumerate(corpus, start=1)))
    index.commit()
    for _ in range(150):
        query = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
        terms = EN.query(query).required
        if not terms:
            continue
        expected = sorted(t for t in corpus if EN.matches(t, terms))
        assert sorted(texts(index, query, limit=500, strict=True)) == expected, query
        partly = sorted(t for t in corpus if any(EN.holds(t, term) for term in terms))
        assert sorted(texts(index, query, limit=500)) == partly, query


def _whoosh_weights(searcher: Any, key: str, longer: bool) -> dict[int, float]:
    """BM25 term weights computed from what Whoosh's own reader yields for a stem (or the longer words it begins)."""
    reader = searcher.reader()
    terms = [t for t in reader.expand_prefix("text", key) if t != key.encode()] if longer else [key]
    avg = searcher.avg_field_length("text")
    found: dict[int, float] = {}
    for term in terms:
        if ("text", term) not in reader:
            continue
        matcher = searcher.postings("text", term)
        while matcher.is_active():
            docnum, weight = matcher.id(), matcher.weight()
            norm = K1 * (1 - B + B * searcher.doc_field_length(docnum, "text") / avg)
            found[docnum] = found.get(docnum, 0.0) + (K1 + 1) * weight / (weight + norm)
            matcher.next()
    return found


def test_term_weights_and_totals_agree_with_whoosh_over_segments_and_deletions(index: Index) -> None:
    rng = random.Random(11)
    words = ["deploy", "deployed", "deployment", "kafka", "broker", "cafe", "乌龙茶", "饮料", "茶", "alpha", "alp"]
    for day in range(1, 9):  # one commit per day, then a rewrite: several segments and deletions
        lines = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 9))) for _ in range(20)]
        put(index, f"diary/2026-01-0{day}.md", *(entry(t, i, date=f"2026-01-0{day}") for i, t in enumerate(lines, 1)))
        index.commit()
    put(index, "diary/2026-01-03.md", entry("kafka broker rewritten", date="2026-01-03"))
    index.commit()
    searcher, view = index._searcher, index._view_now()
    for key in ["deploy", "kafka", "alp", "caf", "brok"]:
        for mode, longer in ((postings.EXACT, False), (postings.LONGER, True)):
            ids, weights = view.weights("text", key, mode)
            mine = dict(zip(ids.tolist(), weights.tolist(), strict=True))
            theirs = _whoosh_weights(searcher, key, longer)
            assert mine.keys() == theirs.keys(), key
            assert all(abs(mine[n] - theirs[n]) < 1e-5 for n in mine), key
        both = view.word("text", key)  # both modes at once: the same lists
        assert [a.tolist() for a in both] == [
            a.tolist() for m in (postings.EXACT, postings.LONGER) for a in view.weights("text", key, m)
        ]
    for query in ["deploy", "kafka broker", "alp deploy", "乌龙 饮料", "茶 kafka", "饮料 alpha cafe"]:
        clauses = []
        for term in EN.query(query).required:
            run = term.keys[0]
            if not term.cjk or len(run) == 1:
                clauses.append(Prefix("text", run))
            else:
                clauses.append(And([Term("text", pair) for pair in analysis.bigrams(run)]))
        expected = [
            r for r in searcher.search(And(clauses), limit=None) if EN.matches(r["text"], EN.query(query).required)
        ]
        assert index.search(query, limit=500).total == len(expected), query


# -- read-your-writes -------------------------------------------------------------


def test_queued_write_is_found_before_any_commit(index: Index) -> None:
    generation = index.generation
    put(index, "diary/2026-01-10.md", entry("fresh note about kafka"))
    assert texts(index, "kafka") == ["fresh note about kafka"]
    assert index.generation == generation


def test_remove_hides_at_once_and_after_commit(index: Index) -> None:
    rec = put(index, "diary/2026-01-10.md", entry("kafka"))
    index.commit()
    index.remove_file(rec.path)
    assert texts(index, "kafka") == []
    assert rec.path not in index.file_records()
    index.commit()
    assert texts(index, "kafka") == []
    assert index.entries_for(rec.path) == []


def test_replace_hides_the_old_entries_at_once(index: Index) -> None:
    put(index, "diary/2026-01-10.md", entry("old kafka"))
    index.commit()
    put(index, "diary/2026-01-10.md", entry("new kafka"))
    assert texts(index, "kafka") == ["new kafka"]
    index.commit()
    assert texts(index, "kafka") == ["new kafka"]
    assert index.search("kafka").total == 1


def test_many_commits_and_merges_never_duplicate_entries(index: Index) -> None:
    for n in range(30):
        put(index, "diary/2026-01-10.md", entry(f"kafka {n}", 1), entry(f"kafka {n}", 2))
        put(index, f"diary/2026-02-{n + 1:02d}.md", entry("other", date=f"2026-02-{n + 1:02d}"))
        index.commit()
        assert index.search("kafka").total == 2
    assert index.search("other").total == 30 and index.stats()["entries"] == 32


def test_an_appended_line_commits_one_entry_document(index: Index) -> None:
    """Unchanged entries keep their documents: the commit writes the new entry and the file's record only."""
    day = [entry(f"kafka {n}", n) for n in range(1, 51)]
    put(index, "diary/2026-01-10.md", *day)
    index.commit()
    put(index, "diary/2026-01-10.md", *day, entry("kafka appended", 51))
    index.commit()
    newest = max(index._searcher.reader().leaf_readers(), key=lambda pair: pair[1])[0]
    assert sorted(doc.get("kind", "diary") for doc in newest.all_stored_fields()) == ["diary", "file"]
    assert index.search("kafka").total == 51 and index._searcher.doc_count() == 52


def test_appends_are_found_exactly_once_before_during_and_after_commits(index: Index) -> None:
    """A note extends the very entries the index handed out (as the syncer does): only the new ones are matched
    by hand, the committed documents stay, and no step of a commit shows an entry twice or loses one."""
    rec = record("diary/2026-01-10.md")
    lines: list[str] = []

    def append(text: str) -> None:
        old = index.entries_for(rec.path)
        index.replace_file(rec, [*old, entry(text, len(old) + 1)])
        lines.append(text)

    def found() -> tuple[int, list[str]]:
        found = index.search("kafka", limit=500)
        hits, total = found.hits, found.total
        return total, sorted(hit.entry.text for hit in hits)

    for n in range(5):
        append(f"kafka {n}")
        assert found() == (len(lines), sorted(lines))
    index.commit()
    append("kafka 5")  # queued on top of what the searcher holds
    assert found() == (6, sorted(lines))
    batch = index._take_batch()  # a commit starts; a note arrives before it is searchable
    append("kafka 6")
    assert found() == (7, sorted(lines))
    write_batch(index._ix, batch, index._known_entries())
    assert found() == (7, sorted(lines))
    index._publish(batch)
    assert found() == (7, sorted(lines))
    index.commit()
    assert found() == (7, sorted(lines)) and index._searcher.doc_count() == 8
    old = index.entries_for(rec.path)
    marked = [replace(e, status="tombstoned") if e.text == "kafka 0" else replace(e) for e in old]
    index.replace_file(rec, marked)  # a re-read file: equal entries, new objects; its documents are all replaced
    lines.remove("kafka 0")
    assert found() == (6, sorted(lines))
    index.commit()
    assert found() == (6, sorted(lines))


def _edit(rng: random.Random, day: list[tuple[str, str, str]]) -> None:
    """One random edit of a day's (text, type, status) lines: append, rewrite, retype, mark, delete or insert."""
    kind = rng.choice(["append", "append", "text", "type", "status", "delete", "insert"])
    text = f"{rng.choice(['kafka', 'deploy', '乌龙茶'])} {rng.randint(0, 9)}"
    at = rng.randrange(len(day)) if day else 0
    if kind == "append" or not day:
        day.append((text, "note", "live"))
    elif kind == "text":
        day[at] = (text, *day[at][1:])
    elif kind == "type":
        day[at] = (day[at][0], rng.choice(["note", "decision"]), day[at][2])
    elif kind == "status":
        day[at] = (*day[at][:2], rng.choice(["live", "tombstoned", "pinned"]))
    elif kind == "delete":
        del day[at]
    else:
        day.insert(0, (text, "note", "live"))


def _day_entries(name: str, day: list[tuple[str, str, str]]) -> list[Entry]:
    """The entries of a day's lines."""
    date = name.removeprefix("diary/").removesuffix(".md")
    return [entry(t, n, date=date, type=kind, status=status) for n, (t, kind, status) in enumerate(day, start=1)]


def _contents(index: Index) -> tuple[Any, ...]:
    """Everything reads see: entries by file, search totals and hits, marked entries, live documents."""
    by_file = {path: index.entries_for(path) for path in sorted(index.file_records())}
    found = {
        q: (total, sorted((h.entry.path, h.entry.line) for h in hits))
        for q in ["kafka", "deploy", "乌龙茶"]
        for found in [index.search(q, limit=500)]
        for hits, total in [(found.hits, found.total)]
    }
    marked = sorted((e.path, e.line, e.status) for e in index.select("status", ["tombstoned", "pinned"]))
    return by_file, found, marked, index.stats()["entries"], index._searcher.doc_count()


def test_commits_keep_the_index_equal_to_a_clean_rebuild(tmp_path: Path, state: Path) -> None:
    """Random edits to a few days, committed at random moments, the index sometimes reopened (what recent
    commits wrote is then unknown), then compared with an index built afresh."""
    rng = random.Random(3)
    days: dict[str, list[tuple[str, str, str]]] = {}
    index = Index(state, "identity-1")
    index.open()
    for _ in range(300):
        name = f"diary/2026-01-1{rng.randint(0, 3)}.md"
        if name in days and rng.random() < 0.05:
            del days[name]
            index.remove_file(record(name).path)
        else:
            _edit(rng, days.setdefault(name, []))
            put(index, name, *_day_entries(name, days[name]))
        if rng.random() < 0.4:
            index.commit()
            assert index._searcher.doc_count() == len(days) + sum(map(len, days.values()))
        if rng.random() < 0.1:
            index.close()
            index = Index(state, "identity-1")
            assert index.open() is False
    index.commit()
    fresh = Index(tmp_path / "fresh", "identity-1")
    fresh.open()
    try:
        for name, day in days.items():
            put(fresh, name, *_day_entries(name, day))
        fresh.close()  # reopened: its entries are read back from Whoosh, not remembered from its commits
        fresh = Index(tmp_path / "fresh", "identity-1")
        fresh.open()
        assert _contents(index) == _contents(fresh)
    finally:
        fresh.close()
        index.close()


def test_file_records_and_entries_include_queued_changes(index: Index) -> None:
    first = put(index, "diary/2026-01-10.md", entry("b", 2), entry("a", 1))
    assert index.file_records() == {first.path: first}
    assert [e.text for e in index.entries_for(first.path)] == ["a", "b"]
    index.commit()
    assert index.file_records() == {first.path: first}
    assert [e.line for e in index.entries_for(first.path)] == [1, 2]


def test_entries_round_trip_through_the_index(index: Index) -> None:
    original = entry(
        "a decision", 3, kind="logentry", type="decision", key="db", triggers=("file:app.py", "err:E1"), occurrence=2
    )
    rec = put(index, "logs/x.md", original)
    index.commit()
    assert index.entries_for(rec.path) == [original]
    assert index.search("decision").hits[0].entry == original  # read back from the stored fields


def test_background_committer_commits_within_its_interval(state: Path) -> None:
    ix = Index(state, "identity-1", commit_ms=20)
    ix.open()
    ix.start()
    try:
        before = ix.generation
        put(ix, "diary/2026-01-10.md", entry("kafka"))
        wait_until(lambda: ix.generation > before and ix.stats()["queued"] == 0, what="a background commit")
        assert ix.alive() and texts(ix, "kafka") == ["kafka"]
    finally:
        ix.close()
    assert not ix.alive()


def test_a_closed_index_refuses_reads(state: Path) -> None:
    ix = Index(state, "identity-1")
    ix.open()
    ix.close()
    assert not ix.alive()
    with pytest.raises(Unavailable):
        ix.search("kafka")


def test_close_commits_what_is_queued(state: Path) -> None:
    ix = Index(state, "identity-1")
    ix.open()
    put(ix, "diary/2026-01-10.md", entry("kafka"))
    ix.close()
    again = Index(state, "identity-1")
    assert again.open() is False
    try:
        assert texts(again, "kafka") == ["kafka"]
    finally:
        again.close()


# -- filters, order, limits -------------------------------------------------------


def test_since_is_an_inclusive_lower_bound_on_the_date(index: Index, settle: Settle) -> None:
    for day in ("2026-01-09", "2026-01-10", "2026-01-11"):
        put(index, f"diary/{day}.md", entry(f"kafka {day}", date=day))
    settle(index)
    assert sorted(texts(index, "kafka", since="2026-01-10")) == ["kafka 2026-01-10", "kafka 2026-01-11"]
    assert texts(index, "kafka", since="2027-01-01") == []


def test_roots_restrict_to_the_listed_roots(index: Index, settle: Settle) -> None:
    put(index, "diary/2026-01-10.md", entry("kafka user"))
    put(index, "diary/2026-01-10.md", entry("kafka project", root=OTHER), root=OTHER)
    settle(index)
    assert texts(index, "kafka", roots=[OTHER]) == ["kafka project"]
    assert len(texts(index, "kafka", roots=[ROOT, OTHER])) == 2
    assert texts(index, "kafka", roots=[]) == []


def test_type_filters(index: Index, settle: Settle) -> None:
    put(index, "diary/2026-01-10.md", entry("kafka note", 1), entry("kafka fact", 2, type="fact"))
    settle(index)
    assert texts(index, "kafka", type="fact") == ["kafka fact"]
    assert texts(index, "kafka", type="note") == ["kafka note"]


def test_tombstoned_entries_never_come_back(index: Index, settle: Settle) -> None:
    put(
        index,
        "diary/2026-01-10.md",
        entry("kafka gone", 1, status="tombstoned"),
        entry("kafka pinned", 2, status="pinned"),
    )
    settle(index)
    assert texts(index, "kafka") == ["kafka pinned"]
    assert index.search("kafka").total == 1


def test_a_settled_file_is_read_from_the_searcher_once_until_a_commit_changes_it(state: Path) -> None:
    """inject reads yesterday's diary every turn: once read, it is held until a commit changes that file."""
    old, new = record("diary/2026-01-09.md"), record("diary/2026-01-10.md")
    first = Index(state, "identity-1")
    first.open()
    first.replace_file(old, [entry("yesterday", 1, date="2026-01-09")])
    first.commit()
    first.close()
    index = Index(state, "identity-1")  # started again: nothing read yet
    assert index.open() is False
    index.replace_file(new, [entry("today", 1)])
    index.commit()
    reads: list[str] = []
    searcher = index._searcher
    numbers = searcher.document_numbers
    searcher.document_numbers = lambda **kw: reads.append(kw["path"]) or numbers(**kw)
    assert [e.text for e in index.recent(old.path, 5)] == ["yesterday"] == [e.text for e in index.recent(old.path, 5)]
    assert reads == [old.path]
    index.replace_file(old, [entry("yesterday", 1, date="2026-01-09"), entry("late", 2, date="2026-01-09")])
    index.commit()
    assert [e.text for e in index.recent(old.path, 5)] == ["yesterday", "late"]
    index.close()


def test_a_day_read_for_a_note_is_not_read_again_by_the_commit_after_it(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy day read from the searcher once (to append a note to) is diffed against that read at its commit."""
    day, other = record("diary/2026-01-10.md"), record("diary/2026-01-09.md")
    first = Index(state, "identity-1")
    first.open()
    first.replace_file(day, [entry(f"busy {n}", n + 1) for n in range(50)])
    first.replace_file(other, [entry("yesterday", 1, date="2026-01-09")])
    first.commit()
    first.close()
    index = Index(state, "identity-1")  # started again: no commit of its own remembers either file
    assert index.open() is False
    reads: list[str] = []
    read_all = changes._committed_docs
    monkeypatch.setattr(changes, "_committed_docs", lambda s, path: reads.append(path) or read_all(s, path))
    held = index.file_entries(day.path)
    index.replace_file(day, [*held, entry("one more", 51)])
    index.replace_file(other, [entry("yesterday", 1, date="2026-01-09"), entry("late", 2, date="2026-01-09")])
    index.commit()
    assert reads == [other.path]  # the file nothing had read is read whole; the day is not
    index.close()
    again = Index(state, "identity-1")
    assert again.open() is False
    assert again.search("busy", limit=100).total == 50  # no entry lost or written twice
    assert [e.text for e in again.entries_for(day.path)][-2:] == ["busy 49", "one more"]
    assert [e.text for e in again.entries_for(other.path)] == ["yesterday", "late"]
    again.close()


def test_stored_fields_read_past_whoosh_are_whooshs_own(index: Index) -> None:
    """The direct read of stored fields gives what Whoosh's stored_fields() gives, over several segments."""
    for step in range(4):
        put(index, f"diary/2026-01-0{step + 1}.md", *(entry(f"note {step} {n}", n + 1) for n in range(5)))
        index.commit()
    searcher = index._searcher
    assert len(list(searcher.leaf_searchers())) > 1
    numbers = list(searcher.document_numbers())
    read = compat.StoredFields(searcher)
    direct = {n: read(n) for n in numbers}
    assert direct == {n: searcher.stored_fields(n) for n in numbers}
    assert any(fields.get("text") == "note 3 4" for fields in direct.values())


def test_entries_not_yet_committed_score_as_they_will_once_committed(index: Index) -> None:
    """Appended entries and a new file are scored by hand until their commit: the same hits, words and scores.

    Scores agree to within the length norm's drift (a commit adds the files' own documents to its average).
    """
    rng = random.Random(7)
    words = ["harbour", "kafka", "oolong", "tea", "lighthouse", "museum", "deploy", "deployed", "ferry", "garden"]
    day = [entry(" ".join(rng.choice(words) for _ in range(4)), n + 1) for n in range(30)]
    put(index, "diary/2026-01-10.md", *day[:10])
    index.commit()
    put(index, "diary/2026-01-10.md", *day)  # twenty appended, their context partly committed
    fresh = [entry(" ".join(rng.choice(words) for _ in range(4)), n + 1, date="2026-01-11") for n in range(8)]
    put(index, "diary/2026-01-11.md", *fresh)
    queries = ["kafka tea", "deploy", "oolong museum ferry", "garden harbour lighthouse", "tea"]

    def answers() -> list[tuple[int, int, dict[tuple[str, int], tuple[float, str, tuple[str, ...]]]]]:
        found = [index.search(q, limit=50) for q in queries]
        return [
            (f.total, f.partial_total, {(h.entry.date, h.entry.line): (h.score, h.match, h.matched) for h in f.hits})
            for f in found
        ]

    before = answers()
    index.commit()
    assert index.stats()["queued"] == 0
    for (total, partial, hits), (total_after, partial_after, hits_after) in zip(before, answers(), strict=True):
        assert (total, partial, hits.keys()) == (total_after, partial_after, hits_after.keys()) and hits
        for key, (score, match, matched) in hits.items():
            assert (match, matched) == hits_after[key][1:]
            assert score == pytest.approx(hits_after[key][0], rel=0.01), key


def test_a_searcher_after_a_commit_keeps_the_readers_of_untouched_segments(index: Index) -> None:
    """Appends, edits, deletions and merges: the kept readers never show a deleted or merged-away document twice."""
    rng = random.Random(5)
    days: dict[str, list[str]] = {f"2026-01-{n:02d}": [] for n in range(10, 16)}
    kept_any = False
    for step in range(60):
        name = rng.choice(sorted(days))
        lines = days[name]
        kind = rng.choice(["append", "append", "edit", "delete"])
        if kind == "append" or not lines:
            lines.append(f"kafka note {step}")
        elif kind == "edit":
            lines[rng.randrange(len(lines))] = f"kafka edited {step}"
        else:
            del lines[rng.randrange(len(lines))]
        put(index, f"diary/{name}.md", *(entry(t, n + 1, date=name) for n, t in enumerate(lines)))
        before = {id(r) for r, _ in index._searcher.reader().leaf_readers()}
        index.commit()
        after = index._searcher.reader()
        kept_any = kept_any or any(id(r) in before for r, _ in after.leaf_readers())
        fresh = index._ix.searcher()
        try:
            assert sorted(fresh.reader().all_doc_ids()) == sorted(after.all_doc_ids()), step
        finally:
            fresh.close()
        found = sorted(h.entry.text for h in index.search("kafka", limit=1000).hits)
        assert found == sorted(t for lines in days.values() for t in lines), step
    assert kept_any


def test_merged_away_segments_leave_nothing_in_the_shared_caches(index: Index) -> None:
    """Commits that merge segments: what was decoded from a segment goes with it, not when pushed out by others."""
    seen: set[str] = set()
    lines: list[str] = []
    for step in range(40):
        lines.append(f"kafka note {step}")
        put(index, "diary/2026-01-10.md", *(entry(t, n + 1) for n, t in enumerate(lines)))
        index.commit()
        assert len(index.search("kafka", limit=100).hits) == len(lines)
        seen |= {compat.segment_id(r) for r, _ in index._searcher.reader().leaf_readers()}
    live = {compat.segment_id(r) for r, _ in index._searcher.reader().leaf_readers()}
    gone = seen - live
    cached = {key[0] for cache in (postings._POSTINGS, postings._TERM_LISTS) for key in list(cache._lists)}
    assert gone and cached & live  # merges happened, and the live segments' lists are cached
    assert not cached & gone


def test_a_commit_reads_ahead_what_searches_need_of_the_segments_it_wrote_or_merged(
    index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After every commit, merges among them, each segment's lexicons are held before a search: none reads one."""
    lines: list[str] = []
    for step in range(30):
        lines.append(f"kafka note {step}")
        put(index, "diary/2026-01-10.md", *(entry(t, n + 1) for n, t in enumerate(lines)))
        index.commit()
        for reader, _ in index._searcher.reader().leaf_readers():
            for field in (analysis.FIELD, postings.HEADS):
                assert index._segments.find(reader, "lexicon", field) is not None, (step, field)
    reads: list[str] = []
    real = postings.Lexicon.read
    monkeypatch.setattr(postings.Lexicon, "read", classmethod(lambda cls, r, f: reads.append(f) or real(r, f)))
    put(index, "diary/2026-01-10.md", *(entry(t, n + 1) for n, t in enumerate(lines)), entry("kafka last", 99))
    assert len(index.search("kafka", limit=100).hits) == len(lines) + 1  # scored by hand: the entry before it found
    assert reads == []


def test_appends_prepared_for_have_every_segments_heads_read(state: Path) -> None:
    """An index opened again holds no lexicon; warm_appends reads every segment's fingerprint heads."""
    first = Index(state, "identity-1")
    first.open()
    for step in range(3):
        put(first, f"diary/2026-01-0{step + 1}.md", entry(f"note {step}", date=f"2026-01-0{step + 1}"))
        first.commit()
    first.close()
    index = Index(state, "identity-1")
    assert index.open() is False
    leaves = [reader for reader, _ in index._searcher.reader().leaf_readers()]
    assert len(leaves) > 1 and all(index._segments.find(r, "lexicon", postings.HEADS) is None for r in leaves)
    index.prepare_appends("/mem/user/diary/2026-01-01.md")
    assert all(index._segments.find(r, "lexicon", postings.HEADS) is not None for r in leaves)
    index.close()


def test_ties_are_broken_newer_first(index: Index, settle: Settle) -> None:
    days = ["2026-01-03", "2026-01-01", "2026-01-02"]
    for day in days:  # the same words with the same context: equal scores
        put(
            index,
            f"diary/{day}.md",
            entry("unrelated words", date=day, time="08:00"),
            entry("same kafka words", 2, date=day, time="09:00"),
        )
    settle(index)
    hits = index.search("kafka").hits
    assert [(h.entry.date, h.entry.time) for h in hits] == [(d, "09:00") for d in sorted(days, reverse=True)]


def test_better_matches_rank_first(index: Index) -> None:
    put(
        index,
        "diary/2026-01-10.md",
        entry("kafka mentioned once in a much longer line of text", 1),
        entry("kafka kafka kafka broker", 2),
    )
    index.commit()
    hits = index.search("kafka").hits
    assert hits[0].entry.line == 2 and hits[0].score > hits[1].score


def test_the_entries_just_before_lift_a_short_reply(index: Index, settle: Settle) -> None:
    put(
        index,
        "diary/2026-01-10.md",
        entry("When did you go to the harbour museum?", 1),
        entry("Yes, last Tuesday, the museum was lovely", 2),
        entry("The museum shop was closed", 3, date="2026-01-10"),
    )
    put(
        index,
        "diary/2026-01-11.md",
        entry("unrelated", date="2026-01-11"),
        entry("a museum somewhere", 2, date="2026-01-11"),
    )
    settle(index)
    lines = [(h.entry.date, h.entry.line) for h in index.search("museum harbour").hits]
    assert lines[0] == ("2026-01-10", 1)  # holds both words
    assert lines.index(("2026-01-10", 2)) < lines.index(("2026-01-11", 2))  # one word, and the question above


def test_limit_and_total(index: Index, settle: Settle) -> None:
    put(index, "diary/2026-01-10.md", *(entry(f"kafka {n}", n) for n in range(1, 31)))
    settle(index)
    found = index.search("kafka", limit=5)
    hits, total = found.hits, found.total
    assert len(hits) == 5 and total == 30


def test_limit_and_total_with_committed_and_queued_entries(index: Index) -> None:
    put(index, "diary/2026-01-09.md", *(entry(f"kafka {n}", n, date="2026-01-09") for n in range(1, 11)))
    index.commit()
    put(index, "diary/2026-01-10.md", *(entry(f"kafka {n}", n) for n in range(1, 11)))
    found = index.search("kafka", limit=15)
    hits, total = found.hits, found.total
    assert len(hits) == 15 and total == 20
    lines = [(h.entry.date, h.entry.line) for h in hits]
    assert len(set(lines)) == 15 and {d for d, _ in lines} == {"2026-01-09", "2026-01-10"}


@pytest.mark.parametrize("chars", [1, 5, 40, 240])
def test_snippet_stays_within_its_budget(index: Index, settle: Settle, chars: int) -> None:
    put(index, "diary/2026-01-10.md", entry("lorem ipsum " * 40 + "kafka 乌龙茶 " + "dolor " * 40))
    settle(index)
    for query in ("kafka", "乌龙茶"):
        snippet = index.search(query, snippet_chars=chars).hits[0].snippet
        assert 0 < len(snippet) <= chars
        if chars >= 40:
            assert query in snippet


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_empty_query_is_invalid(index: Index, query: str) -> None:
    with pytest.raises(InvalidParams) as caught:
        index.search(query)
    assert caught.value.reason == "invalid_query"


def test_query_without_letters_is_invalid(index: Index) -> None:
    with pytest.raises(InvalidParams):
        index.search("-- !!")


def test_stats_count_committed_and_queued(index: Index) -> None:
    put(index, "diary/2026-01-09.md", entry("a"), entry("b", 2))
    index.commit()
    put(index, "diary/2026-01-10.md", entry("c"))
    stats = index.stats()
    assert (stats["entries"], stats["files"], stats["queued"], stats["state"]) == (3, 2, 1, "ready")


# -- opening and recovery ---------------------------------------------------------


def test_reopen_keeps_data_and_the_analyzer(state: Path, index: Index) -> None:
    put(index, "diary/2026-01-10.md", entry("我最喜欢的饮料是乌龙茶 CAFÉ"))
    index.close()
    again = Index(state, "identity-1")
    assert again.open() is False
    try:
        assert texts(again, "乌龙茶 cafe") == ["我最喜欢的饮料是乌龙茶 CAFÉ"]
        assert len(again.file_records()) == 1
    finally:
        again.close()


def test_state_dir_is_private(state: Path) -> None:
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    ix = Index(state, "identity-1")
    ix.open()
    ix.close()
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def _manifest(state: Path) -> Path:
    return state / "manifest.json"


def _segments(state: Path) -> list[Path]:
    return sorted((state / "index").glob("*.seg"))


def _tocs(state: Path) -> list[Path]:
    return sorted((state / "index").glob("*.toc"))


def _edit_manifest(state: Path, **changes: object) -> None:
    manifest = json.loads(_manifest(state).read_text())
    _manifest(state).write_text(json.dumps({**manifest, **changes}))


def _truncate_segments(state: Path) -> None:
    for path in _segments(state):
        os.truncate(path, path.stat().st_size // 2)


def _garble_tocs(state: Path) -> None:
    for path in _tocs(state):
        path.write_bytes(b"garbage" * 20)


def _remove_index_dir(state: Path) -> None:
    for path in (state / "index").iterdir():
        path.unlink()
    (state / "index").rmdir()


DAMAGE: dict[str, Callable[[Path], object]] = {
    "manifest missing": lambda s: _manifest(s).unlink(),
    "manifest garbage": lambda s: _manifest(s).write_text("{not json"),
    "manifest not an object": lambda s: _manifest(s).write_text("[1]"),
    "other schema": lambda s: _edit_manifest(s, schema_version=SCHEMA_VERSION + 1),
    "other analyzer": lambda s: _edit_manifest(s, analyzer_version=0),
    "other whoosh": lambda s: _edit_manifest(s, whoosh_version="2.7.4"),
    "truncated segment": _truncate_segments,
    "garbage toc": _garble_tocs,
    "index dir missing": _remove_index_dir,
}


# Whoosh leaves the file of a TOC it cannot parse for the garbage collector to close.
LEAKS_A_FILE = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(name, marks=LEAKS_A_FILE) if name in ("garbage toc", "truncated segment") else name
        for name in sorted(DAMAGE)
    ],
)
def test_damaged_index_is_moved_aside_and_recreated(state: Path, damage: str) -> None:
    ix = Index(state, "identity-1")
    ix.open()
    put(ix, "diary/2026-01-10.md", entry("kafka"))
    ix.close()
    DAMAGE[damage](state)
    again = Index(state, "identity-1")
    assert again.open() is True
    try:
        assert (again.search("kafka").hits, again.search("kafka").total) == ([], 0)
        assert again.file_records() == {}
        put(again, "diary/2026-01-10.md", entry("kafka again"))
        again.commit()
        assert texts(again, "kafka") == ["kafka again"]
    finally:
        again.close()
    aside = [p for p in state.iterdir() if p.name.startswith("index.old-")]
    assert len(aside) == (0 if damage == "index dir missing" else 1)


def test_other_identity_starts_fresh(state: Path, index: Index) -> None:
    put(index, "diary/2026-01-10.md", entry("kafka"))
    index.close()
    other = Index(state, "identity-2")
    assert other.open() is True
    try:
        assert other.search("kafka").total == 0
    finally:
        other.close()


def test_only_the_newest_two_old_dirs_are_kept(state: Path) -> None:
    names = []
    for n in range(4):
        ix = Index(state, f"identity-{n}")
        assert ix.open() is True
        ix.close()
        names = sorted(p.name for p in state.iterdir() if p.name.startswith("index.old-"))
    assert len(names) == 2


# -- writing ----------------------------------------------------------------------


def _dump(directory: Path) -> dict[str, Any]:
    """Every term's statistics and postings, and every live document's stored fields, text length and stamp."""
    reader = open_whoosh(directory).reader()
    try:
        terms = {}
        for key in reader.all_terms():
            info, matcher, postings = reader.term_info(*key), reader.postings(*key), []
            while matcher.is_active():
                postings.append((matcher.id(), matcher.weight(), matcher.value() or b""))
                matcher.next()
            stats = (info.weight(), info.doc_frequency(), info.max_weight(), info.min_id(), info.max_id())
            terms[key] = (stats, postings)
        docs = [(n, reader.stored_fields(n), reader.doc_field_length(n, "text")) for n in reader.all_doc_ids()]
        return {"terms": terms, "docs": docs, "stamps": list(reader.column_reader("stamp"))}
    finally:
        reader.close()


def _write_batches(directory: Path, make_writer: Callable[[Any], Any], batches: list[dict[str, list[Entry]]]) -> None:
    """Commit batches of files (each replacing any earlier version) with the given writer."""
    directory.mkdir()
    ix = whoosh_index.create_in(str(directory), make_schema())
    for batch in batches:
        writer = make_writer(ix)
        for name in batch:
            writer.delete_by_term("path", record(name).path)
        for name, entries in batch.items():
            add_file(writer, record(name), entries)
        writer.commit()


def _writer_batches() -> list[dict[str, list[Entry]]]:
    """Days of entries with values (triggers), long and short lists, then rewrites that delete documents."""
    rng = random.Random(5)
    words = ["common", "kafka", "乌龙茶", "deploy"] + [f"rare{n}" for n in range(300)]

    def day(date: str, count: int) -> list[Entry]:
        return [
            entry(
                " ".join(["common", *rng.choices(words, k=rng.randint(1, 8))]),
                n,
                date=date,
                type="decision" if n % 7 == 0 else "note",
                key=f"k{n % 5}" if n % 7 == 0 else None,
                triggers=("file:app.py", f"tool:t{n % 3}") if n % 4 == 0 else (),
                status="tombstoned" if n % 11 == 0 else "live",
            )
            for n in range(1, count + 1)
        ]

    batches = [{"diary/2026-01-10.md": day("2026-01-10", 2600)}, {"diary/2026-01-11.md": day("2026-01-11", 40)}]
    batches += [{f"diary/2026-01-{d}.md": day(f"2026-01-{d}", 5)} for d in range(12, 20)]
    return [*batches, {"diary/2026-01-10.md": day("2026-01-10", 2300)}, {"diary/2026-01-13.md": []}]


def test_braind_writer_writes_what_whoosh_writes(tmp_path: Path) -> None:
    """Short lists inlined, long ones in several blocks, values, deletions and merges: all read back alike."""
    batches = _writer_batches()
    _write_batches(tmp_path / "braind", open_writer, batches)
    _write_batches(tmp_path / "whoosh", lambda ix: ix.writer(), batches)
    ours, theirs = _dump(tmp_path / "braind"), _dump(tmp_path / "whoosh")
    assert ours == theirs
    lengths = [len(postings) for _, postings in ours["terms"].values()]
    assert max(lengths) > 2 * BLOCK_LIMIT and min(lengths) < INLINE_LIMIT


def test_a_merge_copies_segments_as_whooshs_own_merge_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments with deletions, values, inlined and blocked lists merged into one: the same terms and documents."""
    blocks = 0
    read_blocks = writer_module._posting_blocks

    def counted(*args: Any) -> Iterator[Any]:
        nonlocal blocks
        for block in read_blocks(*args):
            blocks += 1
            yield block

    monkeypatch.setattr(writer_module, "_posting_blocks", counted)
    batches = _writer_batches()
    for name, make_writer in (("braind", open_writer), ("whoosh", lambda ix: ix.writer())):
        _write_batches(tmp_path / name, lambda ix, make=make_writer: _unmerged(make(ix)), batches)
        ix = open_whoosh(tmp_path / name)
        assert len(ix._segments()) == len(batches)
        make_writer(ix).commit(optimize=True)  # every segment merged into one by this writer
        assert len(open_whoosh(tmp_path / name)._segments()) == 1
    assert blocks > len(batches)  # the merge went through braind's block copy
    ours, theirs = _dump(tmp_path / "braind"), _dump(tmp_path / "whoosh")
    assert ours == theirs
    final = {name: entries for batch in batches for name, entries in batch.items()}  # each file's last version
    assert len(ours["docs"]) == sum(1 + len(entries) for entries in final.values())  # a record, then its entries


def _unmerged(writer: Any) -> Any:
    """A writer whose commit never merges segments, so that each batch stays a segment of its own."""
    commit = writer.commit
    writer.commit = lambda: commit(merge=False)
    return writer


@pytest.mark.parametrize("format_", [Existence(), Frequency()], ids=["without values", "with values"])
def test_short_lists_are_inlined_alike_posting_by_posting_and_whole(tmp_path: Path, format_: Any) -> None:
    """Whoosh's own per-posting path inlines with braind's codec; the whole-list path's term info reads the same."""
    postings = Postings()
    for doc, weight in [(3, 1.0), (9, 2.0), (40, 1.0)]:
        postings.docs.append(doc)
        postings.weights.append(weight)
        postings.values.extend([pack_uint(int(weight))] if format_.posting_size else [])
    with FileStorage(str(tmp_path)).create_file("postings") as file:
        writer = Codec().postings_writer(file)
        writer.start_postings(format_, W3TermInfo())
        for doc, weight, value in zip(postings.docs, postings.weights, postings.values or [b""] * 3, strict=True):
            writer.add_posting(doc, weight, value)
        terminfo = writer.finish_postings()
        assert terminfo.is_inlined() and not writer.written()
        whole = W3TermInfo.from_bytes(writer.write_all(format_, postings))
        assert whole.to_bytes() == terminfo.to_bytes()
        expected = ((3, 9, 40), (1.0, 2.0, 1.0), tuple(postings.values) or (b"", b"", b""))
        assert whole.inlined_postings() == terminfo.inlined_postings() == expected


def test_an_inlined_list_is_pickled_with_a_protocol_that_writes_bytes_as_bytes() -> None:
    """Protocol 2 writes each empty value of an inlined list as a call to bytes(); the term info stays small."""
    postings = Postings([3, 9, 40], [1.0, 2.0, 1.0])
    info = Codec().postings_writer(None).write_all(Existence(), postings)
    assert b"bytes" not in info
    assert W3TermInfo.from_bytes(info).inlined_postings() == ((3, 9, 40), (1.0, 2.0, 1.0), (b"", b"", b""))


@pytest.mark.parametrize(
    ("small_runs", "runs_batch"),
    [(0, pool_module.RUNS_BATCH), (0, 20), (pool_module.SMALL_RUNS, pool_module.RUNS_BATCH)],
    ids=["grouped by NumPy", "grouped by NumPy, written 20 postings at a time", "grouped in Python"],
)
def test_postings_gathered_as_documents_arrive_come_out_as_the_per_posting_path_orders_them(
    small_runs: int, runs_batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Terms of any script in the order of their bytes, each list in document order, a merge's blocks after."""
    monkeypatch.setattr(pool_module, "SMALL_RUNS", small_runs)
    monkeypatch.setattr(pool_module, "RUNS_BATCH", runs_batch)
    rng = random.Random(3)
    words = ["a", "ab", "z", "zz", "é", "ß", "乌", "乌龙", "\U0001d518x", "\uffefy"]
    gathered, reference = pool_module.TermPool(), pool_module.TermPool()
    for doc in range(400):
        counts = {word: rng.randint(1, 3) for word in rng.sample(words, rng.randint(1, len(words)))}
        gathered.arrivals("text").add(doc, counts)
        gathered.arrivals("path").add_one(doc, f"p{doc % 53}", 1.0)  # lists shorter than a batch, and
        gathered.arrivals("type").add_one(doc, "note", 1.0)  # one longer
        for word, count in counts.items():
            reference.add_term(reference.terms("text"), word.encode(), doc, float(count))
        reference.add_term(reference.terms("path"), f"p{doc % 53}".encode(), doc, 1.0)
        reference.add_term(reference.terms("type"), b"note", doc, 1.0)
    for pool in (gathered, reference):  # a merged segment's postings, after the new documents
        pool.add_block("text", "é".encode(), ([0, 2], [1.0, 2.0], None), 400)
        pool.add_block("text", b"new", ([5], [1.0], None), 400)

    def lists(pool: pool_module.TermPool, field: str) -> list[tuple[bytes, list[int], list[float]]]:
        return [(text, list(p.docs), list(p.weights)) for text, p in pool.sorted_terms(field)]

    assert gathered.fields == ["path", "text", "type"]
    for field in ("text", "path", "type"):
        ours = lists(gathered, field)
        assert ours == lists(reference, field)
        assert [text for text, _, _ in ours] == sorted(text for text, _, _ in ours)
        assert all(docs == sorted(docs) for _, docs, _ in ours)


def test_a_document_with_an_unknown_field_is_refused_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """Whoosh's contract: the field is named; no posting or stored field of the refused document is written."""
    ix = whoosh_index.create_in(str(tmp_path), make_schema())
    writer = open_writer(ix)
    with pytest.raises(UnknownFieldError, match="colour"):
        writer.add_document(path="/r/diary/2026-01-10.md", text="persimmon", realm="user", colour="red")
    add_file(writer, record("diary/2026-01-10.md"), [entry("quince jam")])
    writer.commit()
    with open_whoosh(tmp_path).searcher() as searcher:
        assert searcher.doc_count() == 2  # the file's record and its entry
        assert list(searcher.lexicon("text")) == [b"jam", b"quinc"]
        assert [doc.get("realm") for doc in searcher.documents() if "text" in doc] == ["user"]


def test_stored_fields_are_written_as_their_bytes_and_read_back_by_whoosh(tmp_path: Path) -> None:
    """Stored fields at zlib level 0: an entry's text lies in the segment as it is, and Whoosh reads it."""
    text = "oolong tea at the harbour market"
    ix = whoosh_index.create_in(str(tmp_path), make_schema())
    writer = open_writer(ix)
    add_file(writer, record("diary/2026-01-10.md"), [entry(text)])
    writer.commit()
    written = b"".join(path.read_bytes() for path in tmp_path.iterdir() if path.is_file())
    assert text.encode() in written
    with open_whoosh(tmp_path).searcher() as searcher:
        assert [doc["text"] for doc in searcher.documents() if "text" in doc] == [text]


@pytest.mark.parametrize("size", [0, 1, 300, 16_000, 65_535, 65_536, 200_000])
def test_stored_values_are_zlib_streams_of_stored_blocks(size: int) -> None:
    """What zlib's level 0 makes (byte for byte while zlib keeps one block), read back by zlib at any size."""
    data = random.Random(size).randbytes(size)
    stream = writer_module.stored_zlib(data)
    assert zlib.decompress(stream) == data
    assert len(stream) == len(data) + 6 + 5 * max(1, -(-size // writer_module.STORED_BLOCK))
    if size <= 300:
        assert stream == zlib.compress(data, 0)


def test_select_by_fingerprint_checks_the_whole_fingerprint(index: Index, settle: Settle) -> None:
    """The index holds only each fingerprint's head: entries sharing it are told apart by the whole."""
    entries = [entry(f"note {n}", n) for n in range(1, 400)]
    put(index, "diary/2026-01-10.md", *entries)
    settle(index)
    heads: dict[str, list[Entry]] = {}
    for e in entries:
        heads.setdefault(e.fp[:3], []).append(e)
    first, second = next(group for group in heads.values() if len(group) > 1)[:2]

    def select(values: list[str], prefix: bool = False) -> list[Entry]:
        return sorted(index.select("fp", values, prefix), key=lambda e: e.line)

    def starting(prefix: str) -> list[Entry]:
        return [e for e in entries if e.fp.startswith(prefix)]

    assert select([first.fp]) == [first]
    assert select([second.fp, first.fp]) == sorted([first, second], key=lambda e: e.line)
    for length in (1, 2, 3, 4, 12):
        assert select([first.fp[:length]], prefix=True) == starting(first.fp[:length])
    assert len(select([first.fp[:3]], prefix=True)) >= 2
    assert select([first.fp[:3]]) == []  # exact: no fingerprint is three characters long
    assert select(["fffffffffffg", "x"], prefix=True) == []


# -- rebuild ----------------------------------------------------------------------


def test_rebuild_swaps_in_a_new_index_while_the_old_one_answers(index: Index) -> None:
    put(index, "diary/2026-01-10.md", entry("old kafka"))
    index.commit()
    rebuild = index.rebuild()
    assert index.stats()["state"] == "rebuilding"
    rebuild.add(record("diary/2026-01-11.md"), [entry("rebuilt kafka", date="2026-01-11")])
    assert texts(index, "kafka") == ["old kafka"]
    generation = index.generation
    rebuild.finish()
    assert texts(index, "kafka") == ["rebuilt kafka"]
    assert index.generation > generation and index.stats()["state"] == "ready"
    assert set(index.file_records()) == {record("diary/2026-01-11.md").path}


def test_writes_during_a_rebuild_survive_the_swap(index: Index) -> None:
    stale = put(index, "diary/2026-01-09.md", entry("stale kafka", date="2026-01-09"))
    index.commit()
    rebuild = index.rebuild()
    rebuild.add(stale, [entry("stale kafka", date="2026-01-09")])
    rebuild.add(record("diary/2026-01-10.md"), [entry("first kafka")])
    put(index, "diary/2026-01-10.md", entry("edited kafka"))
    index.commit()
    index.remove_file(stale.path)
    put(index, "diary/2026-01-11.md", entry("queued kafka", date="2026-01-11"))
    rebuild.finish()
    assert sorted(texts(index, "kafka")) == ["edited kafka", "queued kafka"]
    index.commit()
    assert sorted(texts(index, "kafka")) == ["edited kafka", "queued kafka"]
    assert stale.path not in index.file_records()


def test_aborted_rebuild_leaves_the_live_index(state: Path, index: Index) -> None:
    put(index, "diary/2026-01-10.md", entry("kafka"))
    rebuild = index.rebuild()
    rebuild.add(record("diary/2026-01-11.md"), [entry("other")])
    rebuild.abort()
    assert texts(index, "kafka") == ["kafka"] and index.stats()["state"] == "ready"
    assert not [p for p in state.iterdir() if p.name.startswith("index.new-")]


def test_rebuilt_index_is_reopened_without_a_rebuild(state: Path, index: Index) -> None:
    rebuild = index.rebuild()
    rebuild.add(record("diary/2026-01-10.md"), [entry("kafka")])
    rebuild.finish()
    index.close()
    again = Index(state, "identity-1")
    assert again.open() is False
    try:
        assert texts(again, "kafka") == ["kafka"]
    finally:
        again.close()


# -- threads ----------------------------------------------------------------------


def test_concurrent_searches_while_a_writer_commits(state: Path) -> None:
    ix = Index(state, "identity-1", commit_ms=10)
    ix.open()
    ix.start()
    put(ix, "diary/2026-01-01.md", *(entry(f"stable kafka {n}", n, date="2026-01-01") for n in range(1, 21)))
    put(ix, "diary/2026-01-02.md", *(entry("moving kafka", i, date="2026-01-02") for i in range(1, 6)))
    ix.commit()
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        for n in range(60):
            put(ix, "diary/2026-01-02.md", *(entry(f"moving kafka {n}", i, date="2026-01-02") for i in range(1, 6)))
            if n % 10 == 0:
                ix.commit()
        stop.set()

    def reader() -> None:
        try:
            while not stop.is_set():
                found = ix.search("kafka", limit=100)
                hits, total = found.hits, found.total
                moving = {h.entry.text for h in hits if h.entry.text.startswith("moving")}
                assert total == 25 and len(hits) == 25 and len(moving) == 1, (total, moving)
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=reader) for _ in range(8)] + [threading.Thread(target=writer)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ix.close()
    assert errors == []


def test_a_commit_that_fails_half_way_leaves_the_index_unlocked(index: Index, monkeypatch: Any) -> None:
    """A full disk while the table of contents is written: the batch stays queued and the next commit goes through."""
    from whoosh.writing import SegmentWriter

    put(index, "diary/2026-01-10.md", entry("kafka on a full disk"))

    def full(self: Any, *args: Any) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(SegmentWriter, "_commit_toc", full)
        with pytest.raises(OSError):
            index.commit()
    assert index.stats()["queued"] == 1
    index.commit()  # nothing of the failed one is left in the way: not its batch, not its lock
    assert index.stats()["queued"] == 0 and texts(index, "kafka") == ["kafka on a full disk"]


def test_holding_more_of_the_words_outweighs_one_rarer_word(index: Index, settle: Settle) -> None:
    put(index, "diary/2026-01-10.md", *(entry(f"alpha filler {n}", n) for n in range(1, 6)))
    put(index, "diary/2026-01-11.md", *(entry(f"gamma other {n}", n, date="2026-01-11") for n in range(1, 2)))
    put(index, "diary/2026-01-12.md", entry("zeta", 1, date="2026-01-12"))
    put(index, "diary/2026-01-13.md", entry("alpha gamma", 1, date="2026-01-13"))
    settle(index)
    hits = index.search("gamma zeta alpha").hits  # no two of the words side by side: no phrase bonus
    assert [h.entry.text for h in hits[:2]] == ["alpha gamma", "zeta"]
    assert hits[0].score / ranking.coordination(2, 3) < hits[1].score  # its words alone weigh less than the rare one


def test_candidates_past_the_limit_are_loaded_only_when_the_phrase_bonus_could_lift_them() -> None:
    full = [ranking.Candidate(True, score, 0, n) for n, score in enumerate([9.0, 8.0, 6.5, 5.0])]
    partial = [ranking.Candidate(False, 8.5, 0, 10)]
    chosen = ranking.reachable(full, partial, 2, 1.5)
    assert [c.ref for c in chosen] == [0, 1, 2]  # 6.5 + 1.5 reaches 8.0; 5.0 cannot; a partial one never passes
    assert [c.ref for c in ranking.reachable(full[:1], partial, 1, 0.0)] == [0]
    assert [c.ref for c in ranking.reachable(full[:1], partial, 3, 0.0)] == [0, 10]
    many = [ranking.Candidate(True, 1.0, 0, n) for n in range(40)]
    assert len(ranking.reachable(many, [], 5, 1.0)) == ranking.DEPTH  # ties all within reach: as deep as it looks
    assert len(ranking.reachable(many, [], 30, 1.0)) == 30
