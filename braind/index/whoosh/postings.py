"""Postings of one Whoosh searcher as arrays, read once per segment and term and kept within a budget.

Recall combines a few words, each a stem that may also begin longer words,
over every partition of memory. Whoosh's matchers decode postings one at a
time and score them in Python. Here a term's posting list is decoded once
per segment into two arrays (document numbers and term frequencies), kept in
one least-recently-used budget of bytes (`caches`; segments never change but by
deletions, so a commit costs only the new segment's reads), and BM25's term
weight (saturated frequency over normalised length) is computed for a
whole list at once with NumPy. The idf is left to the caller, which takes it
from every partition a query covers. A segment whose posting table was built
ahead of searches (`tables`) is read from it instead: a slice, no decode.
"""

from __future__ import annotations

import bisect
import functools
from array import array
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Any, TypeVar, cast

import numpy as np
from whoosh.codec.whoosh3 import LENGTHS_COLUMN, W3TermInfo
from whoosh.reading import TermNotFound
from whoosh.util.numeric import byte_to_length

from braind.index import analysis, ranking
from braind.index.whoosh import compat, neighbours
from braind.index.whoosh.caches import ArrayCache, SegmentCache, StoredDocuments, segment_id
from braind.index.whoosh.decoding import Ids, Values, decode
from braind.index.whoosh.lexicon import Lexicon
from braind.index.whoosh.tables import LongBuilder, PostingTable, TableBuilder, tables_bytes

EXACT, LONGER, PREFIX, RUN = "exact", "longer", "prefix", "run"  # how a query term reads the postings
WORD = "word"  # EXACT and LONGER together, as `SearcherView.word` keeps them
K1, B = ranking.K1, ranking.B  # the posting weights are BM25's, as ranking.FreshScorer computes them
Made = TypeVar("Made")

CACHE_BYTES = 64 << 20  # decoded posting lists kept, all segments together
WARM_BYTES = 48 << 20  # posting tables built ahead of any search, all segments together (1M entries: 47 MB)
VIEW_BYTES = 8 << 20  # weighted lists kept per searcher
TERM_LIST_BYTES = 8 << 20  # a term's merged list in each segment, kept for the searchers after a commit
HEADS = "fp_head"  # the field of fingerprint heads, by which a committed entry is found
STORED_DOCUMENTS = 4096  # loaded entries kept, all indexes together: a few MB
_LENGTHS = np.array([byte_to_length(b) for b in range(256)], dtype=np.float32)
_STAMP = "stamp"
_EMPTY_IDS = np.zeros(0, dtype=np.int64)
_EMPTY_VALUES = np.zeros(0, dtype=np.float32)


def read_segments(searcher: Any, segments: SegmentCache, fields: Sequence[str], shared_with: Any = None) -> None:
    """Cache a searcher's per-segment lexicons, stamps and lengths, but of readers shared with a searcher in use."""
    shared = {id(sub.reader()) for sub, _ in shared_with.leaf_searchers()} if shared_with is not None else set()
    for reader in (sub.reader() for sub, _ in searcher.leaf_searchers()):
        if id(reader) not in shared:
            for field in fields:
                segments.get(reader, "lexicon", field, Lexicon.read)
            segments.get(reader, "stamps", analysis.FIELD, _leaf_stamps)
            segments.get(reader, "lengths", analysis.FIELD, _leaf_lengths)


def forget_segments(segments: Collection[Hashable]) -> None:
    """Drop what the shared caches hold of segments an index no longer has."""
    if segments:
        _POSTINGS.forget(segments)
        _TERM_LISTS.forget(segments)


_STORED = StoredDocuments(STORED_DOCUMENTS)
_POSTINGS = ArrayCache(CACHE_BYTES)
_TERM_LISTS = ArrayCache(TERM_LIST_BYTES)


