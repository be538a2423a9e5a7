"""Weighted postings of one Whoosh searcher, read once per query term and kept while it lives.

Recall combines a few words, each a prefix that may expand to many terms.
Whoosh's matcher trees rebuild those unions for every query and score them in
Python. Here each query term is read once into a map of document number →
BM25 term weight (saturated frequency over normalised length, without the
idf, which the caller takes from every partition the query covers), so that
AND is a set intersection, OR a set union, and the maps of recent terms are
kept until the searcher is replaced, within a budget of postings.
"""

from __future__ import annotations

import bisect
import contextlib
import io
import itertools
import struct
import sys
import threading
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from whoosh.codec.whoosh3 import LENGTHS_COLUMN, W3LeafMatcher, W3TermInfo
from whoosh.columns import NumericColumn
from whoosh.filedb.filetables import OrderedHashReader
from whoosh.filedb.structfile import StructFile
from whoosh.matching import WrappingMatcher
from whoosh.reading import TermNotFound
from whoosh.system import pack_ushort
from whoosh.util.numeric import byte_to_length

from braind import analysis

Scores = dict[int, float]
EXACT, LONGER, PREFIX, RUN = "exact", "longer", "prefix", "run"  # how a query term reads the postings
K1, B = 0.9, 0.4  # BM25's saturation and length normalisation, for short texts
_K1_PLUS_1 = K1 + 1
Made = TypeVar("Made")
CacheKey = tuple[int, str, str, str]  # searcher, field, term, mode
Block = tuple[int, Sequence[int], Sequence[float]]  # segment offset, document ids, weights

CACHE_POSTINGS = 200_000  # scored postings kept, all searchers together: about 20 MB
STORED_DOCUMENTS = 4096  # loaded entries kept, all indexes together: a few MB
_LENGTHS = [float(byte_to_length(b)) for b in range(256)]
_STAMP = "stamp"
_RECORD = struct.Struct("!ii")  # a terms-file record starts with its key and value lengths
_FIELD_NUMBER = 2  # keys start with the field's number (an unsigned short), then the term
_SAMPLE = 16  # every 16th term is kept as bytes: a bisection, then at most 16 steps


class Lexicon:
    """One field's terms in one segment with their term infos, read into memory in one go.

    Whoosh finds a term by a binary search or a hash lookup that reads the file a
    few bytes at a time, and each query word expands to several terms in every
    segment it touches; the field's run of the sorted terms file (a few hundred
    KB per month of diary) makes each a bisection in memory.
    """

    def __init__(self, data: bytes = b"", starts: array[int] | None = None) -> None:
        self._data = data
        self._starts = array("I") if starts is None else starts  # where each record begins, in term order
        self._sample = [self._term(i) for i in range(0, len(self._starts), _SAMPLE)]  # bisected in C

    @classmethod
    def read(cls, reader: Any, field: str) -> Lexicon | None:
        """The lexicon of a W3 segment reader's field; None for readers of another kind."""
        terms = getattr(reader, "_terms", None)
        table = getattr(terms, "_tindex", None)
        if not isinstance(table, OrderedHashReader):
            return None
        number = terms._fieldmap.get(field)  # type: ignore[union-attr]
        if number is None:
            return cls()
        begin = table.closest_key_pos(pack_ushort(number))
        after = table.closest_key_pos(pack_ushort(number + 1)) if number < 0xFFFF else None
        begin = table.endofdata if begin is None else begin
        end = table.endofdata if after is None else after
        data = table.dbfile.get(begin, end - begin) if end > begin else b""
        return cls(data, _record_starts(data))

    def __len__(self) -> int:
        return len(self._starts)

    def _term(self, index: int) -> bytes:
        """The term of one record."""
        start = self._starts[index]
        keylen = _RECORD.unpack_from(self._data, start)[0]
        return self._data[start + _RECORD.size + _FIELD_NUMBER : start + _RECORD.size + keylen]

    def _info(self, index: int) -> bytes:
        """The encoded term info of one record."""
        start = self._starts[index]
        keylen, infolen = _RECORD.unpack_from(self._data, start)
        begin = start + _RECORD.size + keylen
        return self._data[begin : begin + infolen]

    def infos(self, text: bytes, prefix: bool) -> list[tuple[bytes, bytes]]:
        """(term, encoded term info) of the term, or of every term that begins with it."""
        found: list[tuple[bytes, bytes]] = []
        index = max(0, bisect.bisect_left(self._sample, text) - 1) * _SAMPLE
        while index < len(self._starts) and self._term(index) < text:
            index += 1
        while index < len(self._starts):
            term = self._term(index)
            if not (term.startswith(text) if prefix else term == text):
                break
            found.append((term, self._info(index)))
            index += 1
        return found


