"""Crashes and durability: kill -9, failing writes, a damaged index, a missing root, offline edits.

Every test drives the real daemon over its real socket and ends with `assert_index_matches_files`.
Crash moments are drawn from a seeded generator (BRAIND_FAULT_SEED, default 7), so a failing round
can be replayed; the soak variants (`-m soak`) run five times as many rounds.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from braind.errors import BraindError
from braind.files import durable
from braind.rpc.client import Client
from tests.conftest import Daemon, days_ago, today, wait_until
from tests.faults import assert_index_matches_files, fill, tiny_tmpfs

SEED = int(os.environ.get("BRAIND_FAULT_SEED", "7"))
CRAWL_DAYS = 60  # diary files in the root the initial crawl reads
LINES_PER_DAY = 4
BIG_DAY_LINES = 150  # today's diary is large, so that every commit rewrites many documents


# -- A1: kill -9 during the initial crawl, an index commit, and bursts of brain_note -------------------


@dataclass
class Ledger:
    """What the clients were told: acknowledged notes (text -> diary path) and every note ever sent."""

    acked: dict[str, str] = field(default_factory=dict)
    sent: set[str] = field(default_factory=set)
    checked: set[str] = field(default_factory=set)


def seed_root(d: Daemon, days: int = CRAWL_DAYS, ballast: int = BIG_DAY_LINES) -> None:
    """A root with many diary days (the crawl) and a large diary for today (slow commits)."""
    diary = d.root / "diary"
    diary.mkdir(parents=True)
    first = dt.date.today() - dt.timedelta(days=days + 1)
    for n in range(days):
        day = (first + dt.timedelta(days=n)).isoformat()
        lines = "".join(f"[09:{k:02d}] crawl day {n} line {k} pelican\n" for k in range(LINES_PER_DAY))
        (diary / f"{day}.md").write_text(lines, encoding="utf-8")
    big = "".join(f"[08:00] ballast line {k} heron\n" for k in range(ballast))
    (diary / f"{today()}.md").write_text(big, encoding="utf-8")


def crash_kill(d: Daemon) -> None:
    """SIGKILL the daemon right now."""
    d.kill()


def note_writer(d: Daemon, rnd: int, ledger: Ledger, reached: threading.Event, target: int) -> None:
    """Send notes back to back on one connection until the daemon dies; record each acknowledgement."""
    try:
        with Client(d.socket, timeout=30) as client:
            for i in range(10_000):
                text = f"burst r{rnd} n{i} osprey"
                ledger.sent.add(text)
                result = client.call("brain_note", text=text)
                ledger.acked[text] = result["path"]
                if i + 1 >= target:
                    reached.set()
    except (BraindError, OSError):
        return  # the daemon was killed mid-request: this note is unacknowledged
    finally:
        reached.set()


def burst_round(d: Daemon, rng: random.Random, rnd: int, ledger: Ledger) -> None:
    """kill -9 in the middle of a burst of notes, after a random number of acknowledgements."""
    target = rng.randint(0, 12)
    reached = threading.Event()
    if target == 0:
        reached.set()
    writer = threading.Thread(target=note_writer, args=(d, rnd, ledger, reached, target))
    writer.start()
    assert reached.wait(30), "the burst never reached its target"
    time.sleep(rng.random() * 0.004)  # the kill moment: a random point inside the next request
    crash_kill(d)
    writer.join(30)
    assert not writer.is_alive()


def write_lock_held(lock: Path) -> bool:
    """True while another process (the daemon's index writer) holds the Whoosh write lock."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def commit_round(d: Daemon, rng: random.Random, rnd: int, ledger: Ledger) -> None:
    """kill -9 while the index writer holds its lock: inside a commit of today's large partition."""
    text = f"commit r{rnd} egret"
    ledger.sent.add(text)
    ledger.acked[text] = d.call("brain_note", text=text)["path"]
    lock = d.state / "partitions" / today()[:4] / "index" / "MAIN_WRITELOCK"
    deadline = time.monotonic() + 15
    while not write_lock_held(lock):
        assert time.monotonic() < deadline, "no commit started after a note"
        time.sleep(0.0005)
    time.sleep(rng.random() * 0.005)  # the kill moment: a random point inside the commit
    crash_kill(d)


def crawl_progress(d: Daemon) -> tuple[int, str]:
    """Files loaded so far by the initial crawl, and the daemon's state; (-1, '') before it answers."""
    try:
        status = d.call("status")
    except (BraindError, OSError):
        return -1, ""
    return (status["reindex"] or {}).get("done", 0), status["state"]


def crawl_round(d: Daemon, rng: random.Random, rnd: int, ledger: Ledger) -> None:
    """kill -9 during the initial crawl of a fresh index, after a random number of files."""
    d.stop()
    shutil.rmtree(d.state, ignore_errors=True)
    target = rng.randint(0, CRAWL_DAYS + 1)
    d.start(wait=False)
    deadline = time.monotonic() + 60
    while True:
        done, state = crawl_progress(d)
        if done >= target or state == "ready":
            break
        assert d.proc is not None and d.proc.poll() is None, d.log_text()[-2000:]
        assert time.monotonic() < deadline, "the crawl made no progress"
        time.sleep(0.002)  # leave the daemon the CPU between two looks at its progress
    crash_kill(d)


def restart(d: Daemon) -> None:
    """Start the daemon and wait for ready, polling finely: a hundred restarts add up."""
    d.start(wait=False)
    deadline = time.monotonic() + 60
    while not d.ready():
        assert time.monotonic() < deadline, f"not ready: {d.log_text()[-2000:]}"
        time.sleep(0.005)


def check_after_restart(d: Daemon, ledger: Ledger) -> None:
    """Every acknowledged note is on disk once and recallable; a torn tail is reported, never repaired."""
    days = {Path(p) for p in ledger.acked.values()}
    status = d.call("status")
    for day in days:
        text = day.read_text(encoding="utf-8")
        counts = Counter(line[8:] for line in text.splitlines())
        for note, path in ledger.acked.items():
            if path == str(day):
                assert counts[note] == 1, f"acknowledged note {note!r} appears {counts[note]} times in {day}"
        strays = [n for n, c in counts.items() if c and ("osprey" in n or "egret" in n) and n not in ledger.acked]
        assert all(n in ledger.sent and counts[n] == 1 for n in strays), strays
        if not text.endswith("\n"):
            torn = [p for p in status["skipped_lines"] if p["path"] == str(day) and p["reason"] == "torn_line"]
            assert torn and torn[0]["line"] == text.count("\n") + 1, status["skipped_lines"]
    for note in sorted(set(ledger.acked) - ledger.checked):
        assert note in d.recall(note, limit=500), f"acknowledged note {note!r} is not recallable after restart"
        ledger.checked.add(note)


ROUNDS: dict[str, Callable[[Daemon, random.Random, int, Ledger], None]] = {
    "crawl": crawl_round,
    "commit": commit_round,
    "burst": burst_round,
}


def kill_rounds(d: Daemon, counts: dict[str, int], seed: int) -> Ledger:
    """Run the rounds in a seeded order; before each (but a crawl), restart and check what survived."""
    rng = random.Random(seed)
    schedule = [kind for kind, n in counts.items() for _ in range(n)]
    rng.shuffle(schedule)
    ledger = Ledger()
    seed_root(d)
    for rnd, kind in enumerate(schedule):
        if kind != "crawl":
            restart(d)
            check_after_restart(d, ledger)
        ROUNDS[kind](d, rng, rnd, ledger)
    restart(d)
    check_after_restart(d, ledger)
    return ledger


def run_kill_rounds(make_daemon: Callable[..., Daemon], scale: int) -> None:
    """The A1 scenario with scale x (20 crawl + 25 commit + 55 burst) rounds."""
    d = make_daemon(start=False)
    ledger = kill_rounds(d, {"crawl": 20 * scale, "commit": 25 * scale, "burst": 55 * scale}, SEED + scale)
    assert len(ledger.acked) > 100 * scale  # the rounds really acknowledged notes before dying
    assert d.call("status")["skipped_lines"] == []
    assert_index_matches_files(d)


def test_kill_9_during_crawl_commit_and_note_bursts_loses_nothing(make_daemon: Callable[..., Daemon]) -> None:
    run_kill_rounds(make_daemon, 1)


@pytest.mark.soak
def test_kill_9_soak(make_daemon: Callable[..., Daemon]) -> None:
    run_kill_rounds(make_daemon, 5)


def test_torn_last_line_is_reported_and_left_as_it_is(daemon: Daemon) -> None:
    """A write cut short by a crash leaves a last line with no newline: status says so, nothing repairs it."""
    acked = [daemon.call("brain_note", text=f"before the tear {n} kestrel")["path"] for n in range(3)]
    daemon.kill()
    day = Path(acked[0])
    with day.open("ab") as f:
        f.write(b"[10:4")  # the first bytes of a line whose write() was cut short
    torn = day.read_bytes()
    daemon.start()
    lines = torn.count(b"\n") + 1
    skipped = daemon.call("status")["skipped_lines"]
    assert [(p["path"], p["line"], p["reason"]) for p in skipped] == [(str(day), lines, "torn_line")]
    assert sorted(daemon.recall("tear kestrel")) == [f"before the tear {n} kestrel" for n in range(3)]
    assert day.read_bytes() == torn  # reported, not repaired or truncated
    daemon.call("brain_note", text="after the tear kestrel")
    assert day.read_bytes().startswith(torn + b"\n[")  # the fragment stays a line of its own
    assert [p["reason"] for p in daemon.call("status")["skipped_lines"]] == ["bad_line"]
    assert "after the tear kestrel" in daemon.recall("after tear")
    assert_index_matches_files(daemon)


# -- A2: write → fsync(file) → (replace → fsync(dir)) → reply; EIO and ENOSPC fail the request once --------


def strace_daemon(d: Daemon, log: Path) -> subprocess.Popen[bytes]:
    """Attach strace to every thread of the running daemon; return once requests are being traced."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed: the syscall order of the real daemon cannot be observed")
    assert d.proc is not None
    calls = "trace=openat,write,fsync,fdatasync,close,rename,renameat,renameat2,sendto,sendmsg"
    tracer = subprocess.Popen(
        [strace, "-f", "-qq", "-s", "120", "-e", calls, "-o", str(log), "-p", str(d.proc.pid)],
        stderr=subprocess.DEVNULL,
    )
    wait_until(lambda: d.call("status") and log.exists() and "sendto(" in log.read_text(), 30, "strace attached")
    return tracer


def stopped_threads(pid: int) -> list[str]:
    """Threads of a process left stopped (T) or in a tracing stop (t)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            if task.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                found.append(task.name)
    return found


def resume(pid: int) -> None:
    """After strace detaches, make sure no thread stays stopped (a detach can race the attach's SIGSTOP)."""

    def running() -> bool:
        os.kill(pid, signal.SIGCONT)
        return not stopped_threads(pid)

    wait_until(running, 15, "every daemon thread to run again after strace detached")


def syscalls_by_thread(log: Path) -> dict[str, list[str]]:
    """strace -f output as each thread's calls in order, 'unfinished'/'resumed' halves joined."""
    threads: dict[str, list[str]] = {}
    for line in log.read_text(errors="replace").splitlines():
        tid, _, call = line.partition(" ")
        call = call.strip()
        calls = threads.setdefault(tid, [])
        if call.startswith("<..."):
            calls[-1] = calls[-1].removesuffix(" <unfinished ...>") + call.split("resumed>", 1)[-1]
        else:
            calls.append(call)
    return threads


def syscall_lines(log: Path) -> dict[str, list[tuple[int, int]]]:
    """For each thread, the log lines on which each of its calls began and returned, indexed as syscalls_by_thread."""
    lines: dict[str, list[tuple[int, int]]] = {}
    for number, line in enumerate(log.read_text(errors="replace").splitlines()):
        tid, _, call = line.partition(" ")
        spans = lines.setdefault(tid, [])
        if call.strip().startswith("<..."):
            spans[-1] = (spans[-1][0], number)
        else:
            spans.append((number, number))
    return lines


def first_reply(threads: dict[str, list[str]], lines: dict[str, list[tuple[int, int]]], after: int) -> int:
    """The log line on which the first reply begun after line `after` began, whichever thread sent it.

    Replies are written by the server's event loop, not by the worker thread that wrote and synced,
    so the order that matters is the one strace saw across threads.
    """
    starts = [
        lines[tid][n][0]
        for tid, calls in threads.items()
        for n, call in enumerate(calls)
        if call.startswith("sendto(") and "result" in call and lines[tid][n][0] > after
    ]
    assert starts, f"no reply sent after line {after}"
    return min(starts)


def first(calls: list[str], predicate: Callable[[str], bool], after: int = -1) -> int:
    """The index of the first call after `after` that matches; fails the test when there is none."""
    for number in range(after + 1, len(calls)):
        if predicate(calls[number]):
            return number
    raise AssertionError(f"no matching call after #{after} in {calls[after + 1 : after + 12]}")


def fd_of(call: str) -> str:
    """The descriptor a call returned ('openat(...) = 7' -> '7')."""
    return call.rsplit("=", 1)[1].strip().split()[0]


def test_real_daemon_writes_then_fsyncs_then_replies(daemon: Daemon) -> None:
    """strace on the real daemon: an append is write, fsync, reply; a rewrite is temp, fsync, exchange, fsync(dir)."""
    daemon.call("brain_note", text="warm up the diary")
    daemon.call("memory_write_root", section="Order", content="the file exists, so the next write replaces it")
    log = daemon.base / "strace.log"
    tracer = strace_daemon(daemon, log)
    try:
        daemon.call("brain_note", text="ordered append heron")
        daemon.call("memory_write_root", section="Order", content="ordered section append heron")
        daemon.call("memory_correct", scope="root", section="Order", content="ordered rewrite heron", approved=True)
    finally:
        tracer.terminate()
        tracer.wait(30)
        assert daemon.proc is not None
        resume(daemon.proc.pid)
    threads, lines = syscalls_by_thread(log), syscall_lines(log)
    tid, append = next((t, c) for t, c in threads.items() if any("ordered append heron\\n" in x for x in c))
    at = first(append, lambda c: c.startswith("write(") and "ordered append heron\\n" in c)
    diary_fd = append[at].split("(", 1)[1].split(",", 1)[0]
    synced = first(append, lambda c: c.startswith(f"fsync({diary_fd})") and c.endswith("= 0"), at)
    assert first_reply(threads, lines, lines[tid][at][0]) > lines[tid][synced][1]
    tid, grow = next((t, c) for t, c in threads.items() if any("ordered section append heron\\n" in x for x in c))
    at = first(grow, lambda c: c.startswith("write(") and "ordered section append heron\\n" in c)
    memory_fd = grow[at].split("(", 1)[1].split(",", 1)[0]
    assert "O_APPEND" in grow[max(i for i in range(at) if grow[i].endswith(f"= {memory_fd}"))]
    synced = first(grow, lambda c: c.startswith(f"fsync({memory_fd})") and c.endswith("= 0"), at)
    assert first_reply(threads, lines, lines[tid][at][0]) > lines[tid][synced][1]
    assert not any("braind-tmp" in c for c in grow)  # the last section grows in place: no rewrite
    tid, rewrite = next((t, c) for t, c in threads.items() if any(".MEMORY.md.braind-tmp" in x for x in c))
    opened = first(rewrite, lambda c: c.startswith("openat(") and ".MEMORY.md.braind-tmp" in c)
    tmp_fd = fd_of(rewrite[opened])
    wrote = first(rewrite, lambda c: c.startswith(f"write({tmp_fd},") and "ordered rewrite heron" in c, opened)
    synced = first(rewrite, lambda c: c.startswith(f"fsync({tmp_fd})") and c.endswith("= 0"), wrote)
    renamed = first(rewrite, lambda c: c.startswith("rename") and '"MEMORY.md"' in c, synced)
    dir_fd = rewrite[renamed].split("(", 1)[1].split(",", 1)[0]
    dir_synced = first(rewrite, lambda c: c.startswith(f"fsync({dir_fd})") and c.endswith("= 0"), renamed)
    assert first_reply(threads, lines, lines[tid][renamed][0]) > lines[tid][dir_synced][1]
    assert daemon.stop() == 0, f"{stopped_threads_text(daemon)}\n{warnings(daemon)[-3000:]}"
    assert_index_matches_files(daemon)


def stopped_threads_text(d: Daemon) -> str:
    """For a failure message: the state of every daemon thread."""
    return "daemon gone" if d.proc is None else str(Path(f"/proc/{d.proc.pid}/status").read_text()[:400])


class OsCalls:
    """Records the file operations braind.files.durable makes below one directory, and fails one of them on cue.

    Mocked because a disk that answers EIO cannot be had on a CI machine; ENOSPC is also tested for
    real on a tiny tmpfs below.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, base: Path) -> None:
        self.base = str(base)
        self.log: list[tuple[str, str]] = []
        self.fail: tuple[str, str, int] | None = None  # (operation, file name, errno)
        self.short: str | None = None  # a file name whose write() writes only half
        for name in ("write", "fsync", "replace", "close", "ftruncate"):
            monkeypatch.setattr(os, name, self._wrap(name, getattr(os, name)))

    def _wrap(self, op: str, real: Callable[..., Any]) -> Callable[..., Any]:
        """A stand-in for one os function that logs calls below base and injects the failure."""

        def call(*args: Any, **kw: Any) -> Any:
            where = self._where(op, args)
            if where is None:
                return real(*args, **kw)
            self.log.append((op, where))
            if self.fail is not None and self.fail[:2] == (op, plain(where)):
                raise OSError(self.fail[2], os.strerror(self.fail[2]))
            if op == "write" and self.short == Path(where).name:
                return real(args[0], bytes(args[1])[: len(args[1]) // 2])
            return real(*args, **kw)

        return call

    def _where(self, op: str, args: tuple[Any, ...]) -> str | None:
        """The path an operation touches when it is below base (an fd is resolved through /proc)."""
        if op == "replace":
            return str(args[1]) if not str(args[1]).startswith("/") or str(args[1]).startswith(self.base) else None
        try:
            path = os.readlink(f"/proc/self/fd/{args[0]}").removesuffix(" (deleted)")
        except OSError:
            return None
        return path if path.startswith(self.base) else None

    def ops(self, name: str) -> list[str]:
        """The operations made on one file name, in order."""
        return [op for op, where in self.log if plain(where) == name]


def plain(where: str) -> str:
    """A file's name, a braind temp name without its per-write suffix (`.x.braind-tmp-<pid>-<n>` → `.x.braind-tmp`)."""
    return re.sub(r"(\.braind-(?:tmp|old))-\d+-\d+$", r"\1", Path(where).name)


@pytest.fixture
def dir_fd(tmp_path: Path) -> Iterator[int]:
    """A directory descriptor to write into, as the daemon holds one."""
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def test_append_order_is_write_then_fsync(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dir_fd: int) -> None:
    calls = OsCalls(monkeypatch, tmp_path)
    assert durable.append_line(dir_fd, "2026-01-02.md", "[10:00] new day").created is True
    assert durable.append_line(dir_fd, "2026-01-02.md", "[10:01] next line").created is False
    assert calls.ops("2026-01-02.md") == ["write", "fsync", "close", "write", "fsync", "close"]
    assert calls.log[3] == ("fsync", str(tmp_path))  # the new file's directory entry, after the file
    assert calls.log.count(("fsync", str(tmp_path))) == 1


def test_an_append_seen_half_done_gets_no_empty_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dir_fd: int
) -> None:
    """Another process's line, visible up to a page boundary when braind looks, is finished a moment later."""
    day = tmp_path / "2026-01-02.md"
    day.write_text("[09:00] first\n[09:01] an editor's line, its first page")
    finished = []

    def the_rest_arrives(seconds: float) -> None:  # the other write completes while braind waits
        if not finished:
            with open(day, "a") as other:
                other.write(" and the rest\n")
            finished.append(seconds)

    monkeypatch.setattr(durable.time, "sleep", the_rest_arrives)
    durable.append_line(dir_fd, day.name, "[10:00] braind's note")
    whole = "[09:01] an editor's line, its first page and the rest"
    assert day.read_text() == f"[09:00] first\n{whole}\n[10:00] braind's note\n"
    assert finished