class SearcherView:
    """Per-searcher arrays (norms, stamps, deletions) over the shared per-segment posting lists.

    Not thread-safe: callers hold the lock that guards the searcher.
    """

    def __init__(
        self, searcher: Any, segments: SegmentCache | None = None, previous: SearcherView | None = None
    ) -> None:
        self.searcher = searcher
        self._segments = SegmentCache() if segments is None else segments  # shared across searchers
        self._leaves: list[tuple[Any, int]] = list(searcher.leaf_searchers())
        self._offsets = [offset for _, offset in self._leaves]
        self.size = int(searcher.doc_count_all())  # document numbers run from 0 to size - 1
        self.layout = _layout(self._leaves)  # (segment, documents) in order; None when a segment has no id
        carried = previous.linked() if previous is not None and _extends(self.layout, previous.layout) else None
        self._carried = carried  # the previous searcher's links and live documents, to carry over
        self._norm: dict[str, Values] = {}
        self._stamps: np.ndarray | None = None
        self._neighbours: list[np.ndarray] | None = None
        self._live: np.ndarray | None = None
        self._whole = not any(sub.reader().has_deletions() for sub, _ in self._leaves)  # no document deleted
        self._weights = ArrayCache(VIEW_BYTES)
        self._stored = compat.StoredFields(searcher)
        self.selected: dict[Any, Any] = {}  # the index's select() results for this searcher
        self.masks: dict[Any, np.ndarray] = {}  # the index's filter masks for this searcher

    def weights(self, field: str, key: str, mode: str, cache: bool = True) -> tuple[Ids, Values]:
        """Every live document holding a term (or, by mode, longer terms it begins) and its BM25 term weight.

        Modes: EXACT the term itself, LONGER every longer term it begins, PREFIX both (a CJK character),
        RUN every bigram of a CJK run, kept where the stored text holds the run itself. No idf.
        """
        if not cache:
            return self._weigh(field, key, mode)
        return self._weights.get((field, key, mode), lambda: self._weigh(field, key, mode))

    def word(self, field: str, key: str, cache: bool = True) -> tuple[Ids, Values, Ids, Values]:
        """weights() of a stem EXACT, then LONGER: one search of each segment's lexicon finds both."""
        if not cache:
            return self._weigh_word(field, key)
        return self._weights.get((field, key, WORD), lambda: self._weigh_word(field, key))

    def _weigh(self, field: str, key: str, mode: str) -> tuple[Ids, Values]:
        """Read a term's postings and weigh them."""
        ids, frequencies = self._read(field, key, mode)
        if mode == RUN:
            return ids, frequencies
        return ids, self._weighed(field, ids, frequencies)

    def _weigh_word(self, field: str, key: str) -> tuple[Ids, Values, Ids, Values]:
        """Read a stem's postings and those of the longer words it begins, and weigh them."""
        encoded = key.encode()
        found = [self._segment_word(sub.reader(), field, encoded) for sub, _ in self._leaves]
        exact_ids, exact = self._gathered([lists[0] for lists in found])
        longer_ids, longer = self._gathered([lists[1] for lists in found])
        return exact_ids, self._weighed(field, exact_ids, exact), longer_ids, self._weighed(field, longer_ids, longer)

    def _weighed(self, field: str, ids: Ids, frequencies: Values) -> Values:
        """BM25's term weight of each posting: its saturated frequency over its document's normalised length."""
        norms = self.norms(field)[ids]
        weights: Values = ((K1 + 1) * frequencies / (frequencies + norms)).astype(np.float32, copy=False)
        return weights

    def _read(self, field: str, key: str, mode: str) -> tuple[Ids, Values]:
        """Document numbers and summed frequencies of a term's postings in every segment, deleted ones left out."""
        if mode == RUN:
            return self._run(field, key)
        encoded = key.encode()
        return self._gathered([self._segment_read(sub.reader(), field, encoded, mode) for sub, _ in self._leaves])

    def _gathered(self, lists: Sequence[tuple[Ids, Values]]) -> tuple[Ids, Values]:
        """Each segment's list of a term (in leaf order) as one, in top-level numbers, deleted documents left out."""
        parts_ids: list[Ids] = []
        parts_values: list[Values] = []
        for (ids, values), (_, offset) in zip(lists, self._leaves, strict=True):
            if not len(ids):
                continue
            ids = ids.astype(np.int64)
            if offset:
                ids += offset
            parts_ids.append(ids)
            parts_values.append(values)
        if not parts_ids:
            return _EMPTY_IDS, _EMPTY_VALUES
        ids = np.concatenate(parts_ids) if len(parts_ids) > 1 else parts_ids[0]
        values = np.concatenate(parts_values) if len(parts_values) > 1 else parts_values[0]
        if self._whole:  # nothing deleted: every posting stands
            return ids, values
        keep = self.live()[ids]
        return (ids, values) if keep.all() else (ids[keep], values[keep])

    def _segment_read(self, reader: Any, field: str, encoded: bytes, mode: str) -> tuple[Ids, Values]:
        """One segment's list of a term by mode: slices of its table, or decoded lists kept for the next searchers."""
        made = functools.partial(self._segment_term, reader, field, encoded, mode)
        if self._segments.find(reader, "table", field) is not None:
            return made()
        return _TERM_LISTS.get((segment_id(reader), field, encoded, mode), made)

    def _segment_word(self, reader: Any, field: str, encoded: bytes) -> tuple[tuple[Ids, Values], tuple[Ids, Values]]:
        """One segment's lists of a stem EXACT and LONGER; from its table, one lexicon search for both."""
        table = self._segments.find(reader, "table", field)
        if table is None:
            return self._segment_read(reader, field, encoded, EXACT), self._segment_read(reader, field, encoded, LONGER)
        exact, longer = _stem_ranges(self._segments.get(reader, "lexicon", field, Lexicon.read), encoded)
        return self._from_table(reader, field, table, exact), self._from_table(reader, field, table, longer)

    def _from_table(self, reader: Any, field: str, table: PostingTable, terms: range) -> tuple[Ids, Values]:
        """A run of terms' postings as one list: the table's slice, and the long lists it leaves out, decoded."""
        left_out = table.missing(terms)
        if not left_out:
            return _spanned(table, terms)
        lexicon, read = self._segments.get(reader, "lexicon", field, Lexicon.read), compat.term_read(reader)
        lists = [self._segment_postings(reader, field, *_term_info(lexicon, index, read)) for index in left_out]
        if len(left_out) < len(terms):
            lists.append(table.span(terms))
        return lists[0] if len(lists) == 1 else _summed(lists)

    def _run(self, field: str, run: str) -> tuple[Ids, Values]:
        """Documents holding every bigram of a CJK run, kept when their text holds the run itself."""
        lists = [self.weights(field, pair, EXACT) for pair in analysis.bigrams(run)]
        ids = lists[0][0]
        for other, _ in lists[1:]:
            ids = np.intersect1d(ids, other, assume_unique=True)
        ids = np.array([n for n in ids.tolist() if run in self.stored(n).get(analysis.FIELD, "")], dtype=np.int64)
        values = np.zeros(len(ids), dtype=np.float32)
        for other, weights in lists:
            values += weights[np.searchsorted(other, ids)]
        return ids, values

    def _segment_term(self, reader: Any, field: str, encoded: bytes, mode: str) -> tuple[Ids, Values]:
        """One segment's postings of a term (by mode) as one list: what every later searcher of it reads again."""
        lists = self._segment_lists(reader, field, encoded, mode)
        if not lists:
            return _EMPTY_IDS, _EMPTY_VALUES
        return lists[0] if len(lists) == 1 else _summed(lists)

    def _segment_lists(self, reader: Any, field: str, encoded: bytes, mode: str) -> list[tuple[Ids, Values]]:
        """One segment's lists of a term (EXACT) or of the longer terms it begins (LONGER, PREFIX: both)."""
        table = self._segments.find(reader, "table", field)
        if table is not None:
            exact, longer = _stem_ranges(self._segments.get(reader, "lexicon", field, Lexicon.read), encoded)
            found = {EXACT: exact, LONGER: longer}.get(mode, range(exact.start, longer.stop))  # PREFIX: both
            return [self._from_table(reader, field, table, found)]
        return [
            self._segment_postings(reader, field, term, info)
            for term, info in self._infos(reader, field, encoded, mode != EXACT)
            if not (mode == LONGER and term == encoded)
        ]

    def _infos(self, reader: Any, field: str, text: bytes, prefix: bool) -> list[tuple[bytes, Any]]:
        """(term, term info) of the term, or of every term beginning with it, in one segment."""
        lexicon = self._segments.get(reader, "lexicon", field, Lexicon.read)
        if lexicon is not None:
            infos = lexicon.infos(text, prefix, compat.term_read(reader))
            return [(term, W3TermInfo.from_bytes(info)) for term, info in infos]
        found = []  # not a W3 segment: Whoosh's own lookups
        for term in reader.expand_prefix(field, text) if prefix else (text,):
            try:
                found.append((term, reader.term_info(field, term)))
            except TermNotFound:
                continue
        return found

    def _segment_postings(self, reader: Any, field: str, term: bytes, info: Any) -> tuple[Ids, Values]:
        """One segment's decoded posting list of a term (segment-local document numbers, frequencies)."""
        key = (segment_id(reader), field, term)
        return _POSTINGS.get(key, lambda: decode(reader, field, term, info))

    def term_docs(self, field: str, term: str) -> set[int]:
        """Live documents whose field holds a term (a file's path, a status), read from the postings directly."""
        ids, _ = self._read(field, term, EXACT)
        return set(ids.tolist())

    def entry_docs(self, head: str, key: int, line: int) -> set[int]:
        """Live documents of one entry: among those of its fingerprint's head, the one at its file's key and line.

        A fingerprint head is shared by a few thousandth of the documents, where a path holds all of
        a busy day's: the cost stays that of a few lookups however large the file.
        """
        ids, _ = self._read(HEADS, head, EXACT)
        return {
            n
            for n in ids.tolist()
            if self._value("file_key", "q", n) == key and self._value("file_line", "i", n) == line
        }

    def _value(self, name: str, typecode: str, docnum: int) -> int:
        """One document's value of a numeric column, from its segment's cached column."""
        sub, offset = self._leaves[bisect.bisect_right(self._offsets, docnum) - 1]
        return int(self._segments.get(sub.reader(), name, analysis.FIELD, _column_of(name, typecode))[docnum - offset])

    def norms(self, field: str) -> Values:
        """BM25's length normalisation of every document in one field, in top-level numbering; once per searcher."""
        found = self._norm.get(field)
        if found is None:
            avgfl = self.avg_length(field) or 1.0
            lengths = _LENGTHS[self._field_lengths(field)]
            found = self._norm[field] = (K1 * (1 - B) + (K1 * B / avgfl) * lengths).astype(np.float32)
        return found

    def avg_length(self, field: str) -> float:
        """The average length of a field over the searcher's documents that have it."""
        return float(self.searcher.avg_field_length(field) or 0.0)

    def documents(self) -> int:
        """The number of live documents, entries and file records together."""
        return int(self.searcher.doc_count())

    def _field_lengths(self, field: str) -> np.ndarray:
        """The length byte of a field of every document, in top-level numbering."""
        parts = [self._segments.get(sub.reader(), "lengths", field, _leaf_lengths) for sub, _ in self._leaves]
        return np.concatenate([np.asarray(part, dtype=np.uint8) for part in parts]) if parts else np.zeros(0, np.uint8)

    def live(self) -> np.ndarray:
        """Which document numbers are not deleted."""
        if self._live is None:
            live = np.ones(self.size, dtype=bool)
            for sub, offset in self._leaves:
                deleted = getattr(sub.reader(), "deleted_docs_set", None)
                if deleted:
                    live[np.fromiter(deleted, dtype=np.int64) + offset] = False
            self._live = live
        return self._live

    def stamps(self) -> np.ndarray:
        """The yyyymmddHHMM stamp of every document, to put newer entries first on equal scores."""
        if self._stamps is None:
            parts = [np.asarray(self._segment_array(sub.reader(), "stamps", _leaf_stamps)) for sub, _ in self._leaves]
            self._stamps = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)
        return self._stamps

    def warm(self) -> None:
        """Read what every search of this searcher needs: each segment's lexicon, stamps, norms, neighbours."""
        read_segments(self.searcher, self._segments, (analysis.FIELD,))
        self.stamps()
        self.norms(analysis.FIELD)
        self.neighbours()

    def warm_appends(self) -> None:
        """Read each segment's fingerprint heads, by which a search finds the entry an uncommitted append follows."""
        for sub, _ in self._leaves:
            self._segments.get(sub.reader(), "lexicon", HEADS, Lexicon.read)

    def warm_postings(self, count: int, long: bool = False) -> bool:
        """Decode `count` more lists into the posting table of the first segment that lacks one.

        What the first searches of new words would decode, done ahead of them. With `long`, the
        long lists of the first table without them instead (see PostingTable). False when there is
        nothing left to do or WARM_BYTES are held by tables.
        """
        for sub, _ in self._leaves:
            reader = sub.reader()
            lexicon = self._segments.get(reader, "lexicon", analysis.FIELD, Lexicon.read)
            if lexicon is None:
                continue
            table = self._segments.find(reader, "table", analysis.FIELD)
            if long and table is not None and not table.complete:
                return self._warm_step(reader, "long-builder", functools.partial(LongBuilder, lexicon, table), count)
            if not long and table is None:
                return self._warm_step(reader, "table-builder", functools.partial(TableBuilder, lexicon), count)
        return False

    def common_words(self) -> dict[bytes, int]:
        """The terms whose lists a table leaves out as long, and how many documents hold each, in every segment."""
        found: dict[bytes, int] = {}
        for sub, _ in self._leaves:
            reader = sub.reader()
            table = self._segments.find(reader, "table", analysis.FIELD)
            lexicon = self._segments.get(reader, "lexicon", analysis.FIELD, Lexicon.read)
            if table is None or lexicon is None:
                continue
            read = compat.term_read(reader)
            for index in table.long_lists():
                term, info = _term_info(lexicon, index, read)
                found[term] = found.get(term, 0) + info.doc_frequency()
        return found

    def _warm_step(self, reader: Any, kind: str, make: Callable[[], Any], count: int) -> bool:
        """One step of a segment's table builder of a kind (begun by `make`); False when the budget is spent."""
        builder = self._segments.find(reader, kind, analysis.FIELD)
        if builder is None:
            if tables_bytes() >= WARM_BYTES:
                return False
            builder = make()
            self._segments.put(reader, kind, analysis.FIELD, builder)
        table = builder.step(reader, count)
        if table is not None:
            self._segments.put(reader, "table", analysis.FIELD, table)
            self._segments.put(reader, kind, analysis.FIELD, None)
        return True

    def neighbours(self) -> list[np.ndarray]:
        """For each document, the entries around it in its file that make its context (`size` for none).

        Made once per searcher from two columns (a file's key and the line); after a commit that
        only added segments, carried over from the previous searcher's for the files it left alone.
        """
        if self._neighbours is None:
            keys = self._column("file_key", "q")
            lines = self._column("file_line", "i")
            carried, self._carried = self._carried, None
            if carried is not None:
                self._neighbours = neighbours.carried(*carried, ranking.steps(), keys, lines, self.live())
            else:
                self._neighbours = neighbours.whole(keys, lines, self.live(), ranking.steps())
        return self._neighbours

    def linked(self) -> tuple[list[np.ndarray], np.ndarray] | None:
        """The neighbours and live documents once made, for the next searcher to carry over; else None."""
        if self._neighbours is None or self._live is None:
            return None
        return self._neighbours, self._live

    def _column(self, name: str, typecode: str) -> np.ndarray:
        """A numeric column of every document, in top-level numbering."""
        parts = [
            np.asarray(self._segments.get(sub.reader(), name, analysis.FIELD, _column_of(name, typecode)))
            for sub, _ in self._leaves
        ]
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)

    def stamp(self, docnum: int) -> int:
        """One document's stamp."""
        return int(self.stamps()[docnum])

    def _segment_array(self, reader: Any, name: str, read: Callable[[Any, str], Any]) -> Any:
        """A per-document array of one segment, read once."""
        return self._segments.get(reader, name, analysis.FIELD, read)

    def segment_ids(self) -> set[str]:
        """The ids of the searcher's segments, to forget arrays of merged-away ones."""
        return {segment_id(sub.reader()) for sub, _ in self._leaves}

    def stored(self, docnum: int) -> dict[str, Any]:
        """A document's stored fields, read from its segment directly (the top-level reader filters by schema)."""
        return self._stored(docnum)

    def made(self, docnum: int, make: Callable[[dict[str, Any]], Made]) -> Made:
        """What `make` builds from a document's stored fields (an Entry), kept for the next query's hits."""
        leaf = self._stored.leaf(docnum)
        sub, offset = self._leaves[leaf]
        key = (segment_id(sub.reader()), docnum - offset)
        return cast(Made, _STORED.get(key, lambda: make(self._stored(docnum, leaf))))


