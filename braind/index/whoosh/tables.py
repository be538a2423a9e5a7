"""Posting tables: every posting list of a segment's text field end to end, built ahead of searches."""

from __future__ import annotations

import weakref
from array import array
from typing import Any

import numpy as np
from whoosh.codec.whoosh3 import W3TermInfo

from braind.index import analysis
from braind.index.whoosh import compat
from braind.index.whoosh.decoding import Ids, Values, decode
from braind.index.whoosh.lexicon import Lexicon


class PostingTable:
    """One segment's posting lists of the text field end to end, in term order: a list is a slice, read once.

    Decoding a list costs a term-info lookup and a few unpicklings whatever its length, and most
    words are rare: one table per segment holds them all for 5 bytes a posting, without a NumPy
    array or a cache entry per list. Tables are built ahead of searches (`SearcherView.warm_postings`)
    within WARM_BYTES, and live as long as their segment.
    """

    def __init__(self, ids: np.ndarray, frequencies: np.ndarray, starts: np.ndarray) -> None:
        self._ids, self._frequencies, self._starts = ids, frequencies, starts
        _TABLES.add(self)

    def postings(self, index: int) -> tuple[Ids, Values]:
        """The list of the term at an index of the segment's lexicon (segment-local numbers, frequencies)."""
        return self.span(range(index, index + 1))

    def span(self, terms: range) -> tuple[Ids, Values]:
        """The lists of a run of terms in lexicon order end to end: a stem and the longer words it begins, one slice."""
        begin, end = int(self._starts[terms.start]), int(self._starts[terms.stop])
        return self._ids[begin:end], self._frequencies[begin:end].astype(np.float32)  # weighed as decoded lists are

    @property
    def nbytes(self) -> int:
        """The bytes the table holds."""
        return int(self._ids.nbytes + self._frequencies.nbytes + self._starts.nbytes)


_TABLES: weakref.WeakSet[PostingTable] = weakref.WeakSet()


def tables_bytes() -> int:
    """The bytes every live posting table holds: a table goes with its segment."""
    return sum(table.nbytes for table in list(_TABLES))


class TableBuilder:
    """A segment's posting table made a few lists at a time, so that searches can run in between."""

    def __init__(self, lexicon: Lexicon) -> None:
        self._lexicon = lexicon
        self._ids = array("I")
        self._frequencies = array("f")
        self._starts = array("q", [0])

    def step(self, reader: Any, count: int) -> PostingTable | None:
        """Decode the next `count` lists; the table once every list is in."""
        done = len(self._starts) - 1
        read = compat.term_read(reader)
        for index in range(done, min(len(self._lexicon), done + count)):
            term, info = self._lexicon.entry(index, read)
            ids, frequencies = decode(reader, analysis.FIELD, term, W3TermInfo.from_bytes(info))
            self._ids.frombytes(ids.astype(np.uint32, copy=False).tobytes())
            self._frequencies.frombytes(frequencies.astype(np.float32, copy=False).tobytes())
            self._starts.append(len(self._ids))
        if len(self._starts) - 1 < len(self._lexicon):
            return None
        frequencies = np.frombuffer(self._frequencies, dtype=np.float32)
        small = frequencies.astype(np.uint8)
        if np.array_equal(small, frequencies):  # counts of a word in one entry: a byte each, as a rule
            frequencies = small
        return PostingTable(
            np.frombuffer(self._ids, dtype=np.uint32), frequencies, np.frombuffer(self._starts, np.int64)
        )
