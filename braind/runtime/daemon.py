"""The one place that wires config, index, reconcile, watcher and socket, in order."""

from __future__ import annotations

import ctypes
import functools
import gc
import logging
import math
import os
import resource
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from braind.config import Config
from braind.errors import BraindError
from braind.files.problems import Problems
from braind.files.rewrite.backups import clean_leftovers
from braind.files.roots import ensure_root
from braind.index.partitioned import PartitionedIndex
from braind.ingest.sync import Syncer, root_available
from braind.ingest.watcher import Watcher
from braind.model.roots import Root
from braind.rpc.methods import answers_inline, build, dispatcher
from braind.rpc.server import SocketServer
from braind.runtime import sdnotify
from braind.runtime.statelock import RootLocks, StateLock
from braind.services import make_services
from braind.services.context import make_context

log = logging.getLogger(__name__)

# How long a thread may run before one waiting for the interpreter gets its turn. With Python's
# 5 ms, a request that had just read its line, or finished an fsync, waited up to 5 ms behind
# another's work each time it wanted the interpreter back. With 0.5 ms and reads taken in turn
# (braind/rpc/methods.py), 8 clients' p99 fell from 24 ms to about 15 ms.
SWITCH_INTERVAL_S = 0.0005
_YOUNG_OBJECTS = 20_000  # allocations between two passes of the cycle collector over the youngest objects


