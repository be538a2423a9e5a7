"""The pool of worker threads that run request handlers off the event loop."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable


class Workers:
    """A fixed pool of threads that run handlers off the event loop."""

    def __init__(self, count: int) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._run, name="braind-worker", daemon=True) for _ in range(count)]

    def start(self) -> None:
        """Start every worker."""
        for thread in self._threads:
            thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        """Queue a job for the next free worker."""
        self._jobs.put(job)

    def stop(self, timeout: float) -> int:
        """Let the workers finish their jobs and end, waiting up to `timeout`; how many are still running."""
        started = [thread for thread in self._threads if thread.ident is not None]
        for _ in started:
            self._jobs.put(None)
        deadline = time.monotonic() + timeout
        for thread in started:
            thread.join(max(0.0, deadline - time.monotonic()))
        return sum(thread.is_alive() for thread in started)

    def _run(self) -> None:
        """Run jobs until told to stop."""
        while (job := self._jobs.get()) is not None:
            job()
