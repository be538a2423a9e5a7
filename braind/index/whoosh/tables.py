"""Posting tables: a segment's posting lists of the text field end to end, built ahead of searches."""

from __future__ import annotations

import bisect
import weakref
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np
from whoosh.codec.whoosh3 import W3TermInfo

from braind.index import analysis
from braind.index.whoosh import compat
from braind.index.whoosh.decoding import Ids, Values, decode
from braind.index.whoosh.lexicon import Lexicon

LONG_LIST = 256  # postings: a longer list is a common word's, added to its table only once every short list is in


class Lists:
    """Some posting lists end to end, each one a slice: ids (segment-local numbers) and frequencies."""

    def __init__(self, ids: np.ndarray, frequencies: np.ndarray, starts: np.ndarray) -> None:
        self._ids, self._frequencies, self._starts = ids, frequencies, starts

    def span(self, first: int, stop: int) -> tuple[Ids, Values]:
        """Lists `first` to `stop` (excluded) as one slice."""
        begin, end = int(self._starts[first]), int(self._starts[stop])
        return self._ids[begin:end], self._frequencies[begin:end].astype(np.float32)  # weighed as decoded lists are

    @property
    def nbytes(self) -> int:
        """The bytes the lists hold."""
        return int(self._ids.nbytes + self._frequencies.nbytes + self._starts.nbytes)


class PostingTable:
    """One segment's posting lists of the text field, in term order: a list is a slice, read once.

    Decoding a list costs a term-info lookup and a few unpicklings whatever its length, and most
    words are rare: a table holds their lists for 3 to 5 bytes a posting, without a NumPy array or
    a cache entry per list. It holds the short lists first, for every segment; the few lists longer
    than LONG_LIST, common words' (half of the postings), are added (`add_long`) once every
    segment has its short ones and while the budget lasts: a common word comes back, so a list
    left out is decoded on use and kept in the decoded lists' cache. Tables are built ahead of
    searches (`SearcherView.warm_postings`) within WARM_BYTES, and live as long as their segment.
    """

    def __init__(self, short: Lists, left_out: array[int]) -> None:
        self._short = short  # a list for every term, empty for those left out
        self._left_out = left_out  # the indexes of the terms whose lists are long, ascending
        self._long: Lists | None = None  # their lists, in that order, once added
        _TABLES.add(self)

    def postings(self, index: int) -> tuple[Ids, Values]:
        """The list of the term at an index of the segment's lexicon, if the table holds it (else empty)."""
        return self.span(range(index, index + 1))

    def span(self, terms: range) -> tuple[Ids, Values]:
        """The lists of a run of terms in lexicon order end to end (a stem and the longer words it begins).

        Long lists are in it when the table holds them; `missing` says which are not.
        """
        short = self._short.span(terms.start, terms.stop)
        if self._long is None:
            return short
        first, stop = self._long_ones(terms)
        if first == stop:
            return short
        long = self._long.span(first, stop)
        if not len(short[0]):
            return long
        return np.concatenate((long[0], short[0])), np.concatenate((long[1], short[1]))

    def missing(self, terms: range) -> list[int]:
        """The terms of a run whose lists the table does not hold: the long ones, until they are added."""
        if self._long is not None:
            return []
        first, stop = self._long_ones(terms)
        return self._left_out[first:stop].tolist()

    def _long_ones(self, terms: range) -> tuple[int, int]:
        """Where a run's long terms are among the long ones."""
        return bisect.bisect_left(self._left_out, terms.start), bisect.bisect_left(self._left_out, terms.stop)

    @property
    def complete(self) -> bool:
        """True once the table holds every list of its segment."""
        return self._long is not None or not self._left_out

    def long_lists(self) -> Sequence[int]:
        """The indexes of the terms whose lists are long, ascending."""
        return self._left_out

    def add_long(self, lists: Lists) -> None:
        """Hold the long lists too (in `long_lists` order)."""
        self._long = lists

    @property
    def nbytes(self) -> int:
        """The bytes the table holds."""
        held = self._short.nbytes + self._left_out.itemsize * len(self._left_out)
        return int(held + (self._long.nbytes if self._long is not None else 0))


_TABLES: weakref.WeakSet[PostingTable] = weakref.WeakSet()


def tables_bytes() -> int:
    """The bytes every live posting table holds: a table goes with its segment."""
    return sum(table.nbytes for table in list(_TABLES))


class _Appender:
    """Posting lists decoded one after another into growing arrays."""

    def __init__(self) -> None:
        self.ids = array("I")
        self.frequencies = array("f")
        self.starts = array("q", [0])

    def add(self, reader: Any, term: bytes, info: Any) -> None:
        """Decode one list onto the end."""
        ids, frequencies = decode(reader, analysis.FIELD, term, info)
        self.ids.frombytes(ids.astype(np.uint32, copy=False).tobytes())
        self.frequencies.frombytes(frequencies.astype(np.float32, copy=False).tobytes())
        self.close()

    def close(self) -> None:
        """End the current list (an empty one when nothing was added)."""
        self.starts.append(len(self.ids))

    def lists(self, reader: Any) -> Lists:
        """The lists, each array in the narrowest type that holds it."""
        return Lists(
            _narrowest(np.frombuffer(self.ids, dtype=np.uint32), np.uint16),
            _narrowest(np.frombuffer(self.frequencies, dtype=np.float32), np.uint8),
            _narrowest(np.frombuffer(self.starts, np.int64), np.uint32),
        )


class TableBuilder:
    """A segment's posting table of short lists made a few lists at a time, so that searches can run in between."""

    def __init__(self, lexicon: Lexicon) -> None:
        self._lexicon = lexicon
        self._lists = _Appender()
        self._left_out = array("I")

    def step(self, reader: Any, count: int) -> PostingTable | None:
        """Decode the next `count` lists (a long one is only noted); the table once every term is seen."""
        done = len(self._lists.starts) - 1
        read = compat.term_read(reader)
        for index in range(done, min(len(self._lexicon), done + count)):
            term, encoded = self._lexicon.entry(index, read)
            info = W3TermInfo.from_bytes(encoded)
            if info.doc_frequency() > LONG_LIST:
                self._left_out.append(index)
                self._lists.close()
            else:
                self._lists.add(reader, term, info)
        if len(self._lists.starts) - 1 < len(self._lexicon):
            return None
        return PostingTable(self._lists.lists(reader), self._left_out)


class LongBuilder:
    """A table's long lists made a few at a time."""

    def __init__(self, lexicon: Lexicon, table: PostingTable) -> None:
        self._lexicon = lexicon
        self._table = table
        self._terms = table.long_lists()
        self._lists = _Appender()

    def step(self, reader: Any, count: int) -> PostingTable | None:
        """Decode the next `count` long lists; the table once all are in it."""
        done = len(self._lists.starts) - 1
        read = compat.term_read(reader)
        for index in self._terms[done : done + count]:
            term, encoded = self._lexicon.entry(index, read)
            self._lists.add(reader, term, W3TermInfo.from_bytes(encoded))
        if len(self._lists.starts) - 1 < len(self._terms):
            return None
        self._table.add_long(self._lists.lists(reader))
        return self._table


def _narrowest(values: np.ndarray, narrow: type[np.generic]) -> np.ndarray:
    """The values as the narrower type when they fit in it unchanged (counts of a word in one entry: a byte each)."""
    small = values.astype(narrow)
    return small if np.array_equal(small, values) else values
