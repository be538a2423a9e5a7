"""The lock that orders reads hands itself to its waiters in the order they came, one at a time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from braind.rpc.fairlock import FairLock

WAIT_S = 10.0


def _until(check: Callable[[], bool], what: str) -> None:
    """Wait for a condition another thread brings about, failing after WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.001)


def test_waiters_get_the_lock_in_the_order_they_asked() -> None:
    lock = FairLock()
    order: list[int] = []
    lock.acquire()

    def take(i: int) -> None:
        with lock:
            order.append(i)

    threads = []
    for i in reversed(range(12)):  # started in an order unlike their numbers' sorted order
        thread = threading.Thread(target=take, args=(i,))
        thread.start()
        threads.append(thread)
        queued = len(threads)
        _until(lambda: lock.waiting == queued, f"waiter {i} to queue")  # noqa: B023 (called before the next turn)
    lock.release()
    for thread in threads:
        thread.join(WAIT_S)
    assert order == list(reversed(range(12)))
    assert lock.waiting == 0


def test_only_one_thread_holds_it_at_a_time() -> None:
    lock = FairLock()
    inside = 0
    most = 0
    entered = 0

    def work() -> None:
        nonlocal inside, most, entered
        for _ in range(200):
            with lock:
                inside += 1
                most = max(most, inside)
                time.sleep(0)  # give the others every chance to barge in
                entered += 1
                inside -= 1

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert (most, entered, inside) == (1, 1600, 0)


def test_a_free_lock_is_taken_at_once_and_can_be_taken_again() -> None:
    lock = FairLock()
    with lock:
        assert lock.waiting == 0
    with lock:
        pass
    lock.acquire()
    lock.release()


def test_releasing_a_lock_no_one_holds_is_an_error() -> None:
    lock = FairLock()
    with pytest.raises(RuntimeError, match="unheld"):
        lock.release()
    with lock:
        pass
    with pytest.raises(RuntimeError, match="unheld"):
        lock.release()
