"""The daemon under test: `python -m braind serve` on a copy of a corpus, with its own config and short socket."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from braind.errors import BraindError
from braind.rpc.client import Client

READY_POLL_MIN_S, READY_POLL_MAX_S = 0.02, 0.5
LONG_TIMEOUT_S = 3600.0


class DaemonFailed(RuntimeError):
    """The daemon exited or never became ready."""


class BenchDaemon:
    """One braind process on a root under `base`, spawned and stopped by the bench driver."""

    def __init__(self, base: Path, root: Path, name: str) -> None:
        self.base = base / name
        self.root = root
        self.state = self.base / "state"
        self.socket = self.base / "s.sock"
        self.config = self.base / "braind.yaml"
        self.log = self.base / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The daemon's process id."""
        if self.proc is None:
            raise DaemonFailed("the daemon is not running")
        return self.proc.pid

    def spawn(self) -> float:
        """Start the daemon with an empty state dir; returns the perf_counter time of the spawn."""
        self.base.mkdir(parents=True)
        settings = {"memory_root": str(self.root), "state_dir": str(self.state), "socket": str(self.socket)}
        self.config.write_text(yaml.safe_dump(settings), encoding="utf-8")
        return self._launch()

    def relaunch(self) -> float:
        """Start again after stop(), on the same state dir and its index; returns the perf_counter time."""
        if self.proc is not None:
            raise DaemonFailed("the daemon is still running")
        return self._launch()

    def _launch(self) -> float:
        """Start `braind serve` with this config; returns the perf_counter time of the spawn."""
        env = {key: value for key, value in os.environ.items() if key not in ("NOTIFY_SOCKET", "LISTEN_FDS")}
        started = time.perf_counter()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "braind", "serve", "--config", str(self.config)],
                stdout=log,
                stderr=log,
                env=env,
            )
        return started

    def wait_ready(self, timeout: float) -> float:
        """Poll `status` until the daemon says ready; returns the perf_counter time it first did.

        The poll interval grows with the wait (1 % of it, 20 ms to 500 ms), so
        the polls cost the daemon little and still time it to about 1 %.
        """
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            self._check_alive()
            if self._ready():
                return time.perf_counter()
            time.sleep(min(READY_POLL_MAX_S, max(READY_POLL_MIN_S, (time.monotonic() - started) / 100)))
        raise DaemonFailed(f"not ready after {timeout:g} s; log tail:\n{self.log_tail()}")

    def _ready(self) -> bool:
        """True once status answers with state ready."""
        try:
            return bool(self.call("status").get("state") == "ready")
        except BraindError:
            return False

    def _check_alive(self) -> None:
        """Fail loudly, with the log, when the daemon has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            raise DaemonFailed(f"the daemon exited with {self.proc.returncode}; log tail:\n{self.log_tail()}")

    def client(self, timeout: float = LONG_TIMEOUT_S) -> Client:
        """A new client with its own kept connection."""
        return Client(self.socket, timeout=timeout)

    def call(self, method: str, **params: Any) -> Any:
        """One request on a fresh connection."""
        with self.client() as client:
            return client.call(method, **params)

    def stop(self) -> None:
        """SIGTERM and wait; SIGKILL if it does not stop in time."""
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def remove(self) -> None:
        """Stop, then delete the state dir (the index) and the config."""
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)

    def log_tail(self, size: int = 3000) -> str:
        """The end of the daemon's log."""
        return self.log.read_text(encoding="utf-8", errors="replace")[-size:] if self.log.exists() else ""
