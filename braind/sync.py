"""Make the index match the disk: one file, one directory, or a whole root (reconcile)."""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from braind import layered
from braind.config import FilesConfig
from braind.entries import Entry, diary_entries
from braind.errors import BraindError
from braind.fsutil import lkind
from braind.index import FileRecord
from braind.partitioned import PartitionedIndex
from braind.problems import Problems
from braind.roots import Root
from braind.validate import Problem, classify, diary_date, parse_diary, read_file

log = logging.getLogger("braind.sync")
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


def walk(root: Root) -> Iterator[Path]:
    """Every memory file below a root (relative paths); links and artefacts are not followed."""
    for dirpath, dirnames, filenames in os.walk(root.path, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root.path)
        dirnames[:] = sorted(d for d in dirnames if classify(rel_dir / d) != "artefact")
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in sorted(filenames + links):
            if _is_memory(rel_dir / name, root):
                yield rel_dir / name


def _is_memory(rel: Path, root: Root) -> bool:
    """True for memory files, and for the diary and logs directories themselves (reported when links)."""
    return is_memory_file(rel, root) or rel in (Path("diary"), Path("logs"))


def is_memory_file(rel: Path, root: Root) -> bool:
    """A diary day or a logfile in any root; SOUL.md and MEMORY.md only in the user root."""
    kind = classify(rel)
    return kind in ("diary", "logfile") or (kind in ("soul", "memory") and root.realm == "user")


class Syncer:
    """Applies the disk's state to the index, serialised so two syncs never interleave."""

    def __init__(self, index: PartitionedIndex, files: FilesConfig, problems: Problems) -> None:
        self.index = index
        self.files = files
        self.problems = problems
        self.lock = threading.RLock()

    def apply(self, root: Root, loaded: Loaded) -> None:
        """Put one loaded file into the index, or take it out when it was refused."""
        self.problems.set(loaded.path, loaded.problems)
        if loaded.record is None:
            self.index.remove_file(loaded.path)
        else:
            self.index.replace_file(loaded.record, loaded.entries)

    def sync_file(self, root: Root, rel: Path) -> Loaded:
        """Re-read one file and make the index match it."""
        with self.lock:
            loaded = load_file(root, rel, self.files)
            self.apply(root, loaded)
            return loaded

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
            self.sync_file(root, rel)
            return
        self._forget(str(root.path / rel))
        if _is_memory(rel, root):
            self.apply(root, load_file(root, rel, self.files))

    def _forget(self, path: str) -> None:
        """Drop a vanished file, or every file below a vanished directory."""
        for known in self.index.file_records():
            if known == path or known.startswith(path + "/"):
                self.index.remove_file(known)
        self.problems.clear_under(path)

    def reconcile(self, root: Root, under: Path | None = None, progress: Progress | None = None) -> Report:
        """Diff the disk against the index (stat, then hash) and apply the difference."""
        report = Report()
        with self.lock:
            if not root_available(root):
                report.unavailable.append(str(root.path))
                return report
            base = under or root.path
            known = {p: r for p, r in self.index.file_records().items() if _below(p, base)}
            seen = self._scan(root, base, known, report, progress)
            for path in set(known) - seen:
                self.index.remove_file(path)
                self.problems.set(path, ())
                report.removed += 1
            self._drop_vanished_problems(base, seen)
        return report

    def _scan(
        self, root: Root, base: Path, known: dict[str, FileRecord], report: Report, progress: Progress | None
    ) -> set[str]:
        """Load every file that changed since its record; return the paths seen."""
        rels = [r for r in walk(root) if _below(str(root.path / r), base)]
        seen: set[str] = set()
        for number, rel in enumerate(rels, start=1):
            path = str(root.path / rel)
            seen.add(path)
            report.scanned += 1
            if _same_stat(path, known.get(path)):
                report.unchanged += 1
            else:
                self._count(report, load_file(root, rel, self.files), root)
            if progress:
                progress(number, len(rels))
        return seen

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