def test_a_file_that_keeps_growing_mid_line_is_not_waited_for_forever(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dir_fd: int
) -> None:
    """Another process appending without newlines at every look: the note still goes in, on a line of its own."""
    day = tmp_path / "2026-01-02.md"
    day.write_text("[09:00] first\nno newline yet")
    pauses = []

    def more_without_a_newline(seconds: float) -> None:
        with open(day, "a") as other:
            other.write(" more")
        pauses.append(seconds)

    monkeypatch.setattr(durable.time, "sleep", more_without_a_newline)
    durable.append_line(dir_fd, day.name, "[10:00] note")
    assert day.read_text().endswith(" more\n[10:00] note\n")
    assert 1 < len(pauses) <= 10


def test_a_file_saved_without_a_final_newline_gets_one_before_the_note(tmp_path: Path, dir_fd: int) -> None:
    day = tmp_path / "2026-01-02.md"
    day.write_text("[09:00] saved without a newline")
    durable.append_line(dir_fd, day.name, "[10:00] note")
    assert day.read_text() == "[09:00] saved without a newline\n[10:00] note\n"


def test_replace_order_is_write_fsync_replace_fsync_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dir_fd: int
) -> None:
    (tmp_path / "MEMORY.md").write_text("## old\n")
    calls = OsCalls(monkeypatch, tmp_path)
    durable.replace_file(dir_fd, "MEMORY.md", b"## new\n")
    assert [op for op, _ in calls.log] == ["write", "fsync", "close", "replace", "fsync"]
    assert calls.log[-1] == ("fsync", str(tmp_path)) and calls.log[-2] == ("replace", "MEMORY.md")
    assert (tmp_path / "MEMORY.md").read_text() == "## new\n"


