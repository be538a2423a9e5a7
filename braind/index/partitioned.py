"""The index partitioned by time: one Whoosh index per year of diary, one for everything else.

A diary is a time series and most recall asks about recent days, so a query
touches only the partitions its window covers, a commit touches only the
partitions that changed (usually the newest), and a rebuild builds the
partitions in parallel worker processes. Each partition is an `index.Index`
with its own overlay, searcher and crash recovery; this module routes files
to partitions, merges results and owns the layout manifest.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from braind.errors import BraindError, Unavailable
from braind.index import analysis, manifest, ranking
from braind.index.api import FileRecord, Filters, Found, check_limit, parse_query
from braind.index.hits import finish_hits, make_found
from braind.index.rebuilding import OTHER, Changed, PartitionedRebuild, partition_key
from braind.index.whoosh import compat
from braind.index.whoosh.combined import MIN_PARTS, Combined, key_of
from braind.index.whoosh.documents import SCHEMA_VERSION
from braind.index.whoosh.index import Index
from braind.index.whoosh.rebuild import Rebuild
from braind.model.entries import Entry

log = logging.getLogger(__name__)

LAYOUT_VERSION = 2
_PARTITIONS = "partitions"
_MANIFEST = "manifest.json"
_OLD = "partitions.old-"
_KEEP_OLD = 2
_PARALLEL_MIN_ENTRIES = 4000
_WARM_LISTS = 50  # posting lists decoded at a time, the partition's lock held: half a millisecond
_WARM_LONG_LISTS = 5  # lists of more than tables.LONG_LIST postings decoded at a time
_WARM_PAUSE_S = 0.001  # between two such steps, so that searches need not wait for the interpreter


def _window(keys: Sequence[str], since: str | None) -> list[str]:
    """The partitions a date window touches: years from since's year on, and 'other'."""
    if since is None:
        return list(keys)
    return [key for key in keys if key == OTHER or key >= since[:4]]


def _needed_since(key: str, since: str | None) -> str | None:
    """No date filter for a year wholly inside the window."""
    return None if since is not None and key != OTHER and key > since[:4] else since


def _needed_roots(part: Index, roots: Sequence[str] | None) -> Sequence[str] | None:
    """No roots filter when every file of the partition is in a requested root."""
    return None if roots is not None and part.roots() <= set(roots) else roots


def _from(candidate: ranking.Candidate, part: Index | Combined) -> ranking.Candidate:
    """A partition's candidate, marked with where to load it from."""
    candidate.source = part
    return candidate


def _filters(key: str, part: Index, since: str | None, roots: Sequence[str] | None, type: str | None) -> Filters:
    """A partition's filters: no date filter for a year wholly inside the window, no roots filter when all fit."""
    return Filters(_needed_since(key, since), _tuple(_needed_roots(part, roots)), type)


def _tuple(roots: Sequence[str] | None) -> tuple[str, ...] | None:
    """Roots as the filters hold them."""
    return None if roots is None else tuple(roots)


