"""How the index writes Whoosh segments: postings gathered in arrays as documents arrive, each list written whole.

Whoosh's own writer makes a tuple per posting, sorts them all at commit and
hands them to its codec one by one; the codec compresses every block and
every document's stored fields with zlib, and its inlining of short posting
lists calls a method its term info lacks, so nothing is ever inlined. Here a
document's terms are appended to a field's arrays and grouped by term with
one sort at the commit, lists shorter than INLINE_LIMIT are kept in the term
index itself, the others are written in uncompressed blocks, and stored
fields are not compressed. The files are Whoosh's W3 format: its readers
open them unchanged.
"""

from __future__ import annotations

import pickle
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
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
from whoosh.columns import CompressedBytesColumn, NumericColumn, PickleColumn, TranslatingColumnReader
from whoosh.fields import FieldType, Schema, UnknownFieldError
from whoosh.filedb.filetables import OrderedHashReader
from whoosh.formats import Existence, Format
from whoosh.system import pack_ushort, unpack_ushort
from whoosh.util.numeric import byte_to_length, length_to_byte
from whoosh.writing import SegmentWriter

from braind.index.whoosh import compat
from braind.index.whoosh.analyzer import Counts

INLINE_LIMIT = 16  # most words of a diary occur in a handful of entries
BLOCK_LIMIT = 1024  # postings per block: recall decodes whole lists, and fewer blocks cost less each
BLOCK_PICKLE = 4  # from protocol 3 on, an array is pickled as its bytes; Whoosh's protocol 2 lists its numbers
SMALL_RUNS = 4096  # postings up to which a field's arrivals are grouped in Python: NumPy pays off past some 30,000
STORED_LEVEL = 0  # zlib level of stored fields: 0 keeps the bytes as they are, in a stream Whoosh's readers read
STORED_PICKLE = 4  # protocol of stored fields: a short string's length in one byte, not four as in Whoosh's 2


# (field, term bytes, document, weight, value): a posting as Whoosh's merges hand it over.
Posting = tuple[str, bytes, int, float, "bytes | None"]
# A block of a posting list: document numbers, weights, and values (None for a format without them).
Block = tuple[Sequence[int], Sequence[float], "Sequence[bytes | None] | None"]


class Postings:
    """One term's postings in document order: numbers, weights, and values when the format has them."""

    __slots__ = ("docs", "values", "weights")

    def __init__(self) -> None:
        self.docs = array("I")
        self.weights = array("f")
        self.values: list[bytes] = []


class Arrivals:
    """A field's postings as documents arrive, before they are grouped by term: three arrays, a posting a row.

    Appending a document's terms to these is a few calls in C; grouping them by term once, at the commit,
    is a sort. Keeping a list per term instead cost a dictionary lookup and two appends per posting.
    """

    __slots__ = ("docs", "numbers", "terms", "weights")

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}  # each term's number, in order of arrival
        self.terms = array("I")
        self.docs = array("I")
        self.weights = array("f")

    def add(self, docnum: int, weights: dict[str, float] | dict[str, int]) -> None:
        """One document's terms with their weights."""
        numbers = self.numbers
        self.terms.extend([numbers.setdefault(word, len(numbers)) for word in weights])
        self.docs.extend(repeat(docnum, len(weights)))
        self.weights.extend(weights.values())

    def runs(self) -> Iterator[tuple[bytes, Postings]]:
        """Each term in order with its postings in document order (the order they arrived in)."""
        if len(self.docs) <= SMALL_RUNS:
            yield from self._small_runs()
            return
        names = sorted(self.numbers)  # code point order, which is the order of their UTF-8 bytes
        ranks = np.empty(len(names), dtype=np.uint32)
        ranks[[self.numbers[name] for name in names]] = np.arange(len(names), dtype=np.uint32)
        keys = ranks[np.frombuffer(self.terms, dtype=np.uint32)]
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        docs = memoryview(np.frombuffer(self.docs, dtype=np.uint32)[order].tobytes())
        weights = memoryview(np.frombuffer(self.weights, dtype=np.float32)[order].tobytes())
        bounds = [0, *(np.flatnonzero(keys[1:] != keys[:-1]) + 1).tolist(), len(keys)]
        for name, start, end in zip(names, bounds[:-1], bounds[1:], strict=True):  # a run for each term
            postings = Postings()
            postings.docs.frombytes(docs[4 * start : 4 * end])
            postings.weights.frombytes(weights[4 * start : 4 * end])
            yield name.encode("utf-8"), postings

    def _small_runs(self) -> Iterator[tuple[bytes, Postings]]:
        """runs() for a few postings (a note's commit), where NumPy's fixed costs would outweigh the sort."""
        lists = [Postings() for _ in self.numbers]
        for number, doc, weight in zip(self.terms, self.docs, self.weights, strict=True):
            lists[number].docs.append(doc)
            lists[number].weights.append(weight)
        for name, number in sorted(self.numbers.items()):
            yield name.encode("utf-8"), lists[number]


