"""Scored postings of one Whoosh searcher, read once per query word and kept while it lives.

Recall ANDs a few words, each a prefix that may expand to many terms. Whoosh's
matcher trees rebuild those unions for every query, score the AND in Python
and run the query a second time to count the hits. Here each query part is
read once into a map of document number → BM25F score (the same formula and
statistics Whoosh uses), the AND is a set intersection, the total is its size,
and the maps of recent parts are kept until the searcher is replaced, within
a budget of postings.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

from whoosh.codec.whoosh3 import LENGTHS_COLUMN, W3LeafMatcher
from whoosh.matching import WrappingMatcher
from whoosh.query import Query
from whoosh.reading import TermNotFound
from whoosh.scoring import BM25F
from whoosh.util.numeric import byte_to_length

from braind import analysis

Scores = dict[int, float]
Block = tuple[int, Sequence[int], Sequence[float]]  # segment offset, document ids, weights

CACHE_POSTINGS = 8000  # per searcher: about 1 MB of scores
SEGMENT_ITEMS = 20000  # prefix expansions kept per index, all segments together
_LENGTHS = [float(byte_to_length(b)) for b in range(256)]
_STAMP = "stamp"


class SearcherView:
    """Per-searcher arrays (field lengths, stamps, deletions) and a cache of scored query parts.

    Not thread-safe: callers hold the lock that guards the searcher.
    """

    def __init__(
        self,
        searcher: Any,
        segments: dict[Any, Any] | None = None,
        field: str = analysis.FIELD,
        budget: int = CACHE_POSTINGS,
    ) -> None:
        self.searcher = searcher
        self._segments = {} if segments is None else segments  # per-segment arrays, shared across searchers
        self._field = field
        self._budget = budget
        self._cached: OrderedDict[analysis.Part, Scores] = OrderedDict()
        self._held = 0
        self._leaves: list[tuple[Any, int]] = list(searcher.leaf_searchers())
        self._offsets = [offset for _, offset in self._leaves]
        self._lengths: array[int] | None = None
        self._stamps: array[int] | None = None
        self._deleted: set[int] | None = None
        self.selected: dict[Any, Any] = {}  # the index's select() results for this searcher

    def part_scores(self, part: analysis.Part) -> Scores:
        """Every live document holding the part, with its score; cached while the searcher lives."""
        found = self._cached.get(part)
        if found is not None:
            self._cached.move_to_end(part)
            return found
        found = self._score_part(part)
        self._remember(part, found)
        return found

    def _remember(self, part: analysis.Part, found: Scores) -> None:
        """Keep a part's scores, dropping the least recently used beyond the budget."""
        if len(found) > self._budget:
            return
        self._cached[part] = found
        self._held += len(found)
        while self._held > self._budget:
            _, dropped = self._cached.popitem(last=False)
            self._held -= len(dropped)

    def _score_part(self, part: analysis.Part) -> Scores:
        """Read and score the postings of one part."""
        is_cjk, text = part
        if not isinstance(self.searcher.weighting, BM25F):
            found = self._query_scores(analysis.part_query(part))
        elif is_cjk and len(text) > 2:
            found = self._run_scores(text)
        else:
            found = self._terms_scores(self._read_terms(text.encode(), prefix=not is_cjk or len(text) == 1))
        for docnum in self._deleted_docs() & found.keys():
            del found[docnum]
        return found

    def _run_scores(self, run: str) -> Scores:
        """Documents holding every bigram of a CJK run, kept when their text holds the run itself."""
        maps = sorted(
            (self._terms_scores(self._read_terms(b.encode(), prefix=False)) for b in analysis.bigrams(run)), key=len
        )
        docs: set[int] | Any = maps[0].keys()
        for other in maps[1:]:
            docs = docs & other.keys()
        part = [(True, run)]
        return {
            n: sum(m[n] for m in maps)
            for n in docs
            if analysis.parts_match(self.stored(n).get(analysis.FIELD, ""), part)
        }

    def _read_terms(self, text: bytes, prefix: bool) -> dict[bytes, list[Block]]:
        """The posting blocks of the term (or of every term it begins) in each segment, by term."""
        blocks: dict[bytes, list[Block]] = {}
        for sub, offset in self._leaves:
            reader = sub.reader()
            for term in self._expand(reader, text) if prefix else (text,):
                try:
                    matcher = reader.postings(self._field, term)
                except TermNotFound:
                    continue
                if isinstance(matcher, WrappingMatcher):  # deletions; dropped from the scores afterwards
                    matcher = matcher.child
                blocks.setdefault(term, []).extend((offset, ids, weights) for ids, weights in _blocks(matcher))
        return blocks

    def _expand(self, reader: Any, prefix: bytes) -> tuple[bytes, ...]:
        """The terms of one segment that begin with a prefix; cached per segment, which never changes."""
        key = (_segment_id(reader), "expand", self._field, prefix)
        found = self._segments.get(key)
        if found is None:
            if len(self._segments) >= SEGMENT_ITEMS:
                for old in [k for k in self._segments if k[1] == "expand"]:
                    del self._segments[old]
            found = self._segments[key] = tuple(reader.expand_prefix(self._field, prefix))
        return found

    def _terms_scores(self, blocks: dict[bytes, list[Block]]) -> Scores:
        """BM25F summed over the terms, as Whoosh's array union matcher sums them, with Whoosh's statistics."""
        weighting = self.searcher.weighting
        lengths = self._field_lengths()
        k1 = weighting.K1
        b = weighting._field_B.get(self._field, weighting.B)
        avgfl = self.searcher.avg_field_length(self._field) or 1
        base, per_length = k1 * (1 - b), k1 * b / avgfl
        count = self.searcher.doc_count_all()
        scores: Scores = {}
        get = scores.get
        for term_blocks in blocks.values():
            frequency = sum(len(ids) for _, ids, _ in term_blocks)  # postings, deleted ones included
            boost = (math.log(count / (frequency + 1)) + 1) * (k1 + 1)
            for offset, ids, weights in term_blocks:
                for docnum, weight in zip(ids, weights, strict=True):
                    docnum += offset
                    norm = base + per_length * _LENGTHS[lengths[docnum]]
                    scores[docnum] = get(docnum, 0.0) + boost * weight / (weight + norm)
        return scores

    def _query_scores(self, query: Query) -> Scores:
        """Scores from Whoosh's own matchers, for phrases (multi-character CJK runs)."""
        context = self.searcher.context()
        scores: Scores = {}
        for sub, offset in self._leaves:
            matcher = query.matcher(sub, context)
            while matcher.is_active():
                scores[offset + matcher.id()] = matcher.score()
                matcher.next()
        return scores

    def _field_lengths(self) -> array[int]:
        """The length byte of the text field of every document, in top-level numbering."""
        if self._lengths is None:
            lengths = array("B")
            for sub, _ in self._leaves:
                lengths.extend(self._segment_array(sub.reader(), "lengths", _leaf_lengths))
            self._lengths = lengths
        return self._lengths

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

    def _segment_array(self, reader: Any, name: str, read: Any) -> Any:
        """A per-document array of one segment, read once: segments never change but by deletions."""
        key = (_segment_id(reader), name, self._field)
        found = self._segments.get(key)
        if found is None:
            found = self._segments[key] = read(reader, self._field)
        return found

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
    return array("B", perdoc.column_reader(name, LENGTHS_COLUMN).load())


def _leaf_stamps(reader: Any, field: str) -> array[int]:
    """One segment's stamp column."""
    if not reader.has_column(_STAMP):
        return array("q", bytes(8 * reader.doc_count_all()))
    return array("q", reader.column_reader(_STAMP, translate=False).load())
