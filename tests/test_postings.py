"""The recall engine's in-memory views of real Whoosh segments agree with what Whoosh reads itself."""

from __future__ import annotations

import pickletools
import random
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from whoosh.codec.whoosh3 import LENGTHS_COLUMN, W3TermInfo

from braind.index import analysis, ranking
from braind.index.api import FileRecord
from braind.index.whoosh import caches, compat, decoding, postings, tables, writer
from braind.index.whoosh.index import Index
from braind.index.whoosh.lexicon import Lexicon
from braind.model.entries import Entry

ROOT = "/mem/user"
WORDS = [
    "deploy",
    "deployed",
    "deployment",
    "kafka",
    "broker",
    "cafe",
    "café",
    "乌龙茶",
    "饮料",
    "alpha",
    "alp",
    "zeta",
]


def _entry(text: str, line: int, date: str) -> Entry:
    return Entry(root=ROOT, realm="user", path=f"{ROOT}/diary/{date}.md", line=line, date=date, time="09:30", text=text)


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    """An index of several segments (one commit per day) with deletions (a day rewritten)."""
    ix = Index(tmp_path / "state", "identity-1")
    ix.open()
    rng = random.Random(5)
    for day in range(1, 7):
        date = f"2026-02-0{day}"
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8))) for _ in range(15)]
        ix.replace_file(_record(date), [_entry(text, n, date) for n, text in enumerate(lines, 1)])
        ix.commit()
    ix.replace_file(_record("2026-02-02"), [_entry("kafka broker rewritten", 1, "2026-02-02")])
    ix.commit()
    yield ix
    ix.close()


def _record(date: str) -> FileRecord:
    return FileRecord(ROOT, f"{ROOT}/diary/{date}.md", 1, 1, "0" * 64)


def _readers(index: Index) -> list[Any]:
    return [sub.reader() for sub, _ in index._searcher.leaf_searchers()]


@pytest.mark.parametrize(
    "prefix", [b"dep", b"deploy", b"deployed", b"kaf", b"caf", "乌".encode(), b"a", b"zz", b"", b"\xff"]
)
def test_a_lexicon_expands_and_finds_what_whoosh_finds(index: Index, prefix: bytes) -> None:
    readers = _readers(index)
    assert len(readers) > 1
    for reader in readers:
        lexicon = Lexicon.read(reader, analysis.FIELD)
        assert lexicon is not None
        found = lexicon.infos(prefix, True, compat.term_read(reader))
        assert [term for term, _ in found] == list(reader.expand_prefix(analysis.FIELD, prefix))
        for term, info in found:
            mine, theirs = W3TermInfo.from_bytes(info), reader.term_info(analysis.FIELD, term)
            assert (mine.doc_frequency(), mine.weight()) == (theirs.doc_frequency(), theirs.weight())
        exact = lexicon.infos(prefix, False, compat.term_read(reader))
        assert [term for term, _ in exact] == ([prefix] if (analysis.FIELD, prefix) in reader else [])


def test_a_lexicon_finds_by_bisection_what_a_walk_through_every_term_finds() -> None:
    rng = random.Random(11)
    alphabet = b"ab\xfe\xff"
    terms = sorted({bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 5))) for _ in range(700)})
    infos = [b"info %d" % i for i in range(len(terms))]
    records = [struct.pack("!ii", len(t) + 2, len(i)) + b"\x00\x01" + t + i for t, i in zip(terms, infos, strict=True)]
    file = b"head" + b"".join(records)
    lexicon = Lexicon.of_run(file[4:], 4)
    read = lambda position, length: file[position : position + length]  # noqa: E731
    assert [lexicon.entry(i, read) for i in range(len(lexicon))] == list(zip(terms, infos, strict=True))
    probes = [b"", b"\xff", b"\xff\xff\xff\xff\xff\xff", *terms[::7], *(t[:-1] for t in terms[::5])]
    probes += [bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(300)]
    for probe in probes:
        begins = [i for i, term in enumerate(terms) if term.startswith(probe)]
        assert list(lexicon.find(probe, prefix=True)) == begins, probe
        assert list(lexicon.find(probe, prefix=False)) == [i for i, term in enumerate(terms) if term == probe]


