"""The systemd service protocol: readiness and watchdog notifications, socket activation.

Standard library only, so `braind serve` needs no libsystemd. Everything here is a
no-op outside systemd, which is how the daemon also runs in a terminal or in tests.
"""

from __future__ import annotations

import os
import socket

# sd_listen_fds(3): passed file descriptors start right after stdin, stdout, stderr.
LISTEN_FDS_START = 3
_LISTEN_VARS = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")


def notify(*lines: str) -> bool:
    """Tell systemd about our state (READY=1, STATUS=..., WATCHDOG=1); False when unsupervised."""
    address = _notify_address(os.environ.get("NOTIFY_SOCKET", ""))
    if address is None or not lines:
        return False
    if any("\n" in line for line in lines):
        raise ValueError("a notification line must not contain a newline")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto("\n".join(lines).encode(), address)
    except OSError:
        return False
    return True


def _notify_address(value: str) -> str | None:
    """The socket address in $NOTIFY_SOCKET: a path, or an abstract name written '@name'."""
    if value.startswith("@") and len(value) > 1:
        return "\0" + value[1:]
    if value.startswith("/"):
        return value
    return None


def listen_sockets() -> list[socket.socket]:
    """The sockets passed by socket activation, in order; empty when started another way."""
    try:
        count = _listen_count()
    finally:
        for name in _LISTEN_VARS:  # so processes we spawn do not think the fds are theirs
            os.environ.pop(name, None)
    return [_adopt(fd) for fd in range(LISTEN_FDS_START, LISTEN_FDS_START + count)]


def _listen_count() -> int:
    """LISTEN_FDS when LISTEN_PID names this process, else 0."""
    if not _is_our_pid(os.environ.get("LISTEN_PID")):
        return 0
    try:
        count = int(os.environ.get("LISTEN_FDS", ""))
    except ValueError:
        return 0
    return max(count, 0)


def _adopt(fd: int) -> socket.socket:
    """Wrap a passed descriptor, closing it on exec as systemd leaves it inheritable."""
    os.set_inheritable(fd, False)
    return socket.socket(fileno=fd)


def watchdog_interval() -> float | None:
    """Seconds between WATCHDOG=1 pings (half of WatchdogSec=), or None when no watchdog is armed."""
    pid = os.environ.get("WATCHDOG_PID")
    if pid is not None and not _is_our_pid(pid):
        return None
    try:
        usec = int(os.environ.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    return usec / 2_000_000 if usec > 0 else None


def under_systemd() -> bool:
    """True when systemd started this very process, so `braind start` must not detach from it."""
    env = os.environ
    if env.get("NOTIFY_SOCKET") or _is_our_pid(env.get("LISTEN_PID")):
        return True
    if not env.get("INVOCATION_ID"):
        return False
    # Terminals that run as user services pass INVOCATION_ID on to their shells;
    # SYSTEMD_EXEC_PID (systemd 248+) names the process systemd actually started.
    exec_pid = env.get("SYSTEMD_EXEC_PID")
    return exec_pid is None or _is_our_pid(exec_pid)


def _is_our_pid(value: str | None) -> bool:
    """Whether an environment variable holds this process's pid."""
    try:
        return value is not None and int(value) == os.getpid()
    except ValueError:
        return False
