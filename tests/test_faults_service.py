"""Service integration: the detached daemon, and systemd socket activation with its watchdog."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from braind.rpc.client import Client
from tests.conftest import REPO, Daemon, run_cli, today, wait_until
from tests.faults import assert_index_matches_files

SD_VARS = ("NOTIFY_SOCKET", "INVOCATION_ID", "LISTEN_PID", "LISTEN_FDS", "WATCHDOG_USEC", "WATCHDOG_PID")
SOCKET_ACTIVATE = shutil.which("systemd-socket-activate")
WATCHDOG_USEC = 1_000_000  # a ping every 0.5 s; a commit wedged for 1 s stops them


def plain_env() -> dict[str, str]:
    """This environment without anything that says systemd started us."""
    return {k: v for k, v in os.environ.items() if k not in SD_VARS}


# -- F16: braind start / serve --detach ---------------------------------------------------------------


@pytest.fixture(params=[("start",), ("serve", "--detach")], ids=["start", "serve-detach"])
def detached(request: pytest.FixtureRequest, make_daemon: Callable[..., Daemon]) -> Iterator[tuple[Daemon, int]]:
    """A daemon detached by the CLI; stopped with `braind stop` at the end."""
    d = make_daemon(start=False)
    d.write_config()
    started = run_cli(*request.param, "--json", config=d.config_path, env=plain_env())
    assert started.returncode == 0, started.stderr
    pid = int(json.loads(started.stdout)["pid"])
    try:
        yield d, pid
    finally:
        run_cli("stop", config=d.config_path, env=plain_env())


def fd_targets(pid: int) -> dict[int, str]:
    """What each open descriptor of a process points at."""
    found = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        except FileNotFoundError:
            continue
    return found


def unix_socket_inode(path: Path) -> str:
    """The inode of the listening Unix socket bound at path, from /proc/net/unix."""
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[7] == str(path):
            return fields[6]
    raise AssertionError(f"no socket bound at {path}")


def test_detached_daemon_keeps_its_fds_lock_umask_and_threads(detached: tuple[Daemon, int]) -> None:
    d, pid = detached
    assert d.call("status")["pid"] == pid
    assert "Umask:\t0077" in Path(f"/proc/{pid}/status").read_text()
    fds = fd_targets(pid)
    log = str(d.state / "braind.log")
    assert fds[0] == "/dev/null" and fds[1] == log and fds[2] == log
    assert f"socket:[{unix_socket_inode(d.socket)}]" in fds.values()  # the listening socket survived the fork
    pidfile = d.socket.parent / "braind.pid"
    assert pidfile.read_text().strip() == str(pid)
    with pidfile.open("rb") as f, pytest.raises(BlockingIOError):
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    generation = d.generation()
    d.call("brain_note", text="written to the detached daemon quail")  # the committer thread runs
    wait_until(lambda: d.generation() > generation, 15, "a commit by the detached daemon")
    with (d.root / "diary" / f"{today()}.md").open("a", encoding="utf-8") as f:
        f.write("[10:00] typed while detached, seen by the watcher thread\n")
    d.wait_recall("typed detached watcher", "typed while detached, seen by the watcher thread")
    assert d.call("status")["watcher"]["state"] not in ("stopped", "dead")
    assert (d.root / "diary" / f"{today()}.md").stat().st_mode & 0o777 == 0o600  # the umask applies
    assert "ready" in Path(log).read_text()
    stopped = run_cli("stop", config=d.config_path, env=plain_env())
    assert stopped.returncode == 0, stopped.stderr
    assert not pidfile.exists() and not d.socket.exists()
    assert_index_matches_files(d)


@pytest.mark.parametrize("variable", ["INVOCATION_ID", "NOTIFY_SOCKET"])
@pytest.mark.parametrize("how", [("start",), ("serve", "--detach")], ids=["start", "serve-detach"])
def test_detaching_is_refused_under_systemd(
    make_daemon: Callable[..., Daemon], variable: str, how: tuple[str, ...]
) -> None:
    d = make_daemon(start=False)
    d.write_config()
    value = "0123456789abcdef0123456789abcdef" if variable == "INVOCATION_ID" else str(d.base / "notify")
    result = run_cli(*how, config=d.config_path, env={**plain_env(), variable: value})
    assert result.returncode == 1 and "braind: error: under_systemd:" in result.stderr
    assert not d.socket.exists() and not (d.socket.parent / "braind.pid").exists()


# -- F17: systemd-socket-activate, sd_notify and the watchdog ----------------------------------------


class Notifications:
    """A datagram socket standing in for systemd's NOTIFY_SOCKET, collecting every line sent to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.05)
        self.lines: list[str] = []

    def drain(self) -> list[str]:
        """Receive everything waiting; return all lines so far."""
        while True:
            try:
                self.lines += self.sock.recv(4096).decode().split("\n")
            except TimeoutError:
                return self.lines

    def wait_for(self, line: str, after: int = 0, timeout: float = 30) -> int:
        """Wait until `line` arrives (after the first `after` lines); return its position."""
        wait_until(lambda: line in self.drain()[after:], timeout, f"{line} on the notify socket")
        return self.lines.index(line, after)

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


