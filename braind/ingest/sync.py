"""Make the index match the disk: one file, one directory, or a whole root (reconcile)."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from braind.config import FilesConfig
from braind.errors import BraindError
from braind.files.durable import Appended, lkind
from braind.files.problems import Problems
from braind.files.state import RootState, States
from braind.files.validate import classify, diary_date, is_artefact, parse_diary, read_file
from braind.index.api import FileRecord, SearchIndex
from braind.model import layered
from braind.model.entries import Entry, diary_entries, occurrences
from braind.model.lines import Problem
from braind.model.roots import Root

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Loaded:
    """A memory file as read from disk: its record and entries, or why it was refused."""

    path: str
    record: FileRecord | None
    entries: tuple[Entry, ...] = ()
    problems: tuple[Problem, ...] = ()


@dataclass
class Report:
    """What a reconcile found and did, by kind of change."""

    scanned: int = 0
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    rejected: int = 0
    skipped_lines: int = 0
    entries: int = 0
    unavailable: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """The report as JSON for the wire."""
        return dict(self.__dict__)


def load_file(root: Root, rel: Path, files: FilesConfig) -> Loaded:
    """Validate and parse one memory file (a diary day, SOUL.md, MEMORY.md or a logfile) into entries."""
    path = str(root.path / rel)
    if os.path.islink(path):
        return Loaded(path, None, problems=(Problem(path, None, "symlink", "symbolic links are not followed"),))
    kind = classify(rel)
    if kind == "ignored":  # diary/ or logs/ itself, found to be something other than a directory
        return Loaded(path, None, problems=(Problem(path, None, "not_a_directory", f"{path} is not a directory"),))
    if kind != "diary":
        return _load_layered(root, rel, kind, files)
    date = diary_date(rel.name)
    if date is None:
        problem = Problem(path, None, "invalid_date", "diary files must be named YYYY-MM-DD.md with a real date")
        return Loaded(path, None, problems=(problem,))
    try:
        data = read_file(root.path, rel, files.max_file_bytes)
    except BraindError as exc:
        return Loaded(path, None, problems=(Problem(path, None, exc.reason, exc.message),))
    lines, skipped = parse_diary(path, data.text, files.max_line_bytes)
    record = FileRecord(str(root.path), path, data.size, data.mtime_ns, data.sha256)
    entries = diary_entries(str(root.path), root.realm, path, date, lines)
    return Loaded(path, record, tuple(entries), tuple(skipped))


def _load_layered(root: Root, rel: Path, kind: str, files: FilesConfig) -> Loaded:
    """SOUL.md (no entries), MEMORY.md (one entry per section) or a logfile (one per entry)."""
    path = str(root.path / rel)
    try:
        data = read_file(root.path, rel, files.max_file_bytes)
    except BraindError as exc:
        return Loaded(path, None, problems=(Problem(path, None, exc.reason, exc.message),))
    entries, problems = layered.load(kind, data.text, files.max_line_bytes, str(root.path), root.realm, path)
    record = FileRecord(str(root.path), path, data.size, data.mtime_ns, data.sha256)
    return Loaded(path, record, tuple(entries), tuple(problems))


def walk(root: Root, under: Path | None = None) -> Iterator[Path]:
    """Every memory file below a root, or only below `under` (relative paths), with links and dirs named as files."""
    top = under or root.path  # walking only the changed subtree keeps `mkdir -p a/b/c/...` from costing n² walks
    if classify(top.relative_to(root.path)) == "artefact":
        return
    if top != root.path and _named_as_file(top.relative_to(root.path), root):
        yield top.relative_to(root.path)
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root.path)
        dirnames[:] = sorted(d for d in dirnames if not is_artefact(d))  # the parents were checked on the way down
        odd = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d)) or _named_as_file(rel_dir / d, root)]
        for name in sorted(filenames + odd):
            if _is_memory(rel_dir / name, root):
                yield rel_dir / name


def _named_as_file(rel: Path, root: Root) -> bool:
    """A directory with a memory file's very name (`diary/2026-01-31.md/`, `logs/x.md/`): reported, not skipped."""
    return is_memory_file(rel, root) and (classify(rel) != "diary" or diary_date(rel.name) is not None)


def _is_memory(rel: Path, root: Root) -> bool:
    """True for memory files, and for the diary and logs directories themselves (reported when links)."""
    return is_memory_file(rel, root) or rel in (Path("diary"), Path("logs"))


