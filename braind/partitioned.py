"""The index partitioned by time: one Whoosh index per month of diary, one for everything else.

A diary is a time series and most recall asks about recent days, so a query
touches only the partitions its window covers, a commit touches only the
partitions that changed (usually the newest), and a rebuild builds the
partitions in parallel worker processes. Each partition is an `index.Index`
with its own overlay, searcher and crash recovery; this module routes files
to partitions, merges results and owns the layout manifest.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import re
import shutil
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from braind import analysis, manifest
from braind.entries import Entry
from braind.index import SCHEMA_VERSION, FileRecord, Hit, Index, Rebuild, build_directory, parse_query

log = logging.getLogger("braind.index")

LAYOUT_VERSION = 1
OTHER = "other"
_PARTITIONS = "partitions"
_MANIFEST = "manifest.json"
_OLD = "partitions.old-"
_KEEP_OLD = 2
_DIARY_FILE = re.compile(r"/diary/(\d{4}-\d{2})-\d{2}\.md$")
_PARALLEL_MIN_ENTRIES = 4000


def partition_key(path: str) -> str:
    """The partition a file belongs to: the month of a diary day, else 'other'."""
    match = _DIARY_FILE.search(path)
    return match[1] if match else OTHER


def _window(keys: Sequence[str], since: str | None) -> list[str]:
    """The partitions a date window touches: months from since's month on, and 'other'."""
    if since is None:
        return list(keys)
    return [key for key in keys if key == OTHER or key >= since[:7]]


def _needed_since(key: str, since: str | None) -> str | None:
    """No date filter for a month wholly inside the window: Whoosh searches faster unfiltered."""
    return None if since is not None and key != OTHER and key > since[:7] else since


def _needed_roots(part: Index, roots: Sequence[str] | None) -> Sequence[str] | None:
    """No roots filter when every file of the partition is in a requested root."""
    return None if roots is not None and part.roots() <= set(roots) else roots


class PartitionedIndex:
    """The same interface as `index.Index`, spread over partitions by time."""

    def __init__(
        self, state_dir: Path, identity: str, commit_ms: int = 500, parallel_min_entries: int = _PARALLEL_MIN_ENTRIES
    ) -> None:
        self._state_dir = Path(state_dir)
        self._parallel_min_entries = parallel_min_entries
        self._dir = self._state_dir / _PARTITIONS
        self._identity = identity
        self._commit_ms = commit_ms
        self._parts: dict[str, Index] = {}
        self._lock = threading.Lock()  # the partition table
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._generation = 0
        self._version = 0
        self._rebuilding = False

    # -- opening -----------------------------------------------------------------

    def open(self) -> bool:
        """Open every partition; True when anything was missing or unreadable (reconcile everything)."""
        self._state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self._state_dir, 0o700)
        problem = self._check_manifest()
        if problem is not None:
            log.log(logging.INFO if problem == "missing" else logging.WARNING, "index is %s; starting afresh", problem)
            self._discard()
            self._dir.mkdir(mode=0o700)
            self._write_manifest()
        fresh = problem is not None
        for path in sorted(p for p in self._dir.iterdir() if p.is_dir()):
            fresh |= self._open_part(path.name)
        return fresh

    def _open_part(self, key: str) -> bool:
        """Open (or create) one partition; True when it had to start empty."""
        part = Index(self._dir / key, f"{self._identity}#{key}", self._commit_ms)
        fresh = part.open()
        self._parts[key] = part
        return fresh

    def _manifest(self) -> dict[str, Any]:
        """What the manifest of a compatible layout says."""
        return {
            "layout_version": LAYOUT_VERSION,
            "schema_version": SCHEMA_VERSION,
            "analyzer_version": analysis.ANALYZER_VERSION,
            "identity": self._identity,
        }

    def _check_manifest(self) -> str | None:
        """Why the existing layout cannot be used, or None."""
        if not self._dir.is_dir():
            return "missing"
        return manifest.problem(self._state_dir / _MANIFEST, self._manifest())

    def _write_manifest(self) -> None:
        """Write the layout manifest atomically."""
        manifest.write(self._state_dir / _MANIFEST, self._manifest())

    def _discard(self) -> None:
        """Move an unusable layout aside (and any older single index), keeping the newest few."""
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"{time.time_ns() % 10**9:09d}"
        for name in (_PARTITIONS, "index"):
            if (self._state_dir / name).exists():
                os.replace(self._state_dir / name, self._state_dir / f"{_OLD}{stamp}-{name}")
        old = sorted(p for p in self._state_dir.iterdir() if p.name.startswith(_OLD))
        for path in old[: -_KEEP_OLD * 2]:
            shutil.rmtree(path, ignore_errors=True)

    def _part(self, key: str, create: bool) -> Index | None:
        """The partition for a key, created on the first write to it."""
        with self._lock:
            part = self._parts.get(key)
            if part is None and create:
                self._open_part(key)
                part = self._parts[key]
            return part

    def _all(self) -> list[Index]:
        """A snapshot of the partitions."""
        with self._lock:
            return list(self._parts.values())

    # -- the committer -------------------------------------------------------------

    def start(self) -> None:
        """Start the one thread that commits every partition with queued changes."""
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="braind-index-commit", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """Commit at most every commit_ms while changes arrive; log and retry on errors."""
        while self._wake.wait() and not self._stopping.is_set():
            if self._stopping.wait(self._commit_ms / 1000):
                return
            self._wake.clear()
            try:
                self.commit()
            except Exception:
                log.exception("index commit failed; will retry")
                self._wake.set()

    def commit(self) -> None:
        """Commit the queued changes of every partition now."""
        for part in self._all():
            before = part.generation
            part.commit()
            if part.generation != before:
                self._generation += 1

    def close(self) -> None:
        """Stop the committer, commit what is queued and close every partition."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for part in self._all():
            part.close()

    def alive(self) -> bool:
        """True while every partition is open and the committer (once started) runs."""
        running = self._thread is None or self._thread.is_alive()
        return running and all(part.alive() for part in self._all())

    @property
    def generation(self) -> int:
        """A counter that increases after every commit that changed something."""
        return self._generation

    @property
    def version(self) -> int:
        """A counter that increases with every change to what reads see, committed or not."""
        return self._version

    # -- writes ------------------------------------------------------------------

    def replace_file(self, record: FileRecord, entries: Sequence[Entry]) -> None:
        """Queue a file's new entries in its partition; visible to reads at once."""
        part = self._part(partition_key(record.path), create=True)
        assert part is not None
        part.replace_file(record, entries)
        self._version += 1
        self._wake.set()

    def remove_file(self, path: str) -> None:
        """Queue the removal of a file; hidden from reads at once."""
        part = self._part(partition_key(path), create=False)
        if part is not None:
            part.remove_file(path)
            self._version += 1
            self._wake.set()

    # -- reads ---------------------------------------------------------------------

    def file_records(self) -> dict[str, FileRecord]:
        """Every indexed file's record, including queued changes."""
        records: dict[str, FileRecord] = {}
        for part in self._all():
            records.update(part.file_records())
        return records

    def entries_for(self, path: str) -> list[Entry]:
        """The current entries of one file, by line."""
        part = self._part(partition_key(path), create=False)
        return part.entries_for(path) if part is not None else []

    def search(
        self,
        query: str,
        *,
        since: str | None = None,
        roots: Sequence[str] | None = None,
        type: str | None = None,
        limit: int = 20,
        snippet_chars: int = 240,
    ) -> tuple[list[Hit], int]:
        """Search only the partitions the window covers; merge best first, newer first on ties."""
        parse_query(query)
        with self._lock:
            parts = [(key, self._parts[key]) for key in _window(sorted(self._parts), since)]
        hits: list[Hit] = []
        total = 0
        for key, part in parts:
            found, count = part.search(
                query,
                since=_needed_since(key, since),
                roots=_needed_roots(part, roots),
                type=type,
                limit=limit,
                snippet_chars=snippet_chars,
            )
            hits += found
            total += count
        hits.sort(key=lambda h: (h.score, h.entry.date, h.entry.time), reverse=True)
        return hits[:limit], total

    def select(self, field: str, values: Sequence[str], prefix: bool = False) -> list[Entry]:
        """Every entry of every partition whose field (fp, key, triggers, type) holds one of the values."""
        return [entry for part in self._all() for entry in part.select(field, values, prefix)]

    def stats(self) -> dict[str, Any]:
        """Counts and state for `status`, summed over partitions."""
        stats = [part.stats() for part in self._all()]
        out: dict[str, Any] = {key: sum(s[key] for s in stats) for key in ("entries", "files", "queued", "segments")}
        closed = any(s["state"] == "closed" for s in stats)
        out["state"] = "closed" if closed else "rebuilding" if self._rebuilding else "ready"
        out["partitions"] = len(stats)
        return out

    # -- rebuild -------------------------------------------------------------------

    def rebuild(self) -> PartitionedRebuild:
        """Start rebuilding every partition while the live ones keep answering."""
        return PartitionedRebuild(self)


