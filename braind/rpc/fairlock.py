"""A lock handed to its waiters in the order they came: reads are served first come, first served.

Python runs one thread at a time, so eight reads running at once finish no sooner
than eight run one after another; they only take turns at random, and a read that
keeps losing its turn waits many times its own length. `threading.Lock` makes no
promise about which waiter goes next; this lock hands itself to the oldest.
"""

from __future__ import annotations

import threading
from collections import deque
from types import TracebackType


class FairLock:
    """A mutual-exclusion lock that wakes its waiters first in, first out."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiters: deque[threading.Lock] = deque()
        self._held = False

    def __enter__(self) -> FairLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()

    @property
    def waiting(self) -> int:
        """How many threads wait for the lock."""
        with self._guard:
            return len(self._waiters)

    def acquire(self) -> None:
        """Take the lock, after every thread that asked for it earlier."""
        with self._guard:
            if not self._held:
                self._held = True
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        turn.acquire()  # released by the holder that hands the lock to us; we hold it from then on

    def release(self) -> None:
        """Hand the lock to the oldest waiter, or free it when no one waits."""
        with self._guard:
            if not self._held:
                raise RuntimeError("release of an unheld FairLock")
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._held = False
