"""Rebuilding every partition from the files while the live ones keep answering, in worker processes when large."""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import re
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Protocol

from braind.index.api import FileRecord
from braind.index.whoosh.rebuild import Rebuild, build_directory
from braind.model.entries import Entry

OTHER = "other"
CHUNK_ENTRIES = 2000  # entries read before they are pickled for their worker (see _Collected)
_DIARY_FILE = re.compile(r"/diary/(\d{4})-\d{2}-\d{2}\.md$")

Changed = tuple["FileRecord | None", tuple[Entry, ...]]  # a file's new record and entries, or (None, ()) when removed


def partition_key(path: str) -> str:
    """The partition a file belongs to: the year of a diary day, else 'other'."""
    match = _DIARY_FILE.search(path)
    return match[1] if match else OTHER


class Partitions(Protocol):
    """What a rebuild asks of the partitioned index it rebuilds."""

    languages: tuple[str, ...]
    parallel_min_entries: int

    def keys(self) -> list[str]:
        """The keys of the partitions there are."""

    def rebuild_part(self, key: str) -> Rebuild:
        """Begin one partition's rebuild, with the writes made to it since the whole rebuild began."""

    def rebuilt(self) -> None:
        """Every partition is swapped in."""

    def end_rebuild(self) -> None:
        """Stop recording writes for partitions not started yet."""