def is_memory_file(rel: Path, root: Root) -> bool:
    """A diary day or a logfile in any root; SOUL.md and MEMORY.md only in the user root."""
    if len(rel.parts) > 2:  # memory files live at most one directory down; spare classify() deep trees
        return False
    kind = classify(rel)
    return kind in ("diary", "logfile") or (kind in ("soul", "memory") and root.realm == "user")


def with_status(loaded: Loaded, state: RootState) -> Loaded:
    """The loaded entries with the status (tombstoned, pinned) the root's state gives them."""
    entries = _with_statuses(loaded.entries, state)
    return loaded if entries is loaded.entries else replace(loaded, entries=entries)


_APPENDED_FILES = 8  # files whose running hash and counts are kept (today's diary, a project's, yesterday's)


def _keep(kept: OrderedDict[str, Any], path: str, value: Any) -> None:
    """Remember a file's value, forgetting the least recently appended beyond a few."""
    kept[path] = value
    kept.move_to_end(path)
    while len(kept) > _APPENDED_FILES:
        kept.popitem(last=False)


def _with_statuses(entries: tuple[Entry, ...], state: RootState) -> tuple[Entry, ...]:
    """Entries with the status the root's state gives them; the same tuple when none changes."""
    if not entries or not state.marks:
        return entries
    statuses = state.statuses(e.fp for e in entries)
    if all(status == e.status for status, e in zip(statuses, entries, strict=True)):
        return entries
    return tuple(e if s == e.status else replace(e, status=s) for s, e in zip(statuses, entries, strict=True))


