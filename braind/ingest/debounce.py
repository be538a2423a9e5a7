"""Per-path debouncing for the watcher: pure bookkeeping on an injected clock, no threads, no I/O."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Mark:
    """When a path was first and last marked since it was last handed out."""

    first: float
    last: float


class Debouncer:
    """Holds dirty paths until their writes settle, so a burst of events becomes one look at the disk.

    A path is due once `quiet` seconds passed since its last mark, or `max_wait` seconds since its
    first mark, so a file appended to forever is still looked at regularly. Paths come out in the
    order they were first marked.
    """

    def __init__(self, quiet: float, max_wait: float) -> None:
        if quiet < 0 or max_wait <= 0:
            raise ValueError(f"quiet must be >= 0 and max_wait > 0, got {quiet!r} and {max_wait!r}")
        self._quiet = quiet
        self._max_wait = max_wait
        self._marks: dict[str, _Mark] = {}

    def mark(self, path: str, now: float) -> None:
        """Record that `path` changed at `now`, restarting its quiet window."""
        mark = self._marks.get(path)
        if mark is None:
            self._marks[path] = _Mark(now, now)
        else:
            mark.last = max(mark.last, now)

    def due(self, now: float) -> list[str]:
        """Hand out and forget every path whose deadline has passed, oldest first mark first."""
        ready = [path for path, mark in self._marks.items() if self._deadline(mark) <= now]
        for path in ready:
            del self._marks[path]
        return ready

    def next_deadline(self) -> float | None:
        """When the earliest pending path becomes due, so a scheduler knows how long to sleep."""
        return min((self._deadline(mark) for mark in self._marks.values()), default=None)

    def pending_under(self, directory: str) -> bool:
        """Whether a path at or below a directory is still waiting."""
        below = directory.rstrip("/") + "/"
        return any(path == directory or path.startswith(below) for path in self._marks)

    def pending(self) -> int:
        """How many paths are waiting."""
        return len(self._marks)

    def _deadline(self, mark: _Mark) -> float:
        """The quiet window ends it, unless the first mark is older than max_wait allows."""
        return min(mark.last + self._quiet, mark.first + self._max_wait)