class PartitionedRebuild:
    """Builds the partitions from every file (in worker processes when large) and swaps them in.

    Files arrive in path order, so a diary year is complete once a file of another partition
    arrives: in parallel mode it is handed to a worker then, which overlaps building with reading
    the rest and keeps only a few years' entries in memory at a time.
    """

    def __init__(self, index: Partitions) -> None:
        self._index = index
        self._files: dict[str, _Collected] = {}
        self._rebuilds: dict[str, Rebuild] = {}
        self._jobs: dict[str, Future[int]] = {}
        self._pool: ProcessPoolExecutor | None = None
        self._last: str | None = None
        self.files = self.entries = 0

    def add(self, record: FileRecord, entries: Sequence[Entry]) -> None:
        """Queue one file for its partition; hand finished years to the workers."""
        key = partition_key(record.path)
        if key in self._jobs:  # a file after its year was handed over: written in at the swap
            self._rebuilds[key].late(record, entries)
        else:
            self._files.setdefault(key, _Collected()).add(record, entries)
        self.files += 1
        self.entries += len(entries)
        if self._last not in (None, key) and self._parallel():
            self._hand_over(current=key)
        self._last = key

    def _parallel(self) -> bool:
        """True once the corpus is large enough to be worth worker processes, which then start."""
        if self._pool is None:
            if self.entries < self._index.parallel_min_entries or (os.cpu_count() or 1) < 2:
                return False
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(max_workers=os.cpu_count(), mp_context=context)
        return True

    def _hand_over(self, current: str) -> None:
        """Send every finished year to a worker ('other' waits for the end: its files come from anywhere)."""
        for key in [k for k in self._files if k not in (OTHER, current)]:
            self._submit(key)
        self._wait_below(2 * (os.cpu_count() or 1))

    def _submit(self, key: str) -> None:
        """Start a partition's rebuild and send its files to a worker."""
        assert self._pool is not None
        rebuild = self._rebuilds[key] = self._start(key)
        self._jobs[key] = self._pool.submit(
            _build_job, str(rebuild.directory), self._files.pop(key).packed(), self._index.languages
        )

    def _wait_below(self, limit: int) -> None:
        """Wait until fewer than `limit` jobs are unfinished, so that queued entries stay few."""
        while True:
            running = [job for job in self._jobs.values() if not job.done()]
            if len(running) < limit:
                return
            wait(running, return_when=FIRST_COMPLETED)

    def finish(self) -> None:
        """Build what is left, then swap every partition in; partitions with no files become empty."""
        try:
            try:
                self._build_rest()
            except BaseException:
                self._discard()
                raise
            for rebuild in self._rebuilds.values():
                rebuild.finish()
            self._index.rebuilt()
        finally:
            self._shutdown()
            self._end()

    def _end(self) -> None:
        """Stop recording writes for partitions not started yet."""
        self._index.end_rebuild()

    def _build_rest(self) -> None:
        """Build the partitions not handed over yet, wait for the workers, and start empty ones."""
        parallel = self._parallel()
        for key in sorted(set(self._files) | set(self._index.keys())):
            if key not in self._rebuilds:
                self._rebuilds[key] = self._start(key)
        for key in list(self._files):
            files = self._files.pop(key)
            if parallel:
                assert self._pool is not None
                self._jobs[key] = self._pool.submit(
                    _build_job, str(self._rebuilds[key].directory), files.packed(), self._index.languages
                )
            else:
                build_directory(self._rebuilds[key].directory, files.unpacked(), self._index.languages)
        for job in self._jobs.values():
            job.result()

    def _start(self, key: str) -> Rebuild:
        """Begin one partition's rebuild beside its live index, with the writes made to it since the rebuild began."""
        return self._index.rebuild_part(key)

    def _discard(self) -> None:
        """Abort every started partition rebuild."""
        self._shutdown()
        for rebuild in self._rebuilds.values():
            rebuild.abort()
        self._rebuilds.clear()

    def _shutdown(self) -> None:
        """Stop the worker processes, cancelling jobs not started."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def abort(self) -> None:
        """Forget the collected files and any started builds; the live partitions are untouched."""
        self._files.clear()
        self._discard()
        self._end()


class _Collected:
    """One partition's files while they are read, pickled every CHUNK_ENTRIES entries.

    Read files wait here for their year to be complete, and then for a worker. Kept as objects,
    a year in waiting was some hundred thousand small objects, and the memory they took was not
    given back when they went (the allocator's pools stay behind the few objects that outlive a
    build): 50 MB more at rest after a first start at 100,000 entries. A chunk of bytes is one
    block, returned whole when it goes.
    """

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._open: list[tuple[FileRecord, tuple[Entry, ...]]] = []
        self._entries = 0

    def add(self, record: FileRecord, entries: Sequence[Entry]) -> None:
        """Collect one file; pickle the open chunk once it holds CHUNK_ENTRIES entries."""
        self._open.append((record, tuple(entries)))
        self._entries += len(entries)
        if self._entries >= CHUNK_ENTRIES:
            self._close_chunk()

    def packed(self) -> list[bytes]:
        """Every file collected, as pickled chunks, for a worker process."""
        self._close_chunk()
        return self._chunks

    def unpacked(self) -> list[tuple[FileRecord, tuple[Entry, ...]]]:
        """Every file collected, in order, for a build in this process."""
        return _unpacked(self.packed())

    def _close_chunk(self) -> None:
        """Pickle the open chunk, freeing its objects."""
        if self._open:
            self._chunks.append(pickle.dumps(self._open, protocol=pickle.HIGHEST_PROTOCOL))
        self._open, self._entries = [], 0


def _unpacked(chunks: list[bytes]) -> list[tuple[FileRecord, tuple[Entry, ...]]]:
    """The files of pickled chunks, in order."""
    files: list[tuple[FileRecord, tuple[Entry, ...]]] = []
    for chunk in chunks:
        files += pickle.loads(chunk)
    return files


def _build_job(directory: str, chunks: list[bytes], languages: tuple[str, ...]) -> int:
    """Worker-process entry point: build one partition directory, with the cyclic garbage collector paused.

    A build makes millions of objects that live until its commit and no cycles worth collecting meanwhile:
    the collector's passes over them took a seventh of a worker's time. It runs again once the build is done.
    """
    gc.disable()
    try:
        return build_directory(Path(directory), _unpacked(chunks), languages)
    finally:
        gc.enable()
