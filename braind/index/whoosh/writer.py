"""How the index writes Whoosh segments: a term pool's lists (see `pool.py`) each written whole.

Whoosh's own writer hands postings to its codec one by one; the codec
compresses every block and every document's stored fields with zlib, and
its inlining of short posting lists calls a method its term info lacks, so
nothing is ever inlined. Here each term's list is written at once, lists
shorter than INLINE_LIMIT are kept in the term index itself, the others are
written in uncompressed blocks, and stored fields are not compressed. The
files are Whoosh's W3 format: its readers open them unchanged.
"""

from __future__ import annotations

import pickle
import struct
import zlib
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from whoosh.analysis import IDTokenizer
from whoosh.codec.whoosh3 import (
    LENGTHS_COLUMN,
    WHOOSH3_HEADER_MAGIC,
    W3Codec,
    W3FieldWriter,
    W3PerDocReader,
    W3PerDocWriter,
    W3PostingsWriter,
    W3TermInfo,
    W3TermsReader,
)
from whoosh.columns import (
    CompressedBytesColumn,
    NumericColumn,
    PickleColumn,
    TranslatingColumnReader,
    VarBytesColumn,
)
from whoosh.fields import FieldType, Schema, UnknownFieldError
from whoosh.filedb.filetables import OrderedHashReader
from whoosh.formats import Existence, Format
from whoosh.system import pack_int, pack_ushort, unpack_ushort
from whoosh.util.numeric import byte_to_length, length_to_byte
from whoosh.writing import SegmentWriter

from braind.index.whoosh import compat
from braind.index.whoosh.analyzer import Counts
from braind.index.whoosh.pool import Block, Postings, TermPool

INLINE_LIMIT = 16  # most words of a diary occur in a handful of entries
BLOCK_LIMIT = 1024  # postings per block: recall decodes whole lists, and fewer blocks cost less each
BLOCK_PICKLE = 4  # from protocol 3 on, an array is pickled as its bytes; Whoosh's protocol 2 lists its numbers
INLINE_PICKLE = 4  # protocol 2 pickles each empty value of an inlined list as a call to bytes(): 2.7 µs, not 0.4
STORED_BLOCK = 65535  # the most bytes a stored deflate block holds
STORED_PICKLE = 4  # protocol of stored fields: a short string's length in one byte, not four as in Whoosh's 2


ZLIB_HEADER = b"\x78\x01"  # deflate with a 32 KB window, no dictionary, the check bits zlib's level 0 writes
STORED_HEADER = struct.Struct("<BHH")  # a stored block: final flag and type 0, its length, its length's complement
ADLER32 = struct.Struct(">I")