def _stem_ranges(lexicon: Lexicon, encoded: bytes) -> tuple[range, range]:
    """Where a stem is in a lexicon, and the longer terms it begins: it sorts just before them (one search)."""
    found = lexicon.find(encoded, True)
    split = found.start + 1 if found and lexicon.term(found.start) == encoded else found.start
    return range(found.start, split), range(split, found.stop)


def _term_info(lexicon: Lexicon, index: int, read: Callable[[int, int], bytes]) -> tuple[bytes, Any]:
    """The term at an index of a segment's lexicon and its decoded term info."""
    term, info = lexicon.entry(index, read)
    return term, W3TermInfo.from_bytes(info)


def _spanned(table: PostingTable, terms: range) -> tuple[Ids, Values]:
    """The postings of a run of a table's terms as one list (each document once)."""
    if not terms:
        return _EMPTY_IDS, _EMPTY_VALUES
    ids, frequencies = table.span(terms)
    return (ids, frequencies) if len(terms) == 1 else _merged(ids, frequencies)


def _summed(lists: Sequence[tuple[Ids, Values]]) -> tuple[Ids, Values]:
    """Several terms' postings in one segment as one list, frequencies summed per document."""
    return _merged(np.concatenate([ids for ids, _ in lists]), np.concatenate([values for _, values in lists]))


