"""One field's term table of a W3 segment, read into memory in one go and searched by bisection."""

from __future__ import annotations

import bisect
import struct
from array import array
from typing import Any

from whoosh.filedb.filetables import OrderedHashReader
from whoosh.system import pack_ushort

from braind.index.whoosh import compat

_RECORD = struct.Struct("!ii")  # a terms-file record starts with its key and value lengths
_FIELD_NUMBER = 2  # keys start with the field's number (an unsigned short), then the term
_SAMPLE = 16  # every 16th term is kept as bytes: a bisection of those, then of at most 16 records


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
        self._sample = [self.term(i) for i in range(0, len(self._starts), _SAMPLE)]  # bisected in C

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
        data = table.dbfile.get(begin, end - begin) if end > begin else b""
        return cls(data, _record_starts(data))

    def __len__(self) -> int:
        return len(self._starts)

    def term(self, index: int) -> bytes:
        """The term of one record, in term order."""
        start = self._starts[index]
        keylen = _RECORD.unpack_from(self._data, start)[0]
        return self._data[start + _RECORD.size + _FIELD_NUMBER : start + _RECORD.size + keylen]

    def _info(self, index: int) -> bytes:
        """The encoded term info of one record."""
        start = self._starts[index]
        keylen, infolen = _RECORD.unpack_from(self._data, start)
        begin = start + _RECORD.size + keylen
        return self._data[begin : begin + infolen]

    def entry(self, index: int) -> tuple[bytes, bytes]:
        """The term and encoded term info of one record, in term order."""
        return self.term(index), self._info(index)

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

    def infos(self, text: bytes, prefix: bool) -> list[tuple[bytes, bytes]]:
        """(term, encoded term info) of the term, or of every term that begins with it."""
        return [self.entry(index) for index in self.find(text, prefix)]


def _after_prefix(text: bytes) -> bytes | None:
    """The least string above every string that begins with `text`; None when there is none (b"", all 0xff)."""
    kept = text.rstrip(b"\xff")
    return kept[:-1] + bytes((kept[-1] + 1,)) if kept else None


def _record_starts(data: bytes) -> array[int]:
    """Where each key/value record of a run of a terms file begins."""
    starts = array("I")
    position, size, unpack = 0, len(data), _RECORD.unpack_from
    while position < size:
        starts.append(position)
        keylen, infolen = unpack(data, position)
        position += _RECORD.size + keylen + infolen
    return starts
