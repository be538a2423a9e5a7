"""Queued changes to files and how a batch of them is written: only the entries that differ are added or deleted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from whoosh.query import And, Or, Term

from braind.index.api import FileRecord
from braind.index.whoosh import compat
from braind.index.whoosh.documents import FILE, FP_HEAD, entry_doc, file_doc, to_entry
from braind.index.whoosh.writer import open_writer
from braind.model.entries import Entry

LOCK_TIMEOUT = 10.0
KNOWN_FILES = 16  # files whose committed entries are remembered: their next change is diffed without reading them

# The committed entries of recently written files, by path.
Known = dict[str, tuple[Entry, ...]]


@dataclass(frozen=True)
class Change:
    """A queued change to one file: its new record and entries, or None when removed."""

    record: FileRecord | None
    entries: tuple[Entry, ...] = ()


def write_batch(ix: Any, batch: dict[str, Change], known: Known | None = None) -> None:
    """Apply file changes to an index in one commit; `known` holds the committed entries of recently written files."""
    known = {} if known is None else known
    old = {path: known.pop(path, None) for path in batch}  # unknown until this commit succeeds
    writer = open_writer(ix, timeout=LOCK_TIMEOUT)
    try:
        searcher = writer.searcher()  # the writer's own: closed with it
        for path, change in batch.items():
            _apply_change(writer, searcher, path, change, old[path])
    except BaseException:
        writer.cancel()
        raise
    try:
        writer.commit()
    except BaseException:
        compat.abandon(writer)  # a failed commit (a full disk) would keep the index locked for good
        raise
    _remember(known, batch)


def _remember(known: Known, batch: dict[str, Change]) -> None:
    """Remember the entries just committed for the files of a batch, forgetting the least recently written."""
    known.update((path, change.entries) for path, change in batch.items() if change.record is not None)
    while len(known) > KNOWN_FILES:
        del known[next(iter(known))]


def _apply_change(writer: Any, searcher: Any, path: str, change: Change, old: tuple[Entry, ...] | None) -> None:
    """Make a file's documents match a change, adding and deleting only the entries that differ.

    An appended line costs one entry document and the file's record document, not the whole file again.
    """
    if change.record is None:
        writer.delete_by_term("path", path, searcher=searcher)
        return
    found = None if old is None else _known_diff(searcher, path, old, change.entries)
    added, stale = found or _read_diff(searcher, path, change.entries)
    writer.add_document(**file_doc(change.record, len(change.entries)))
    for entry in added:
        writer.add_document(**entry_doc(path, entry))
    for docnum in stale:
        writer.delete_document(docnum)


def _known_diff(
    searcher: Any, path: str, old: Sequence[Entry], new: Sequence[Entry]
) -> tuple[list[Entry], list[int]] | None:
    """Entries to add and documents to delete, reading only the gone entries' documents (by fingerprint head).

    None when one of them is missing: the index does not hold what was remembered, so every document is read.
    """
    added, gone = _diff(old, new)
    stale = list(searcher.docs_for_query(Term("file", path)))  # the record, not the path's every entry
    if gone:
        heads = Or([Term("fp_head", head) for head in sorted({entry.fp[:FP_HEAD] for entry in gone})])
        for docnum in searcher.docs_for_query(And([Term("path", path), heads])):
            entry = to_entry(searcher.stored_fields(docnum))
            if gone[entry] > 0:
                gone[entry] -= 1
                stale.append(docnum)
    return None if +gone else (added, stale)


def _read_diff(searcher: Any, path: str, new: Sequence[Entry]) -> tuple[list[Entry], list[int]]:
    """Entries to add and documents to delete, reading every committed document of the file."""
    records, committed = _committed_docs(searcher, path)
    added, gone = _diff([entry for entry, docs in committed.items() for _ in docs], new)
    return added, records + [committed[entry].pop() for entry in gone.elements()]


def extends(new: Sequence[Entry], old: Sequence[Entry]) -> bool:
    """Whether `new` is `old` followed by more: an append (one comparison in C, the same objects told by identity)."""
    return len(new) >= len(old) and tuple(new[: len(old)]) == tuple(old)


def remember_searched(
    searched: dict[str, tuple[Entry, ...]], path: str, entries: tuple[Entry, ...]
) -> dict[str, tuple[Entry, ...]]:
    """What a searcher holds once one more of its files was read from it: the newest few files read or committed."""
    found = {name: held for name, held in searched.items() if name != path}
    found[path] = entries
    return _newest(found)


def searched_after(searched: dict[str, tuple[Entry, ...]], batch: dict[str, Change]) -> dict[str, tuple[Entry, ...]]:
    """What a searcher holds of recently committed files once a batch is committed: the newest few files."""
    found = {path: entries for path, entries in searched.items() if path not in batch}
    found.update((path, change.entries) for path, change in batch.items() if change.record is not None)
    return _newest(found)


def _newest(found: dict[str, tuple[Entry, ...]]) -> dict[str, tuple[Entry, ...]]:
    """The last KNOWN_FILES files of a dict, in order."""
    return dict(list(found.items())[-KNOWN_FILES:])


def _diff(old: Sequence[Entry], new: Sequence[Entry]) -> tuple[list[Entry], Counter[Entry]]:
    """The new entries not among the old ones, and the old ones no longer there (each as often as it occurs)."""
    if extends(new, old):  # an append: the old entries, then more
        return list(new[len(old) :]), Counter()
    gone = Counter(old)
    added = []
    for entry in new:
        if gone[entry] > 0:
            gone[entry] -= 1
        else:
            added.append(entry)
    return added, +gone


def _committed_docs(searcher: Any, path: str) -> tuple[list[int], dict[Entry, list[int]]]:
    """A file's committed record documents, and its entry documents by entry."""
    records: list[int] = []
    entries: dict[Entry, list[int]] = {}
    read = compat.StoredFields(searcher)
    for docnum in searcher.document_numbers(path=path):
        stored = read(docnum)
        if stored.get("kind") == FILE:
            records.append(docnum)
        else:
            entries.setdefault(to_entry(stored), []).append(docnum)
    return records, entries


def add_file(writer: Any, record: FileRecord, entries: Sequence[Entry]) -> None:
    """Add the documents of one file: its record, then its entries."""
    writer.add_document(**file_doc(record, len(entries)))
    for entry in entries:
        writer.add_document(**entry_doc(record.path, entry))


def overlay_entries(overlay: dict[str, Change]) -> Iterator[Entry]:
    """Every entry of the overlaid files."""
    for change in overlay.values():
        yield from change.entries