class Daemon:
    """Start order: index → watcher → socket → reconcile → READY=1; stop in reverse."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.problems = Problems()
        self.index = PartitionedIndex(
            config.state_dir, _identity(config), config.index.commit_ms, languages=config.recall.languages
        )
        self.syncer = Syncer(self.index, config.files, self.problems)
        self.context = make_context(config, self.index, self.syncer, self.problems)
        self.services = make_services(self.context)
        self.memory = self.services.memory
        self.watcher = Watcher(
            [r.path for r in self.context.roots.all()],
            self.on_due,
            self.on_rescan,
            quiet=config.watcher.quiet_ms / 1000,
            max_wait=config.watcher.max_wait_ms / 1000,
            rescan_seconds=config.watcher.rescan_seconds,
        )
        self.memory.health = self.watcher.health
        self.context.hooks.root_created = self.watcher.check_roots
        self.owner = {"state_dir": str(config.state_dir), "socket": str(config.socket)}
        self.locks = RootLocks(self.owner)
        self.locks.claimed = self._claimed
        self.context.hooks.claim = self.syncer.states.claim = self.locks.claim
        self.index.on_damage = self.on_index_damage
        self.index.on_warmed = release_free_memory
        self._repair: threading.Thread | None = None
        self._repair_lock = threading.Lock()
        self.server: SocketServer | None = None
        self.stopping = threading.Event()
        self.state = "starting"
        self.stall_limit = math.inf  # seconds one index commit may take before the watchdog gives up on it
        self._health_told: tuple[str, str | None] | None = None

    def run(self) -> None:
        """Serve until SIGTERM or SIGINT, then shut down cleanly."""
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        with StateLock(self.config.state_dir, self.owner):
            self.install_signals()
            try:
                self.start()
                self.stopping.wait()
            finally:
                self.stop()

    def start(self) -> None:
        """Bring every part up in dependency order and tell systemd when ready."""
        for root in self.context.roots.all():
            if root_available(root) and _has_files(root.path):
                self.locks.claim(root)  # another daemon's root: refuse to start; an empty one is claimed when written
        fresh = self.index.open()
        self._create_new_user_root()
        self.index.start()
        self._recover()
        self.watcher.start()
        self.server = self._server()
        self.server.start()
        self.state = "reconciling"
        if fresh:
            self._initial_build()
        sdnotify.notify("STATUS=reconciling (stat diff)")
        # Offline edits may have kept both size and mtime: compare hashes, unless every file was just read.
        report = self.memory.reconcile(verify=not fresh)
        self.index.commit()
        _settle_memory()
        self.state = "ready"
        log.info("ready: %s", report.as_dict())
        sdnotify.notify("READY=1", self._status_line())
        self._start_watchdog()
        threading.Thread(target=self._prepare_notes, name="braind-prepare-notes", daemon=True).start()

    def _prepare_notes(self) -> None:
        """Read today's diary ahead for the first note, after ready: a busy day takes a second or two to read."""
        try:
            self.memory.prepare_notes()
        except Exception as exc:  # only a read ahead: the first note reads the day itself
            if not self.stopping.is_set():
                log.warning("could not read today's diary ahead for the first note: %s", exc)

    def _create_new_user_root(self) -> None:
        """Create a user root the index knows nothing of (0700), so a fresh install reads ok.

        A missing root whose files the index holds is left missing: it may be
        unmounted or moved away, and status must say it is unavailable.
        """
        root = self.context.roots.user.path
        if os.path.lexists(root):
            return
        prefix = str(root).rstrip("/") + "/"
        if any(path.startswith(prefix) for path in self.index.file_records()):
            return
        try:
            ensure_root(self.context.roots.user)
            log.info("created the memory root %s", root)
        except (OSError, BraindError) as exc:
            log.warning("could not create the memory root %s: %s", root, exc)

    def _initial_build(self) -> None:
        """A missing or unreadable index is rebuilt from the files, in parallel when large."""
        sdnotify.notify("STATUS=rebuilding the index")
        try:
            log.info("index rebuilt: %s", self.memory.reindex())
        except BraindError as exc:
            log.warning("initial index build skipped: %s", exc)

    def _server(self) -> SocketServer:
        """The socket server: socket-activated when systemd passes one, else bound here."""
        passed = sdnotify.listen_sockets()
        _raise_open_file_limit()
        server = SocketServer(
            self.config.socket,
            self.dispatch_with_state(),
            max_connections=self.config.server.max_connections,
            read_timeout=float(self.config.server.read_timeout_seconds),
            idle_timeout=float(self.config.server.idle_timeout_seconds),
            workers=self.config.server.workers,
            listen_socket=passed[0] if passed else None,
            inline=functools.partial(answers_inline, frozen=self.services.layered.has_snapshot),
        )
        server.bind()
        return server

    def dispatch_with_state(self) -> Callable[[str, dict[str, Any]], Any]:
        """The method dispatcher, with the daemon's lifecycle state added to `status`."""
        dispatch = dispatcher(build(self.services))

        def call(name: str, params: dict[str, Any]) -> Any:
            result = dispatch(name, params)
            if name == "status" and isinstance(result, dict):
                result["state"] = self.state
            return result

        return call

    def stop(self) -> None:
        """Stop accepting, stop watching, commit the index; safe to call twice."""
        if self.state == "stopped":
            return
        self.state = "stopping"
        sdnotify.notify("STOPPING=1")
        if self.server is not None:
            self.server.close()
        self.watcher.stop()
        if self._repair is not None:
            self._repair.join()
        self.services.layered.close()
        self.syncer.states.close()
        self.index.close()
        self.locks.release()
        self.state = "stopped"
        log.info("stopped")

    def _claimed(self, root: Root) -> None:
        """A root is ours now: clean up what a crashed braind left in it, and complete its compact.log."""
        for done in clean_leftovers(root.path):
            log.info("clean-up of %s: %s", root.path, done)
        for done in self.services.diary.finish_intents(root):
            log.info("clean-up of %s: %s", root.path, done)
        self.syncer.states.of(root).repair_compact_log()
        if self.state != "starting":  # at start the index opens later: _recover and reconcile do it then
            self._recover([root])
            self.services.typed.reconcile_status(root)

    def _recover(self, roots: list[Root] | None = None) -> None:
        """Put in the text a crashed braind was still carrying over into files of these roots (all by default)."""
        for root in roots or [r for r in self.context.roots.all() if root_available(r)]:
            for done in self.services.layered.recover(root):
                log.info("clean-up of %s: %s", root.path, done)

    def on_index_damage(self, why: str) -> None:
        """Index callback: repair and rebuild in the background while requests keep being answered."""
        with self._repair_lock:
            if self.state in ("stopping", "stopped") or (self._repair is not None and self._repair.is_alive()):
                return
            self._repair = threading.Thread(target=self._repair_index, name="braind-index-repair", daemon=True)
            self._repair.start()

    def _repair_index(self) -> None:
        """Move the damaged partitions aside, then rebuild every partition from the files."""
        try:
            log.warning("index repair: moved aside %s; rebuilding", self.index.repair() or "nothing")
            log.info("index rebuilt after damage: %s", self.memory.reindex())
        except Exception:
            log.exception("index repair failed; it is retried when the index fails again")

    def on_due(self, paths: list[Path]) -> None:
        """Watcher callback: make the index match each due path."""
        for path in paths:
            root = self._root_of(path)
            if root is not None:
                self.syncer.sync_path(root, path)

    def on_rescan(self, root_path: Path | None, reason: str) -> None:
        """Watcher callback: reconcile one root or all after an overflow, a root change or the timer."""
        log.info("rescan (%s) of %s", reason, root_path or "all roots")
        roots = [r for r in self.context.roots.all() if root_path is None or r.path == root_path]
        self.memory.reconcile(roots)
        self._tell_health()

    def _status_line(self) -> str:
        """systemd's STATUS=: ready, or degraded with why, so `systemctl status` shows what is not watched."""
        health = self.watcher.health()
        self._health_told = (health["state"], health.get("reason"))
        entries = self.index.stats().get("entries", 0)
        if health["state"] == "degraded":
            return f"STATUS=degraded: {_one_line(str(health['reason']))}; {entries} entries"
        return f"STATUS=ready: {entries} entries"

    def _tell_health(self) -> None:
        """After a rescan, tell systemd when the watcher turned degraded or recovered (once per change)."""
        health = self.watcher.health()
        if self.state == "ready" and (health["state"], health.get("reason")) != self._health_told:
            sdnotify.notify(self._status_line())

    def _root_of(self, path: Path) -> Root | None:
        """The watched root that holds a path."""
        for root in self.context.roots.all():
            if root.contains(path):
                return root
        return None

    def alive(self) -> bool:
        """True while the watcher, its scheduler and the index writer all run, and no commit is wedged."""
        return self.watcher.alive() and self.index.alive() and self.index.stalled_for() < self.stall_limit

    def _start_watchdog(self) -> None:
        """Ping systemd's watchdog only while every worker is alive."""
        interval = sdnotify.watchdog_interval()
        if interval is None:
            return
        self.stall_limit = 2 * interval  # WatchdogSec: what systemd itself allows for a sign of life
        thread = threading.Thread(target=self._watchdog, args=(interval,), name="braind-watchdog", daemon=True)
        thread.start()

    def _watchdog(self, interval: float) -> None:
        """The ping loop; a dead worker stops the pings so systemd restarts us."""
        while not self.stopping.wait(interval):
            if self.alive():
                sdnotify.notify("WATCHDOG=1")
            else:
                log.error("a worker thread died or is wedged; withholding the watchdog ping")

    def install_signals(self) -> None:
        """SIGTERM and SIGINT ask for a clean stop."""

        def handler(signum: int, frame: FrameType | None) -> None:
            log.info("signal %d: stopping", signum)
            self.stopping.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


