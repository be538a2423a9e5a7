"""Fault injection against the watcher: lost events, too few watches, editors, moves.

Every test runs the real daemon on real inotify, waits on what the daemon reports (status, recall),
and ends by comparing the index with a clean rebuild from the files.
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as dt
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from braind.errors import BraindError
from tests.conftest import Daemon, today, wait_until
from tests.faults import WrappedDaemon, assert_index_matches_files

# -- B8: editors' save patterns, and recall never lagging behind the disk ---------------------------

WORD = "quokka"
"""Every note of a save-pattern test holds this word, so one recall sees them all."""
MOVE_PAIRING = 0.5
"""watchdog holds a rename's IN_MOVED_FROM up to this long to pair it with its IN_MOVED_TO."""
SLACK = 1.0
"""Seconds allowed on top of that for the daemon to read and index a due file on a busy machine."""


def day(offset: int) -> str:
    """A diary date `offset` days ago, inside every recall window."""
    return (dt.date.today() - dt.timedelta(days=offset)).isoformat()


@pytest.fixture
def diary_daemon(make_daemon: Callable[..., Daemon]) -> Daemon:
    """A running daemon whose root and diary/ exist from the start, so only the files change under it."""
    daemon = make_daemon(start=False)
    (daemon.root / "diary").mkdir(parents=True)
    daemon.start()
    return daemon