def test_stored_fields_read_in_one_read_are_whooshs(index: Index) -> None:
    view = index.view()
    assert all(compat.stored_read(reader) is not None for reader in _readers(index))  # the fast path is taken
    for docnum in range(view.size):  # every segment's documents, deleted ones included
        assert view.stored(docnum) == index._searcher.stored_fields(docnum), docnum


def test_a_lexicon_of_a_field_a_segment_lacks_is_empty(index: Index) -> None:
    for reader in _readers(index):
        lexicon = Lexicon.read(reader, "no-such-field")
        assert lexicon is not None and len(lexicon) == 0 and lexicon.infos(b"a", True, compat.term_read(reader)) == []


def test_numeric_columns_read_in_one_go_equal_whoosh_reading_each_document(index: Index) -> None:
    for reader in _readers(index):
        stamps = reader.column_reader("stamp", translate=False)
        lengths = reader._perdoc.column_reader(f"_{analysis.FIELD}_len", LENGTHS_COLUMN)
        assert list(compat.column_values(stamps)) == list(stamps.load())
        assert list(compat.column_values(lengths)) == list(lengths.load())
        assert len(compat.column_values(stamps)) == reader.doc_count_all()


def test_a_commit_reads_only_the_new_segments_postings(index: Index) -> None:
    index.search("kafka")
    before = {key for key in postings._POSTINGS._lists if key[1:] == ("text", b"kafka")}
    assert before
    index.replace_file(_record("2026-02-09"), [_entry("kafka again", 1, "2026-02-09")])
    index.commit()
    assert "kafka again" in [hit.entry.text for hit in index.search("kafka", limit=100).hits]
    after = {key for key in postings._POSTINGS._lists if key[1:] == ("text", b"kafka")}
    assert len(after - before) == 1  # the new segment's list; the others were kept


def test_the_postings_cache_keeps_to_its_budget_least_recently_used_first() -> None:
    cache = caches.ArrayCache(budget=3 * (32 + caches.ITEM_BYTES) + 10)
    lists = {name: (np.arange(4, dtype=np.uint32), np.ones(4, dtype=np.float32)) for name in "abc"}  # 32 bytes each
    reads: list[str] = []

    def read(name: str) -> tuple[np.ndarray, np.ndarray]:
        reads.append(name)
        return lists[name]

    for name in ["a", "b", "a", "c", "b"]:
        cache.get(("segment", "text", name.encode()), lambda name=name: read(name))  # type: ignore[misc]
    assert reads == ["a", "b", "c"]  # three fit
    big = (np.arange(400, dtype=np.uint32), np.ones(400, dtype=np.float32))
    cache.get(("segment", "text", b"big"), lambda: big)  # larger than the budget: read, not kept
    assert ("segment", "text", b"big") not in cache._lists
    cache.get(("segment", "text", b"d"), lambda: lists["a"])
    assert ("segment", "text", b"a") not in cache._lists  # the least recently used went


def test_the_postings_of_a_segment_that_is_gone_are_forgotten_and_their_bytes_freed() -> None:
    cache = caches.ArrayCache(budget=1 << 20)
    arrays = (np.arange(4, dtype=np.uint32), np.ones(4, dtype=np.float32))
    for segment in ("merged", "live"):
        for word in (b"a", b"b"):
            cache.get((segment, "text", word), lambda: arrays)
    cache.forget({"merged", "never cached"})
    assert sorted(cache._lists) == [("live", "text", b"a"), ("live", "text", b"b")]
    assert cache.held == 2 * caches.nbytes(arrays)
    cache.forget({"live"})
    assert not cache._lists and cache.held == 0 and not cache._by_segment