def _record_starts(data: bytes) -> array[int]:
    """Where each key/value record of a run of a terms file begins."""
    starts = array("I")
    position, size, unpack = 0, len(data), _RECORD.unpack_from
    while position < size:
        starts.append(position)
        keylen, infolen = unpack(data, position)
        position += _RECORD.size + keylen + infolen
    return starts


class SegmentCache:
    """What is read once per segment and kept while it lives: segments never change but by deletions."""

    def __init__(self) -> None:
        self._items: dict[tuple[Any, str, str], Any] = {}

    def get(self, reader: Any, name: str, field: str, read: Callable[[Any, str], Any]) -> Any:
        """The item `name` of a segment's field, read on first use."""
        key = (_segment_id(reader), name, field)
        found = self._items.get(key)
        if found is None:
            found = self._items[key] = read(reader, field)
        return found

    def keep(self, live: set[Any]) -> None:
        """Forget the items of segments that were merged away or deleted."""
        for key in [key for key in self._items if key[0] not in live]:
            del self._items[key]


class _StoredDocuments:
    """Recently loaded documents (as entries), shared by every index: hits repeat across queries."""

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._docs: OrderedDict[tuple[Any, int], Any] = OrderedDict()
        self._lock = threading.Lock()  # partitions are searched from several threads

    def get(self, key: tuple[Any, int], read: Callable[[], Any]) -> Any:
        """A loaded document, read on a miss."""
        with self._lock:
            found = self._docs.get(key)
            if found is not None:
                self._docs.move_to_end(key)
                return found
        found = read()
        with self._lock:
            self._docs[key] = found
            while len(self._docs) > self._budget:
                self._docs.popitem(last=False)
        return found


class _ScoreCache:
    """Scored query parts of every live searcher, the least recently used dropped beyond one budget.

    One budget for all partitions: a 365-day recall scores the same word in a dozen of them.
    """

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._maps: OrderedDict[CacheKey, Scores] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()  # partitions are searched from several threads

    def get(self, key: CacheKey) -> Scores | None:
        """A cached part's scores, or None."""
        with self._lock:
            found = self._maps.get(key)
            if found is not None:
                self._maps.move_to_end(key)
            return found

    def put(self, key: CacheKey, scores: Scores) -> None:
        """Keep a part's scores unless they alone exceed the budget."""
        if len(scores) > self._budget:
            return
        with self._lock:
            old = self._maps.pop(key, None)
            self._held += len(scores) - (0 if old is None else len(old))
            self._maps[key] = scores
            while self._held > self._budget:
                _, dropped = self._maps.popitem(last=False)
                self._held -= len(dropped)

    def forget(self, owner: int) -> None:
        """Drop the scores of a searcher that was replaced."""
        with self._lock:
            for key in [key for key in self._maps if key[0] == owner]:
                self._held -= len(self._maps.pop(key))


_STORED = _StoredDocuments(STORED_DOCUMENTS)
_SCORES = _ScoreCache(CACHE_POSTINGS)
_OWNERS = itertools.count()