def _merged(ids: Ids, values: Values) -> tuple[Ids, Values]:
    """Postings of several terms end to end as one list: each document once, its frequencies summed."""
    merged, where = np.unique(ids, return_inverse=True)
    return merged, np.bincount(where, weights=values).astype(np.float32)


def _layout(leaves: list[tuple[Any, int]]) -> list[tuple[str, int]] | None:
    """Each segment's id and document count, in order: a searcher that only added segments extends it."""
    layout = [(compat.segment_id(sub.reader()), int(sub.reader().doc_count_all())) for sub, _ in leaves]
    return None if any(name is None for name, _ in layout) else cast(list[tuple[str, int]], layout)


def _extends(layout: list[tuple[str, int]] | None, old: list[tuple[str, int]] | None) -> bool:
    """Whether a searcher's segments are an older searcher's, unmerged and in order, and maybe more."""
    return layout is not None and old is not None and layout[: len(old)] == old


def _leaf_lengths(reader: Any, field: str) -> array[int]:
    """One segment's length bytes of a field (0 for documents without it)."""
    name = compat.lengths_column(field)
    perdoc = compat.segment_stored(reader)  # None for an empty index's EmptyReader
    if perdoc is None or not perdoc.has_column(name):
        return array("B", bytes(reader.doc_count_all()))
    return compat.column_values(perdoc.column_reader(name, LENGTHS_COLUMN))


