"""The Debouncer on a fake clock: quiet windows, the max_wait bound, batching and order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braind.ingest.debounce import Debouncer

# Whole milliseconds as the clock unit keep the arithmetic exact.
QUIET = 150.0
MAX_WAIT = 1000.0


@pytest.fixture
def deb() -> Debouncer:
    """A debouncer with the watcher's default windows, in milliseconds."""
    return Debouncer(QUIET, MAX_WAIT)


def test_nothing_is_due_when_nothing_was_marked(deb: Debouncer) -> None:
    assert deb.due(10_000.0) == []
    assert deb.next_deadline() is None
    assert deb.pending() == 0


def test_a_path_is_due_once_its_quiet_window_has_passed(deb: Debouncer) -> None:
    deb.mark("/r/a.md", 0.0)
    assert deb.due(149.0) == []
    assert deb.due(150.0) == ["/r/a.md"]


def test_due_forgets_what_it_hands_out(deb: Debouncer) -> None:
    deb.mark("/r/a.md", 0.0)
    assert deb.due(200.0) == ["/r/a.md"]
    assert deb.due(5_000.0) == []
    assert deb.pending() == 0


def test_a_new_mark_restarts_the_quiet_window(deb: Debouncer) -> None:
    deb.mark("/r/a.md", 0.0)
    deb.mark("/r/a.md", 100.0)
    assert deb.due(150.0) == []
    assert deb.due(250.0) == ["/r/a.md"]


def test_continuous_marks_are_still_due_every_max_wait(deb: Debouncer) -> None:
    handed_out = []
    for now in range(0, 3_500, 50):  # a file appended every 50 ms, forever
        deb.mark("/r/log.md", float(now))
        if deb.due(float(now)):
            handed_out.append(now)
    assert handed_out == [1_000, 2_050, 3_100]


def test_the_max_wait_bound_counts_from_the_first_mark_since_the_last_hand_out(deb: Debouncer) -> None:
    deb.mark("/r/a.md", 0.0)
    deb.mark("/r/a.md", 900.0)
    assert deb.next_deadline() == 1_000.0
    assert deb.due(1_000.0) == ["/r/a.md"]
    deb.mark("/r/a.md", 1_001.0)
    assert deb.next_deadline() == 1_151.0


def test_paths_that_settled_come_out_in_one_batch(deb: Debouncer) -> None:
    for path in ("/r/a.md", "/r/b.md", "/r/c.md"):
        deb.mark(path, 0.0)
    deb.mark("/r/late.md", 100.0)
    assert deb.due(200.0) == ["/r/a.md", "/r/b.md", "/r/c.md"]
    assert deb.due(250.0) == ["/r/late.md"]


def test_order_is_first_mark_order_and_remarks_do_not_reorder(deb: Debouncer) -> None:
    deb.mark("/r/z.md", 0.0)
    deb.mark("/r/a.md", 1.0)
    deb.mark("/r/m.md", 2.0)
    deb.mark("/r/z.md", 3.0)
    assert deb.due(1_000.0) == ["/r/z.md", "/r/a.md", "/r/m.md"]


def test_a_directory_and_a_file_inside_it_are_independent(deb: Debouncer) -> None:
    deb.mark("/r/logs", 0.0)
    deb.mark("/r/logs/x.md", 100.0)
    assert deb.pending() == 2
    assert deb.due(150.0) == ["/r/logs"]
    assert deb.due(250.0) == ["/r/logs/x.md"]


def test_next_deadline_is_the_earliest_pending_deadline(deb: Debouncer) -> None:
    deb.mark("/r/a.md", 50.0)
    deb.mark("/r/b.md", 10.0)
    assert deb.next_deadline() == 160.0
    deb.due(160.0)
    assert deb.next_deadline() == 200.0


def test_an_out_of_order_clock_never_moves_a_deadline_back(deb: Debouncer) -> None:
    deb.mark("/r/a.md", 100.0)
    deb.mark("/r/a.md", 40.0)
    assert deb.next_deadline() == 250.0


def test_a_zero_quiet_window_hands_paths_out_at_once() -> None:
    deb = Debouncer(0.0, 1.0)
    deb.mark("/r/a.md", 5.0)
    assert deb.due(5.0) == ["/r/a.md"]


@pytest.mark.parametrize(("quiet", "max_wait"), [(-1.0, 1.0), (0.1, 0.0), (0.1, -2.0)])
def test_impossible_windows_are_refused(quiet: float, max_wait: float) -> None:
    with pytest.raises(ValueError, match="quiet must be"):
        Debouncer(quiet, max_wait)


@given(st.lists(st.integers(min_value=0, max_value=int(QUIET) - 1), min_size=1, max_size=60))
def test_a_burst_is_due_exactly_at_its_deadline(gaps: list[int]) -> None:
    """Never early, never late: min(last mark + quiet, first mark + max_wait) for marks closer than quiet."""
    deb = Debouncer(QUIET, MAX_WAIT)
    first = float(gaps[0])
    now = last = 0.0
    for gap in gaps:
        now += gap
        if now >= first + MAX_WAIT:
            break
        assert deb.due(now) == []
        deb.mark("/r/a.md", now)
        last = now
    deadline = min(last + QUIET, first + MAX_WAIT)
    assert deb.next_deadline() == deadline
    assert deb.due(deadline - 1) == []
    assert deb.due(deadline) == ["/r/a.md"]