class PostingsWriter(W3PostingsWriter):
    """Whoosh's W3 postings writer, also taking a whole posting list at once, and inlining as intended.

    A block's numbers and weights are pickled as arrays, not tuples, by a protocol that keeps an array's
    bytes as they are: recall turns them into NumPy arrays without a loop (reading a block of 1,024 postings
    back takes 2.5 µs, where Whoosh's protocol 2, a list of numbers, takes 54), and Whoosh's readers take
    them as the sequences they expect.
    """

    _position: int | None = None  # where the next block goes, once asked of the file

    def _write_block(self, last: bool = False) -> None:
        """Whoosh's block writer, the block's data pickled with BLOCK_PICKLE: length, info, data, in one write."""
        self._terminfo.add_block(self)
        data = pickle.dumps((self._mini_ids(), self._mini_weights(), self._mini_values()), BLOCK_PICKLE)
        lengths = length_to_byte(self._minlength), length_to_byte(self._maxlength)
        info = pickle.dumps((len(self._ids), self._ids[-1], self._maxweight, 0, *lengths), 2)
        size = len(info) + len(data)
        head = b"" if self._blockcount else WHOOSH3_HEADER_MAGIC  # a list's first block follows the magic
        block = b"".join((head, pack_int(-size if last else size), info, data))  # negative: the last block
        self._postfile.write(block)
        if self._position is not None:
            self._position += len(block)
        self._blockcount += 1
        self._new_block()

    def _tell(self) -> int:
        """Where the next block goes: asked of the file once, then counted (a file's tell() is a system call)."""
        if self._position is None:
            self._position = self._postfile.tell()
        return self._position

    def _mini_ids(self) -> Any:
        """The block's document numbers, delta-encoded (each block starts from 0), as an array."""
        ids = np.asarray(self._ids, dtype=np.int64)
        return array("I", np.diff(ids, prepend=0).astype(np.uint32).tobytes())

    def _mini_weights(self) -> Any:
        """None when every weight is 1, the one weight when all are equal, else an array of them."""
        weights = np.asarray(self._weights, dtype=np.float32)
        if bool((weights == 1.0).all()):
            return None
        if bool((weights == weights[0]).all()):
            return float(weights[0])
        return array("f", weights.tobytes())

    def write_all(self, format_: Any, postings: Postings) -> bytes:
        """Write one term's postings, or inline them when short; its term info as bytes."""
        if len(postings.docs) < self._inlinelimit:
            return _inlined(postings)
        return cast(bytes, self._write_blocks(format_, postings).to_bytes())

    def _write_blocks(self, format_: Any, postings: Postings) -> W3TermInfo:
        """Write a posting list in blocks; its term info."""
        self._format, self._terminfo, self._blockcount = format_, W3TermInfo(), 0
        docs, weights, values = postings.docs, postings.weights, postings.values
        start = self._tell()
        for first in range(0, len(docs), self._blocklimit):
            end = first + self._blocklimit
            self._fill(docs[first:end], weights[first:end], values[first:end])
            self._write_block(last=end >= len(docs))
        terminfo, self._terminfo = self._terminfo, None
        terminfo.set_extent(start, self._tell() - start)
        return terminfo

    def _fill(self, docs: Sequence[int], weights: Sequence[float], values: list[bytes]) -> None:
        """Make a block of postings current, with the statistics add_posting() would have kept."""
        self._ids, self._weights, self._values = docs, weights, values
        self._maxweight = max(weights, default=0)
        self._minlength, self._maxlength = None, 0  # lengths are not tracked (Codec.length_stats)

    def finish_postings(self) -> W3TermInfo:
        """End a list added posting by posting: Whoosh's, but inlining short lists with the right method."""
        if self.written() or len(self) >= self._inlinelimit:
            return super().finish_postings()
        return self._inline()

    def _inline(self) -> W3TermInfo:
        """Keep the current short list in its term info; every posting gets a value, as readers expect."""
        terminfo, self._terminfo = self._terminfo, None
        terminfo.add_block(self)
        terminfo.set_inlined(self._ids, self._weights, self._values or (b"",) * len(self._ids))
        return terminfo


def _inlined(postings: Postings) -> bytes:
    """The term info of a short list holding its postings, as W3TermInfo reads it, without its objects."""
    docs, weights = postings.docs, postings.weights
    values = tuple(postings.values) or (b"",) * len(docs)  # every posting gets a value, as readers expect
    flags = compat.TERM_INFO.pack(True, sum(weights), len(docs), 0, 0, max(max(weights), 0), docs[0], docs[-1])
    return cast(bytes, flags) + pickle.dumps((tuple(docs), tuple(weights), values), INLINE_PICKLE)


class FieldWriter(W3FieldWriter):
    """Whoosh's W3 field writer, also writing a whole pool of terms."""

    def add_pool(self, schema: Schema, pool: TermPool) -> None:
        """Write every field's terms in order, each posting list at once."""
        for fieldname in pool.fields:
            self.start_field(fieldname, schema[fieldname])
            prefix, write = pack_ushort(self._fieldid), self._postwriter.write_all
            self._add_terms(
                [(prefix + text, write(self._format, postings)) for text, postings in pool.sorted_terms(fieldname)]
            )
            self.finish_field()

    def _add_terms(self, items: list[tuple[bytes, bytes]]) -> None:
        """Add (key, term info) pairs in key order to the term index: OrderedHashWriter.add() without its calls."""
        tindex = self._tindex
        dbfile, buckets, positions, hashfn = tindex.dbfile, tindex.buckets, tindex.index, tindex.hashfn
        position, last = dbfile.tell(), tindex.lastkey
        for key, value in items:
            if key <= last:
                raise ValueError(f"Keys must increase: {last!r}..{key!r}")
            record = compat.LENGTHS.pack(len(key), len(value)) + key + value
            dbfile.write(record)
            positions.append(position)
            hashed = hashfn(key)
            buckets[hashed & 255].append((hashed, position))
            position, last = position + len(record), key
        tindex.lastkey = last


