"""The one place that wires config, index, reconcile, watcher and socket, in order."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from braind import sdnotify
from braind.config import Config
from braind.errors import BraindError
from braind.methods import build, dispatcher
from braind.partitioned import PartitionedIndex
from braind.problems import Problems
from braind.roots import Root
from braind.server import SocketServer
from braind.service import Memory
from braind.sync import Syncer
from braind.watcher import Watcher

log = logging.getLogger("braind")


class Daemon:
    """Start order: index → watcher → socket → reconcile → READY=1; stop in reverse."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.problems = Problems()
        self.index = PartitionedIndex(config.state_dir, _identity(config), config.index.commit_ms)
        self.syncer = Syncer(self.index, config.files, self.problems)
        self.memory = Memory(config, self.index, self.syncer, self.problems)
        self.watcher = Watcher(
            [r.path for r in self.memory.roots()],
            self.on_due,
            self.on_rescan,
            quiet=config.watcher.quiet_ms / 1000,
            max_wait=config.watcher.max_wait_ms / 1000,
            rescan_seconds=config.watcher.rescan_seconds,
        )
        self.memory.health = self.watcher.health
        self.memory.root_created = self.watcher.check_roots
        self.server: SocketServer | None = None
        self.stopping = threading.Event()
        self.state = "starting"

    def run(self) -> None:
        """Serve until SIGTERM or SIGINT, then shut down cleanly."""
        self._install_signals()
        try:
            self.start()
            self.stopping.wait()
        finally:
            self.stop()

    def start(self) -> None:
        """Bring every part up in dependency order and tell systemd when ready."""
        fresh = self.index.open()
        self.index.start()
        self.watcher.start()
        self.server = self._server()
        self.server.start()
        self.state = "reconciling"
        if fresh:
            self._initial_build()
        sdnotify.notify("STATUS=reconciling (stat diff)")
        report = self.memory.reconcile()
        self.index.commit()
        self.state = "ready"
        log.info("ready: %s", report.as_dict())
        sdnotify.notify("READY=1", f"STATUS=ready: {self.index.stats().get('entries', 0)} entries")
        self._start_watchdog()

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
        server = SocketServer(
            self.config.socket,
            self.dispatch_with_state(),
            max_connections=self.config.server.max_connections,
            read_timeout=float(self.config.server.read_timeout_seconds),
            listen_socket=passed[0] if passed else None,
        )
        server.bind()
        return server

    def dispatch_with_state(self) -> Callable[[str, dict[str, Any]], Any]:
        """The method dispatcher, with the daemon's lifecycle state added to `status`."""
        dispatch = dispatcher(build(self.memory))

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
        self.index.close()
        self.state = "stopped"
        log.info("stopped")

    def on_due(self, paths: list[Path]) -> None:
        """Watcher callback: make the index match each due path."""
        for path in paths:
            root = self._root_of(path)
            if root is not None:
                self.syncer.sync_path(root, path)

    def on_rescan(self, root_path: Path | None, reason: str) -> None:
        """Watcher callback: reconcile one root or all after an overflow, a root change or the timer."""
        log.info("rescan (%s) of %s", reason, root_path or "all roots")
        roots = [r for r in self.memory.roots() if root_path is None or r.path == root_path]
        self.memory.reconcile(roots)

    def _root_of(self, path: Path) -> Root | None:
        """The watched root that holds a path."""
        for root in self.memory.roots():
            if root.contains(path):
                return root
        return None

    def alive(self) -> bool:
        """True while the watcher, its scheduler and the index writer all run."""
        return self.watcher.alive() and self.index.alive()

    def _start_watchdog(self) -> None:
        """Ping systemd's watchdog only while every worker is alive."""
        interval = sdnotify.watchdog_interval()
        if interval is None:
            return
        thread = threading.Thread(target=self._watchdog, args=(interval,), name="braind-watchdog", daemon=True)
        thread.start()

    def _watchdog(self, interval: float) -> None:
        """The ping loop; a dead worker stops the pings so systemd restarts us."""
        while not self.stopping.wait(interval):
            if self.alive():
                sdnotify.notify("WATCHDOG=1")
            else:
                log.error("a worker thread died; withholding the watchdog ping")

    def _install_signals(self) -> None:
        """SIGTERM and SIGINT ask for a clean stop."""

        def handler(signum: int, frame: FrameType | None) -> None:
            log.info("signal %d: stopping", signum)
            self.stopping.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


def _identity(config: Config) -> str:
    """What the index was built from: the memory root and the configured projects."""
    return "|".join([str(config.memory_root), *(str(p) for p in config.projects)])
