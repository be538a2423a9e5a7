"""The registry of rejected files and skipped lines that `status` reports."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from braind.model.lines import Problem

log = logging.getLogger(__name__)


class Problems:
    """Current problems per path; logged once when they appear, dropped when fixed."""

    def __init__(self) -> None:
        self._by_path: dict[str, tuple[Problem, ...]] = {}
        self._lock = threading.Lock()

    def set(self, path: str, problems: Iterable[Problem]) -> None:
        """Replace what is known about one path (an empty list clears it)."""
        new = tuple(problems)
        with self._lock:
            old = self._by_path.pop(path, ())
            if new:
                self._by_path[path] = new
        for problem in new:
            if problem not in old:
                log.warning("rejected %s", problem)

    def of(self, path: str) -> tuple[Problem, ...]:
        """What is known about one path."""
        with self._lock:
            return self._by_path.get(path, ())

    def clear_under(self, prefix: str) -> None:
        """Forget every path below a directory that went away."""
        with self._lock:
            for path in [p for p in self._by_path if p == prefix or p.startswith(prefix + "/")]:
                del self._by_path[path]

    def files(self) -> list[Problem]:
        """Rejected files, sorted by path."""
        with self._lock:
            return sorted((p for ps in self._by_path.values() for p in ps if p.line is None), key=lambda p: p.path)

    def lines(self) -> list[Problem]:
        """Skipped lines, sorted by path and line."""
        with self._lock:
            found = [p for ps in self._by_path.values() for p in ps if p.line is not None]
        return sorted(found, key=lambda p: (p.path, p.line or 0))
