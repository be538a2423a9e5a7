"""Every private Whoosh name braind uses, in one place, and the check that Whoosh is the version they come from.

braind reads Whoosh's W3 segments directly (a field's term table in one read, posting lists
decoded whole into arrays, numeric columns in one read) and writes them with its own segment
writer. Those reads reach names Whoosh does not publish: each is one small function here, so
that nothing else in braind depends on Whoosh's internals.

The writer (`braind.index.whoosh.writer`) subclasses `W3PostingsWriter`, `W3FieldWriter`,
`W3PerDocWriter`, `W3Codec`, `SegmentWriter` and the stored fields' column writers, and works
with the fields their constructors set up (the posting file, the term table, the block buffers
and limits, the column writers and the current document's stored fields). That is why the installed Whoosh must be
the one braind was tested with (`check_version`), and why the index manifest records the
version: an index written under another one is rebuilt. The test suite checks the segments
braind writes against Whoosh's own writer and searcher.
"""

from __future__ import annotations

import bisect
import importlib.metadata
import io
import os
import pickle
import sys
from array import array
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any, cast

from whoosh.codec.whoosh3 import STORED_COLUMN, W3LeafMatcher, W3TermInfo
from whoosh.columns import CompressedBytesColumn, NumericColumn
from whoosh.filedb import filetables
from whoosh.filedb.compound import SubFile
from whoosh.filedb.structfile import StructFile
from whoosh.formats import Format
from whoosh.reading import EmptyReader, MultiReader, SegmentReader
from whoosh.searching import Searcher

from braind.errors import Unavailable

DISTRIBUTION = "whoosh-reloaded"
WHOOSH_VERSION = "2.7.5"  # the exact pin in pyproject.toml

LENGTHS = filetables._lengths  # a hash table record's (key length, value length)
TERM_INFO = W3TermInfo._struct  # flags, weight, frequency, min and max length, max weight, first and last id

# One block of postings: document numbers, weights, and the values when the format has them.
Block = tuple[Any, Any, Any]


@lru_cache(maxsize=1)
def installed_version() -> str | None:
    """The installed Whoosh distribution's version (None when it is missing)."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_version(found: str | None = None) -> None:
    """Refuse to open an index under a Whoosh other than the tested one: its private names may differ."""
    found = installed_version() if found is None else found
    if found != WHOOSH_VERSION:
        raise Unavailable(
            "whoosh_version",
            f"braind reads and writes Whoosh's files directly and needs {DISTRIBUTION} {WHOOSH_VERSION}, "
            f"but {found or 'no ' + DISTRIBUTION} is installed; reinstall braind (./install.sh) to get it",
        )


def segment_terms(reader: Any) -> Any:
    """A segment reader's terms reader (None for readers of another kind)."""
    return getattr(reader, "_terms", None)


def segment_stored(reader: Any) -> Any:
    """A segment reader's per-document reader: stored fields and columns (None for readers of another kind)."""
    return getattr(reader, "_perdoc", None)


def stored_read(reader: Any) -> Callable[[int], dict[str, Any]] | None:
    """A segment reader's stored fields of a document, read in one pread (None for readers of another kind).

    Whoosh reads a document's stored fields through five layers of its own file classes, each a
    Python call, and a seek and a buffered read that fetches 8 KB for the hundred-odd bytes of
    one entry; a hit reads its document once. Only while the reader is open.
    """
    try:
        values = reader._perdoc._cached_reader("_stored", STORED_COLUMN)._child  # PickleColumn of compressed bytes
        part = values._dbfile.file
        if not isinstance(part, SubFile) or not isinstance(values, CompressedBytesColumn.Reader):
            return None
        fd, base = part._file.fileno(), part._offset + values._basepos
        offsets, lengths, decompress = values._offsets, values._lengths, values._decompress
    except (AttributeError, OSError, ValueError):
        return None

    def read(docnum: int) -> dict[str, Any]:
        length = lengths[docnum]
        if not length:  # a document stored nothing
            return {}
        return cast(dict[str, Any], pickle.loads(decompress(os.pread(fd, length, base + offsets[docnum]))))

    return read


class StoredFields:
    """A searcher's stored fields by document number, each segment read with `stored_read` where it allows.

    Whoosh's own stored_fields() takes about twice as long a document, which counts when a whole
    file is read back (a busy day of 100,000 entries). Only while the searcher is open.
    """

    def __init__(self, searcher: Any) -> None:
        self._searcher = searcher
        self._leaves: list[tuple[Any, int]] = list(searcher.leaf_searchers())
        self._offsets = [offset for _, offset in self._leaves]
        self._reads: dict[int, Callable[[int], dict[str, Any]] | None] = {}  # per segment

    def leaf(self, docnum: int) -> int:
        """The index of the segment that holds a document."""
        return bisect.bisect_right(self._offsets, docnum) - 1

    def __call__(self, docnum: int, leaf: int | None = None) -> dict[str, Any]:
        """One document's stored fields (`leaf`: its segment, when the caller knows it)."""
        leaf = self.leaf(docnum) if leaf is None else leaf
        sub, offset = self._leaves[leaf]
        if leaf not in self._reads:
            self._reads[leaf] = stored_read(sub.reader())
        read = self._reads[leaf]
        if read is not None:
            return read(docnum - offset)
        perdoc = segment_stored(sub.reader())
        if perdoc is None:
            return cast(dict[str, Any], self._searcher.stored_fields(docnum))
        return cast(dict[str, Any], perdoc.stored_fields(docnum - offset) or {})