def _has_files(path: Path) -> bool:
    """True when a directory holds anything (an empty one may be a mount point whose disk is away)."""
    with os.scandir(path) as entries:
        return any(True for _ in entries)


def _one_line(text: str) -> str:
    """A notification line may not hold a newline; a root's path might."""
    return text.replace("\n", "\\n")


def _settle_memory() -> None:
    """What start-up built lives as long as the daemon: frozen, no full collection walks it again.

    A recall makes a few thousand short-lived objects that reference counting frees; the cycle
    collector's default of a pass every 700 allocations would run several times per request.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(_YOUNG_OBJECTS, *gc.get_threshold()[1:])


def release_free_memory() -> None:
    """Give the C allocator's free pages back to the system once a start or a rebuild has settled.

    Building and reading the index ahead free far more than they keep, and glibc holds on to
    what was freed: about 35 MB at rest at 100,000 entries. Where the C library has no
    malloc_trim (musl), nothing is done.
    """
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)


def _raise_open_file_limit() -> None:
    """Each connection holds a descriptor: take the soft open-file limit up to the hard one, so 1,000+ fit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        log.warning("open-file limit left at %d (hard limit %d): %s", soft, hard, exc)
    else:
        log.debug("open-file limit raised from %d to %d", soft, hard)


def _identity(config: Config) -> str:
    """What the index was built from: the memory root and the configured projects."""
    return "|".join([str(config.memory_root), *(str(p) for p in config.projects)])