def stored_zlib(data: bytes) -> bytes:
    """`data` as a zlib stream of stored deflate blocks, what zlib's level 0 makes, without zlib's per-call state.

    zlib.compress() sets up a compressor of some 256 KB for each call, even at level 0: for an entry's few
    hundred bytes that was most of the cost. A stream of stored blocks is a two-byte header, each block's
    length and its complement before its bytes, and the Adler-32 checksum.
    """
    view = memoryview(data)
    parts: list[bytes | memoryview] = [ZLIB_HEADER]
    for start in range(0, max(len(data), 1), STORED_BLOCK):  # no data: one empty final block
        chunk = view[start : start + STORED_BLOCK]
        parts += [STORED_HEADER.pack(start + STORED_BLOCK >= len(data), len(chunk), len(chunk) ^ 0xFFFF), chunk]
    parts.append(ADLER32.pack(zlib.adler32(data)))
    return b"".join(parts)


class StoredBytesColumn(CompressedBytesColumn):
    """Whoosh's column of zlib-compressed bytes, written as stored blocks (see stored_zlib); read by Whoosh's."""

    class Writer(CompressedBytesColumn.Writer):
        """Each value as a stream of stored blocks."""

        def add(self, docnum: int, v: bytes) -> None:
            """Add one document's value."""
            VarBytesColumn.Writer.add(self, docnum, stored_zlib(v))


class StoredColumn(PickleColumn):
    """Whoosh's column of stored fields, pickled with STORED_PICKLE and not compressed (a StoredBytesColumn)."""

    def __init__(self) -> None:
        super().__init__(StoredBytesColumn(level=0))

    class Writer(PickleColumn.Writer):
        """Whoosh's writer of pickled values, with a newer protocol (its readers read any)."""

        def add(self, docnum: int, v: Any) -> None:
            """Add one document's stored fields."""
            self._child.add(docnum, b"" if v is None else pickle.dumps(v, STORED_PICKLE))


class PerDocWriter(W3PerDocWriter):
    """Whoosh's per-document writer, with its stored fields in a StoredColumn.

    Whoosh compresses each document's stored fields at zlib level 3: for an entry's few hundred bytes,
    mostly zlib setting up its state, a fifth of the time indexing an entry took (0 and 3 taking turns).
    """

    def _create_column(self, fieldname: str, column: Any) -> None:
        """Whoosh's, with the stored fields' column a StoredColumn."""
        super()._create_column(fieldname, StoredColumn() if fieldname == "_stored" else column)

    @property
    def stored_fields(self) -> dict[str, Any]:
        """The current document's stored fields, which add_field() fills (for fields only stored, directly)."""
        return cast("dict[str, Any]", self._storedfields)

    def add_column_value(self, fieldname: str, column: Any, value: Any) -> None:
        """Whoosh's, with one lookup of the column's writer instead of a check and a lookup: it runs per field."""
        writer = self._colwriters.get(fieldname)
        if writer is None:
            self._create_column(fieldname, column)
            writer = self._colwriters[fieldname]
        writer.add(self._docnum, value)


class Codec(W3Codec):
    """Whoosh's W3 codec without zlib, with inlined short lists and without per-block length statistics.

    Length statistics only speed up Whoosh's own top-N search, which braind does not use.
    """

    length_stats = False

    def __init__(self) -> None:
        super().__init__(blocklimit=BLOCK_LIMIT, compression=0, inlinelimit=INLINE_LIMIT)

    def postings_writer(self, dbfile: Any, byteids: bool = False) -> PostingsWriter:
        """The postings writer that takes whole lists."""
        return PostingsWriter(
            dbfile,
            blocklimit=self._blocklimit,
            byteids=byteids,
            compression=self._compression,
            inlinelimit=self._inlinelimit,
        )

    def per_document_writer(self, storage: Any, segment: Any) -> PerDocWriter:
        """The per-document writer that stores fields uncompressed."""
        return PerDocWriter(self, storage, segment)

    def field_writer(self, storage: Any, segment: Any) -> FieldWriter:
        """The field writer that writes a whole pool."""
        return FieldWriter(self, storage, segment)


