"""`braind start`: fork, detach with python-daemon, and wait until the daemon is ready."""

from __future__ import annotations

import logging
import os
import select
import sys
import time
from pathlib import Path
from typing import TextIO

import daemon

from braind.config import Config
from braind.errors import BraindError
from braind.runtime import sdnotify
from braind.runtime.detach import PidFile, running_pid


def pidfile_path(config: Config) -> Path:
    """The pidfile sits beside the socket, in the 0700 runtime directory."""
    return config.socket.parent / "braind.pid"


def log_path(config: Config) -> Path:
    """Where a detached daemon logs."""
    return config.state_dir / "braind.log"


def start(config: Config, timeout: float) -> int:
    """Start a detached daemon and return its pid once it answers, or raise why not."""
    if sdnotify.under_systemd():
        raise BraindError("under_systemd", "refusing to detach under systemd; use `systemctl --user start braind`")
    pid = running_pid(pidfile_path(config))
    if pid is not None:
        raise BraindError("already_running", f"braind is already running (pid {pid})")
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_fd)
        _daemonize(config, write_fd)
    os.close(write_fd)
    os.waitpid(child, 0)
    return _await_ready(read_fd, timeout, config)


def _await_ready(read_fd: int, timeout: float, config: Config) -> int:
    """Read the daemon's one-line report: 'ready PID' or 'error reason: message'."""
    deadline = time.monotonic() + timeout
    data = b""
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        while b"\n" not in data and time.monotonic() < deadline:
            ready, _, _ = select.select([pipe], [], [], max(0.0, deadline - time.monotonic()))
            chunk = pipe.read(4096) if ready else b""
            if ready and not chunk:
                break
            data += chunk or b""
    line = data.decode("utf-8", "replace").strip()
    if line.startswith("ready "):
        return int(line.split()[1])
    if line.startswith("error "):
        reason, _, message = line[6:].partition(": ")
        raise BraindError(reason, message)
    raise BraindError("start_failed", f"braind did not become ready within {timeout:.0f} s; see {log_path(config)}")


def _daemonize(config: Config, write_fd: int) -> None:
    """In the forked child: detach (umask 0077, pidfile), run the daemon, report readiness."""
    code = 0
    try:
        config.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        log = open_log(log_path(config))
        context = daemon.DaemonContext(
            umask=0o077,
            pidfile=PidFile(pidfile_path(config)),
            files_preserve=[write_fd, log],
            stdout=log,
            stderr=log,
            working_directory="/",
        )
        with context:
            _run_detached(config, write_fd)
    except BaseException as exc:
        _report(write_fd, f"error {getattr(exc, 'reason', 'start_failed')}: {getattr(exc, 'message', exc)}")
        code = 1
    os._exit(code)


def open_log(path: Path) -> TextIO:
    """The detached daemon's log, private like everything braind creates (0600, also when it existed)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)
    return open(fd, "a", encoding="utf-8")


def _run_detached(config: Config, write_fd: int) -> None:
    """Start the daemon, tell the parent, then serve until stopped."""
    from braind.runtime.daemon import Daemon

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = Daemon(config)
    server.install_signals()
    try:
        server.start()
        _report(write_fd, f"ready {os.getpid()}")
        server.stopping.wait()
    finally:
        server.stop()


def _report(fd: int, line: str) -> None:
    """Write one line to the parent and close the pipe; ignore a parent that went away."""
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
        os.close(fd)
    except OSError:
        pass