class SearcherView:
    """Per-searcher arrays (field lengths, stamps, deletions) and a cache of weighted query terms.

    Not thread-safe: callers hold the lock that guards the searcher.
    """

    def __init__(
        self,
        searcher: Any,
        segments: SegmentCache | None = None,
        field: str = analysis.FIELD,
    ) -> None:
        self.searcher = searcher
        self._segments = SegmentCache() if segments is None else segments  # shared across searchers
        self._field = field
        self._owner = next(_OWNERS)
        weakref.finalize(self, _SCORES.forget, self._owner)
        self._leaves: list[tuple[Any, int]] = list(searcher.leaf_searchers())
        self._offsets = [offset for _, offset in self._leaves]
        self._lengths: dict[str, array[int]] = {}
        self._norm: dict[str, list[float]] = {}
        self._stamps: array[int] | None = None
        self._deleted: set[int] | None = None
        self.selected: dict[Any, Any] = {}  # the index's select() results for this searcher

    def weights(self, field: str, key: str, mode: str) -> Scores:
        """Every live document holding a term, with its BM25 term weight (no idf); cached while the searcher lives.

        Modes: EXACT the term itself, LONGER every longer term it begins, PREFIX both (a CJK character),
        RUN every bigram of a CJK run, kept where the stored text holds the run itself.
        """
        cache_key = (self._owner, field, key, mode)
        found = _SCORES.get(cache_key)
        if found is None:
            found = self._read_weights(field, key, mode)
            _SCORES.put(cache_key, found)
        return found

    def _read_weights(self, field: str, key: str, mode: str) -> Scores:
        """Read and weigh the postings of one term (or its expansions) in one field."""
        if mode == RUN:
            found = self._run_weights(field, key)
        else:
            blocks = self._read_terms(key.encode(), prefix=mode != EXACT, field=field)
            if mode == LONGER:
                blocks.pop(key.encode(), None)
            found = self._terms_weights(field, blocks)
        for docnum in self._deleted_docs() & found.keys():
            del found[docnum]
        return found

    def _run_weights(self, field: str, run: str) -> Scores:
        """Documents holding every bigram of a CJK run, kept when their text holds the run itself."""
        maps = sorted((self.weights(field, pair, EXACT) for pair in analysis.bigrams(run)), key=len)
        docs: set[int] | Any = maps[0].keys()
        for other in maps[1:]:
            docs = docs & other.keys()
        if field != analysis.FIELD:  # context is not stored: the bigrams must do
            return {n: sum(m[n] for m in maps) for n in docs}
        return {n: sum(m[n] for m in maps) for n in docs if run in self.stored(n).get(analysis.FIELD, "")}

    def _read_terms(self, text: bytes, prefix: bool, field: str | None = None) -> dict[bytes, list[Block]]:
        """The posting blocks of the term (or of every term it begins) in each segment, by term."""
        blocks: dict[bytes, list[Block]] = {}
        for sub, offset in self._leaves:
            reader = sub.reader()
            for term, matcher in self._matchers(reader, text, prefix, field):
                if isinstance(matcher, WrappingMatcher):  # deletions; dropped from the scores afterwards
                    matcher = matcher.child
                blocks.setdefault(term, []).extend((offset, ids, weights) for ids, weights in _blocks(matcher))
        return blocks

    def _matchers(
        self, reader: Any, text: bytes, prefix: bool, field: str | None = None
    ) -> Iterator[tuple[bytes, Any]]:
        """A postings matcher for the term, or for each term beginning with it, in one segment."""
        field = field or self._field
        lexicon = self._segments.get(reader, "lexicon", field, Lexicon.read)
        if lexicon is None:  # not a W3 segment: Whoosh's own lookups
            for term in reader.expand_prefix(field, text) if prefix else (text,):
                with contextlib.suppress(TermNotFound):
                    yield term, reader.postings(field, term)
            return
        found = lexicon.infos(text, prefix)
        if not found:
            return
        terms = reader._terms
        field_format = reader.schema[field].format
        for term, info in found:
            terminfo = W3TermInfo.from_bytes(info)
            if terminfo.is_inlined():
                yield term, terms._codec.postings_reader(None, terminfo, field_format, term=(field, term))
                continue
            # One read of the whole posting list: Whoosh reads each block's header through pickle, a byte at a time.
            offset, length = terminfo.extent()
            length = length[0] if isinstance(length, tuple) else length  # this Whoosh decodes it as a 1-tuple
            postings = StructFile(io.BytesIO(terms._postfile.get(offset, length)))
            yield term, W3LeafMatcher(postings, 0, length, field_format, term=(field, term))

    def term_docs(self, field: str, term: str) -> set[int]:
        """Live documents whose field holds a term (a file's path, a status), read from the postings directly."""
        found: set[int] = set()
        for sub, offset in self._leaves:
            for _, matcher in self._matchers(sub.reader(), term.encode(), False, field):
                if isinstance(matcher, WrappingMatcher):
                    matcher = matcher.child
                for ids, _ in _blocks(matcher):
                    found.update([n + offset for n in ids] if offset else ids)
        return found - self._deleted_docs() if found else found

    def _terms_weights(self, field: str, blocks: dict[bytes, list[Block]]) -> Scores:
        """BM25's term-frequency part summed over the terms; the caller multiplies by the idf of the window."""
        norms = self._norms(field)
        scores: Scores = {}
        get = scores.get
        for term_blocks in blocks.values():
            for offset, ids, weights in term_blocks:
                if offset:
                    ids = [docnum + offset for docnum in ids]
                if not scores:
                    scores = {n: _K1_PLUS_1 * w / (w + norms[n]) for n, w in zip(ids, weights, strict=True)}
                    get = scores.get
                    continue
                for docnum, weight in zip(ids, weights, strict=True):
                    scores[docnum] = get(docnum, 0.0) + _K1_PLUS_1 * weight / (weight + norms[docnum])
        return scores

    def _norms(self, field: str) -> list[float]:
        """BM25's length normalisation of every document in one field, in top-level numbering; once per searcher."""
        found = self._norm.get(field)
        if found is None:
            avgfl = self.avg_length(field) or 1
            base, per_length = K1 * (1 - B), K1 * B / avgfl
            found = self._norm[field] = [base + per_length * _LENGTHS[n] for n in self._field_lengths(field)]
        return found

    def avg_length(self, field: str) -> float:
        """The average length of a field over the searcher's documents that have it."""
        return float(self.searcher.avg_field_length(field) or 0.0)

    def documents(self) -> int:
        """The number of live documents, entries and file records together: BM25's N."""
        return int(self.searcher.doc_count())

    def _field_lengths(self, field: str) -> array[int]:
        """The length byte of a field of every document, in top-level numbering."""
        found = self._lengths.get(field)
        if found is None:
            found = self._lengths[field] = array("B")
            for sub, _ in self._leaves:
                found.extend(self._segments.get(sub.reader(), "lengths", field, _leaf_lengths))
        return found

    def _deleted_docs(self) -> set[int]:
        """Deleted documents in top-level numbering."""
        if self._deleted is None:
            leaves = [(getattr(sub.reader(), "deleted_docs_set", None) or (), offset) for sub, offset in self._leaves]
            self._deleted = {offset + n for deleted, offset in leaves for n in deleted}
        return self._deleted

    def stamp(self, docnum: int) -> int:
        """The yyyymmddHHMM stamp of a document, to put newer entries first on equal scores."""
        if self._stamps is None:
            self._stamps = array("q")
            for sub, _ in self._leaves:
                self._stamps.extend(self._segment_array(sub.reader(), "stamps", _leaf_stamps))
        return self._stamps[docnum]

    def _segment_array(self, reader: Any, name: str, read: Callable[[Any, str], Any]) -> Any:
        """A per-document array of one segment, read once."""
        return self._segments.get(reader, name, self._field, read)

    def segment_ids(self) -> set[str]:
        """The ids of the searcher's segments, to forget arrays of merged-away ones."""
        return {_segment_id(sub.reader()) for sub, _ in self._leaves}

    def stored(self, docnum: int) -> dict[str, Any]:
        """A document's stored fields, read from its segment directly (the top-level reader filters by schema)."""
        leaf = bisect.bisect_right(self._offsets, docnum) - 1
        sub, offset = self._leaves[leaf]
        perdoc = getattr(sub.reader(), "_perdoc", None)
        if perdoc is None:
            return self.searcher.stored_fields(docnum)
        return perdoc.stored_fields(docnum - offset) or {}

    def made(self, docnum: int, make: Callable[[dict[str, Any]], Made]) -> Made:
        """What `make` builds from a document's stored fields (an Entry), kept for the next query's hits."""
        leaf = bisect.bisect_right(self._offsets, docnum) - 1
        sub, offset = self._leaves[leaf]
        key = (_segment_id(sub.reader()), docnum - offset)
        return _STORED.get(key, lambda: make(self.stored(docnum)))