FAILURES = [
    pytest.param("write", errno.EIO, id="write-EIO"),
    pytest.param("write", errno.ENOSPC, id="write-ENOSPC"),
    pytest.param("fsync", errno.EIO, id="fsync-EIO"),
    pytest.param("fsync", errno.ENOSPC, id="fsync-ENOSPC"),
]


@pytest.mark.parametrize(("op", "code"), FAILURES)
@pytest.mark.parametrize("existing", [True, False], ids=["existing", "new"])
def test_append_error_fails_once_and_leaves_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dir_fd: int, op: str, code: int, existing: bool
) -> None:
    day = tmp_path / "2026-01-02.md"
    if existing:
        day.write_bytes(b"[09:00] already there\n")
    calls = OsCalls(monkeypatch, tmp_path)
    calls.fail = (op, day.name, code)
    with pytest.raises(BraindError) as err:
        durable.append_line(dir_fd, day.name, "[10:00] lost to a failing disk")
    assert err.value.reason == "io_error" and os.strerror(code) in err.value.message
    assert calls.ops(day.name).count(op) == 1  # never retried on the same descriptor
    assert calls.ops(day.name)[-1] == "close"
    assert (day.read_bytes() == b"[09:00] already there\n") if existing else not day.exists()


def test_short_write_fails_and_is_cut_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dir_fd: int) -> None:
    """A write() that stops half-way (a disk filling up) fails the request and leaves no torn line."""
    day = tmp_path / "2026-01-02.md"
    day.write_bytes(b"[09:00] already there\n")
    calls = OsCalls(monkeypatch, tmp_path)
    calls.short = day.name
    with pytest.raises(BraindError) as err:
        durable.append_line(dir_fd, day.name, "[10:00] half of this would be torn")
    assert err.value.reason == "io_error" and "short write" in err.value.message
    assert calls.ops(day.name) == ["write", "ftruncate", "close"]
    assert day.read_bytes() == b"[09:00] already there\n"