class PartitionedIndex:
    """The same interface as `index.Index`, spread over partitions by time."""

    def __init__(
        self,
        state_dir: Path,
        identity: str,
        commit_ms: int = 500,
        parallel_min_entries: int = _PARALLEL_MIN_ENTRIES,
        languages: tuple[str, ...] = analysis.DEFAULT_LANGUAGES,
    ) -> None:
        self._state_dir = Path(state_dir)
        self.languages = tuple(languages)
        self.language = analysis.language(self.languages)
        self.parallel_min_entries = parallel_min_entries
        self._dir = self._state_dir / _PARTITIONS
        self._identity = identity
        self._commit_ms = commit_ms
        self._parts: dict[str, Index] = {}
        self._lock = threading.Lock()  # the partition table
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._warmer: threading.Thread | None = None
        self._warm_due = threading.Event()  # set at start and after a rebuild: new segments to read ahead
        self._warming = False  # while the warmer reads ahead
        self._generation = 0
        self._version = 0
        self._rebuilding = False
        self._busy_since: float | None = None  # when the committer's current attempt began
        self._damaged: str | None = None  # why the index was found damaged while running, until rebuilt
        self._changed: dict[str, Changed] | None = None  # writes since a rebuild began, for partitions it starts later
        self.on_damage: Callable[[str], None] = lambda why: None
        self.on_warmed: Callable[[], None] = lambda: None  # the read-ahead is done: a moment to give memory back
        self._combined: Combined | None = None  # the settled partitions as one, see braind/index/whoosh/combined.py

    # -- opening -----------------------------------------------------------------

    def open(self) -> bool:
        """Open every partition; True when anything was missing or unreadable (reconcile everything)."""
        self._state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self._state_dir, 0o700)
        compat.check_version()
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
        part = Index(self._dir / key, f"{self._identity}#{key}", self._commit_ms, self.languages)
        fresh = part.open()
        self._parts[key] = part
        return fresh

    def _manifest(self) -> dict[str, Any]:
        """What the manifest of a compatible layout says."""
        return {
            "layout_version": LAYOUT_VERSION,
            "schema_version": SCHEMA_VERSION,
            "analyzer_version": analysis.ANALYZER_VERSION,
            "whoosh_version": compat.WHOOSH_VERSION,
            "languages": list(self.languages),
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
        """Start the one thread that commits every partition with queued changes, and the one that warms them."""
        self._stopping.clear()
        self._ask_warm()
        self._warmer = threading.Thread(target=self._warm_when_due, name="braind-index-warm", daemon=True)
        self._warmer.start()
        self._thread = threading.Thread(target=self._run, name="braind-index-commit", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """Commit at most every commit_ms while changes arrive; log and retry on errors."""
        while self._wake.wait() and not self._stopping.is_set():
            if self._stopping.wait(self._commit_ms / 1000):
                return
            self._wake.clear()
            if self._stopping.is_set():  # close() may have set the wake-up just cleared
                return
            self._busy_since = time.monotonic()
            try:
                self.commit()
            except Exception:
                log.exception("index commit failed; will retry")
                self._wake.set()
                self._busy_since = None
                self._report_damage(self.damage())
            else:
                self._report_damage(self._layout_problem())
            finally:
                self._busy_since = None

    def _ask_warm(self) -> None:
        """Have the warmer read the partitions ahead (status says warming from now on)."""
        self._warming = True
        self._warm_due.set()

    def _warm_when_due(self) -> None:
        """Warm the searchers after the start and after every rebuild, until closed."""
        while self._warm_due.wait() and not self._stopping.is_set():
            self._warm_due.clear()
            try:
                self._warm()
            finally:
                self._warming = self._warm_due.is_set()
            if not self._warming:
                self.on_warmed()

    def _warm(self) -> None:
        """Read what the first searches would (lexicons, stamps, neighbours, then posting lists), newest first.

        Every partition's rare words first, then common words' lists, while the tables' budget lasts.
        """
        parts = self._all()[::-1]
        for part in parts:
            self._warm_part(part, part.warm)
        for count, long in ((_WARM_LISTS, False), (_WARM_LONG_LISTS, True)):
            for part in parts:
                more = True
                while more and not self._stopping.is_set() and not self._warm_due.is_set():
                    more = bool(self._warm_part(part, functools.partial(part.warm_postings, count, long)))
                    time.sleep(_WARM_PAUSE_S)
        self._warm_settled()

    def _warm_settled(self) -> None:
        """Put the settled years' most common words end to end, one at a time, as searches would.

        With several languages a word's query terms are its stems in each, which an index term does not tell.
        """
        if len(self.languages) > 1:
            return
        for term in self._with_settled(lambda settled: settled.common_words(self.language)) or []:
            if self._stopping.is_set() or self._warm_due.is_set():
                return
            if not self._with_settled(functools.partial(Combined.warm_word, term=term)):
                return
            time.sleep(_WARM_PAUSE_S)

    def _with_settled(self, step: Callable[[Combined], Any]) -> Any:
        """One step on the settled years as one, every partition's lock held as a search holds them; None if none."""
        with self._lock:
            parts = [(key, self._parts[key]) for key in sorted(self._parts)]
        try:
            with ExitStack() as held:
                for _, part in parts:
                    held.enter_context(part.reading)
                settled, _ = self._split(parts)
                return None if settled is None else step(settled)
        except Exception:
            log.debug("could not warm the settled years", exc_info=True)
            return None

    def _warm_part(self, part: Index, warm: Callable[[], Any]) -> Any:
        """One step of warming a partition, under its lock; None when it failed (a cache: the search reads it)."""
        if self._stopping.is_set():
            return None
        try:
            with part.reading:
                return warm()
        except Exception:
            log.debug("could not warm a partition", exc_info=True)
            return None

    def damage(self) -> str | None:
        """Why the layout or a partition on disk can no longer be used, or None (a full read: only after a failure)."""
        return self._layout_problem() or next(
            (f"partition {key}: {why}" for key, part in self._items() if (why := part.damage()) is not None), None
        )

    def _layout_problem(self) -> str | None:
        """The cheap check after each commit: the manifest and every partition directory are still there."""
        if not (self._state_dir / _MANIFEST).is_file():
            return "the layout manifest is missing"
        missing = [key for key, _ in self._items() if not (self._dir / key).is_dir()]
        return f"partition directories missing: {', '.join(missing)}" if missing else None

    def _items(self) -> list[tuple[str, Index]]:
        """A snapshot of the partitions by key."""
        with self._lock:
            return sorted(self._parts.items())

    def _report_damage(self, why: str | None) -> None:
        """Remember damage found while running and ask for a repair (the daemon rebuilds from the files)."""
        if why is not None:
            log.warning("the index is damaged: %s", why)
            self._damaged = why
            self.on_damage(why)

    def repair(self) -> list[str]:
        """Restore the layout and move every damaged partition aside, empty; a rebuild then refills them."""
        self._state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._dir.mkdir(mode=0o700, exist_ok=True)
        if self._check_manifest() is not None:
            self._write_manifest()
        damaged = [key for key, part in self._items() if part.damage() is not None]
        for key in damaged:
            self._parts[key].reset()
        return damaged

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """A read that fails inside Whoosh means a damaged index: answer with a clear error and repair it."""
        try:
            yield
        except BraindError:
            raise
        except Exception as exc:
            log.exception("reading the index failed")
            self._report_damage(f"a read failed ({type(exc).__name__}: {exc})")
            raise Unavailable("index_damaged", "the index is damaged and is being rebuilt; try again") from None

    def stalled_for(self) -> float:
        """Seconds the committer has been inside its current attempt: a wedged writer keeps it growing."""
        since = self._busy_since
        return 0.0 if since is None else time.monotonic() - since

    def commit(self) -> None:
        """Commit the queued changes of every partition now."""
        for part in self._all():
            before = part.generation
            part.commit()
            if part.generation != before:
                self._generation += 1

    def close(self) -> None:
        """Stop the committer and the warmer, commit what is queued and close every partition."""
        self._stopping.set()
        self._wake.set()
        self._warm_due.set()
        for thread in (self._thread, self._warmer):
            if thread is not None:
                thread.join()
        self._thread = self._warmer = None
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
        with self._lock:  # a rebuild starting the partition now sees the write either here or in its overlay
            if self._changed is not None:
                self._changed[record.path] = (record, tuple(entries))
            part.replace_file(record, entries)
        self._version += 1
        self._wake.set()

    def remove_file(self, path: str) -> None:
        """Queue the removal of a file; hidden from reads at once."""
        part = self._part(partition_key(path), create=False)
        with self._lock:
            if self._changed is not None:
                self._changed[path] = (None, ())
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

    def record(self, path: str) -> FileRecord | None:
        """One file's record from its partition, including queued changes."""
        part = self._part(partition_key(path), create=False)
        return part.record(path) if part is not None else None

    def entries_for(self, path: str) -> list[Entry]:
        """The current entries of one file, by line."""
        part = self._part(partition_key(path), create=False)
        with self._reading():
            return part.entries_for(path) if part is not None else []

    def file_entries(self, path: str) -> tuple[Entry, ...]:
        """The current entries of one file in the order they were read, without a copy."""
        part = self._part(partition_key(path), create=False)
        with self._reading():
            return part.file_entries(path) if part is not None else ()

    def recent(self, path: str, count: int) -> list[Entry]:
        """The last `count` entries of one file, by line."""
        part = self._part(partition_key(path), create=False)
        with self._reading():
            return part.recent(path, count) if part is not None else []

    def prepare_appends(self, path: str) -> None:
        """Read ahead, in the file's partition, what searches need while appends to it wait for their commit."""
        part = self._part(partition_key(path), create=False)
        if part is not None:
            with self._reading():
                part.prepare_appends(path)

    def search(
        self,
        query: str,
        *,
        since: str | None = None,
        roots: Sequence[str] | None = None,
        type: str | None = None,
        limit: int = 20,
        snippet_chars: int = 240,
        strict: bool = False,
    ) -> Found:
        """Search the partitions the window covers: full matches first, then (unless strict) the best partial ones.

        Word weights come from every partition searched, so that scores compare across them; each
        partition proposes its best candidates, and only the overall best are loaded and given
        snippets. Every partition's lock is held meanwhile (always taken in key order) so that a
        commit cannot swap a searcher between the steps.
        """
        parsed = parse_query(query, self.language)
        check_limit(limit)
        terms = parsed.required
        depth = max(limit, ranking.DEPTH)
        with self._lock:
            parts = [(key, self._parts[key]) for key in _window(sorted(self._parts), since)]
        with ExitStack() as held:
            for _, part in parts:
                held.enter_context(part.reading)
            settled, hot = self._split(parts)
            prepared: list[tuple[Any, Any, list[ranking.TermMaps], list[ranking.Stats]]] = [
                (key, part, *part.term_maps(terms)) for key, part in hot
            ]
            if settled is not None:
                prepared.append((None, settled, *settled.term_maps(terms)))
            stats = [ranking.Stats(0, 0, 0)] * len(terms)
            for _, _, _, part_stats in prepared:
                stats = [total + more for total, more in zip(stats, part_stats, strict=True)]
            weights = [ranking.weights_of(st) for st in stats]
            full: list[ranking.Candidate] = []
            partial: list[ranking.Candidate] = []
            total = partial_total = 0
            for key, part, maps, _ in prepared:
                if key is None:
                    each = [_filters(k, p, since, roots, type) for k, p in zip(part.names, part.parts, strict=True)]
                    ranked = part.rank(maps, weights, each, depth, strict)
                else:
                    ranked = part.rank(terms, maps, weights, _filters(key, part, since, roots, type), depth, strict)
                full += [_from(c, part) for c in ranked.full]
                partial += [_from(c, part) for c in ranked.partial]
                total, partial_total = total + ranked.total, partial_total + ranked.partial_total
            chosen = ranking.reachable(full, partial, limit, ranking.most_bonus(parsed))
            loaded = [(c, c.source.load([c])[0]) for c in chosen]
        found = finish_hits(self.language, parsed, loaded)[:limit]
        ranked = ranking.Ranked([], [], total, partial_total)
        return make_found(self.language, found, terms, stats, ranked, snippet_chars)

    def _split(self, parts: list[tuple[str, Index]]) -> tuple[Combined | None, list[tuple[str, Index]]]:
        """The settled partitions (past years with nothing queued) as one, and the others (held locks: caller)."""
        years = [key for key, _ in parts if key != OTHER]
        newest = max(years, default=None)
        settled = [(key, part) for key, part in parts if key not in (OTHER, newest) and part.quiet()]
        if len(settled) < MIN_PARTS:
            return None, parts
        with self._lock:
            combined = self._combined
        if combined is None or combined.key != key_of([part for _, part in settled]):
            combined = Combined(settled)
            with self._lock:
                self._combined = combined
        return combined, [(key, part) for key, part in parts if (key, part) not in settled]

    def select(self, field: str, values: Sequence[str], prefix: bool = False) -> list[Entry]:
        """Every entry of every partition whose field (fp, key, triggers, type) holds one of the values."""
        return [entry for part in self._all() for entry in part.select(field, values, prefix)]

    def stats(self) -> dict[str, Any]:
        """Counts and state for `status`, summed over partitions."""
        stats = [part.stats() for part in self._all()]
        out: dict[str, Any] = {key: sum(s[key] for s in stats) for key in ("entries", "files", "queued", "segments")}
        out["state"] = self._state(any(s["state"] == "closed" for s in stats))
        out["partitions"] = len(stats)
        out["warming"] = self._warming
        return out

    def _state(self, closed: bool) -> str:
        """closed, rebuilding, damaged (found while running, a rebuild is due) or ready."""
        if closed:
            return "closed"
        return "rebuilding" if self._rebuilding else "damaged" if self._damaged else "ready"

    # -- rebuild -------------------------------------------------------------------

    def rebuild(self) -> PartitionedRebuild:
        """Start rebuilding every partition while the live ones keep answering."""
        with self._lock:
            self._rebuilding, self._changed = True, {}
        return PartitionedRebuild(self)

    def keys(self) -> list[str]:
        """The keys of the partitions there are."""
        with self._lock:
            return sorted(self._parts)

    def rebuild_part(self, key: str) -> Rebuild:
        """Begin one partition's rebuild beside its live index, with the writes made to it since the rebuild began."""
        part = self._part(key, create=True)
        assert part is not None
        with self._lock:
            changed = self._changed or {}
            return part.rebuild({path: change for path, change in changed.items() if partition_key(path) == key})

    def rebuilt(self) -> None:
        """Every partition is swapped in: reads see it, damage found before is repaired, its segments are warmed."""
        self._generation += 1
        self._version += 1
        self._damaged = None
        self._ask_warm()

    def end_rebuild(self) -> None:
        """Stop recording writes for partitions not started yet."""
        with self._lock:
            self._changed = None
        self._rebuilding = False