def _segment_id(reader: Any) -> Any:
    """What names a segment for as long as it exists."""
    return getattr(reader, "_segid", None) or id(reader)


def _blocks(matcher: Any) -> Iterator[tuple[Sequence[int], Sequence[float]]]:
    """A leaf matcher's postings block by block; one posting at a time for other matchers."""
    if type(matcher) is not W3LeafMatcher:
        while matcher.is_active():
            yield (matcher.id(),), (matcher.weight(),)
            matcher.next()
        return
    while matcher.is_active():
        matcher._read_ids()
        matcher._read_weights()
        yield matcher._ids, matcher._weights
        matcher._next_block()


def _leaf_lengths(reader: Any, field: str) -> array[int]:
    """One segment's length bytes of a field (0 for documents without it)."""
    name = f"_{field}_len"  # where the W3 codec keeps field lengths
    perdoc = getattr(reader, "_perdoc", None)  # an empty index has an EmptyReader
    if perdoc is None or not perdoc.has_column(name):
        return array("B", bytes(reader.doc_count_all()))
    return numbers(perdoc.column_reader(name, LENGTHS_COLUMN))


def _leaf_stamps(reader: Any, field: str) -> array[int]:
    """One segment's stamp column."""
    if not reader.has_column(_STAMP):
        return array("q", bytes(8 * reader.doc_count_all()))
    return numbers(reader.column_reader(_STAMP, translate=False))


def numbers(column: Any) -> array[int]:
    """A numeric column's values in one read; Whoosh's load() reads them one document at a time."""
    if not isinstance(column, NumericColumn.Reader):
        return array("q", column.load())
    stored = column._count  # values past it are the default, never written
    values = array(column._typecode, column._dbfile.get(column._basepos, stored * column._fixedlen))
    if sys.byteorder == "little" and values.itemsize > 1:
        values.byteswap()  # stored big-endian
    values.extend([column._default] * (column._doccount - stored))
    return values