@pytest.mark.parametrize(("op", "code"), FAILURES)
def test_replace_error_before_the_rename_leaves_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dir_fd: int, op: str, code: int
) -> None:
    (tmp_path / "MEMORY.md").write_text("## old\n")
    calls = OsCalls(monkeypatch, tmp_path)
    calls.fail = (op, ".MEMORY.md.braind-tmp", code)
    with pytest.raises(BraindError) as err:
        durable.replace_file(dir_fd, "MEMORY.md", b"## new\n")
    assert err.value.reason == "io_error"
    assert calls.ops(".MEMORY.md.braind-tmp").count(op) == 1 and "replace" not in calls.ops("MEMORY.md")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MEMORY.md"]
    assert (tmp_path / "MEMORY.md").read_text() == "## old\n"


def test_replace_dir_fsync_error_fails_the_request(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dir_fd: int
) -> None:
    """After the rename the new text is whole in place; a failing directory fsync still fails the request."""
    (tmp_path / "MEMORY.md").write_text("## old\n")
    calls = OsCalls(monkeypatch, tmp_path)
    calls.fail = ("fsync", tmp_path.name, errno.EIO)
    with pytest.raises(BraindError) as err:
        durable.replace_file(dir_fd, "MEMORY.md", b"## new\n")
    assert err.value.reason == "io_error"
    assert calls.ops(tmp_path.name) == ["fsync"]
    assert (tmp_path / "MEMORY.md").read_text() in ("## old\n", "## new\n")