class TermPool:
    """A segment's postings by field and term, in memory: compact arrays instead of a tuple per posting."""

    def __init__(self) -> None:
        self._fields: dict[str, dict[bytes, Postings]] = {}
        self._arrivals: dict[str, Arrivals] = {}  # postings without values, not yet grouped by term
        self.unsorted: set[tuple[str, bytes]] = set()  # terms that got a posting out of document order

    @property
    def fields(self) -> list[str]:
        """The names of the fields that have postings."""
        return sorted(self._fields.keys() | self._arrivals.keys())

    def terms(self, fieldname: str) -> dict[bytes, Postings]:
        """The postings of one field by term."""
        if fieldname in self._arrivals:
            self._group(fieldname)
        found = self._fields.get(fieldname)
        return found if found is not None else self._fields.setdefault(fieldname, {})

    def _group(self, fieldname: str) -> None:
        """Move a field's arrived postings into its lists by term."""
        terms = self._fields.setdefault(fieldname, {})
        for text, arrived in self._arrivals.pop(fieldname).runs():
            postings = terms.get(text)
            if postings is None:
                terms[text] = arrived
                continue
            if postings.docs[-1] >= arrived.docs[0]:
                self.unsorted.add((fieldname, text))
            postings.docs.extend(arrived.docs)
            postings.weights.extend(arrived.weights)

    def add_weights(self, fieldname: str, docnum: int, weights: dict[str, float] | dict[str, int]) -> None:
        """Add a document's terms of a field whose format has no values, each with its weight."""
        arrivals = self._arrivals.get(fieldname)
        if arrivals is None:
            arrivals = self._arrivals[fieldname] = Arrivals()
        arrivals.add(docnum, weights)

    def add_term(self, terms: dict[bytes, Postings], text: bytes, docnum: int, weight: float) -> Postings:
        """Add a posting without a value."""
        postings = terms.get(text)
        if postings is None:
            postings = terms[text] = Postings()
        postings.docs.append(docnum)
        postings.weights.append(weight)
        return postings

    def add_terms(self, fieldname: str, docnum: int, items: Iterable[tuple[str, int, float, bytes]]) -> int:
        """Add a document's (term, frequency, weight, value) items for a field; the sum of frequencies."""
        terms, length = self.terms(fieldname), 0
        for word, frequency, weight, value in items:  # add_term() inlined: this runs for every posting
            text = word.encode("utf-8")
            postings = terms.get(text)
            if postings is None:
                postings = terms[text] = Postings()
            postings.docs.append(docnum)
            postings.weights.append(weight)
            if value:
                postings.values.append(value)
            length += frequency
        return length

    def add(self, item: Posting) -> None:
        """One posting of a merged segment (Whoosh's pool interface)."""
        fieldname, text, docnum, weight, value = item
        terms = self.terms(fieldname)
        known = terms.get(text)
        if known is not None and known.docs[-1] >= docnum:
            self.unsorted.add((fieldname, text))
        postings = self.add_term(terms, text, docnum, weight)
        if value:
            postings.values.append(value)

    def add_block(self, fieldname: str, text: bytes, block: Block, docmap: Any) -> None:
        """A block of a merged segment's postings: renumbered by `docmap`, deleted documents left out."""
        docs, weights, values = block
        kept: Sequence[int]
        if isinstance(docmap, int):  # no deletions: numbers shift by the segment's first document
            kept = range(len(docs))
            renumbered = [docmap + doc for doc in docs]
        else:
            kept = [i for i, doc in enumerate(docs) if doc in docmap]
            renumbered = [docmap[docs[i]] for i in kept]
        if not renumbered:
            return
        terms = self.terms(fieldname)
        postings = terms.get(text)
        if postings is None:
            postings = terms[text] = Postings()
        elif postings.docs[-1] >= renumbered[0]:
            self.unsorted.add((fieldname, text))
        postings.docs.extend(renumbered)
        postings.weights.extend([weights[i] for i in kept])
        if values is not None:
            postings.values.extend(value for i in kept if (value := values[i]))

    def sorted_terms(self, fieldname: str) -> list[tuple[bytes, Postings]]:
        """A field's terms in order, each with its postings in document order."""
        if fieldname not in self._fields and fieldname in self._arrivals:
            return list(self._arrivals.pop(fieldname).runs())
        terms = self.terms(fieldname)
        if not self.unsorted:
            return sorted(terms.items())
        return [(text, self._in_order(fieldname, text, terms[text])) for text in sorted(terms)]

    def _in_order(self, fieldname: str, text: bytes, postings: Postings) -> Postings:
        """The postings sorted by document, for a term whose postings arrived out of order."""
        if (fieldname, text) not in self.unsorted:
            return postings
        order = sorted(range(len(postings.docs)), key=postings.docs.__getitem__)
        ordered = Postings()
        ordered.docs.extend(postings.docs[i] for i in order)
        ordered.weights.extend(postings.weights[i] for i in order)
        if postings.values:  # a format with values gives every posting one
            ordered.values.extend(postings.values[i] for i in order)
        return ordered

    def cleanup(self) -> None:
        """Forget everything (Whoosh's pool interface)."""
        self._fields, self._arrivals, self.unsorted = {}, {}, set()