@pytest.fixture
def notifications(short_tmp: Path) -> Iterator[Notifications]:
    """The test's NOTIFY_SOCKET."""
    sink = Notifications(short_tmp / "notify")
    yield sink
    sink.close()


def socket_activated(d: Daemon, notify: Path) -> subprocess.Popen[bytes]:
    """Run `braind serve` under systemd-socket-activate: it listens, and execs braind on the first connection."""
    if SOCKET_ACTIVATE is None:
        pytest.skip("systemd-socket-activate is not installed (Debian package systemd)")
    d.write_config()
    d.socket.parent.mkdir(mode=0o700, parents=True)
    setenv = [
        f"--setenv={k}={v}" for k, v in {"NOTIFY_SOCKET": str(notify), "WATCHDOG_USEC": str(WATCHDOG_USEC)}.items()
    ]
    argv = [SOCKET_ACTIVATE, "--listen", str(d.socket), *setenv, "--setenv=BRAIND_LOG_LEVEL=INFO"]
    with d.log.open("ab") as log:
        d.proc = subprocess.Popen(
            [*argv, sys.executable, "-m", "braind", "serve", "--config", str(d.config_path)],
            stdout=log,
            stderr=log,
            env=plain_env(),
            cwd=REPO,
        )
    wait_until(lambda: "Listening on" in d.log_text(), 30, "systemd-socket-activate to listen")
    return d.proc


def program(pid: int) -> str:
    """The executable a process runs now."""
    return os.path.basename(os.readlink(f"/proc/{pid}/exe"))


def test_socket_activation_ready_watchdog_and_clean_stop(
    make_daemon: Callable[..., Daemon], notifications: Notifications
) -> None:
    d = make_daemon({"index": {"commit_ms": 60000}}, start=False)  # only SIGTERM commits the last note
    proc = socket_activated(d, notifications.path)
    assert program(proc.pid) == "systemd-socket-activate" and notifications.drain() == []
    with Client(d.socket, timeout=60) as first:  # the first connection starts braind, then is answered
        assert first.call("status")["pid"] == proc.pid
    assert program(proc.pid).startswith("python")
    ready = notifications.wait_for("READY=1")
    notifications.wait_for("WATCHDOG=1", after=ready)
    d.call("brain_note", text="committed by the stop sandpiper")
    assert d.call("status")["index"]["queued"] == 1
    stopping = len(notifications.drain())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0, d.log_text()[-3000:]
    d.proc = None
    notifications.wait_for("STOPPING=1", after=stopping)
    assert_index_matches_files(d)  # the queued note is in the index: SIGTERM committed it


def hold_write_lock(d: Daemon) -> int:
    """Take the Whoosh write lock of this month's partition, as a stuck writer would hold it."""
    lock = d.state / "partitions" / today()[:4] / "index" / "MAIN_WRITELOCK"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_a_wedged_committer_stops_the_watchdog_pings(
    make_daemon: Callable[..., Daemon], notifications: Notifications
) -> None:
    d = make_daemon(start=False)
    socket_activated(d, notifications.path)
    d.call("brain_note", text="before the wedge stint")
    wait_until(lambda: d.call("status")["index"]["queued"] == 0, 30, "the first commit")
    notifications.wait_for("WATCHDOG=1", after=notifications.wait_for("READY=1"))
    fd = hold_write_lock(d)
    try:
        d.call("brain_note", text="its commit waits for the lock stint")  # the committer blocks in Whoosh
        withheld = "withholding the watchdog ping"
        wait_until(lambda: withheld in d.log_text(), 30, "the watchdog to notice the wedged committer")
        quiet_from = len(notifications.drain())
        count = d.log_text().count(withheld)
        wait_until(lambda: d.log_text().count(withheld) >= count + 2, 30, "two more withheld pings")
        assert "WATCHDOG=1" not in notifications.drain()[quiet_from:]
        assert d.call("status")["state"] == "ready"  # the daemon still answers meanwhile
        assert "its commit waits for the lock stint" in d.recall("stint")
    finally:
        os.close(fd)  # unwedge
    resumed = len(notifications.drain())
    notifications.wait_for("WATCHDOG=1", after=resumed)
    wait_until(lambda: d.call("status")["index"]["queued"] == 0, 30, "the blocked commit to finish")
    assert_index_matches_files(d)