def test_enospc_on_a_real_full_disk_fails_the_note_and_leaves_the_file(make_daemon: Callable[..., Daemon]) -> None:
    """The real daemon on a full tmpfs: the note fails with io_error, the diary keeps its bytes, then recovers."""
    d = make_daemon(start=False)
    with tiny_tmpfs(d.root, "16k"):
        (d.root / "diary").mkdir()
        day = d.root / "diary" / f"{today()}.md"
        day.write_bytes(b"".join(b"[09:00] filler line %05d\n" % n for n in range(170))[:4000] + b"\n")
        d.start()
        fill(d.root / "ballast")
        before = day.read_bytes()
        with pytest.raises(BraindError) as err:
            d.call("brain_note", text="this note does not fit " + "z" * 400)
        assert err.value.reason == "io_error", err.value
        assert day.read_bytes() == before and d.call("status")["state"] == "ready"
        (d.root / "ballast").unlink()
        d.call("brain_note", text="room again for a plover")
        assert d.recall("plover") == ["room again for a plover"]
        assert_index_matches_files(d)


# -- A3: a damaged, deleted or incompatible index is moved aside and rebuilt while the daemon answers ------


def month_index(d: Daemon) -> Path:
    """The Whoosh directory of this month's partition."""
    return d.state / "partitions" / today()[:4] / "index"


