"""One daemon per state directory and per memory root: two would write the same files at once.

The socket only guards its own path: a second daemon given another socket (or started after
the first one's socket file was removed) would otherwise run beside the first. Two daemons with
different state directories (a second config, a system unit beside a user unit) would still
share a memory root, so each root has its own lock, `<root>/.braind/daemon.lock`, taken at
start and before the first write to a root first seen later. Each lock file names its holder
(pid, state directory, socket), so the daemon refused can say who has it.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from braind.errors import Unavailable
from braind.files.roots import identity
from braind.files.validate import open_dir
from braind.model.lines import printable
from braind.model.roots import Root

LOCK_NAME = "braind.lock"
ROOT_LOCK = (".braind", "daemon.lock")


class StateLock:
    """An exclusive flock on a file in the state directory, held while the daemon runs."""

    def __init__(self, state_dir: Path, owner: Mapping[str, object] | None = None) -> None:
        self.path = state_dir / LOCK_NAME
        self.owner = owner or {}
        self._fd: int | None = None

    def __enter__(self) -> StateLock:
        what = f"another braind is using the state directory {self.path.parent}"
        self._fd = lock_owned(self.path, what, self.owner)
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


def lock_owned(path: Path, held: str, owner: Mapping[str, object]) -> int:
    """lock_exclusively, writing the holder (pid and `owner`) into the file; a refusal names who holds it."""
    try:
        fd = lock_exclusively(path, held)
    except Unavailable as exc:
        raise Unavailable(exc.reason, f"{exc.message} ({holder(path)})") from None
    os.ftruncate(fd, 0)
    os.write(fd, (json.dumps({"pid": os.getpid(), **owner}) + "\n").encode("utf-8"))
    return fd


def holder(path: Path) -> str:
    """Who a lock file says holds it: pid, state directory and socket, as far as it says."""
    try:
        said = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        said = None
    if not isinstance(said, dict):
        return "holder unknown"
    names = {"pid": "pid", "state_dir": "state dir", "socket": "socket"}
    return printable(", ".join(f"{names[k]} {said[k]}" for k in names if k in said) or "holder unknown")


class RootLocks:
    """The lock of every memory root this daemon writes; taken once per root, again if the root was replaced."""

    def __init__(self, owner: Mapping[str, object]) -> None:
        self.owner = owner
        self.claimed: Callable[[Root], None] = lambda root: None  # once the lock is held (start-up clean-up)
        self._held: dict[Path, tuple[int, str]] = {}
        self._lock = threading.RLock()

    def claim(self, root: Root) -> None:
        """Hold the root's lock before writing it; `already_running` when another daemon has it."""
        now = identity(root.path)
        with self._lock:
            held = self._held.get(root.path)
            if held is not None and held[1] == now:
                return
            if held is not None:
                os.close(held[0])
                del self._held[root.path]
            self._held[root.path] = (self._take(root), now)
            self.claimed(root)

    def _take(self, root: Root) -> int:
        """Create <root>/.braind/ (refusing links) and lock its daemon.lock."""
        os.close(open_dir(root.path, ROOT_LOCK[:1], create=True))
        what = f"another braind is using the memory root {root.path}"
        return lock_owned(root.path.joinpath(*ROOT_LOCK), what, self.owner)

    def release(self) -> None:
        """Let every root go (the daemon is stopping); the files stay for the next daemon to lock."""
        with self._lock:
            for fd, _ in self._held.values():
                os.close(fd)
            self._held.clear()
