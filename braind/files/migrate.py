"""Move a legacy `<project>/.memory` into the project root `<project>/.agents/.memory`, once.

Two legacy shapes exist: a single Markdown file (it becomes the logfile
`logs/project.md`, with frontmatter added in front of its unchanged text) and
a directory of logfiles (it becomes `logs/`, moved with one rename). Nothing
is ever overwritten: when the target is already there the migration stops
with `migration_conflict` and both stay as they are. When a step fails, every
step done so far is undone, so the project is left exactly as it was.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from braind.errors import BraindError, Rejected
from braind.files.durable import create_file, lkind
from braind.files.problems import Problems
from braind.files.validate import open_dir, read_file
from braind.model.layered import NO_DESCRIPTION, heading1, parse_logfile, render_logfile
from braind.model.lines import Problem
from braind.model.roots import PROJECT_SUBDIR, Root

log = logging.getLogger(__name__)

LEGACY = ".memory"
LOGS = (*PROJECT_SUBDIR, "logs")
MIGRATED_NAME = "project"
MIGRATED_DESCRIPTION = "Project memory migrated from .memory"


@dataclass(frozen=True)
class Migration:
    """What a migration did, for the log, the CLI and the tests."""

    moved: bool
    source: str
    target: str | None
    message: str

    def as_dict(self) -> dict[str, object]:
        """The outcome as JSON."""
        return dict(self.__dict__)


@dataclass
class _Undo:
    """The steps that reverse what a migration did so far, run newest first."""

    steps: list[Callable[[], None]] = field(default_factory=list)

    def run(self) -> None:
        """Reverse every step; a step that cannot be reversed is skipped."""
        for step in reversed(self.steps):
            with contextlib.suppress(OSError):
                step()


def migrate(project: Path, max_file_bytes: int) -> Migration:
    """Migrate one project's legacy memory; a no-op when there is none (so it is idempotent)."""
    legacy = project / LEGACY
    kind = lkind(legacy)
    if kind == "missing":
        return Migration(False, str(legacy), None, f"nothing to migrate: {legacy} does not exist")
    if kind not in ("file", "dir"):
        raise Rejected("symlink" if kind == "link" else "not_regular", f"{legacy} is not a plain file or directory")
    undo = _Undo()
    try:
        return _move_dir(project, undo) if kind == "dir" else _move_file(project, max_file_bytes, undo)
    except BraindError as exc:
        undo.run()
        if exc.reason == "migration_conflict":
            raise
        raise BraindError("migration_failed", f"{legacy} was left as it was: {exc.message}") from None
    except OSError as exc:
        undo.run()
        raise BraindError("migration_failed", f"{legacy} was left as it was: {exc.strerror or exc}") from None


def _move_file(project: Path, max_file_bytes: int, undo: _Undo) -> Migration:
    """A single legacy file becomes logs/project.md; it is removed only once the copy is durable."""
    text = read_file(project, Path(LEGACY), max_file_bytes).text
    target = project.joinpath(*LOGS, f"{MIGRATED_NAME}.md")
    if os.path.lexists(target):
        raise _conflict(project, target)
    _mkdirs(project, LOGS, undo)
    dir_fd = open_dir(project, LOGS)
    try:
        try:
            create_file(dir_fd, target.name, as_logfile(text).encode("utf-8"))
        except FileExistsError:
            raise _conflict(project, target) from None
        undo.steps.append(functools.partial(os.unlink, target))
        os.unlink(project / LEGACY)
        _fsync_dir(project)
    finally:
        os.close(dir_fd)
    return Migration(True, str(project / LEGACY), str(target), f"moved {project / LEGACY} to {target}")


def as_logfile(text: str) -> str:
    """The legacy text as a logfile: frontmatter and a `# heading` in front, the text itself unchanged."""
    if text.startswith(("---\n", "---\r\n")):
        return text
    description = parse_logfile(text, 1 << 30).meta
    said = description.description if description and description.description != NO_DESCRIPTION else None
    body = text.lstrip("\r\n")
    first, _, rest = body.partition("\n")
    title = heading1(first)
    if title:
        return render_logfile(MIGRATED_NAME, "project", said or title, title) + rest
    return render_logfile(MIGRATED_NAME, "project", said or MIGRATED_DESCRIPTION, MIGRATED_NAME) + "\n" + body


def _move_dir(project: Path, undo: _Undo) -> Migration:
    """A legacy directory of logfiles becomes logs/ with one rename (onto an empty logs/ at most)."""
    source, target = project / LEGACY, project.joinpath(*LOGS)
    target_kind = lkind(target)
    if target_kind not in ("missing", "dir") or (target_kind == "dir" and any(target.iterdir())):
        raise _conflict(project, target)
    _mkdirs(project, PROJECT_SUBDIR, undo)
    os.close(open_dir(project, PROJECT_SUBDIR))
    os.rename(source, target)
    undo.steps.append(functools.partial(os.rename, target, source))
    _fsync_dir(target.parent)
    _fsync_dir(project)
    return Migration(True, str(source), str(target), f"moved {source} to {target}")


def _conflict(project: Path, target: Path) -> BraindError:
    """Both the legacy memory and its destination exist: a person has to merge them."""
    return BraindError(
        "migration_conflict",
        f"both {project / LEGACY} and {target} exist; nothing was moved: merge them by hand, "
        f"then remove {project / LEGACY}",
        target=str(target),
    )


def _mkdirs(project: Path, parts: tuple[str, ...], undo: _Undo) -> None:
    """Create the missing directories of a path below project (0700), remembering how to remove them."""
    path = project
    for part in parts:
        path = path / part
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        undo.steps.append(functools.partial(os.rmdir, path))
        _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    """Make a directory's entries durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Migrator:
    """Migrates each project the daemon meets once; failures are listed by `status` and retried."""

    def __init__(
        self,
        problems: Problems,
        max_file_bytes: int,
        lock: threading.RLock,
        moved: Callable[[Root], None],
        claim: Callable[[Root], None] = lambda root: None,
    ) -> None:
        self._problems = problems
        self._max_file_bytes = max_file_bytes
        self._lock = lock
        self._moved = moved
        self._claim = claim  # one daemon per root: its lock is held before the root is written
        self._done: set[Path] = set()

    def ensure(self, root: Root) -> None:
        """Run the migration of root's project unless it already ran (or found nothing) in this daemon."""
        project = root.project
        if project is None or project in self._done:
            return
        with self._lock:
            if project not in self._done:
                self._run(root, project)

    def _run(self, root: Root, project: Path) -> None:
        """One attempt: report a refusal as a problem of the legacy path, or record success."""
        legacy = str(project / LEGACY)
        try:
            result = migrate(project, self._max_file_bytes)  # it never overwrites: safe before the root's lock
            if result.moved:
                self._claim(root)
        except BraindError as exc:
            self._problems.set(legacy, [Problem(legacy, None, exc.reason, exc.message)])
            return
        self._problems.set(legacy, ())
        self._done.add(project)
        if result.moved:
            log.info("%s", result.message)
            self._moved(root)
