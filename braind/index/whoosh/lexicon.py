"""One field's term table of a W3 segment: its terms in memory, searched by bisection; term infos read when asked."""

from __future__ import annotations

import bisect
import struct
from array import array
from collections.abc import Callable
from typing import Any

from whoosh.filedb.filetables import OrderedHashReader
from whoosh.system import pack_ushort

from braind.index.whoosh import compat

_RECORD = struct.Struct("!ii")  # a terms-file record starts with its key and value lengths
_FIELD_NUMBER = 2  # keys start with the field's number (an unsigned short), then the term
_SAMPLE = 16  # every 16th term is kept as bytes: a bisection of those, then of at most 16 records

Read = Callable[[int, int], bytes]  # the bytes at a position of a segment's terms file, of a length (compat.term_read)


class Lexicon:
    """One field's terms in one segment, in term order, and where each one's term info is in the terms file.

    Whoosh finds a term by a binary search or a hash lookup that reads the file a
    few bytes at a time, and each query word expands to several terms in every
    segment it touches; holding the field's terms (about a tenth of its run of the
    terms file: the rest is term infos, which carry short posting lists inline)
    makes each a bisection in memory, and a term info one read.
    """

    def __init__(
        self,
        terms: bytes = b"",
        ends: array[int] | None = None,
        at: array[int] | None = None,
        sizes: array[int] | None = None,
    ) -> None:
        self._terms = terms  # every term end to end
        self._ends = array("I", [0]) if ends is None else ends  # where each term ends in _terms, after a 0
        self._at = array("q") if at is None else at  # where each term's info is in the terms file
        self._sizes = array("I") if sizes is None else sizes  # and how long it is
        self._sample = [self.term(i) for i in range(0, len(self), _SAMPLE)]  # bisected in C

    @classmethod
    def read(cls, reader: Any, field: str) -> Lexicon | None:
        """The lexicon of a W3 segment reader's field; None for readers of another kind."""
        terms = compat.segment_terms(reader)
        table = compat.term_table(terms)
        if not isinstance(table, OrderedHashReader):
            return None
        number = compat.field_number(terms, field)
        if number is None:
            return cls()
        begin = table.closest_key_pos(pack_ushort(number))
        after = table.closest_key_pos(pack_ushort(number + 1)) if number < 0xFFFF else None
        begin = table.endofdata if begin is None else begin
        end = table.endofdata if after is None else after
        return cls.of_run(table.dbfile.get(begin, end - begin) if end > begin else b"", begin)

    @classmethod
    def of_run(cls, run: bytes, begin: int) -> Lexicon:
        """The lexicon of a run of terms-file records that starts at `begin` in the file."""
        terms, ends, at, sizes = bytearray(), array("I", [0]), array("q"), array("I")
        position, size, unpack = 0, len(run), _RECORD.unpack_from
        while position < size:
            keylen, infolen = unpack(run, position)
            key = position + _RECORD.size
            terms += run[key + _FIELD_NUMBER : key + keylen]
            ends.append(len(terms))
            at.append(begin + key + keylen)
            sizes.append(infolen)
            position = key + keylen + infolen
        return cls(bytes(terms), ends, at, sizes)

    def __len__(self) -> int:
        return len(self._ends) - 1

    def term(self, index: int) -> bytes:
        """The term at an index, in term order."""
        return self._terms[self._ends[index] : self._ends[index + 1]]

    def entry(self, index: int, read: Read) -> tuple[bytes, bytes]:
        """The term at an index and its encoded term info, read from the segment's terms file by `read`."""
        return self.term(index), read(self._at[index], self._sizes[index])

    def find(self, text: bytes, prefix: bool) -> range:
        """Where the term is, or every term that begins with it, in term order."""
        index = self._first_from(text)
        if prefix:
            after = _after_prefix(text)
            return range(index, len(self) if after is None else self._first_from(after))
        found = index < len(self) and self.term(index) == text
        return range(index, index + 1 if found else index)

    def _first_from(self, text: bytes) -> int:
        """The index of the first term not below `text` (the length when there is none): two bisections."""
        block = bisect.bisect_left(self._sample, text)  # sampled terms below it
        if block == 0:
            return 0
        low = (block - 1) * _SAMPLE + 1  # just past the last sampled term below it
        high = min(block * _SAMPLE, len(self))
        return bisect.bisect_left(range(len(self)), text, low, high, key=self.term)

    def infos(self, text: bytes, prefix: bool, read: Read) -> list[tuple[bytes, bytes]]:
        """(term, encoded term info) of the term, or of every term that begins with it."""
        return [self.entry(index, read) for index in self.find(text, prefix)]


def _after_prefix(text: bytes) -> bytes | None:
    """The least string above every string that begins with `text`; None when there is none (b"", all 0xff)."""
    kept = text.rstrip(b"\xff")
    return kept[:-1] + bytes((kept[-1] + 1,)) if kept else None