def test_stored_documents_are_kept_to_their_budget() -> None:
    stored = caches.StoredDocuments(budget=2)
    reads: list[int] = []

    def read(n: int) -> dict[str, Any]:
        reads.append(n)
        return {"n": n}

    for n in [1, 2, 1, 3, 1, 2]:
        assert stored.get(("segment", n), lambda n=n: read(n)) == {"n": n}  # type: ignore[misc]
    assert reads == [1, 2, 3, 2]


def test_a_lexicon_of_many_terms_finds_each_of_them_and_each_prefix(tmp_path: Path) -> None:
    ix = Index(tmp_path / "state", "identity-1")
    ix.open()
    rng = random.Random(9)
    written = sorted({"".join(rng.choices("abcdefgh", k=rng.randint(1, 6))) for _ in range(600)})
    ix.replace_file(_record("2026-03-01"), [_entry(w, n, "2026-03-01") for n, w in enumerate(written, 1)])
    words = sorted({term for w in written for term in analysis.language().stems(w)})  # what the index holds
    ix.commit()
    try:
        (reader,) = _readers(ix)
        lexicon = Lexicon.read(reader, analysis.FIELD)
        assert lexicon is not None and len(lexicon) == len(list(reader.lexicon(analysis.FIELD)))
        for probe in [*words, *(w[:2] for w in words), "0", "hhhhhhh", "a" * 7]:
            term = probe.encode()
            assert [t for t, _ in lexicon.infos(term, True, compat.term_read(reader))] == list(
                reader.expand_prefix(analysis.FIELD, term)
            )
            assert [t for t, _ in lexicon.infos(term, False, compat.term_read(reader))] == (
                [term] if probe in words else []
            )
    finally:
        ix.close()


def test_term_docs_are_whooshs_document_numbers_without_deleted_ones(index: Index) -> None:
    view = index._view_now()
    for date in ["2026-02-01", "2026-02-02", "2026-02-06", "2026-03-09"]:
        path = f"{ROOT}/diary/{date}.md"
        assert view.term_docs("path", path) == set(index._searcher.document_numbers(path=path))
    assert view.term_docs("path", f"{ROOT}/diary/2026-02-02.md")  # rewritten: only the new documents
    assert view.term_docs("no-such-field", "x") == set()


def test_decoded_posting_lists_of_several_blocks_equal_whooshs(tmp_path: Path) -> None:
    ix = Index(tmp_path / "state", "identity-1")
    ix.open()
    rng = random.Random(3)
    lines = [" ".join(rng.choice(["kafka", "broker", "zeta"]) for _ in range(rng.randint(1, 4))) for _ in range(2500)]
    ix.replace_file(_record("2026-03-01"), [_entry(t, n, "2026-03-01") for n, t in enumerate(lines, 1)])
    ix.commit()
    try:
        for sub, _ in ix._searcher.leaf_searchers():
            reader = sub.reader()
            for field in (analysis.FIELD,):
                lexicon = Lexicon.read(reader, field)
                assert lexicon is not None
                for term, info in lexicon.infos(b"", True, compat.term_read(reader)):
                    ids, weights = decoding.decode(reader, field, term, W3TermInfo.from_bytes(info))
                    matcher = reader.postings(field, term)
                    theirs = []
                    while matcher.is_active():
                        theirs.append((matcher.id(), matcher.weight()))
                        matcher.next()
                    assert len(theirs) > writer.BLOCK_LIMIT or term not in (b"kafka", b"broker")
                    assert list(zip(ids.tolist(), weights.tolist(), strict=True)) == theirs, (field, term)
    finally:
        ix.close()