class PartitionedRebuild:
    """Collects every file, then builds the partitions (in parallel when large) and swaps them in."""

    def __init__(self, index: PartitionedIndex) -> None:
        self._index = index
        self._files: dict[str, list[tuple[FileRecord, tuple[Entry, ...]]]] = {}
        self.files = self.entries = 0
        index._rebuilding = True

    def add(self, record: FileRecord, entries: Sequence[Entry]) -> None:
        """Queue one file for its partition."""
        self._files.setdefault(partition_key(record.path), []).append((record, tuple(entries)))
        self.files += 1
        self.entries += len(entries)

    def finish(self) -> None:
        """Build every partition, then swap each in; partitions with no files become empty."""
        try:
            keys = sorted(set(self._files) | set(self._index._parts))
            rebuilds: dict[str, Rebuild] = {}
            try:
                for key in keys:
                    rebuilds[key] = self._start(key)
                self._build(rebuilds)
            except BaseException:
                for rebuild in rebuilds.values():
                    rebuild.abort()
                raise
            for rebuild in rebuilds.values():
                rebuild.finish()
            self._index._generation += 1
            self._index._version += 1
        finally:
            self._index._rebuilding = False

    def _start(self, key: str) -> Rebuild:
        """Begin one partition's rebuild beside its live index."""
        part = self._index._part(key, create=True)
        assert part is not None
        return part.rebuild()

    def _build(self, rebuilds: dict[str, Rebuild]) -> None:
        """Fill each new partition directory, in worker processes when the corpus is large."""
        jobs = [(str(rebuilds[key].directory), files) for key, files in self._files.items()]
        if self.entries < self._index._parallel_min_entries or (os.cpu_count() or 1) < 2:
            for directory, files in jobs:
                build_directory(Path(directory), files)
            return
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=os.cpu_count(), mp_context=context) as pool:
            largest_first = sorted(jobs, key=lambda job: -sum(len(e) for _, e in job[1]))
            for future in [pool.submit(_build_job, directory, files) for directory, files in largest_first]:
                future.result()

    def abort(self) -> None:
        """Forget the collected files; the live partitions are untouched."""
        self._files.clear()
        self._index._rebuilding = False


def _build_job(directory: str, files: list[tuple[FileRecord, tuple[Entry, ...]]]) -> int:
    """Worker-process entry point: build one partition directory."""
    return build_directory(Path(directory), files)