def edit_manifest(path: Path, **changes: object) -> None:
    """Rewrite some keys of an index manifest, as another braind version would have written it."""
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}), encoding="utf-8")


def truncate_segments(d: Daemon) -> None:
    """Cut every segment of this month's partition in half."""
    for seg in month_index(d).glob("*.seg"):
        os.truncate(seg, seg.stat().st_size // 2)


def garble_tocs(d: Daemon) -> None:
    """Overwrite the table of contents of this month's partition."""
    for toc in month_index(d).glob("*.toc"):
        toc.write_bytes(b"garbage" * 20)


DAMAGE: dict[str, Callable[[Daemon], object]] = {
    "truncated segment": truncate_segments,
    "garbage toc": garble_tocs,
    "missing manifest": lambda d: (d.state / "manifest.json").unlink(),
    "missing partition manifest": lambda d: (month_index(d).parent / "manifest.json").unlink(),
    "index deleted": lambda d: shutil.rmtree(d.state / "partitions"),
    "schema changed": lambda d: edit_manifest(d.state / "manifest.json", schema_version=-1),
    "analyzer changed": lambda d: edit_manifest(d.state / "manifest.json", analyzer_version=-1),
    "whoosh changed": lambda d: edit_manifest(d.state / "manifest.json", whoosh_version="2.7.4"),
    "partition whoosh changed": lambda d: edit_manifest(
        month_index(d).parent / "manifest.json", whoosh_version="2.7.4"
    ),
}
MOVED_ASIDE = {  # where the unusable index goes, for inspection
    "truncated segment": "partitions/{year}/index.old-",
    "garbage toc": "partitions/{year}/index.old-",
    "missing manifest": "partitions.old-",
    "missing partition manifest": "partitions/{year}/index.old-",
    "schema changed": "partitions.old-",
    "analyzer changed": "partitions.old-",
    "whoosh changed": "partitions.old-",
    "partition whoosh changed": "partitions/{year}/index.old-",
}


def aside(d: Daemon, pattern: str) -> list[Path]:
    """The moved-aside index directories matching a MOVED_ASIDE pattern."""
    parent, _, prefix = pattern.format(year=today()[:4]).rpartition("/")
    base = d.state / parent if parent else d.state
    return [p for p in base.iterdir() if p.name.startswith(prefix)] if base.is_dir() else []


def start_watching_states(d: Daemon) -> list[dict[str, Any]]:
    """Start the daemon and record every status answered until it is ready."""
    d.start(wait=False)
    seen: list[dict[str, Any]] = []

    def ready() -> bool:
        assert d.proc is not None and d.proc.poll() is None, d.log_text()[-2000:]
        with contextlib.suppress(BraindError, OSError):
            seen.append(d.call("status"))
        return bool(seen) and seen[-1]["state"] == "ready"

    wait_until(ready, 60, "ready after the damage")
    return seen


REBUILD_DAYS = 150  # diary days, all inside a 365-day window
REBUILD_BALLAST = 20_000  # lines of today's diary: enough that a rebuild takes a moment to watch


def crawl_root(d: Daemon) -> None:
    """Enough entries that a rebuild takes a noticeable moment."""
    seed_root(d, REBUILD_DAYS, REBUILD_BALLAST)


def test_damage_while_stopped_is_moved_aside_and_rebuilt(make_daemon: Callable[..., Daemon]) -> None:
    d = make_daemon(start=False)
    crawl_root(d)
    d.start()
    notes = [d.call("brain_note", text=f"survivor {n} grebe")["path"] and f"survivor {n} grebe" for n in range(3)]
    for kind, damage in DAMAGE.items():
        d.stop()
        damage(d)
        seen = start_watching_states(d)
        assert any(s["index_state"] == "rebuilding" for s in seen), f"{kind}: no status answered during the rebuild"
        assert seen[-1]["index_state"] == "ready", kind
        assert sorted(d.recall("survivor grebe")) == notes, kind
        assert d.call("brain_recall", query="pelican", days=365, limit=500)["total"] == REBUILD_DAYS * LINES_PER_DAY
        if kind in MOVED_ASIDE:
            assert aside(d, MOVED_ASIDE[kind]), f"{kind}: the old index was not moved aside"
    assert_index_matches_files(d)


def test_identity_change_while_stopped_starts_a_new_index(make_daemon: Callable[..., Daemon]) -> None:
    """Another memory_root is another index: the old one is moved aside and the new root indexed."""
    d = make_daemon()
    d.call("brain_note", text="written in the first root avocet")
    d.stop()
    moved = d.base / "root2"
    shutil.copytree(d.root, moved)
    (moved / "diary" / f"{days_ago(5)}.md").write_text("[10:00] only in the second root ibis\n", encoding="utf-8")
    d.settings["memory_root"] = str(moved)
    d.start()
    assert aside(d, "partitions.old-")
    assert d.recall("ibis second", days=365) == ["only in the second root ibis"]
    assert d.call("brain_recall", query="avocet")["hits"][0]["path"].startswith(str(moved))
    assert_index_matches_files(d)


RUNNING_DAMAGE = ["truncated segment", "garbage toc", "missing manifest", "index deleted"]


@pytest.mark.parametrize("kind", RUNNING_DAMAGE)
def test_damage_while_running_is_repaired_while_answering(daemon: Daemon, kind: str) -> None:
    notes = [f"kept through damage {n} shrike" for n in range(4)]
    for note in notes:
        daemon.call("brain_note", text=note)
    wait_until(lambda: daemon.call("status")["index"]["queued"] == 0, 15, "the notes to be committed")
    DAMAGE[kind](daemon)
    with contextlib.suppress(BraindError):  # a read of a damaged segment is answered with index_damaged
        daemon.recall("shrike")
    daemon.call("brain_note", text="written after the damage shrike")  # its commit meets the damage
    notes.append("written after the damage shrike")

    def repaired() -> bool:
        status = daemon.call("status")  # every status is answered throughout
        assert status["state"] == "ready" and status["index_state"] in ("ready", "damaged", "rebuilding")
        with contextlib.suppress(BraindError):
            return status["index_state"] == "ready" and sorted(daemon.recall("shrike")) == sorted(notes)
        return False

    wait_until(lambda: "index rebuilt after damage" in daemon.log_text(), 30, f"a repair after {kind}")
    wait_until(repaired, 30, f"the index repaired after {kind}")
    assert "the index is damaged" in daemon.log_text(), warnings(daemon)
    if kind in ("truncated segment", "garbage toc"):
        assert aside(daemon, MOVED_ASIDE[kind])
    daemon.call("brain_note", text="and one more after the repair shrike")
    assert "and one more after the repair shrike" in daemon.recall("shrike")
    assert_index_matches_files(daemon)


def warnings(d: Daemon) -> str:
    """The daemon's log without its debug chatter, for failure messages."""
    return "\n".join(line for line in d.log_text().splitlines() if line.startswith(("INFO", "WARNING", "ERROR")))


def test_root_replaced_while_running_is_rescanned(daemon: Daemon) -> None:
    """A root whose identity changes (another directory moved in at its path) is rescanned in full."""
    daemon.call("brain_note", text="in the original root plover")
    other = daemon.base / "other"
    shutil.copytree(daemon.root, other)
    for day in (other / "diary").iterdir():
        day.unlink()
    (other / "diary" / f"{today()}.md").write_text("[11:00] only in the new root curlew\n", encoding="utf-8")
    daemon.root.rename(daemon.base / "gone")
    other.rename(daemon.root)
    daemon.wait_recall("curlew", "only in the new root curlew")
    daemon.wait_gone("plover", "in the original root plover")
    assert_index_matches_files(daemon)


# -- A4: a missing, empty or unmounted root at start purges nothing ---------------------------------------


@pytest.mark.parametrize("how", ["missing", "empty"])
def test_unavailable_root_at_start_purges_nothing(make_daemon: Callable[..., Daemon], how: str) -> None:
    """An unmounted root looks missing, or empty (the bare mount point): the index keeps its entries."""
    d = make_daemon()
    for n in range(3):
        d.call("brain_note", text=f"kept while away {n} dunlin")
    entries = d.call("status")["index"]["entries"]
    d.stop()
    away = d.base / "away"
    d.root.rename(away)
    if how == "empty":
        d.root.mkdir()
    d.start()
    status = d.call("status")
    assert (status["roots"][0]["available"], status["roots"][0]["reason"]) == (False, how)
    assert status["index"]["entries"] == entries
    assert len(d.recall("dunlin away")) == 3
    with pytest.raises(BraindError) as err:
        d.call("reindex")
    assert err.value.reason == "root_unavailable" and len(d.recall("dunlin away")) == 3
    if how == "empty":
        d.root.rmdir()
    away.rename(d.root)  # the mount is back
    with (d.root / "diary" / f"{today()}.md").open("a", encoding="utf-8") as f:
        f.write("[12:00] written once the root returned dunlin\n")
    d.wait_recall("dunlin", "written once the root returned dunlin")
    wait_until(lambda: d.call("status")["roots"][0]["available"], 15, "the root to be available again")
    assert len(d.recall("dunlin away")) == 3
    assert_index_matches_files(d)


# -- A5: every kind of offline change is seen at the next start -------------------------------------------


LOG_ENTRY = (
    "---\nname: {name}\ntype: reference\ndescription: {name} notes\n---\n\n"
    "# {name}\n\n## [{word}] {day} 10:00\n{word} body\n"
)


def test_offline_changes_are_all_reflected_after_start(make_daemon: Callable[..., Daemon]) -> None:
    d = make_daemon(start=False)
    day = [days_ago(n) for n in range(10, 16)]  # dates inside a 30-day window whatever today is
    diary, logs, staging = d.root / "diary", d.root / "logs", d.root / "staging"
    for path in (diary, logs, staging):
        path.mkdir(parents=True)
    (diary / f"{day[1]}.md").write_text("[10:00] original wording lark\n", encoding="utf-8")
    (diary / f"{day[2]}.md").write_text("[10:00] deleted offline pipit\n", encoding="utf-8")
    (diary / f"{day[3]}.md").write_text("[10:00] renamed offline bunting\n", encoding="utf-8")
    (logs / "alpha.md").write_text(LOG_ENTRY.format(name="alpha", word="moorhen", day=day[0]), encoding="utf-8")
    (staging / "beta.md").write_text(LOG_ENTRY.format(name="beta", word="gannet", day=day[0]), encoding="utf-8")
    d.start()
    assert d.recall("lark") == ["original wording lark"] and d.recall("gannet") == []
    d.stop()
    same = diary / f"{day[1]}.md"
    before = same.stat()
    same.write_text("[10:00] modified wording wren\n", encoding="utf-8")  # same size, same mtime
    os.utime(same, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (same.stat().st_size, same.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    (diary / f"{day[2]}.md").unlink()
    (diary / f"{day[3]}.md").rename(diary / f"{day[4]}.md")
    (diary / f"{day[5]}.md").write_text("[10:00] added offline siskin\n", encoding="utf-8")
    logs.rename(d.root / "attic")  # a directory moved out of memory ...
    staging.rename(logs)  # ... and another moved in
    d.start()
    assert d.recall("wren") == ["modified wording wren"] and d.recall("lark") == []
    assert d.recall("pipit") == []
    assert [h["path"] for h in d.call("brain_recall", query="bunting")["hits"]] == [str(diary / f"{day[4]}.md")]
    assert d.recall("siskin") == ["added offline siskin"]
    assert d.recall("moorhen") == [] and d.recall("gannet") == ["gannet\ngannet body"]
    assert_index_matches_files(d)
