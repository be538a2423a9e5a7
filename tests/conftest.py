"""Shared fixtures: a real daemon on a temporary root, reached over its real socket."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from braind.rpc.client import Client

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"


def wait_until(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll until predicate() is truthy; fail with a message when the timeout passes."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


class Daemon:
    """A `braind serve` subprocess with its temp root, state dir, socket and config."""

    def __init__(self, base: Path, overrides: dict[str, Any] | None = None) -> None:
        self.base = base
        self.root = base / "root"
        self.state = base / "state"
        self.socket = base / "run" / "braind.sock"
        self.config_path = base / "braind.yaml"
        self.settings: dict[str, Any] = {
            "memory_root": str(self.root),
            "state_dir": str(self.state),
            "socket": str(self.socket),
            "watcher": {"quiet_ms": 50, "max_wait_ms": 300},
            "index": {"commit_ms": 100},
        }
        for key, value in (overrides or {}).items():
            if isinstance(value, dict):
                self.settings.setdefault(key, {}).update(value)
            else:
                self.settings[key] = value
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = base / "daemon.log"
        self.env: dict[str, str] = {}  # added to the daemon's environment

    def write_config(self) -> None:
        """Write the YAML config the daemon is started with."""
        self.config_path.write_text(yaml.safe_dump(self.settings), encoding="utf-8")

    def start(self, wait: bool = True) -> None:
        """Run `python -m braind serve` and wait until status says ready."""
        self.write_config()
        env = {**os.environ, "BRAIND_LOG_LEVEL": "DEBUG", **self.env}
        env.pop("NOTIFY_SOCKET", None)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "braind", "serve", "--config", str(self.config_path)],
                stdout=log,
                stderr=log,
                env=env,
            )
        if wait:
            wait_until(self.ready, 60, f"daemon ready (log: {self.log_text()[-2000:]})")

    def ready(self) -> bool:
        """True once the socket answers and reconcile is done."""
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"daemon exited with {self.proc.returncode}: {self.log_text()[-3000:]}")
        try:
            return bool(self.call("status")["state"] == "ready")
        except Exception:
            return False

    def call(self, method: str, **params: Any) -> Any:
        """One request on a fresh connection."""
        with Client(self.socket, timeout=30) as client:
            return client.call(method, **params)

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.proc is None:
            return 0
        self.proc.terminate()
        try:
            code = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(10)
        self.proc = None
        return code

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def log_text(self) -> str:
        """What the daemon logged so far."""
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def generation(self) -> int:
        """The index generation (bumped by every commit)."""
        return int(self.call("status")["generation"])

    def recall(self, query: str, **params: Any) -> list[str]:
        """The texts of the entries recalled as holding every word of a query (the full matches)."""
        hits = self.call("brain_recall", query=query, **params)["hits"]
        return [hit["text"] for hit in hits if hit["match"] == "all"]

    def wait_recall(self, query: str, text: str, timeout: float = 15.0) -> None:
        """Wait until a recall of query returns text (editor writes land after the debounce)."""
        wait_until(lambda: text in self.recall(query), timeout, f"{text!r} recalled by {query!r}")

    def wait_gone(self, query: str, text: str, timeout: float = 15.0) -> None:
        """Wait until a recall of query no longer returns text."""
        wait_until(lambda: text not in self.recall(query), timeout, f"{text!r} gone from {query!r}")

    def rejected(self) -> dict[str, str]:
        """path -> reason of every rejected file in status."""
        return {p["path"]: p["reason"] for p in self.call("status")["rejected"]}


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short temp dir: AF_UNIX socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="bd", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def make_daemon(short_tmp: Path) -> Iterator[Callable[..., Daemon]]:
    """A factory for daemons on fresh roots; all are stopped at the end."""
    started: list[Daemon] = []

    def factory(overrides: dict[str, Any] | None = None, start: bool = True, name: str = "d") -> Daemon:
        base = short_tmp / name
        base.mkdir()
        daemon = Daemon(base, overrides)
        started.append(daemon)
        if start:
            daemon.start()
        return daemon

    yield factory
    for daemon in started:
        daemon.stop()


@pytest.fixture
def daemon(make_daemon: Callable[..., Daemon]) -> Daemon:
    """One running daemon on an empty root."""
    return make_daemon()


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves threads behind in the test process."""
    before = set(threading.enumerate())
    yield
    wait_until(
        lambda: not [t for t in threading.enumerate() if t not in before and t.is_alive()],
        10,
        "threads started by the test to end",
    )


def today() -> str:
    """Today's date in local time, as the daemon names diary files."""
    import datetime as dt

    return dt.datetime.now().astimezone().date().isoformat()


def yesterday() -> str:
    """Yesterday's date in local time, inside every recall window."""
    import datetime as dt

    return (dt.datetime.now().astimezone().date() - dt.timedelta(days=1)).isoformat()


def days_ago(n: int) -> str:
    """The local date n days back, so that tests never depend on the calendar."""
    import datetime as dt

    return (dt.datetime.now().astimezone().date() - dt.timedelta(days=n)).isoformat()


def run_cli(*args: str, config: Path | None = None, check: bool = False, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run the installed CLI entry point the way a person would."""
    cmd = [sys.executable, "-m", "braind", *args] + (["--config", str(config)] if config else [])
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.run(cmd, text=True, check=check, timeout=120, **kw)