def _leaf_stamps(reader: Any, field: str) -> array[int]:
    """One segment's stamp column."""
    return _column_of(_STAMP, "q")(reader, field)


def _column_of(name: str, typecode: str) -> Callable[[Any, str], array[int]]:
    """A reader of one segment's numeric column (zeros where a segment lacks it)."""

    def read(reader: Any, field: str) -> array[int]:
        if not reader.has_column(name):
            return array(typecode, bytes(array(typecode).itemsize * reader.doc_count_all()))
        return compat.column_values(reader.column_reader(name, translate=False))

    return read


def word_postings(view: SearcherView, term: analysis.Term, cache: bool = True) -> ranking.TermMaps:
    """One query word's postings in one searcher: its stem and the longer words it begins."""
    if term.cjk:
        run = term.keys[0]
        mode = PREFIX if len(run) == 1 else EXACT if len(run) == 2 else RUN
        return ranking.TermMaps(view.weights(analysis.FIELD, run, mode, cache), NOTHING)
    found = [view.word(analysis.FIELD, key, cache) for key in term.keys]
    exact = best_of([(ids, weights) for ids, weights, _, _ in found])
    longer = best_of([(ids, weights) for _, _, ids, weights in found])
    return ranking.TermMaps(exact, longer)


NOTHING: ranking.Postings = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))


def best_of(lists: Sequence[ranking.Postings]) -> ranking.Postings:
    """One list of several (a word's stems in several languages), the best weight of each document."""
    if len(lists) == 1:
        return lists[0]
    ids = np.concatenate([found for found, _ in lists])
    weights = np.concatenate([weight for _, weight in lists])
    order = np.lexsort((-weights, ids))  # by document, best weight first
    ids, weights = ids[order], weights[order]
    first = np.ones(len(ids), dtype=bool)
    first[1:] = ids[1:] != ids[:-1]
    return ids[first], weights[first]