class Syncer:
    """Applies the disk's state to the index, serialised so two syncs never interleave."""

    def __init__(
        self, index: SearchIndex, files: FilesConfig, problems: Problems, states: States | None = None
    ) -> None:
        self.index = index
        self.files = files
        self.problems = problems
        self.states = states or States()
        self.lock = threading.RLock()
        self.behind: dict[str, tuple[Root, Path]] = {}  # files whose index update failed, retried at each sync
        # What lets an append be indexed alone: a running hash and line count of each file appended to,
        # and how often each (time, text) occurs in it, for the last few files.
        self._hashes: OrderedDict[str, tuple[int, Any, int]] = OrderedDict()
        self._seen: OrderedDict[str, tuple[tuple[Entry, ...], dict[tuple[str, str], int]]] = OrderedDict()

    def load(self, root: Root, rel: Path) -> Loaded:
        """Validate and parse one file, with each entry's status from the root's state."""
        return with_status(load_file(root, rel, self.files), self.states.of(root))

    def apply(self, root: Root, loaded: Loaded) -> None:
        """Put one loaded file into the index, or take it out when it was refused.

        The index is a cache: when it cannot take the change (a full state directory), the write
        that changed the file has still happened, so the failure is logged, never raised, and
        the file is indexed again at the next sync or rescan.
        """
        self.problems.set(loaded.path, loaded.problems)
        try:
            if loaded.record is None:
                self.index.remove_file(loaded.path)
            else:
                self.index.replace_file(loaded.record, loaded.entries)
        except Exception as exc:
            if loaded.path not in self.behind:
                log.warning(
                    "cannot index %s now (%s); it is indexed again at the next write or rescan", loaded.path, exc
                )
            self.behind[loaded.path] = (root, Path(loaded.path).relative_to(root.path))
            return
        self.behind.pop(loaded.path, None)

    def catch_up(self) -> None:
        """Index again the files whose index update failed (their files are the truth)."""
        with self.lock:
            for path, (root, rel) in list(self.behind.items()):
                if self.behind.get(path) == (root, rel):
                    self.apply(root, self.load(root, rel))

    def sync_file(self, root: Root, rel: Path) -> Loaded:
        """Re-read one file and make the index match it."""
        with self.lock:
            self.catch_up()
            loaded = self.load(root, rel)
            self.apply(root, loaded)
            return loaded

    def sync_append(self, root: Root, rel: Path, appended: Appended) -> Loaded:
        """Index a diary day the daemon just appended to: when nothing else touched the file since the index
        read it, only the new lines are parsed and hashed, so a note to a busy day costs its own length.

        Anything else (an editor's change, another process's append, a missing running hash) re-reads the file.
        """
        with self.lock:
            self.catch_up()
            path = str(root.path / rel)
            date = diary_date(rel.name)
            grown = self._grown(path, appended)
            if date is None or grown is None:
                return self._reread(root, rel)
            record, lines_before = grown
            text = appended.data.decode("utf-8")
            lines, skipped = parse_diary(path, text, self.files.max_line_bytes)
            try:
                old = self.index.file_entries(path)
            except BraindError:  # an index being repaired: the file itself is the truth
                return self._reread(root, rel)
            seen = self._seen_in(path, old)
            numbered = [(lines_before + number, line) for number, line in lines]
            home = str(root.path)
            if old:  # a busy day's entries share one copy of the strings they have in common, not one a note
                home, path, date = old[0].root, old[0].path, old[0].date
            parsed = diary_entries(home, root.realm, path, date, numbered, old, seen)
            new = _with_statuses(tuple(parsed), self.states.of(root))  # the indexed entries carry theirs already
            problems = self.problems.of(path) + tuple(replace(p, line=lines_before + (p.line or 1)) for p in skipped)
            loaded = Loaded(path, record, old + new, problems)  # tuple concatenation: a copy in C, no unpacking
            _keep(self._seen, path, (loaded.entries, seen))
            self.apply(root, loaded)
            return loaded

    def _grown(self, path: str, appended: Appended) -> tuple[FileRecord, int] | None:
        """The file's new record and its lines before the append, when the append only grew what the index holds."""
        before = self.index.record(path)
        if before is None or appended.prior != (before.size, before.mtime_ns) or appended.start != before.size:
            return None
        if appended.data.startswith(b"\n"):  # the file ended mid-line: that line is complete now, read it again
            return None
        running = self._running(path, before)
        if running is None:
            return None
        try:
            info = os.lstat(path)
        except OSError:
            return None
        end = appended.start + len(appended.data)
        if info.st_size != end or end > self.files.max_file_bytes or not stat.S_ISREG(info.st_mode):
            return None  # another process appended after us, or the day outgrew its cap
        digest = running[1].copy()
        digest.update(appended.data)
        _keep(self._hashes, path, (end, digest, running[2] + appended.data.count(b"\n")))
        return FileRecord(before.root, path, end, info.st_mtime_ns, digest.hexdigest()), running[2]

    def prepare_append(self, root: Root, rel: Path) -> None:
        """Work out ahead what a note to a day needs (its running hash, how often each entry occurs) and what searches
        need while it waits for its commit, so that the first note after a start, and the recall after it, cost
        their own length, not a read of the whole day or of the index's lexicons."""
        with self.lock:
            path = str(root.path / rel)
            before = self.index.record(path)
            if before is None or self._running(path, before) is None:
                return
            try:
                old = self.index.file_entries(path)
            except BraindError:  # an index being repaired: the first note reads the day itself
                return
            found = self._seen.get(path)
            if found is None or found[0] is not old:
                _keep(self._seen, path, (old, occurrences(old)))
        self.index.prepare_appends(path)  # outside the lock: searches read this, notes need not wait for it

    def _running(self, path: str, before: FileRecord) -> tuple[int, Any, int] | None:
        """The running hash and line count of what the index holds of a file, kept or read now; None when it differs."""
        running = self._hashes.get(path)
        if running is not None and running[0] == before.size and running[1].hexdigest() == before.sha256:
            return running
        return self._hash_of(path, before)

    def _hash_of(self, path: str, before: FileRecord) -> tuple[int, Any, int] | None:
        """The running hash and line count of what the index holds of a file, read once; None when it differs."""
        try:
            with open(path, "rb") as stream:
                data = stream.read(before.size)
        except OSError:
            return None
        digest = hashlib.sha256(data)
        if len(data) != before.size or digest.hexdigest() != before.sha256:
            return None
        running = (before.size, digest, data.count(b"\n"))
        _keep(self._hashes, path, running)
        return running

    def _seen_in(self, path: str, old: tuple[Entry, ...]) -> dict[tuple[str, str], int]:
        """How often each (time, text) occurs in a day's indexed entries, kept from the last append to it."""
        found = self._seen.get(path)
        if found is not None and found[0] is old:
            return found[1]
        return occurrences(old)

    def _reread(self, root: Root, rel: Path) -> Loaded:
        """Re-read one file whole, forgetting what was kept to index appends to it alone."""
        path = str(root.path / rel)
        self._hashes.pop(path, None)
        self._seen.pop(path, None)
        return self.sync_file(root, rel)

    def sync_path(self, root: Root, path: Path) -> None:
        """Look at a path the watcher marked: a file, a directory, or something gone."""
        rel = path.relative_to(root.path)
        with self.lock:
            if not root_available(root):
                return
            kind = lkind(path)
            if kind == "dir":
                self.reconcile(root, under=path)
            elif kind == "missing":
                self._forget(str(path))
            elif _is_memory(rel, root) or kind == "link":
                self._sync_or_forget(root, rel)

    def _sync_or_forget(self, root: Root, rel: Path) -> None:
        """Sync a memory file; forget what lies below a linked directory, reporting the link."""
        if is_memory_file(rel, root):
            path = str(root.path / rel)
            if not _same_stat(path, self.index.record(path)):
                self.sync_file(root, rel)  # the daemon's own appends are already indexed: same size and mtime
            return
        self._forget(str(root.path / rel))
        if _is_memory(rel, root):
            self.apply(root, self.load(root, rel))

    def _forget(self, path: str) -> None:
        """Drop a vanished file, or every file below a vanished directory."""
        for known in self.index.file_records():
            if known == path or known.startswith(path + "/"):
                self.index.remove_file(known)
        self.problems.clear_under(path)

    def reconcile(
        self, root: Root, under: Path | None = None, progress: Progress | None = None, verify: bool = False
    ) -> Report:
        """Diff the disk against the index (stat; with verify also the hash) and apply the difference."""
        report = Report()
        with self.lock:
            self.catch_up()
            if not root_available(root) or self.emptied(root):
                report.unavailable.append(str(root.path))
                return report
            base = under or root.path
            known = {p: r for p, r in self.index.file_records().items() if _below(p, base)}
            seen = self._scan(root, base, known, report, progress, verify)
            for path in set(known) - seen:
                self.index.remove_file(path)
                self.problems.set(path, ())
                report.removed += 1
            self._drop_vanished_problems(base, seen)
        return report

    def emptied(self, root: Root) -> bool:
        """An empty root whose files the index holds looks unmounted: it purges nothing until it has content."""
        try:
            with os.scandir(root.path) as entries:
                if any(True for _ in entries):
                    return False
        except OSError:
            return False
        prefix = str(root.path).rstrip("/") + "/"
        return any(path.startswith(prefix) for path in self.index.file_records())

    def _scan(
        self,
        root: Root,
        base: Path,
        known: dict[str, FileRecord],
        report: Report,
        progress: Progress | None,
        verify: bool = False,
    ) -> set[str]:
        """Load every file that changed since its record; return the paths seen."""
        rels = list(walk(root, base))
        seen: set[str] = set()
        for number, rel in enumerate(rels, start=1):
            path = str(root.path / rel)
            seen.add(path)
            report.scanned += 1
            if _same_stat(path, known.get(path)) and (not verify or self._same_hash(root, rel, known[path])):
                report.unchanged += 1
            else:
                self._count(report, self.load(root, rel), root)
            if progress:
                progress(number, len(rels))
        return seen

    def _same_hash(self, root: Root, rel: Path, record: FileRecord) -> bool:
        """The thorough check of a start: the same bytes, for an edit that kept both size and mtime."""
        try:
            return read_file(root.path, rel, self.files.max_file_bytes).sha256 == record.sha256
        except BraindError:
            return False

    def _count(self, report: Report, loaded: Loaded, root: Root) -> None:
        """Apply one loaded file and add it to the report."""
        self.apply(root, loaded)
        report.rejected += loaded.record is None
        report.indexed += loaded.record is not None
        report.entries += len(loaded.entries)
        report.skipped_lines += sum(1 for p in loaded.problems if p.line is not None)

    def _drop_vanished_problems(self, base: Path, seen: set[str]) -> None:
        """Forget problems of files that are no longer there."""
        for problem in self.problems.files() + self.problems.lines():
            if _below(problem.path, base) and problem.path not in seen and not os.path.lexists(problem.path):
                self.problems.set(problem.path, ())


def root_available(root: Root) -> bool:
    """A root is usable when it is a real directory (not a link); missing roots purge nothing."""
    try:
        return stat.S_ISDIR(os.lstat(root.path).st_mode)
    except OSError:
        return False


def _below(path: str, base: Path) -> bool:
    """True when path is base or inside it."""
    prefix = str(base)
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


def _same_stat(path: str, record: FileRecord | None) -> bool:
    """The cheap check of reconcile: same size and mtime as when it was indexed."""
    if record is None:
        return False
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == record.size and info.st_mtime_ns == record.mtime_ns