@dataclass(frozen=True, slots=True)
class _Plan:
    """How one field of the schema is written."""

    field: FieldType
    whole: bool  # an ID field: the value itself is the only term
    counted: bool  # analysed into term counts, without values (the text field)
    weight: float
    scorable: bool
    stored: bool
    column: Any
    only_stored: bool  # neither indexed nor a column: the value is only kept with the document


def _plan(field: FieldType) -> _Plan:
    """The plan of a field; refuse what add_document() does not write (vectors, separate spellings)."""
    if field.vector or field.separate_spelling():
        raise ValueError(f"{type(field).__name__} fields with vectors or spellings are not supported")
    whole = field.indexed and type(field.analyzer) is IDTokenizer and type(field.format) is Existence
    weight = field.format.field_boost if field.indexed else 1.0
    counted = field.indexed and isinstance(field.format, Counts)
    only_stored = field.stored and not field.indexed and not field.column_type
    return _Plan(field, whole, counted, weight, field.scorable, field.stored, field.column_type, only_stored)


class Writer(SegmentWriter):
    """Whoosh's segment writer with the term pool and a per-field plan; documents take plain values only."""

    def __init__(self, ix: Any, **kwargs: Any) -> None:
        self._plans = {name: _plan(field) for name, field in ix.schema.items()}  # before taking the lock
        super().__init__(ix, codec=Codec(), **kwargs)
        self.pool = TermPool()

    def add_document(self, **fields: Any) -> None:
        """Add one document: its postings to the pool, its stored fields and columns to the segment."""
        self._check_state()
        plans = self._plans
        if not plans.keys() >= fields.keys():
            unknown = next(name for name in fields if name not in plans)
            raise UnknownFieldError(f"No field named {unknown!r} in {self.schema}")
        self.perdocwriter.start_doc(self.docnum)
        stored = self.perdocwriter.stored_fields
        try:
            for name, value in fields.items():
                if value is None:
                    continue
                if plans[name].only_stored:  # most fields of an entry: a call less each
                    stored[name] = value
                else:
                    self._add_field(name, value)
        except Exception:
            self.perdocwriter.cancel_doc()
            raise
        self.perdocwriter.finish_doc()
        self._added = True
        self.docnum += 1

    def _add_field(self, name: str, value: Any) -> None:
        """Index, store and put in its column one field of the current document."""
        plan, docnum = self._plans[name], self.docnum
        length = 0
        if plan.whole and isinstance(value, str):
            self.pool.arrivals(name).add_one(docnum, value, plan.weight)
        elif plan.counted:
            counts = plan.field.format.term_counts(value, plan.field.analyzer)
            weight = plan.weight
            weighted = counts if weight == 1.0 else {word: count * weight for word, count in counts.items()}
            self.pool.arrivals(name).add(docnum, weighted)
            length = sum(counts.values())
        elif plan.field.indexed:
            words = plan.field.format.word_values(value, plan.field.analyzer, mode="index")
            length = self.pool.add_terms(name, docnum, words)
        length = length if plan.scorable else 0
        if plan.stored or length:
            self.perdocwriter.add_field(name, plan.field, value if plan.stored else None, length)
        if plan.column:
            self.perdocwriter.add_column_value(name, plan.column, plan.field.to_column_value(value))

    def write_per_doc(self, fieldnames: set[str], reader: Any) -> dict[int, int] | None:
        """Copy a merged segment's documents: Whoosh's loop, with each column read once, not per document.

        Whoosh asks the file system whether a field's length column exists for every field of every document.
        """
        perdoc = compat.segment_stored(reader)
        if not isinstance(perdoc, W3PerDocReader) or any(self.schema[name].vector for name in fieldnames):
            return cast("dict[int, int] | None", super().write_per_doc(fieldnames, reader))
        lengths = {name: _column(perdoc, compat.lengths_column(name), LENGTHS_COLUMN) for name in fieldnames}
        columns = {name: _column(perdoc, name, self.schema[name].column_type) for name in fieldnames}
        docmap: dict[int, int] | None = {} if reader.has_deletions() else None
        pdw, schema = self.perdocwriter, self.schema
        for docnum, stored in reader.iter_docs():
            if docmap is not None:
                docmap[docnum] = self.docnum
            pdw.start_doc(self.docnum)
            for name in fieldnames | {name for name in stored if name in schema}:
                field, sizes, column = schema[name], lengths.get(name), columns.get(name)
                pdw.add_field(name, field, stored.get(name), byte_to_length(sizes[docnum]) if sizes else 0)
                if column is not None:
                    pdw.add_column_value(name, field.column_type, column[docnum])
            pdw.finish_doc()
            self.docnum += 1
        return docmap

    def add_postings_to_pool(self, reader: Any, startdoc: int, docmap: dict[int, int] | None) -> None:
        """Copy a merged segment's postings a block at a time, reading its terms file in one go.

        Whoosh looks each term up again by its hash, a few bytes at a time, and hands over one tuple per posting.
        """
        terms = compat.segment_terms(reader)
        if not isinstance(terms, W3TermsReader) or not isinstance(compat.term_table(terms), OrderedHashReader):
            super().add_postings_to_pool(reader, startdoc, docmap)
            return
        mapping = startdoc if docmap is None else docmap
        for fieldname, text, info in _term_infos(terms):
            if fieldname in self.schema:
                for block in _posting_blocks(terms, info, self.schema[fieldname].format):
                    self.pool.add_block(fieldname, text, block, mapping)

    def _flush_segment(self) -> None:
        """Write the segment's stored fields, then its terms from the pool."""
        self.perdocwriter.close()
        self.fieldwriter.add_pool(self.schema, self.pool)
        self.fieldwriter.close()


