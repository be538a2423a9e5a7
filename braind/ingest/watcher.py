"""A thin adapter over watchdog: mark changed paths dirty, hand them out once settled, ask for rescans.

The watchdog handler only marks paths in a Debouncer; one scheduler thread hands due paths to
`on_due` and asks `on_rescan` for a reconcile whenever events may have been lost: an inotify queue
overflow, a root that vanished or was replaced, watches that could not all be added, and a timer.
Both callbacks always run on the scheduler thread, never on watchdog's threads.
"""

from __future__ import annotations

import datetime as dt
import errno
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from watchdog.events import (
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileOpenedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver, ObservedWatch
from watchdog.observers.inotify import InotifyEmitter
from watchdog.observers.inotify_c import CallbackId, InotifyEvent, InotifyFD, Mask, WatchCallback, WatchDescriptor

from braind.files.validate import is_artefact
from braind.ingest.debounce import Debouncer
from braind.model.lines import printable

log = logging.getLogger(__name__)

ROOT_CHECK_SECONDS = 2.0
"""How often each root's identity is compared with what is watched."""
DEGRADED_RESCAN_CAP = 30.0
"""A root whose watches fell short is rescanned at least this often."""
BATCH_SLACK = 0.25
"""Wake this fraction of the quiet window late, so paths that settle together are handed out together."""
BURST_PATHS = 32
"""This many paths of one root settling together (a `git pull`, an unpacked backup) are one rescan of it:
the root's later paths join the burst until none of them has been waiting for one more quiet window
(a writer that stalls briefly mid-checkout stays one burst), or for at most BURST_WAITS x max_wait."""
BURST_WAITS = 5
"""A root written to without pause is still rescanned this many max_waits after its burst began."""

# Opens and read-only closes change nothing; DirModifiedEvent is what watchdog adds for the parent
# of every create/delete/move/close, whose own event is already marked.
_NOISE = (FileOpenedEvent, FileClosedNoWriteEvent, DirModifiedEvent)
# What is asked of the kernel: every event that can change a file or whether it can be read (a
# chmod that makes a rejected file readable again), and not the noise, which
# watchdog would otherwise read, group and queue one by one (an open for each append of a note).
_CHANGES = [
    FileAttribEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileClosedEvent,
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]
# A directory that disappears while watchdog walks a tree is not a shortfall.
_VANISHED = frozenset({errno.ENOENT, errno.ENOTDIR})

OnDue = Callable[[list[Path]], None]
OnRescan = Callable[[Path | None, str], None]


def split_bursts(
    due: Sequence[Path], roots: Sequence[Path], bursting: Set[Path] = frozenset()
) -> tuple[list[Path], list[Path]]:
    """The roots to rescan whole (BURST_PATHS or more due paths, or already bursting), and the other paths."""
    by_root: dict[Path | None, list[Path]] = {}
    for path in due:
        root = next((r for r in roots if path == r or r in path.parents), None)
        by_root.setdefault(root, []).append(path)
    bursts = [
        root for root, paths in by_root.items() if root is not None and (len(paths) >= BURST_PATHS or root in bursting)
    ]
    rest = [path for root, paths in by_root.items() if root not in bursts for path in paths]
    return bursts, rest


class _InotifyFD(InotifyFD):
    """watchdog's inotify reader, reporting what it only logs or swallows: overflows and failed watches."""

    def __init__(self, on_overflow: Callable[[], None], on_shortfall: Callable[[bytes, bytes, str], None]) -> None:
        super().__init__()
        self.name = "braind-inotify"
        self._on_overflow = on_overflow
        self._on_shortfall = on_shortfall

    def handle_event(self, event: InotifyEvent) -> None:
        """Report IN_Q_OVERFLOW once watchdog has rebuilt its watches, so the rescan sees a full tree."""
        try:
            super().handle_event(event)
        finally:
            if event.is_queue_overflow:
                self._on_overflow()

    def add_callback(self, path: bytes, mask: Mask, callback: WatchCallback, id_: CallbackId) -> WatchDescriptor:
        """Report a directory that cannot be watched; watchdog drops that error below the root."""
        try:
            wd = super().add_callback(path, mask, callback, id_)
        except OSError as exc:
            if exc.errno not in _VANISHED:
                self._on_shortfall(_group_root(callback), path, exc.strerror or str(exc))
            raise
        if wd < 0:  # watchdog keeps a dead watch instead of raising when access is denied
            self._on_shortfall(_group_root(callback), path, os.strerror(errno.EACCES))
        return wd

    def _add_callback(self, path: bytes, mask: Mask, callback: WatchCallback, id_: CallbackId) -> WatchDescriptor:
        """Adding a directory twice is a benign race (`mkdir -p a/b`), not worth watchdog's RuntimeWarning."""
        watch = self._get_or_create_watch(path, mask)
        if watch.callbacks.setdefault(id_, callback) is not callback:
            return super()._add_callback(path, mask, callback, id_)  # a real clash: let watchdog warn
        return watch.wd

    def watch_count(self) -> int:
        """How many inotify watches this reader holds, for health()."""
        with self._lock:
            return len(self._watch_for_wd)


def _group_root(callback: WatchCallback) -> bytes:
    """The root a watchdog InotifyWatchGroup was created for."""
    path = getattr(callback, "path", b"")
    return path if isinstance(path, bytes) else b""


class _Observer(BaseObserver):
    """watchdog's InotifyObserver, built on a reporting inotify reader that it owns and joins."""

    def __init__(self, inotify_fd: _InotifyFD) -> None:
        super().__init__(InotifyEmitter, inotify_fd=inotify_fd)
        self.name = "braind-observer"
        self._inotify_fd = inotify_fd

    def on_thread_stop(self) -> None:
        """Stop the emitters, then the reader thread, as InotifyObserver does."""
        super().on_thread_stop()
        self._inotify_fd.stop()
        if self._inotify_fd.is_alive():
            self._inotify_fd.join()


class _Handler(FileSystemEventHandler):
    """Turns watchdog events into dirty paths; the only work done on watchdog's threads."""

    def __init__(self, mark: Callable[[str], None], touch_root: Callable[[], None], roots: set[str]) -> None:
        self._mark = mark
        self._touch_root = touch_root
        self._roots = roots

    def dispatch(self, event: FileSystemEvent) -> None:
        """Mark every real path the event names; an event on a root itself asks for an identity check."""
        if isinstance(event, _NOISE):
            return
        for path in _event_paths(event):
            if path in self._roots:
                self._touch_root()
            elif not is_artefact(os.path.basename(path)):
                self._mark(path)


def _event_paths(event: FileSystemEvent) -> Iterator[str]:
    """Both ends of a move, so a rename from a temp name still marks the real destination."""
    for raw in (event.src_path, event.dest_path):
        if raw:
            yield os.fsdecode(raw)


class _Identity(NamedTuple):
    """What a root path is right now: its kind and, for real directories, which one."""

    kind: str  # "dir" | "symlink" | "other" | "missing" | "unknown"
    dev: int = 0
    ino: int = 0


_UNKNOWN = _Identity("unknown")
_KIND_PROBLEMS = {"symlink": "root is a symlink, not followed", "other": "root is not a directory"}


def _identity(path: Path) -> _Identity:
    """lstat the root, so a symlink is seen as one and never followed."""
    try:
        st = os.lstat(path)
    except OSError:
        return _Identity("missing")
    if stat.S_ISDIR(st.st_mode):
        return _Identity("dir", st.st_dev, st.st_ino)
    return _Identity("symlink" if stat.S_ISLNK(st.st_mode) else "other", st.st_dev, st.st_ino)


@dataclass
class _Root:
    """One watched root and why it is not fully watched, if it is not."""

    path: Path
    identity: _Identity = _UNKNOWN
    watch: ObservedWatch | None = None
    problem: str | None = None
    shortfall: str | None = None
    retry_at: float = 0.0
    warned: bool = False

    @property
    def state(self) -> str:
        """watching, missing or degraded, as reported by health()."""
        if self.identity.kind == "missing":
            return "missing"
        return "degraded" if self.reason else "watching"

    @property
    def reason(self) -> str | None:
        """Why this root is degraded, or None."""
        return self.problem or self.shortfall

    @property
    def retries(self) -> bool:
        """A real directory that is not fully watched is rewatched and rescanned periodically."""
        return self.identity.kind == "dir" and self.reason is not None


@dataclass
class _Burst:
    """When a root's burst began and when its last paths joined it."""

    began: float
    joined: float


class Watcher:
    """Watches memory roots with inotify and reports settled paths and needed rescans."""

    def __init__(
        self,
        roots: Sequence[Path],
        on_due: OnDue,
        on_rescan: OnRescan,
        *,
        quiet: float = 0.15,
        max_wait: float = 1.0,
        rescan_seconds: float = 600.0,
    ) -> None:
        if rescan_seconds <= 0:
            raise ValueError(f"rescan_seconds must be > 0, got {rescan_seconds!r}")
        self._roots = [_Root(path) for path in dict.fromkeys(Path(os.path.abspath(r)) for r in roots)]
        self._on_due = on_due
        self._on_rescan = on_rescan
        self._rescan_seconds = rescan_seconds
        self._degraded_seconds = min(rescan_seconds, DEGRADED_RESCAN_CAP)
        self._debouncer = Debouncer(quiet, max_wait)
        self._settle = min(quiet, max_wait)
        self._max_wait = max_wait
        self._bursts: dict[Path, _Burst] = {}  # root -> its burst (scheduler thread)
        self._wake_at = 0.0
        self._cond = threading.Condition()
        self._handler = _Handler(self._mark, self.check_roots, {str(r.path) for r in self._roots})
        self._pending_rescans: dict[tuple[Path | None, str], None] = {}
        self._check_requested = False
        self._next_root_check = self._next_timer = 0.0
        self._started = self._stopping = False
        self._fd: _InotifyFD | None = None
        self._observer: _Observer | None = None
        self._inotify_problem: str | None = None
        self._scheduler: threading.Thread | None = None
        self._overflows = self._rescans = 0
        self._last_rescan: str | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Watch every root that can be watched now, then start the scheduler; missing roots are fine."""
        if self._started:
            raise RuntimeError("watcher already started")
        self._started = True
        try:
            self._start_observer()
            for root in self._roots:
                self._refresh_root(root, initial=True)
            self._start_scheduler()
        except BaseException:
            self.stop()
            raise

    def _start_scheduler(self) -> None:
        """Arm the timers and start the one thread that runs the callbacks."""
        now = time.monotonic()
        self._next_root_check = now + ROOT_CHECK_SECONDS
        self._next_timer = now + self._rescan_seconds
        self._scheduler = threading.Thread(target=self._run, name="braind-watcher", daemon=True)
        self._scheduler.start()

    def stop(self) -> None:
        """Stop the scheduler, then watchdog's observer, emitters and reader, joining every thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._scheduler is not None and self._scheduler is not threading.current_thread():
            self._scheduler.join()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join()

    def alive(self) -> bool:
        """True while the scheduler and watchdog's threads run; the systemd watchdog ping depends on it."""
        if self._stopping or self._scheduler is None or not self._scheduler.is_alive():
            return False
        if self._observer is None or self._fd is None:
            return self._inotify_problem is not None
        return self._observer.is_alive() and self._fd.is_alive()

    def health(self) -> dict[str, Any]:
        """A snapshot for `status`: overall state, each root's state and the rescan counters."""
        with self._cond:
            roots = [{"path": str(r.path), "state": r.state, "reason": r.reason} for r in self._roots]
            report: dict[str, Any] = {"overflows": self._overflows, "rescans": self._rescans}
            report |= {"last_rescan": self._last_rescan, "pending": self._debouncer.pending()}
        state, reason = self._overall(roots)
        watched = self._fd.watch_count() if self._fd is not None and self.alive() else 0
        return {"state": state, "roots": roots, "watched_dirs": watched, **report, "reason": reason}

    def _overall(self, roots: list[dict[str, Any]]) -> tuple[str, str | None]:
        """ok, degraded (with every root's reason) or stopped."""
        if not self.alive():
            return "stopped", "watcher stopped" if self._started else "watcher not started"
        problems = [f"{r['path']}: {r['reason']}" for r in roots if r["state"] == "degraded"]
        return ("degraded", "; ".join(problems)) if problems else ("ok", None)

    def _start_observer(self) -> None:
        """Start watchdog's reader and observer; without inotify every root is degraded, not fatal."""
        try:
            fd = _InotifyFD(self._overflowed, self._fell_short)
        except OSError as exc:
            self._inotify_problem = f"inotify unavailable: {exc.strerror or exc}"
            log.error("cannot watch memory roots: %s", self._inotify_problem)
            return
        fd.start()
        observer = _Observer(fd)
        observer.start()
        self._fd, self._observer = fd, observer

    # -- watchdog side: only marks and wakes the scheduler -------------------------------------

    def _mark(self, path: str) -> None:
        """Note a dirty path; wake the scheduler only if it would otherwise sleep past it (observer thread)."""
        now = time.monotonic()
        with self._cond:
            self._debouncer.mark(path, now)
            if now + self._settle * (1 + BATCH_SLACK) < self._wake_at:
                self._cond.notify()

    def check_roots(self) -> None:
        """Check the roots' identities now: an event on a root itself, or a root just created."""
        with self._cond:
            self._check_requested = True
            self._cond.notify()

    def _overflowed(self) -> None:
        """The kernel dropped events: rescan everything and recheck the roots (inotify thread)."""
        log.warning("inotify queue overflowed; requesting a full rescan")
        with self._cond:
            self._overflows += 1
            self._check_requested = True
            self._pending_rescans[(None, "overflow")] = None
            self._cond.notify()

    def _fell_short(self, group_root: bytes, path: bytes, reason: str) -> None:
        """A directory could not be watched: degrade its root and rescan it now and periodically."""
        message = f"cannot watch {printable(os.fsdecode(path))}: {reason}"  # status is JSON; a name may not be UTF-8
        with self._cond:
            root = next((r for r in self._roots if os.fsencode(r.path) == group_root), None)
            if root is None or root.shortfall is not None:
                return
            root.shortfall = message
            root.retry_at = time.monotonic() + self._degraded_seconds
            self._pending_rescans[(root.path, "degraded")] = None
            self._cond.notify()
            warn, root.warned = not root.warned, True
        log.log(logging.WARNING if warn else logging.DEBUG, "%s; rescanning it periodically", message)

    # -- roots ---------------------------------------------------------------------------------

    def _refresh_root(self, root: _Root, *, initial: bool = False) -> None:
        """Rewatch a root whose identity changed or whose watch died, and ask for its rescan."""
        identity = _identity(root.path)
        if identity == root.identity and (root.watch is None or self._watch_alive(root.watch)):
            return
        self._unwatch(root)
        with self._cond:
            root.identity = identity
        self._watch(root)
        if identity.kind == "missing":
            self._request(root.path, "root_missing")
        elif not initial:
            self._request(root.path, "root_changed")

    def _watch(self, root: _Root) -> None:
        """Schedule a recursive watch that never follows symlinks; record why when there can be none."""
        with self._cond:
            root.problem, root.shortfall = _KIND_PROBLEMS.get(root.identity.kind), None
            root.retry_at = time.monotonic() + self._degraded_seconds
        if root.identity.kind != "dir":
            return
        if self._observer is None:
            problem: str | None = self._inotify_problem
        else:
            problem = self._schedule(root)
        with self._cond:
            root.problem = problem
            root.warned = root.warned and root.reason is not None

    def _schedule(self, root: _Root) -> str | None:
        """Ask watchdog to watch the root; the error text when it cannot."""
        assert self._observer is not None
        try:
            root.watch = self._observer.schedule(self._handler, str(root.path), recursive=True, event_filter=_CHANGES)
        except OSError as exc:
            log.debug("cannot watch %s: %s", root.path, exc)
            return f"cannot watch root: {exc.strerror or exc}"
        return None

    def _unwatch(self, root: _Root) -> None:
        """Drop a root's watch; watchdog joins its emitter thread."""
        watch, root.watch = root.watch, None
        if watch is not None and self._observer is not None:
            try:
                self._observer.unschedule(watch)
            except KeyError:
                log.debug("watch on %s was already gone", root.path)

    def _watch_alive(self, watch: ObservedWatch) -> bool:
        """False once watchdog's emitter stopped itself, as it does when the root is deleted."""
        emitters = list(self._observer.emitters) if self._observer is not None else []
        return any(e.watch == watch and e.is_alive() and not e.stopped_event.is_set() for e in emitters)

    def _retry_degraded(self, now: float) -> None:
        """Rewatch each root whose watches fell short, and ask for its rescan."""
        for root in self._roots:
            if root.retries and root.retry_at <= now:
                self._unwatch(root)
                self._watch(root)
                self._request(root.path, "degraded")
                if root.reason is None:
                    log.info("%s is fully watched again", root.path)

    # -- scheduler thread ----------------------------------------------------------------------

    def _run(self) -> None:
        """Sleep until something is due, then deliver it; never die of a callback or a bug."""
        while self._wait():
            try:
                self._tick(time.monotonic())
            except Exception:
                log.exception("watcher scheduler failed; continuing")

    def _wait(self) -> bool:
        """Block until the next deadline or a wake-up; False once stopping."""
        with self._cond:
            while not self._stopping:
                self._wake_at = self._next_wake()
                delay = self._wake_at - time.monotonic()
                if delay <= 0:
                    break
                self._cond.wait(delay)
            return not self._stopping

    def _next_wake(self) -> float:
        """The earliest moment the scheduler has something to do (caller holds the lock)."""
        if self._pending_rescans or self._check_requested:
            return 0.0
        deadlines = [self._next_root_check, self._next_timer]
        deadlines += [r.retry_at for r in self._roots if r.retries]
        debounced = self._debouncer.next_deadline()
        if debounced is not None:
            deadlines.append(debounced + self._settle * BATCH_SLACK)
        for burst in self._bursts.values():
            deadlines += [burst.began + self._burst_cap(), burst.joined + self._settle]
        return min(deadlines)

    def _tick(self, now: float) -> None:
        """Refresh roots, retry degraded ones, run the timer, then deliver rescans and due paths."""
        if self._take_root_check(now):
            for root in self._roots:
                self._refresh_root(root)
        self._retry_degraded(now)
        if now >= self._next_timer:
            self._next_timer = now + self._rescan_seconds
            self._request(None, "timer")
        for root_path, reason in self._take_rescans():
            self._deliver_rescan(root_path, reason)
        with self._cond:
            due = self._debouncer.due(time.monotonic())
        bursts, rest = split_bursts([Path(p) for p in due], [r.path for r in self._roots], set(self._bursts))
        for root_path in bursts:
            self._bursts.setdefault(root_path, _Burst(now, now)).joined = now
        for root_path in self._settled_bursts(now):
            self._deliver_rescan(root_path, "burst")
        if rest:
            self._call(self._on_due, rest)

    def _settled_bursts(self, now: float) -> list[Path]:
        """The bursting roots quiet for a window with nothing waiting (or at their cap), forgotten as bursts."""
        with self._cond:
            settled = [
                root
                for root, burst in self._bursts.items()
                if now >= burst.began + self._burst_cap()
                or (now >= burst.joined + self._settle and not self._debouncer.pending_under(str(root)))
            ]
        for root in settled:
            del self._bursts[root]
        return settled

    def _burst_cap(self) -> float:
        """How long a burst may grow before its root is rescanned anyway."""
        return self._max_wait * BURST_WAITS

    def _take_root_check(self, now: float) -> bool:
        """Whether the roots are to be checked now, because an event asked or the timer elapsed."""
        with self._cond:
            due = self._check_requested or now >= self._next_root_check
            if due:
                self._check_requested = False
                self._next_root_check = now + ROOT_CHECK_SECONDS
            return due

    def _request(self, root: Path | None, reason: str) -> None:
        """Queue a rescan for the scheduler; repeated requests before it runs collapse into one."""
        with self._cond:
            self._pending_rescans[(root, reason)] = None
            self._cond.notify()

    def _take_rescans(self) -> list[tuple[Path | None, str]]:
        """Hand out the queued rescans in request order."""
        with self._cond:
            rescans = list(self._pending_rescans)
            self._pending_rescans.clear()
            return rescans

    def _deliver_rescan(self, root: Path | None, reason: str) -> None:
        """Count the rescan for health() and ask the consumer for it."""
        with self._cond:
            self._rescans += 1
            self._last_rescan = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        self._call(self._on_rescan, root, reason)

    def _call(self, callback: Callable[..., None], *args: Any) -> None:
        """Run a consumer callback; its failure is logged with a traceback and never stops the thread."""
        try:
            callback(*args)
        except Exception:
            log.exception("watcher callback %s failed", getattr(callback, "__qualname__", callback))