def test_a_blocks_numbers_and_weights_are_pickled_as_their_bytes(tmp_path: Path) -> None:
    """Pickled by Whoosh's protocol 2, an array becomes a list of numbers, which takes 20 times as long to read."""
    ix = Index(tmp_path / "state", "identity-1")
    ix.open()
    lines = [("kafka " * (1 + n % 3)).strip() for n in range(1500)]
    ix.replace_file(_record("2026-03-01"), [_entry(t, n, "2026-03-01") for n, t in enumerate(lines, 1)])
    ix.commit()
    try:
        (reader,) = _readers(ix)
        lexicon = Lexicon.read(reader, analysis.FIELD)
        assert lexicon is not None
        ((_, raw),) = lexicon.infos(b"kafka", False, compat.term_read(reader))
        info = W3TermInfo.from_bytes(raw)
        offset, length = info.extent()
        length = length[0] if isinstance(length, tuple) else length  # this Whoosh decodes it as a 1-tuple
        data = compat.posting_bytes(compat.segment_terms(reader), offset, length)
        first = [op.name for op, _, _ in pickletools.genops(data[data.index(b"\x80\x04") :])]  # the first block's
        assert "BINBYTES" in first
        assert len([name for name in first if name.startswith(("BININT", "BINFLOAT"))]) < 10  # not one a posting
        ids, weights = decoding.decode(reader, analysis.FIELD, b"kafka", info)
        matcher, theirs = reader.postings(analysis.FIELD, b"kafka"), []
        while matcher.is_active():
            theirs.append((matcher.id(), matcher.weight()))
            matcher.next()
        assert list(zip(ids.tolist(), weights.tolist(), strict=True)) == theirs
        assert sorted(weights.tolist()) == sorted(1 + n % 3 for n in range(1500))
    finally:
        ix.close()


@pytest.mark.parametrize("long_list", [tables.LONG_LIST, 1])
def test_warming_tables_each_segments_lists_as_a_search_would_decode_them_and_stops_at_its_budget(
    index: Index, monkeypatch: pytest.MonkeyPatch, long_list: int
) -> None:
    """Short lists first, long ones (past `long_list` postings; 1: most) after: searches find what they found."""
    words = ["deploy", "dep", "kafka", "caf", "café", "乌", "乌龙", "饮料", "zeta", "zz"]
    modes = (postings.EXACT, postings.LONGER)
    before = {(w, m): index.view().weights(analysis.FIELD, w, m, cache=False) for w in words for m in modes}
    monkeypatch.setattr(tables, "LONG_LIST", long_list)
    monkeypatch.setattr(postings, "WARM_BYTES", 0)
    assert index.warm_postings(10) is False  # the budget is full: no table begun
    monkeypatch.setattr(postings, "WARM_BYTES", postings.CACHE_BYTES)
    steps = 0
    while index.warm_postings(7):
        steps += 1
    readers = _readers(index)
    view = index.view()
    made = [view._segments.find(reader, "table", analysis.FIELD) for reader in readers]
    assert all(made) and steps >= len(readers)  # seven lists a step, a table for each segment
    long = _check_tables(readers, made, long_list, held=False)
    assert long > 0 if long_list == 1 else long == 0
    _check_searches(index, words, modes, before)
    long_steps = 0
    while index.warm_postings(3, long=True):  # then the common words' lists
        long_steps += 1
    assert long_steps >= long / 3 and all(table.complete for table in made)
    _check_tables(readers, made, long_list, held=True)
    _check_searches(index, words, modes, before)


def _check_tables(readers: list[Any], made: list[Any], long_list: int, held: bool) -> int:
    """Each table holds each list as decoded, the long ones only when `held`; how many lists are long."""
    long = 0
    for reader, table in zip(readers, made, strict=True):
        lexicon = Lexicon.read(reader, analysis.FIELD)
        assert lexicon is not None
        for i, (term, info) in enumerate(lexicon.infos(b"", True, compat.term_read(reader))):
            term_info = W3TermInfo.from_bytes(info)
            ids, frequencies = decoding.decode(reader, analysis.FIELD, term, term_info)
            tabled = table.postings(i)
            is_long = term_info.doc_frequency() > long_list
            long += is_long
            if is_long and not held:  # left to the decoded lists' cache
                assert table.missing(range(i, i + 1)) == [i] and not len(tabled[0]), term
            else:
                assert table.missing(range(i, i + 1)) == [], term
                assert tabled[0].tolist() == ids.tolist() and tabled[1].tolist() == frequencies.tolist(), term
        assert table.postings(0)[0].dtype == np.uint16  # a small segment's numbers take two bytes
    return long