def _column(perdoc: W3PerDocReader, name: str, kind: Any) -> Sequence[Any] | None:
    """A segment's column read whole, or None when the segment has none (or the field is not a column)."""
    if kind is None or not perdoc.has_column(name):
        return None
    column = perdoc.column_reader(name, kind)
    if isinstance(column, TranslatingColumnReader):
        column = column.raw_column()
    return compat.column_values(column) if isinstance(column, NumericColumn.Reader) else column


def _term_infos(terms: W3TermsReader) -> Iterator[tuple[str, bytes, W3TermInfo]]:
    """Every (field, term, term info) of a segment, in order, from one read of its terms file."""
    table = compat.term_table(terms)
    data = table.dbfile.get(table.startofdata, table.endofdata - table.startofdata)
    position, size, unpack = 0, len(data), compat.LENGTHS.unpack_from
    while position < size:
        keylen, infolen = unpack(data, position)
        key = position + compat.LENGTHS.size
        info = key + keylen
        field = compat.field_name(terms, unpack_ushort(data[key : key + 2])[0])
        yield field, data[key + 2 : info], W3TermInfo.from_bytes(data[info : info + infolen])
        position = info + infolen


def _posting_blocks(terms: W3TermsReader, info: W3TermInfo, format_: Format) -> Iterator[Block]:
    """A term's postings block by block: from the term info when inlined, else from one read of the list."""
    with_values = format_.fixed_value_size() != 0
    if info.is_inlined():
        docs, weights, values = info.inlined_postings()
        yield docs, weights, values if with_values else None
        return
    offset, length = info.extent()
    length = length[0] if isinstance(length, tuple) else length  # this Whoosh decodes it as a 1-tuple
    yield from compat.posting_blocks(compat.posting_bytes(terms, offset, length), format_)


def open_writer(ix: Any, **kwargs: Any) -> Writer:
    """A writer of braind's segments for an index."""
    return Writer(ix, **kwargs)
