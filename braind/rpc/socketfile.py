"""The socket's place on disk: a private directory, and a stale socket told from a live one."""

from __future__ import annotations

import logging
import os
import socket
import stat
from pathlib import Path

from braind.errors import Unavailable

log = logging.getLogger(__name__)

PROBE_TIMEOUT = 1.0


def prepare_directory(directory: Path) -> None:
    """Create the socket's directory 0700, or check an existing one is ours and make it private."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = directory.stat()
    if info.st_uid != os.getuid():
        raise Unavailable(
            "unsafe_directory", f"{directory} belongs to uid {info.st_uid}; the socket needs a directory of its own"
        )
    if info.st_mode & stat.S_ISVTX:
        raise Unavailable("unsafe_directory", f"{directory} is a shared directory; put the socket in a private one")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(directory, 0o700)


def clear_stale(path: Path) -> None:
    """Remove a socket left by a dead daemon; refuse a live one, and never touch a non-socket."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise Unavailable("not_a_socket", f"{path} exists and is not a socket; refusing to replace it")
    if is_live(path):
        raise Unavailable("already_running", f"another braind is already listening on {path}")
    log.info("removing stale socket %s", path)
    path.unlink(missing_ok=True)


def is_live(path: Path) -> bool:
    """Whether something accepts connections on the socket; a full backlog counts as alive."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(PROBE_TIMEOUT)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except TimeoutError:
            return True
        return True
