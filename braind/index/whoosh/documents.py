"""Entries and file records as Whoosh documents and back: the schema, the mapping, the queries that select them."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import Any

from whoosh.columns import NumericColumn
from whoosh.fields import COLUMN, ID, KEYWORD, STORED, TEXT, Schema
from whoosh.query import Every, Not, NullQuery, Or, Prefix, Query, Term, TermRange

from braind.index import analysis
from braind.index.api import FileRecord, Filters
from braind.index.whoosh.analyzer import Counts, analyzer
from braind.model.entries import Entry

SCHEMA_VERSION = 8
FILE = "file"
LIVE = "live"
FP_HEAD = 3  # characters of fp indexed: a few thousand terms, not one per entry


class Text(TEXT):
    """The entry text: analysed, stored, scored; frequencies without positions (see analyzer.Counts)."""

    def __init__(self, languages: tuple[str, ...] = analysis.DEFAULT_LANGUAGES, stored: bool = True) -> None:
        super().__init__(analyzer=analyzer(languages), stored=stored, phrase=False)
        self.format = Counts()


def make_schema(languages: tuple[str, ...] = analysis.DEFAULT_LANGUAGES) -> Schema:
    """One document per entry, plus one per file so that entries and records commit together.

    Only what is searched or filtered on is indexed (each indexed field costs
    indexing speed); fp is not stored because Entry derives it.
    """
    return Schema(
        path=ID(stored=True),
        root=ID(stored=True),
        type=ID(stored=True),
        status=ID(stored=True),  # left out when live, so only the exceptions are posted
        date=ID(stored=True),
        stamp=COLUMN(NumericColumn("q")),
        text=Text(languages),
        file_key=COLUMN(NumericColumn("q")),  # which file, and where in it: an entry's neighbours, for ranking
        file_line=COLUMN(NumericColumn("i")),
        triggers=KEYWORD(stored=True),
        fp_head=ID,  # fp's first characters; select() checks the whole fp, which stored fields derive
        key=ID(stored=True),
        realm=STORED,
        kind=STORED,
        line=STORED,
        time=STORED,
        occurrence=STORED,
        entry_path=STORED,
        record=ID,  # only on file documents
        file=ID,  # a file document's path: its record is found without reading the file's entries
        size=STORED,
        mtime_ns=STORED,
        sha256=STORED,
        count=STORED,
    )


def stamp(entry: Entry) -> int:
    """yyyymmddHHMM as an integer, the tie-breaker that puts newer entries first."""
    digits = entry.date.replace("-", "") + (entry.time.replace(":", "") or "0000")
    return int(digits) if digits.isascii() and digits.isdigit() and len(digits) == 12 else 0


def entry_doc(path: str, entry: Entry) -> dict[str, Any]:
    """The Whoosh document of one entry; empty optional fields are left out."""
    doc: dict[str, Any] = {
        "file_key": file_key(path),
        "file_line": entry.line,
        "path": path,
        "root": entry.root,
        "type": entry.type,
        "status": None if entry.status == LIVE else entry.status,
        "date": entry.date,
        "stamp": stamp(entry),
        "text": entry.text,
        "triggers": " ".join(entry.triggers),
        "fp_head": entry.fp[:FP_HEAD],
        "realm": entry.realm,
        "kind": entry.kind,
        "key": entry.key,
        "line": entry.line,
        "time": entry.time,
        "occurrence": entry.occurrence,
        "entry_path": None if entry.path == path else entry.path,
    }
    return {name: value for name, value in doc.items() if value is not None and value != ""}


def file_doc(record: FileRecord, count: int) -> dict[str, Any]:
    """The Whoosh document that stores a file's record and its number of entries."""
    return {
        "record": FILE,
        "file": record.path,
        "kind": FILE,
        "root": record.root,
        "path": record.path,
        "size": record.size,
        "mtime_ns": record.mtime_ns,
        "sha256": record.sha256,
        "count": count,
        "stamp": 0,  # every segment needs the sort column, even one holding only file records
    }


def to_entry(stored: dict[str, Any]) -> Entry:
    """Rebuild an Entry from a document's stored fields (empty fields were left out)."""
    return Entry(
        root=stored.get("root", ""),
        realm=stored.get("realm", ""),
        path=stored.get("entry_path", stored["path"]),
        line=stored.get("line", 0),
        date=stored.get("date", ""),
        time=stored.get("time", ""),
        text=stored.get("text", ""),
        kind=stored.get("kind", "diary"),
        type=stored.get("type", "note"),
        key=stored.get("key"),
        triggers=tuple(stored.get("triggers", "").split()),
        status=stored.get("status", "live"),
        occurrence=stored.get("occurrence", 0),
    )


@functools.lru_cache(maxsize=1024)
def file_key(path: str) -> int:
    """A number naming a file, the same in every segment and process (a hash, not Python's salted one).

    Kept for the last files asked about: a file's entries are indexed one after another, each asking.
    """
    return int.from_bytes(hashlib.blake2b(path.encode("utf-8", "surrogateescape"), digest_size=8).digest()) >> 2


def to_record(stored: dict[str, Any]) -> FileRecord:
    """Rebuild a FileRecord from a file document's stored fields."""
    return FileRecord(stored["root"], stored["path"], stored["size"], stored["mtime_ns"], stored["sha256"])


def read_records(searcher: Any) -> tuple[dict[str, FileRecord], dict[str, int]]:
    """Every file record and entry count stored in an index."""
    records: dict[str, FileRecord] = {}
    counts: dict[str, int] = {}
    for doc in searcher.documents(record=FILE):
        records[doc["path"]] = to_record(doc)
        counts[doc["path"]] = doc.get("count", 0)
    return records, counts


def select_query(field: str, values: Sequence[str], prefix: bool) -> Query:
    """select()'s query; for fp, the heads of the values, which find every match and a few others."""
    if field == "fp":
        heads = {value[:FP_HEAD] for value in values}
        return Or([Term("fp_head", h) if len(h) == FP_HEAD else Prefix("fp_head", h) for h in sorted(heads)])
    kind = Prefix if prefix else Term
    return Or([kind(field, value) for value in values])


def field_matches(entry: Entry, field: str, values: Sequence[str], prefix: bool) -> bool:
    """The Python form of select()'s query, for uncommitted entries."""
    if field == "triggers":
        held: Sequence[str] = entry.triggers
    else:
        value = getattr(entry, field)
        held = () if value is None else (value,)
    if prefix:
        return any(h.startswith(v) for h in held for v in values)
    return any(h in values for h in held)


def day_stamp(date: str) -> int:
    """The smallest stamp of a day."""
    return int(date.replace("-", "")) * 10000


def filter_clauses(filters: Filters) -> list[Query]:
    """The filters as Whoosh queries."""
    clauses: list[Query] = []
    if filters.since is not None:
        clauses.append(Or([TermRange("date", filters.since, None), Not(Every("date"))]))
    if filters.roots is not None:
        clauses.append(Or([Term("root", root) for root in filters.roots]) if filters.roots else NullQuery)
    if filters.type is not None:
        clauses.append(Term("type", filters.type))
    return clauses