def segment_id(reader: Any) -> Any:
    """The id a segment reader's segment has for as long as it exists (None for readers of another kind)."""
    return getattr(reader, "_segid", None)


def lengths_column(field: str) -> str:
    """The column where the W3 codec keeps a field's lengths."""
    return f"_{field}_len"


def term_table(terms: Any) -> Any:
    """A terms reader's hash table of (field number + term) -> term info (None for another kind)."""
    return getattr(terms, "_tindex", None)


def term_read(reader: Any) -> Callable[[int, int], bytes]:
    """A read of the bytes at a position of a segment reader's terms file (this reader's open file)."""
    return lambda position, length: bytes(term_table(segment_terms(reader)).dbfile.get(position, length))


def field_number(terms: Any, field: str) -> int | None:
    """The number a segment gives a field in its term keys (None when the segment has no such field)."""
    number = terms._fieldmap.get(field)
    return None if number is None else int(number)


def field_name(terms: Any, number: int) -> str:
    """The field a segment's field number stands for."""
    return str(terms._fieldunmap[number])


def has_postings_file(terms: Any) -> bool:
    """Whether a terms reader keeps its posting lists in a W3 postings file."""
    return hasattr(terms, "_postfile")


def posting_bytes(terms: Any, offset: int, length: int) -> bytes:
    """The bytes of one posting list, read in one go."""
    return bytes(terms._postfile.get(offset, length))


def column_values(column: Any) -> array[int]:
    """A numeric column's values in one read; Whoosh's load() reads them one document at a time."""
    if not isinstance(column, NumericColumn.Reader):
        return array("q", column.load())
    stored = column._count  # values past it are the default, never written
    values = array(column._typecode, column._dbfile.get(column._basepos, stored * column._fixedlen))
    if sys.byteorder == "little" and values.itemsize > 1:
        values.byteswap()  # stored big-endian
    values.extend([column._default] * (column._doccount - stored))
    return values


def posting_blocks(data: bytes, format_: Format) -> Iterator[Block]:
    """The blocks of one posting list, decoded by Whoosh's own leaf matcher."""
    with_values = format_.fixed_value_size() != 0
    matcher = W3LeafMatcher(StructFile(io.BytesIO(data)), 0, len(data), format_)
    while matcher.is_active():
        matcher._read_ids()
        matcher._read_weights()
        if with_values:
            matcher._read_values()
        yield matcher._ids, matcher._weights, matcher._values if with_values else None
        matcher._next_block()


def abandon(writer: Any) -> None:
    """Release what a writer whose commit failed still holds: Whoosh then leaves its lock taken."""
    try:
        writer.cancel()
    except Exception:  # its files half closed: at least give the lock back
        lock = getattr(writer, "writelock", None)
        if lock is not None:
            lock.release()


def searcher_keeping(ix: Any, previous: Any) -> Any:
    """A searcher of the index's newest generation that keeps `previous`'s readers of segments left alone.

    Opening a segment's reader opens its file and reads its directory and term table (a third of a
    millisecond each), and a commit of one note leaves all segments but one or two as they were. A reader
    is kept when its segment has as many deletions as now: Whoosh holds deletions in the segment
    object a reader was opened with, and only ever adds to them. `Searcher.refresh()` is not used:
    it also keeps readers of segments merged away, which shows their documents twice.
    """
    info = ix._read_toc()
    kept = {}
    for reader, _ in previous.reader().leaf_readers():
        segment = reader.segment()
        if segment is not None and not getattr(reader, "is_closed", True):
            kept[segment.segment_id()] = reader
    readers = []
    for segment in info.segments:
        old = kept.get(segment.segment_id())
        if old is not None and old.segment().deleted_count() == segment.deleted_count():
            readers.append(old)
        else:
            readers.append(SegmentReader(ix.storage, info.schema, segment, generation=info.generation))
    if not readers:
        return Searcher(EmptyReader(info.schema), fromindex=ix)
    reader = readers[0] if len(readers) == 1 else MultiReader(readers, generation=info.generation)
    return Searcher(reader, fromindex=ix)


def close_unshared(previous: Any, current: Any) -> None:
    """Close a searcher replaced by `searcher_keeping()`, but not the readers its successor kept."""
    kept = {id(reader) for reader, _ in current.reader().leaf_readers()}
    for reader, _ in previous.reader().leaf_readers():
        if id(reader) not in kept:
            reader.close()
