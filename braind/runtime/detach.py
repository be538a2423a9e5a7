"""`braind start|stop`: run the daemon in the background with python-daemon and a flock pidfile."""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import time
from pathlib import Path
from types import TracebackType

from braind.errors import BraindError
from braind.runtime.statelock import lock_exclusively


class PidFile:
    """A pidfile held with flock for the daemon's lifetime; a stale file is simply re-locked."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> PidFile:
        fd = lock_exclusively(self.path, f"braind is already running (pidfile {self.path} is locked)")
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.fd is not None:
            os.unlink(self.path)
            os.close(self.fd)
            self.fd = None


def running_pid(path: Path) -> int | None:
    """The pid of a running daemon, known from a pidfile whose lock is held."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.read(fd, 32).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    finally:
        os.close(fd)
    return None


def stop(path: Path, timeout: float = 30.0) -> int:
    """Send SIGTERM to the daemon of a pidfile and wait until it is gone."""
    pid = running_pid(path)
    if pid is None:
        raise BraindError("not_running", f"braind is not running (no locked pidfile at {path})")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _exists(pid):
            return pid
        time.sleep(0.05)
    raise BraindError("timeout", f"braind (pid {pid}) did not stop within {timeout:.0f} s")


def _exists(pid: int) -> bool:
    """True while a process with this pid exists."""
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True