def _check_searches(index: Index, words: list[str], modes: tuple[str, ...], before: dict[Any, Any]) -> None:
    """Searches read the tables and find what they found before."""
    for word in words:
        for mode in modes:
            ids, weights = index.view().weights(analysis.FIELD, word, mode, cache=False)
            assert ids.tolist() == before[word, mode][0].tolist() and weights.tolist() == before[word, mode][1].tolist()
        both = index.view().word(analysis.FIELD, word, cache=False)  # one lexicon search for both modes
        assert [a.tolist() for a in both] == [a.tolist() for m in modes for a in before[word, m]], word


def test_neighbours_are_the_live_entries_around_each_one_in_its_file() -> None:
    """Before and after, skipping a deleted entry, never across files nor to a file's own record."""
    from braind.index.whoosh import neighbours

    keys = np.array([0, 7, 7, 9, 7, 7, 7])  # a file record, then entries of files 7 and 9
    lines = np.array([0, 1, 2, 1, 3, 4, 5])
    live = np.array([True, True, True, True, False, True, True])
    before, two_before, after = neighbours.whole(keys, lines, live, [-1, -2, 1])
    none = len(keys)
    assert before.tolist() == [none, none, 1, none, none, 2, 5]
    assert two_before.tolist() == [none, none, none, none, none, 1, 2]
    assert after.tolist() == [none, 2, 5, none, none, 6, none]
    assert {a.dtype for a in (before, two_before, after)} == {np.dtype(np.int32)}  # 4 bytes a document and step


def test_neighbours_carried_over_commits_equal_neighbours_made_whole(tmp_path: Path, monkeypatch: Any) -> None:
    """Appends, edits, deletions and merges, each committed and searched: the carried links are the whole ones."""
    from braind.index.whoosh import neighbours

    carried: list[int] = []
    real = neighbours.carried
    monkeypatch.setattr(neighbours, "carried", lambda *args: carried.append(1) or real(*args))
    rng = random.Random(11)
    words = ["kafka", "deploy", "harbour", "oolong", "ferry"]
    days: dict[str, list[str]] = {}
    ix = Index(tmp_path / "ix", "id")
    ix.open()
    try:
        for step in range(120):
            name = f"2026-01-1{rng.randint(0, 4)}"
            lines = days.setdefault(name, [])
            kind = rng.choice(["append", "append", "append", "edit", "delete", "insert"])
            text = f"{rng.choice(words)} {step}"
            if kind == "append" or not lines:
                lines.append(text)
            elif kind == "edit":
                lines[rng.randrange(len(lines))] = text
            elif kind == "delete":
                del lines[rng.randrange(len(lines))]
            else:
                lines.insert(0, text)
            root = "/m"
            record = FileRecord(root, f"{root}/diary/{name}.md", step, step, f"{step:064d}")
            entries = [
                Entry(root=root, realm="user", path=record.path, line=n, date=name, time="10:00", text=t)
                for n, t in enumerate(lines, start=1)
            ]
            ix.replace_file(record, entries)
            ix.commit()
            ix.search(rng.choice(words))  # the view of each searcher is made, so the next can carry it over
            with ix.reading:
                view = ix.view()
                keys, lines_ = view._column("file_key", "q"), view._column("file_line", "i")
                whole = neighbours.whole(keys, lines_, view.live(), ranking.steps())
                assert all(np.array_equal(a, b) for a, b in zip(view.neighbours(), whole, strict=True)), step
    finally:
        ix.close()
    assert 20 < len(carried) < 120  # most commits carried over; merges made some whole


def test_a_cache_of_lists_counts_empty_ones_against_its_budget() -> None:
    """A word absent from a segment is cached as two empty arrays: they cost memory too, and are dropped in turn."""
    cache = caches.ArrayCache(100 * caches.ITEM_BYTES)
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
    for n in range(10_000):
        cache.get(("segment", f"word{n}"), lambda: empty)
    assert cache.held <= 100 * caches.ITEM_BYTES
    assert cache.get(("segment", "word9999"), lambda: pytest.fail("the newest stays")) is empty
