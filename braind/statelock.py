"""One daemon per state directory: two that shared one would index the same files into the same index.

The socket only guards its own path: a second daemon given another socket (or started after
the first one's socket file was removed) would otherwise run beside the first.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from braind.errors import Unavailable

LOCK_NAME = "braind.lock"


class StateLock:
    """An exclusive flock on a file in the state directory, held while the daemon runs."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_NAME
        self._fd: int | None = None

    def __enter__(self) -> StateLock:
        self._fd = lock_exclusively(self.path, f"another braind is using the state directory {self.path.parent}")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        """Release the lock; the file stays, so that a later daemon locks the same one."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def lock_exclusively(path: Path, held: str) -> int:
    """Open (or create) a private lock file and flock it; `already_running` saying `held` when another has it."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Unavailable("already_running", held) from None
    return fd