@dataclass
class Timeline:
    """Which notes were certainly on disk when: each segment's set holds from its start to the next start."""

    starts: list[float] = field(default_factory=list)
    sets: list[frozenset[str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def mark(self, notes: set[str] | frozenset[str]) -> None:
        """From now on, until the next mark, these notes are on disk."""
        with self.lock:
            self.starts.append(time.monotonic())
            self.sets.append(frozenset(notes))

    def certain(self, since: float, until: float) -> frozenset[str]:
        """The notes on disk during the whole of [since, until]; none before the first mark."""
        with self.lock:
            first = bisect.bisect_right(self.starts, since) - 1
            if first < 0:
                return frozenset()
            last = bisect.bisect_right(self.starts, until)
            return frozenset.intersection(*self.sets[first:last])


@dataclass
class Poller:
    """Recalls WORD over and over while files change, recording any note on disk that a recall missed."""

    daemon: Daemon
    timeline: Timeline
    window: float
    misses: list[tuple[float, list[str]]] = field(default_factory=list)
    polls: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        """Poll until stopped; a recall started `window` after a note landed must return it."""
        while not self.stop.wait(0.02):
            began = time.monotonic()
            seen = set(self.daemon.recall(WORD, limit=500))
            required = self.timeline.certain(began - self.window, time.monotonic())
            self.polls += 1
            if required - seen:
                self.misses.append((began, sorted(required - seen)))


@contextlib.contextmanager
def polling(daemon: Daemon, timeline: Timeline) -> Iterator[Poller]:
    """Run a Poller in a thread for the duration of the block, then check it never missed a note."""
    window = daemon.settings["watcher"]["max_wait_ms"] / 1000 + MOVE_PAIRING + SLACK
    poller = Poller(daemon, timeline, window)
    thread = threading.Thread(target=poller.run, name="recall-poller")
    thread.start()
    try:
        yield poller
    finally:
        poller.stop.set()
        thread.join()
    assert poller.polls > 0
    assert poller.misses == [], f"recalls missed notes that were on disk: {poller.misses[:5]}"


def render(notes: list[str]) -> str:
    """A diary file holding these notes, one line each."""
    return "".join(f"[10:{i:02d}] {note}\n" for i, note in enumerate(notes))


Save = Callable[[Path, str], None]


@dataclass(frozen=True)
class Pattern:
    """An editor's way of replacing a file's text, and whether the old lines stay on disk throughout."""

    name: str
    save: Save
    keeps_old: bool
    appends_only: bool = False
    tool: str | None = None


def _run(*argv: str, stdin: str | None = None) -> None:
    """Run a real tool on the file, failing the test if it fails."""
    subprocess.run(argv, input=stdin, text=True, check=True, timeout=60, capture_output=True)


def vim_save(backupcopy: str) -> Save:
    """Real vim replacing the buffer and writing it, with backups made as in a home directory."""

    def save(path: Path, text: str) -> None:
        lines = ", ".join("'" + line.replace("'", "''") + "'" for line in text.splitlines())
        commands = [
            "set nocompatible",
            f"set backupcopy={backupcopy}",
            "set backupskip=",
            "set backup writebackup",
            "%delete _",
            f"call setline(1, [{lines}])",
            "wq",
        ]
        _run("vim", "-u", "NONE", "-i", "NONE", "-N", "-es", *[a for c in commands for a in ("-c", c)], str(path))

    return save


def sed_save(path: Path, text: str) -> None:
    """GNU `sed -i` (temp file sedXXXXXX, then rename) printing a prepared file instead of every line."""
    source = path.parents[2] / f"{path.name}.sed-source"  # beside the root, not in it
    source.write_text(text)
    _run("sed", "-i", "-e", f"$r {source}", "-e", "d", str(path))


def temp_rename_save(path: Path, text: str) -> None:
    """Write name.tmp, fsync, rename over the file: what most careful programs do."""
    temp = path.with_name(path.name + ".tmp")
    with open(temp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def truncate_write_save(path: Path, text: str) -> None:
    """Truncate in place, then write in two parts (VS Code, nano, shell redirection)."""
    half = len(text) // 2
    with open(path, "r+", encoding="utf-8") as handle:
        handle.truncate(0)
        handle.write(text[:half])
        handle.flush()
        handle.write(text[half:])


def emacs_save(path: Path, text: str) -> None:
    """Emacs: a `.#name` lock symlink while modified, the original renamed to `name~`, a new file written."""
    lock = path.with_name(".#" + path.name)
    lock.symlink_to(f"user@host.{os.getpid()}:1700000000")
    os.replace(path, path.with_name(path.name + "~"))
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    lock.unlink()


def gio_save(path: Path, text: str) -> None:
    """GLib's g_file_replace: a `.goutputstream-XXXXXX` temp file renamed over the file (real `gio save`)."""
    if shutil.which("gio"):
        _run("gio", "save", str(path), stdin=text)
        return
    temp = path.with_name(".goutputstream-K3X9QZ")
    temp.write_text(text)
    os.rename(temp, path)


def slow_save(path: Path, text: str) -> None:
    """A slow writer: the new lines arrive in small pieces, pausing longer than the quiet window between them."""
    new = text.encode()[path.stat().st_size :]
    with open(path, "ab") as handle:
        for start in range(0, len(new), 7):
            handle.write(new[start : start + 7])
            handle.flush()
            time.sleep(0.06)  # the writer's own pace, longer than quiet_ms, not a wait on the daemon


def recreate_save(path: Path, text: str) -> None:
    """Delete the file, then create it anew (git checkout, some sync tools)."""
    path.unlink()
    path.write_text(text)


def hard_link_save(path: Path, text: str) -> None:
    """`ln -f` a fully written dot-file over the name (unlink + link: no write event on the name at all)."""
    staged = path.with_name(f".{path.name}.new")
    staged.write_text(text)
    _run("ln", "-f", str(staged), str(path))
    staged.unlink()


def move_over_save(path: Path, text: str) -> None:
    """`mv` a file written outside the root over the note (only IN_MOVED_TO arrives)."""
    outside = path.parents[2] / f"{path.name}.outside"  # beside the root, not in it
    outside.write_text(text)
    _run("mv", "-f", str(outside), str(path))


PATTERNS = [
    Pattern("vim-backupcopy-auto", vim_save("auto"), keeps_old=False, tool="vim"),
    Pattern("vim-backupcopy-yes", vim_save("yes"), keeps_old=False, tool="vim"),
    Pattern("vim-backupcopy-no", vim_save("no"), keeps_old=False, tool="vim"),
    Pattern("sed-i", sed_save, keeps_old=True, tool="sed"),
    Pattern("temp-rename", temp_rename_save, keeps_old=True),
    Pattern("truncate-write", truncate_write_save, keeps_old=False),
    Pattern("emacs-lock-rename", emacs_save, keeps_old=False),
    Pattern("gio-goutputstream", gio_save, keeps_old=True),
    Pattern("slow-writer", slow_save, keeps_old=True, appends_only=True),
    Pattern("unlink-recreate", recreate_save, keeps_old=False),
    Pattern("ln-f-hard-link", hard_link_save, keeps_old=False, tool="ln"),
    Pattern("mv-from-outside", move_over_save, keeps_old=True, tool="mv"),
]
"""Twelve patterns here; the thirteenth, a file appended every 200 ms, is test_a_file_appended_every_200_ms."""


def rounds(name: str, appends_only: bool) -> list[list[str]]:
    """The notes after each save: add one, edit one and add one, delete one and add one."""
    note = [f"{WORD} {name} k{i}" for i in range(5)]
    if appends_only:
        return [note[:3], note[:4], note[:5]]
    edited = f"{note[1]} edited"
    return [note[:3], [note[0], edited, note[2], note[3]], [edited, note[2], note[3], note[4]]]


@pytest.mark.parametrize("pattern", PATTERNS, ids=[p.name for p in PATTERNS])
def test_a_save_pattern_ends_with_exactly_the_right_entries(diary_daemon: Daemon, pattern: Pattern) -> None:
    if pattern.tool and shutil.which(pattern.tool) is None:
        pytest.skip(f"{pattern.tool} is not installed")
    daemon = diary_daemon
    path = daemon.root / "diary" / f"{today()}.md"
    seed = [f"{WORD} {pattern.name} k0", f"{WORD} {pattern.name} k1"]
    path.write_text(render(seed))
    wait_until(lambda: set(daemon.recall(WORD)) == set(seed), 15, "the seed notes recalled")
    timeline = Timeline()
    timeline.mark(set(seed))
    before = seed
    with polling(daemon, timeline):
        for after in rounds(pattern.name, pattern.appends_only):
            timeline.mark(set(before) & set(after) if pattern.keeps_old else set())
            pattern.save(path, render(after))
            timeline.mark(set(after))
            wait_until(
                lambda after=after: sorted(daemon.recall(WORD, limit=500)) == sorted(after),
                15,
                f"exactly {after} recalled after {pattern.name}",
            )
            before = after
    assert daemon.rejected() == {}
    assert_index_matches_files(daemon)


def append_every(path: Path, seconds: float, timeline: Timeline, interval: float = 0.2) -> list[str]:
    """Append one note every `interval` seconds for `seconds`, as a logging script would; return the notes."""
    notes: list[str] = []
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        note = f"{WORD} appended k{len(notes)}"
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"[11:{len(notes) % 60:02d}] {note}\n")
        notes.append(note)
        timeline.mark(set(notes))
        time.sleep(max(0.0, start + len(notes) * interval - time.monotonic()))  # the writer's pace
    return notes


@pytest.mark.parametrize("seconds", [pytest.param(4.0, id="4s"), pytest.param(30.0, id="30s", marks=pytest.mark.soak)])
def test_a_file_appended_every_200_ms(diary_daemon: Daemon, seconds: float) -> None:
    """The thirteenth pattern: the file never stays quiet for long, yet every settled note is recallable."""
    daemon = diary_daemon
    diary = daemon.root / "diary"
    timeline = Timeline()
    timeline.mark(set())
    with polling(daemon, timeline) as poller:
        notes = append_every(diary / f"{today()}.md", seconds, timeline)
    wait_until(lambda: sorted(daemon.recall(WORD, limit=500)) == sorted(notes), 15, "every appended note recalled")
    assert poller.polls >= seconds  # recalls kept coming while the file kept changing
    assert_index_matches_files(daemon)


# -- B6: an inotify queue overflow while the daemon is paused --------------------------------------

QUEUE_LIMIT = Path("/proc/sys/fs/inotify/max_queued_events")
QUEUE_LIMIT_LOCK = Path(tempfile.gettempdir()) / "braind-tests-max_queued_events.lock"
SMALL_QUEUE = 256
FLOOD_CAP = 20_000
"""Flooding a queue bigger than this takes too long; such a queue must be lowered for the test."""


def watcher_health(daemon: Daemon) -> dict[str, Any]:
    """The watcher section of `status`."""
    return dict(daemon.call("status")["watcher"])


def holds_inotify(daemon: Daemon) -> bool:
    """Whether the daemon has created its inotify instance yet; fails if it exited instead."""
    assert daemon.proc is not None
    if daemon.proc.poll() is not None:
        raise AssertionError(f"daemon exited with {daemon.proc.returncode}: {daemon.log_text()[-3000:]}")
    fds = Path(f"/proc/{daemon.proc.pid}/fd")
    return any(_readlink(fd) == "anon_inode:inotify" for fd in fds.iterdir())


def _readlink(path: Path) -> str:
    """A symlink's target, or '' when it went away meanwhile."""
    try:
        return os.readlink(path)
    except OSError:
        return ""


def start_with_queue(daemon: Daemon, size: int) -> int:
    """Start the daemon with its inotify queue limited to `size` events if allowed; return the daemon's limit.

    The limit is read when an inotify instance is created, so it is lowered only until the daemon holds
    its own; a lock file keeps concurrent test runs from saving each other's lowered value.
    """
    with open(QUEUE_LIMIT_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = QUEUE_LIMIT.read_text()
        try:
            QUEUE_LIMIT.write_text(f"{size}\n")
        except OSError:
            daemon.start()
            return int(saved)
        try:
            daemon.start(wait=False)
            wait_until(lambda: holds_inotify(daemon), 60, "the daemon's inotify instance")
        finally:
            QUEUE_LIMIT.write_text(saved)
    wait_until(daemon.ready, 60, "daemon ready")
    return size


@contextlib.contextmanager
def paused(daemon: Daemon) -> Iterator[None]:
    """SIGSTOP the daemon for the block: the kernel keeps queueing inotify events nobody reads."""
    assert daemon.proc is not None
    os.kill(daemon.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)


def flood(directory: Path, count: int) -> None:
    """Create `count` empty files in a watched directory: three events each (create, open, close)."""
    for number in range(count):
        os.close(os.open(directory / f"f{number}", os.O_WRONLY | os.O_CREAT, 0o600))


def test_an_overflow_while_paused_is_followed_by_a_rescan(make_daemon: Callable[..., Daemon]) -> None:
    daemon = make_daemon(start=False)
    diary, junk = daemon.root / "diary", daemon.root / "flood"
    days = [day(n) for n in range(5)]
    junk.mkdir(parents=True)
    diary.mkdir()
    for date in days[:3]:
        (diary / f"{date}.md").write_text(f"[09:00] {WORD} before {date}\n")
    limit = start_with_queue(daemon, SMALL_QUEUE)
    if limit > FLOOD_CAP:
        pytest.skip(f"cannot lower fs.inotify.max_queued_events ({limit}), and flooding it would take too long")
    assert len(daemon.recall(WORD)) == 3
    before = watcher_health(daemon)
    with paused(daemon):
        flood(junk, limit + 1)
        (diary / f"{days[0]}.md").write_text(f"[09:00] {WORD} before {days[0]}\n[09:05] {WORD} edited while lost\n")
        (diary / f"{days[1]}.md").unlink()
        (diary / f"{days[2]}.md").rename(diary / f"{days[3]}.md")
        (diary / f"{days[4]}.md").write_text(f"[09:00] {WORD} created while lost\n")
    expected = {
        f"{WORD} before {days[0]}",
        f"{WORD} edited while lost",
        f"{WORD} before {days[2]}",
        f"{WORD} created while lost",
    }
    wait_until(lambda: set(daemon.recall(WORD)) == expected, 30, "the disk's state recalled after the overflow")
    after = wait_until(lambda: (h := watcher_health(daemon))["rescans"] > before["rescans"] and h, 15, "a rescan")
    assert after["overflows"] > before["overflows"]
    assert after["state"] == "ok" and after["last_rescan"] is not None
    log = daemon.log_text()
    assert "inotify queue overflowed; requesting a full rescan" in log
    assert "rescan (overflow) of all roots" in log
    assert_index_matches_files(daemon)


# -- B7: fewer inotify watches than directories ------------------------------------------------------

WATCH_LIMIT = "/proc/sys/user/max_inotify_watches"


def _user_namespaces() -> bool:
    """Whether this machine lets us open a user namespace with its own inotify watch limit."""
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        return False
    probe = subprocess.run(["unshare", "-Ur", "sh", "-c", f"echo 1 > {WATCH_LIMIT}"], capture_output=True, timeout=30)
    return probe.returncode == 0


class NotifySocket:
    """A datagram socket standing in for systemd's NOTIFY_SOCKET, keeping every line received."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.lines: list[str] = []

    def received(self) -> list[str]:
        """Every line so far, reading whatever is waiting."""
        with contextlib.suppress(BlockingIOError):
            while True:
                self.lines += self.sock.recv(65536).decode().split("\n")
        return self.lines

    def last_status(self) -> str:
        """The latest STATUS= line, or ''."""
        return next((line for line in reversed(self.received()) if line.startswith("STATUS=")), "")

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


@pytest.fixture
def notify_socket(short_tmp: Path) -> Iterator[NotifySocket]:
    """A NOTIFY_SOCKET for one test."""
    listener = NotifySocket(short_tmp / "notify")
    yield listener
    listener.close()


def set_watch_limit(pid: int, limit: int) -> None:
    """Change max_inotify_watches inside the user namespace the daemon runs in."""
    command = ["nsenter", "--user", "--target", str(pid), "sh", "-c", f"echo {limit} > {WATCH_LIMIT}"]
    subprocess.run(command, check=True, capture_output=True, timeout=30)


@pytest.mark.skipif(not _user_namespaces(), reason="needs `unshare -Ur` and nsenter to lower the watch limit alone")
def test_a_watch_shortfall_is_reported_degraded_and_covered_by_rescans(
    short_tmp: Path, notify_socket: NotifySocket
) -> None:
    """One watch for three directories: only the root is watched; diary/ is caught up by periodic rescans."""
    lowered = f'echo 1 > {WATCH_LIMIT} && exec "$@"'
    daemon = WrappedDaemon(
        short_tmp / "d",
        {"watcher": {"rescan_seconds": 10}},
        wrapper=["unshare", "-Ur", "sh", "-c", lowered, "sh"],
        env={"NOTIFY_SOCKET": str(notify_socket.path)},
    )
    (daemon.root / "diary").mkdir(parents=True)
    (daemon.root / "logs").mkdir()
    try:
        daemon.start()
        health = watcher_health(daemon)
        assert health["state"] == "degraded" and "inotify watch limit reached" in health["reason"], health
        wait_until(lambda: "READY=1" in notify_socket.received(), 15, "READY=1")
        assert notify_socket.last_status().startswith("STATUS=degraded: ")
        assert "inotify watch limit reached" in notify_socket.last_status()
        rescans = health["rescans"]
        (daemon.root / "diary" / f"{today()}.md").write_text(f"[09:00] {WORD} in an unwatched directory\n")
        daemon.wait_recall(WORD, f"{WORD} in an unwatched directory", timeout=40)
        assert watcher_health(daemon)["rescans"] > rescans
        assert "rescan (degraded) of" in daemon.log_text()
        assert daemon.proc is not None
        set_watch_limit(daemon.proc.pid, 1000)
        wait_until(lambda: watcher_health(daemon)["state"] == "ok", 40, "the watcher fully watching again")
        wait_until(lambda: notify_socket.last_status().startswith("STATUS=ready: "), 15, "STATUS=ready again")
        (daemon.root / "diary" / f"{today()}.md").write_text(f"[09:00] {WORD} watched again\n")
        daemon.wait_recall(WORD, f"{WORD} watched again")
        assert_index_matches_files(daemon)
    finally:
        daemon.stop()


# -- B9: moves, directories that come and go, roots that are moved, deleted or replaced -----------------


def hits(daemon: Daemon, **params: Any) -> list[tuple[str, str]]:
    """(text, path) of every WORD hit, sorted, to see where each note lives now (and that it lives only there)."""
    found = daemon.call("brain_recall", query=WORD, limit=500, **params)["hits"]
    return sorted((hit["text"], hit["path"]) for hit in found)


def notes(daemon: Daemon, **params: Any) -> list[str]:
    """The texts of every WORD hit, sorted, duplicates kept."""
    return [text for text, _ in hits(daemon, **params)]


def wait_notes(daemon: Daemon, expected: set[str], what: str) -> None:
    """Wait until the WORD hits are exactly these notes, each once."""
    wait_until(lambda: notes(daemon) == sorted(expected), 20, what)


def wait_hits(daemon: Daemon, expected: dict[str, Path], what: str, **params: Any) -> None:
    """Wait until the WORD hits are exactly these notes at exactly these paths."""
    want = sorted((text, str(path)) for text, path in expected.items())
    wait_until(lambda: hits(daemon, **params) == want, 20, what)


@pytest.fixture
def project(short_tmp: Path) -> Path:
    """A project directory without memory yet."""
    path = short_tmp / "proj"
    path.mkdir()
    return path


@pytest.fixture
def two_roots(make_daemon: Callable[..., Daemon], project: Path) -> Daemon:
    """A daemon with diary/ and logs/ in the user root and a configured project whose root exists."""
    daemon = make_daemon({"projects": [str(project)]}, start=False)
    for root in (daemon.root, project / ".agents" / ".memory"):
        (root / "diary").mkdir(parents=True)
        (root / "logs").mkdir()
    daemon.start()
    return daemon


def logfile(body: str) -> str:
    """A logfile with one untitled entry, whose indexed text is its body."""
    return f"---\nname: t\ntype: project\ndescription: d\n---\n\n# T\n\n## {day(0)} 09:00\n{body}\n"


def test_moves_within_and_across_directories_and_roots(two_roots: Daemon, project: Path, short_tmp: Path) -> None:
    daemon, user, proj = two_roots, two_roots.root, project / ".agents" / ".memory"
    (user / "inbox").mkdir()
    (user / "diary" / f"{day(1)}.md").write_text(f"[09:00] {WORD} one\n")
    (user / "inbox" / f"{day(2)}.md").write_text(f"[09:00] {WORD} two\n")
    (user / "logs" / "topic.md").write_text(logfile(f"{WORD} three"))
    (user / "diary" / f"{day(3)}.md").write_text(f"[09:00] {WORD} four\n")
    before = {
        f"{WORD} one": user / "diary" / f"{day(1)}.md",
        f"{WORD} three": user / "logs" / "topic.md",
        f"{WORD} four": user / "diary" / f"{day(3)}.md",
    }
    wait_hits(daemon, before, "the notes before the moves", project=str(project))
    (user / "diary" / f"{day(1)}.md").rename(user / "diary" / f"{day(4)}.md")
    (user / "inbox" / f"{day(2)}.md").rename(user / "diary" / f"{day(2)}.md")
    (user / "logs" / "topic.md").rename(user / "logs" / "renamed.md")
    (user / "diary" / f"{day(3)}.md").rename(proj / "diary" / f"{day(3)}.md")
    expected = {
        f"{WORD} one": user / "diary" / f"{day(4)}.md",
        f"{WORD} two": user / "diary" / f"{day(2)}.md",
        f"{WORD} three": user / "logs" / "renamed.md",
        f"{WORD} four": proj / "diary" / f"{day(3)}.md",
    }
    wait_hits(daemon, expected, "every note at its new place", project=str(project))
    assert notes(daemon) == sorted([f"{WORD} one", f"{WORD} three", f"{WORD} two"])  # the project's note stays there
    (proj / "diary" / f"{day(3)}.md").rename(short_tmp / "moved-out.md")
    del expected[f"{WORD} four"]
    wait_hits(daemon, expected, "the note moved out of every root gone", project=str(project))
    assert_index_matches_files(daemon)


def test_whole_directories_moved_out_and_in(two_roots: Daemon, short_tmp: Path) -> None:
    """A directory moved out arrives as one 'directory deleted' event: everything below it must go."""
    daemon, root, parked = two_roots, two_roots.root, short_tmp / "parked"
    for n in range(1, 4):
        (root / "diary" / f"{day(n)}.md").write_text(f"[09:00] {WORD} diary {n}\n")
    (root / "logs" / "topic.md").write_text(logfile(f"{WORD} logged"))
    everything = {f"{WORD} diary {n}" for n in range(1, 4)} | {f"{WORD} logged"}
    wait_notes(daemon, everything, "the notes before the moves")
    parked.mkdir()
    (root / "diary").rename(parked / "diary")
    (root / "logs").rename(parked / "logs")
    wait_notes(daemon, set(), "both directories' notes gone")
    (parked / "diary" / f"{day(5)}.md").write_text(f"[09:00] {WORD} written while out\n")
    (parked / "diary").rename(root / "diary")
    (parked / "logs").rename(root / "logs")
    wait_notes(daemon, everything | {f"{WORD} written while out"}, "the notes moved back in")
    (root / "diary").rename(root / "diary.old")
    (root / "logs" / "topic.md").write_text(logfile(f"{WORD} logged again"))
    wait_notes(daemon, {f"{WORD} logged again"}, "diary/ renamed to a name that is not memory")
    (root / "diary.old").rename(root / "diary")
    everything = {f"{WORD} diary {n}" for n in range(1, 4)} | {f"{WORD} written while out", f"{WORD} logged again"}
    wait_notes(daemon, everything, "diary/ renamed back")
    assert_index_matches_files(daemon)


def test_mkdir_p_then_an_immediate_write(make_daemon: Callable[..., Daemon], project: Path) -> None:
    """New directories (and a project root that did not exist) are watched before their first file is missed."""
    daemon = make_daemon({"projects": [str(project)]}, start=False)
    daemon.root.mkdir()
    daemon.start()
    proj = project / ".agents" / ".memory"
    for root in (daemon.root, proj):
        (root / "diary").mkdir(parents=True, exist_ok=True)
        (root / "diary" / f"{day(0)}.md").write_text(f"[09:00] {WORD} first {root.name}\n")
        (root / "logs").mkdir()
        (root / "logs" / "topic.md").write_text(logfile(f"{WORD} log {root.name}"))
        (root / "logs" / "deep" / "er").mkdir(parents=True)
        (root / "logs" / "deep" / "er" / "not-a-logfile.md").write_text(logfile(f"{WORD} too deep"))
    expected = {
        f"{WORD} first root": daemon.root / "diary" / f"{day(0)}.md",
        f"{WORD} log root": daemon.root / "logs" / "topic.md",
        f"{WORD} first .memory": proj / "diary" / f"{day(0)}.md",
        f"{WORD} log .memory": proj / "logs" / "topic.md",
    }
    wait_hits(daemon, expected, "every file written right after its mkdir -p", project=str(project))
    assert daemon.rejected() == {}
    assert_index_matches_files(daemon)


def root_state(daemon: Daemon) -> tuple[bool, str | None]:
    """Whether the user root is available in `status`, and why not."""
    root = daemon.call("status")["roots"][0]
    return root["available"], root["reason"]


def watched_state(daemon: Daemon) -> str:
    """What the watcher says of the user root: watching, missing or degraded."""
    return str(watcher_health(daemon)["roots"][0]["state"])


def barrier(daemon: Daemon, project: Path) -> None:
    """Wait until the watcher's thread has done what it queued so far: a note in the other root comes after it."""
    token = f"barrier{time.monotonic_ns()}"
    with open(project / ".agents" / ".memory" / "diary" / f"{day(0)}.md", "a") as handle:
        handle.write(f"[09:00] {token}\n")
    wait_until(lambda: daemon.recall(token, project=str(project)) == [token], 20, "the barrier note")


def test_the_root_moved_away_and_back(two_roots: Daemon, project: Path, short_tmp: Path) -> None:
    """A root that is gone keeps its entries (nothing is purged); back again, the changes made meanwhile count."""
    daemon, root, away = two_roots, two_roots.root, short_tmp / "away"
    (root / "diary" / f"{day(1)}.md").write_text(f"[09:00] {WORD} kept\n")
    (root / "diary" / f"{day(2)}.md").write_text(f"[09:00] {WORD} deleted while away\n")
    wait_notes(daemon, {f"{WORD} kept", f"{WORD} deleted while away"}, "the notes before the move")
    root.rename(away)
    wait_until(lambda: watched_state(daemon) == "missing", 20, "the watcher noticing the root is gone")
    barrier(daemon, project)
    assert root_state(daemon) == (False, "missing")
    assert notes(daemon) == sorted([f"{WORD} kept", f"{WORD} deleted while away"])
    (away / "diary" / f"{day(2)}.md").unlink()
    (away / "diary" / f"{day(3)}.md").write_text(f"[09:00] {WORD} added while away\n")
    away.rename(root)
    wait_notes(daemon, {f"{WORD} kept", f"{WORD} added while away"}, "the root back")
    assert root_state(daemon) == (True, None)
    assert_index_matches_files(daemon)


def test_the_root_deleted_and_recreated(two_roots: Daemon, project: Path) -> None:
    daemon, root = two_roots, two_roots.root
    (root / "diary" / f"{day(1)}.md").write_text(f"[09:00] {WORD} old root\n")
    wait_notes(daemon, {f"{WORD} old root"}, "the old root's note")
    shutil.rmtree(root)
    wait_until(lambda: watched_state(daemon) == "missing", 20, "the watcher noticing the root is gone")
    barrier(daemon, project)
    assert root_state(daemon) == (False, "missing")
    assert notes(daemon) == [f"{WORD} old root"]  # a missing root must not empty the index
    (root / "diary").mkdir(parents=True)
    (root / "diary" / f"{day(2)}.md").write_text(f"[09:00] {WORD} new root\n")
    wait_notes(daemon, {f"{WORD} new root"}, "the new root's note alone")
    (root / "diary" / f"{day(2)}.md").write_text(f"[09:00] {WORD} new root edited\n")
    wait_notes(daemon, {f"{WORD} new root edited"}, "the new root watched")
    assert_index_matches_files(daemon)


def test_the_root_replaced_by_a_symlink(two_roots: Daemon, project: Path, short_tmp: Path) -> None:
    """A root that became a symlink is not followed: reported, its old entries kept, the target never read."""
    daemon, root = two_roots, two_roots.root
    (root / "diary" / f"{day(1)}.md").write_text(f"[09:00] {WORD} real root\n")
    wait_notes(daemon, {f"{WORD} real root"}, "the real root's note")
    elsewhere = short_tmp / "elsewhere"
    (elsewhere / "diary").mkdir(parents=True)
    (elsewhere / "diary" / f"{day(2)}.md").write_text(f"[09:00] {WORD} behind the link\n")
    root.rename(short_tmp / "real")
    root.symlink_to(elsewhere)
    wait_until(lambda: watched_state(daemon) == "degraded", 20, "the watcher refusing the symlinked root")
    (elsewhere / "diary" / f"{day(3)}.md").write_text(f"[09:00] {WORD} written behind the link\n")
    barrier(daemon, project)
    assert root_state(daemon) == (False, "symlink")
    assert "root is a symlink, not followed" in watcher_health(daemon)["reason"]
    with pytest.raises(BraindError) as refused:
        daemon.call("reindex")
    assert refused.value.reason == "root_unavailable"
    assert notes(daemon) == [f"{WORD} real root"]
    root.unlink()
    (short_tmp / "real").rename(root)
    wait_until(lambda: watcher_health(daemon)["state"] == "ok", 20, "the watcher back to ok")
    (root / "diary" / f"{day(1)}.md").write_text(f"[09:00] {WORD} real root again\n")
    wait_notes(daemon, {f"{WORD} real root again"}, "the real root watched again")
    assert_index_matches_files(daemon)