class PostingsWriter(W3PostingsWriter):
    """Whoosh's W3 postings writer, also taking a whole posting list at once, and inlining as intended.

    A block's numbers and weights are pickled as arrays, not tuples, by a protocol that keeps an array's
    bytes as they are: recall turns them into NumPy arrays without a loop (reading a block of 1,024 postings
    back takes 2.5 µs, where Whoosh's protocol 2, a list of numbers, takes 54), and Whoosh's readers take
    them as the sequences they expect.
    """

    def _write_block(self, last: bool = False) -> None:
        """Whoosh's block writer, the block's data pickled with BLOCK_PICKLE: length, info, data."""
        if not self._blockcount:
            self._postfile.write(WHOOSH3_HEADER_MAGIC)
        self._terminfo.add_block(self)
        data = pickle.dumps((self._mini_ids(), self._mini_weights(), self._mini_values()), BLOCK_PICKLE)
        lengths = length_to_byte(self._minlength), length_to_byte(self._maxlength)
        info = pickle.dumps((len(self._ids), self._ids[-1], self._maxweight, 0, *lengths), 2)
        size = len(info) + len(data)
        self._postfile.write_int(-size if last else size)  # negative: the last block
        self._postfile.write(info)
        self._postfile.write(data)
        self._blockcount += 1
        self._new_block()

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
        start = self._postfile.tell()
        for first in range(0, len(docs), self._blocklimit):
            end = first + self._blocklimit
            self._fill(docs[first:end], weights[first:end], values[first:end])
            self._write_block(last=end >= len(docs))
        terminfo, self._terminfo = self._terminfo, None
        terminfo.set_extent(start, self._postfile.tell() - start)
        return terminfo

    def _fill(self, docs: array[int], weights: array[float], values: list[bytes]) -> None:
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
    """The term info of a short list holding its postings: the bytes W3TermInfo makes, without its objects."""
    docs, weights = postings.docs, postings.weights
    values = tuple(postings.values) or (b"",) * len(docs)  # every posting gets a value, as readers expect
    flags = compat.TERM_INFO.pack(True, sum(weights), len(docs), 0, 0, max(max(weights), 0), docs[0], docs[-1])
    return cast(bytes, flags) + pickle.dumps((tuple(docs), tuple(weights), values), 2)


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


class StoredColumn(PickleColumn):
    """Whoosh's column of stored fields, pickled with STORED_PICKLE and kept at zlib level STORED_LEVEL."""

    def __init__(self) -> None:
        super().__init__(CompressedBytesColumn(level=STORED_LEVEL))

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


def _plan(field: FieldType) -> _Plan:
    """The plan of a field; refuse what add_document() does not write (vectors, separate spellings)."""
    if field.vector or field.separate_spelling():
        raise ValueError(f"{type(field).__name__} fields with vectors or spellings are not supported")
    whole = field.indexed and type(field.analyzer) is IDTokenizer and type(field.format) is Existence
    weight = field.format.field_boost if field.indexed else 1.0
    counted = field.indexed and isinstance(field.format, Counts)
    return _Plan(field, whole, counted, weight, field.scorable, field.stored, field.column_type)


class Writer(SegmentWriter):
    """Whoosh's segment writer with the term pool and a per-field plan; documents take plain values only."""

    def __init__(self, ix: Any, **kwargs: Any) -> None:
        self._plans = {name: _plan(field) for name, field in ix.schema.items()}  # before taking the lock
        super().__init__(ix, codec=Codec(), **kwargs)
        self.pool = TermPool()

    def add_document(self, **fields: Any) -> None:
        """Add one document: its postings to the pool, its stored fields and columns to the segment."""
        self._check_state()
        unknown = [name for name in fields if name not in self._plans]
        if unknown:
            raise UnknownFieldError(f"No field named {unknown[0]!r} in {self.schema}")
        self.perdocwriter.start_doc(self.docnum)
        try:
            for name, value in fields.items():
                if value is not None:
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
            self.pool.add_weights(name, docnum, {value: plan.weight})
        elif plan.counted:
            counts = plan.field.format.term_counts(value, plan.field.analyzer)
            weight = plan.weight
            self.pool.add_weights(name, docnum, counts if weight == 1.0 else {w: n * weight for w, n in counts.items()})
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
