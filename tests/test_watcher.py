"""The watcher against real inotify: editors' save patterns, moves, overflows, shortfalls and roots that change.

Every test waits on what the recorder has seen, with a timeout; none asserts on timing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from braind.files.validate import is_artefact
from braind.ingest.watcher import Watcher

TIMEOUT = 15.0
MISSING = "missing"
DIRECTORY = "dir"
Snapshot = bytes | str


def snapshot(path: Path) -> Snapshot:
    """What the consumer would find on disk when the path is handed out."""
    if path.is_dir():
        return DIRECTORY
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return MISSING


class Recorder:
    """Collects on_due batches (with what each path held at that moment) and on_rescan calls."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.batches: list[dict[Path, Snapshot]] = []
        self.rescans: list[tuple[Path | None, str]] = []
        self.fail_next_due = False

    def on_due(self, paths: list[Path]) -> None:
        """The watcher's on_due: look at the disk now, as the daemon would."""
        batch = {path: snapshot(path) for path in paths}
        with self.cond:
            self.batches.append(batch)
            self.cond.notify_all()
            if self.fail_next_due:
                self.fail_next_due = False
                raise RuntimeError("consumer failed")

    def on_rescan(self, root: Path | None, reason: str) -> None:
        """The watcher's on_rescan."""
        with self.cond:
            self.rescans.append((root, reason))
            self.cond.notify_all()

    def paths(self) -> set[Path]:
        """Every path handed out so far."""
        with self.cond:
            return {path for batch in self.batches for path in batch}

    def saw(self, path: Path, state: Snapshot | None = None) -> bool:
        """Whether path was handed out (holding `state`, when given)."""
        with self.cond:
            return any(path in b and (state is None or b[path] == state) for b in self.batches)

    def wait(self, predicate: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
        """Block until predicate() holds, re-checking whenever a callback arrives."""
        with self.cond:
            if not self.cond.wait_for(predicate, timeout):
                recent = f"last batches {self.batches[-10:]}, rescans {self.rescans[-10:]}"
                raise AssertionError(f"timed out after {timeout} s waiting for {what}; {recent}")

    def wait_due(self, path: Path, state: Snapshot | None = None) -> None:
        """Wait until path is handed out while holding `state`."""
        self.wait(lambda: self.saw(path, state), f"{path} due with {state!r}")

    def wait_rescan(self, root: Path | None, reason: str) -> None:
        """Wait until on_rescan(root, reason) was called."""
        self.wait(lambda: (root, reason) in self.rescans, f"on_rescan({root}, {reason!r})")


Start = Callable[..., tuple[Watcher, Recorder]]


@pytest.fixture
def start_watcher() -> Iterator[Start]:
    """Start watchers with short windows; stop them, and check no artefact was ever handed out."""
    started: list[tuple[Watcher, Recorder]] = []

    def start(roots: list[Path], **options: Any) -> tuple[Watcher, Recorder]:
        recorder = Recorder()
        options = {"quiet": 0.05, "max_wait": 0.5, **options}
        watcher = Watcher(roots, recorder.on_due, recorder.on_rescan, **options)
        watcher.start()
        started.append((watcher, recorder))
        return watcher, recorder

    yield start
    for watcher, _ in started:
        watcher.stop()
    for _, recorder in started:
        assert [p for p in recorder.paths() if is_artefact(p.name)] == []


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An empty memory root."""
    path = tmp_path / "root"
    path.mkdir()
    return path


def write(path: Path, text: str) -> None:
    """Write a whole file the plain way."""
    path.write_text(text, encoding="utf-8")


# -- editors' save patterns -------------------------------------------------------------------


def test_a_plain_write_is_handed_out_once_settled(root: Path, start_watcher: Start) -> None:
    _, rec = start_watcher([root])
    write(root / "note.md", "hello\n")
    rec.wait_due(root / "note.md", b"hello\n")


def test_vim_style_rename_dance(root: Path, start_watcher: Start) -> None:
    note = root / "note.md"
    write(note, "old\n")
    _, rec = start_watcher([root])
    swap = root / ".note.md.swp"
    write(swap, "swap")
    note.rename(root / "note.md~")
    write(note, "old\nnew\n")
    (root / "note.md~").unlink()
    swap.unlink()
    rec.wait_due(note, b"old\nnew\n")


def _vim(path: Path, backupcopy: str) -> None:
    """Append a line with a real vim, forcing backups even under /tmp (backupskip=)."""
    commands = [f"set backupcopy={backupcopy}", "set backupskip=", "set writebackup", "call append('$', 'new')"]
    args = ["vim", "-u", "NONE", "-N", "-i", "NONE", "-es"]
    for command in [*commands, "wq"]:
        args += ["-c", command]
    subprocess.run([*args, str(path)], check=True, stdin=subprocess.DEVNULL, timeout=60)


@pytest.mark.skipif(shutil.which("vim") is None, reason="vim is not installed")
@pytest.mark.parametrize("backupcopy", ["no", "yes", "auto"])
def test_real_vim_saves(root: Path, start_watcher: Start, backupcopy: str) -> None:
    note = root / "note.md"
    write(note, "old\n")
    _, rec = start_watcher([root])
    _vim(note, backupcopy)
    rec.wait_due(note, b"old\nnew\n")
    assert rec.paths() == {note}


@pytest.mark.skipif(shutil.which("sed") is None, reason="sed is not installed")
def test_sed_in_place(root: Path, start_watcher: Start) -> None:
    note = root / "note.md"
    write(note, "colour\n")
    _, rec = start_watcher([root])
    subprocess.run(["sed", "-i", "s/colour/color/", str(note)], check=True, timeout=60)
    rec.wait_due(note, b"color\n")
    assert rec.paths() == {note}


def test_temp_file_then_replace(root: Path, start_watcher: Start) -> None:
    note = root / "note.md"
    write(note, "old\n")
    _, rec = start_watcher([root])
    temp = root / "note.md.tmp"
    with open(temp, "wb") as handle:
        handle.write(b"replaced\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, note)
    rec.wait_due(note, b"replaced\n")
    assert rec.paths() == {note}


def test_truncate_then_write(root: Path, start_watcher: Start) -> None:
    note = root / "note.md"
    write(note, "a much longer old text\n")
    _, rec = start_watcher([root])
    with open(note, "r+b") as handle:
        handle.truncate(0)
        handle.write(b"short\n")
        handle.flush()
        handle.write(b"more\n")
    rec.wait_due(note, b"short\nmore\n")


def test_gio_output_stream_rename(root: Path, start_watcher: Start) -> None:
    note = root / "note.md"
    write(note, "old\n")
    _, rec = start_watcher([root])
    temp = root / ".goutputstream-K3X9QZ"
    write(temp, "from gedit\n")
    temp.rename(note)
    rec.wait_due(note, b"from gedit\n")
    assert rec.paths() == {note}


def test_artefact_only_activity_hands_out_nothing(root: Path, start_watcher: Start) -> None:
    _, rec = start_watcher([root])
    for name in (".note.md.swp", "4913", "note.md~", ".#note.md", "#note.md#", ".goutputstream-AB12CD", "sedAb12Cd"):
        write(root / name, "x")
        (root / name).unlink()
    sentinel = root / "sentinel.md"
    write(sentinel, "done\n")
    rec.wait_due(sentinel, b"done\n")
    assert rec.paths() == {sentinel}


def test_a_file_appended_forever_is_still_handed_out(root: Path, start_watcher: Start) -> None:
    """max_wait bounds the wait: the quiet window never passes while appends keep coming."""
    log = root / "log.md"
    _, rec = start_watcher([root], quiet=3.0, max_wait=0.3)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    deadline = time.monotonic() + TIMEOUT
    try:
        while not rec.saw(log):
            assert time.monotonic() < deadline, "an endlessly appended file was never handed out"
            os.write(fd, b"x")
    finally:
        os.close(fd)


# -- moves and directories --------------------------------------------------------------------


def test_a_move_within_the_root_hands_out_both_ends(root: Path, start_watcher: Start) -> None:
    write(root / "a.md", "text\n")
    _, rec = start_watcher([root])
    (root / "a.md").rename(root / "b.md")
    rec.wait_due(root / "b.md", b"text\n")
    rec.wait_due(root / "a.md", MISSING)


def test_a_file_moved_in_from_outside(root: Path, tmp_path: Path, start_watcher: Start) -> None:
    outside = tmp_path / "outside.md"
    write(outside, "arrived\n")
    _, rec = start_watcher([root])
    outside.rename(root / "in.md")
    rec.wait_due(root / "in.md", b"arrived\n")


def test_a_file_moved_out(root: Path, tmp_path: Path, start_watcher: Start) -> None:
    write(root / "gone.md", "bye\n")
    _, rec = start_watcher([root])
    (root / "gone.md").rename(tmp_path / "gone.md")
    rec.wait_due(root / "gone.md", MISSING)


def test_a_directory_moved_in_and_out(root: Path, tmp_path: Path, start_watcher: Start) -> None:
    tree = tmp_path / "logs"
    (tree / "sub").mkdir(parents=True)
    write(tree / "one.md", "1\n")
    write(tree / "sub" / "two.md", "2\n")
    _, rec = start_watcher([root])
    tree.rename(root / "logs")
    rec.wait_due(root / "logs", DIRECTORY)
    rec.wait_due(root / "logs" / "one.md", b"1\n")
    rec.wait_due(root / "logs" / "sub" / "two.md", b"2\n")
    (root / "logs").rename(tmp_path / "elsewhere")
    rec.wait_due(root / "logs", MISSING)


def test_a_directory_renamed_within_the_root(root: Path, start_watcher: Start) -> None:
    (root / "logs").mkdir()
    write(root / "logs" / "one.md", "1\n")
    _, rec = start_watcher([root])
    (root / "logs").rename(root / "topics")
    rec.wait_due(root / "topics", DIRECTORY)
    rec.wait_due(root / "logs", MISSING)
    rec.wait_due(root / "topics" / "one.md", b"1\n")


def test_mkdir_p_then_an_immediate_write(root: Path, start_watcher: Start) -> None:
    _, rec = start_watcher([root])
    (root / "a" / "b").mkdir(parents=True)
    write(root / "a" / "b" / "f.md", "deep\n")
    rec.wait_due(root / "a" / "b" / "f.md", b"deep\n")
    rec.wait_due(root / "a", DIRECTORY)


def test_a_directory_and_a_file_in_it_are_separate_entries(root: Path, start_watcher: Start) -> None:
    _, rec = start_watcher([root])
    (root / "diary").mkdir()
    write(root / "diary" / "2026-01-31.md", "[10:00] x\n")
    rec.wait_due(root / "diary" / "2026-01-31.md", b"[10:00] x\n")
    rec.wait_due(root / "diary", DIRECTORY)


# -- lost events: overflow and watch shortfall ------------------------------------------------

QUEUE_LIMIT = Path("/proc/sys/fs/inotify/max_queued_events")
QUEUE_LIMIT_LOCK = Path(tempfile.gettempdir()) / "braind-tests-max_queued_events.lock"


@contextlib.contextmanager
def tiny_inotify_queue() -> Iterator[None]:
    """Lower the system-wide queue size for the inotify instances created inside the block.

    The size is fixed when an instance is created, so the window stays a few milliseconds wide;
    a lock file keeps concurrent test runs from saving each other's lowered value.
    """
    with open(QUEUE_LIMIT_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            saved = QUEUE_LIMIT.read_text()
            QUEUE_LIMIT.write_text("16\n")
        except OSError as exc:
            pytest.skip(f"cannot lower fs.inotify.max_queued_events ({exc}); a real overflow needs a tiny queue")
        try:
            yield
        finally:
            QUEUE_LIMIT.write_text(saved)


def test_an_inotify_overflow_asks_for_a_full_rescan(root: Path, start_watcher: Start) -> None:
    """A 16-event kernel queue overflows under a burst of creates; the rescan request must follow."""
    with tiny_inotify_queue():
        watcher, rec = start_watcher([root])
    created = iter(range(1_000_000))

    def burst() -> bool:
        for _ in range(300):
            (root / f"f{next(created)}.md").touch()
        return (None, "overflow") in rec.rescans

    deadline = time.monotonic() + TIMEOUT
    while not burst():
        assert time.monotonic() < deadline, "no overflow reported"
    assert watcher.health()["overflows"] >= 1
    _wait_until_watching_again(root, rec)


def _wait_until_watching_again(root: Path, rec: Recorder) -> None:
    """Write sentinels until one is handed out; one lost to a still-full queue brings another overflow."""
    for attempt in range(50):
        if _sentinel_handed_out(root / f"after{attempt}.md", rec):
            return
    raise AssertionError("the watcher never recovered from the overflow")


def _sentinel_handed_out(sentinel: Path, rec: Recorder) -> bool:
    """Write a sentinel, then wait until it is handed out (alone, or in a burst's rescan of its root) or lost."""
    overflows = rec.rescans.count((None, "overflow"))
    bursts = rec.rescans.count((sentinel.parent, "burst"))
    write(sentinel, "still watching\n")

    def seen_in_a_burst() -> bool:
        return rec.rescans.count((sentinel.parent, "burst")) > bursts

    rec.wait(
        lambda: rec.saw(sentinel) or seen_in_a_burst() or rec.rescans.count((None, "overflow")) > overflows,
        f"{sentinel} handed out or another overflow",
    )
    return rec.saw(sentinel, b"still watching\n") or seen_in_a_burst()


SHORTFALL_SCRIPT = """
import json, sys, threading
from pathlib import Path
from braind.ingest.watcher import Watcher

root = Path(sys.argv[1])
cond = threading.Condition()
rescans, due = [], []

def on_due(paths):
    with cond:
        due.extend(str(p) for p in paths)
        cond.notify_all()

def on_rescan(path, reason):
    with cond:
        rescans.append(reason)
        cond.notify_all()

def wait(predicate):
    with cond:
        return cond.wait_for(predicate, 20)

watcher = Watcher([root], on_due, on_rescan, quiet=0.05, max_wait=0.5, rescan_seconds=0.2)
watcher.start()
try:
    (root / "top.md").write_text("x")
    periodic = wait(lambda: rescans.count("degraded") >= 2)
    degraded = watcher.health()
    with open("/proc/sys/user/max_inotify_watches", "w") as limit:
        limit.write("1000")
    recovered = wait(lambda: watcher.health()["state"] == "ok")
    print(json.dumps({"periodic": periodic, "degraded": degraded, "recovered": recovered, "due": due}))
finally:
    watcher.stop()
"""


def _user_namespaces() -> bool:
    """Whether this machine lets us open a user namespace with its own inotify watch limit."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-Ur", "true"], capture_output=True, timeout=30)
    return probe.returncode == 0


@pytest.mark.skipif(not _user_namespaces(), reason="needs `unshare -Ur` to lower the watch limit in isolation")
@pytest.mark.parametrize(
    ("limit", "reason", "root_watched"),
    [(3, "inotify watch limit reached", True), (0, "cannot watch root", False)],
)
def test_a_watch_shortfall_degrades_and_rescans_until_it_recovers(
    tmp_path: Path, limit: int, reason: str, root_watched: bool
) -> None:
    """inotify_add_watch really fails with ENOSPC: a user namespace gets its own max_inotify_watches."""
    root = tmp_path / "root"
    (root / "a" / "b" / "c" / "d").mkdir(parents=True)
    shell = f'echo {limit} > /proc/sys/user/max_inotify_watches && exec "$0" -c "$1" "$2"'
    argv = ["unshare", "-Ur", "sh", "-c", shell, sys.executable, SHORTFALL_SCRIPT, str(root)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["periodic"], result
    assert result["degraded"]["state"] == "degraded"
    assert reason in result["degraded"]["reason"]
    assert result["degraded"]["roots"][0]["state"] == "degraded"
    assert result["recovered"], result
    assert (str(root / "top.md") in result["due"]) == root_watched


NO_INOTIFY_SCRIPT = """
import json, sys, threading
from pathlib import Path
from braind.ingest.watcher import Watcher

cond = threading.Condition()
rescans = []

def on_rescan(path, reason):
    with cond:
        rescans.append(reason)
        cond.notify_all()

watcher = Watcher([Path(sys.argv[1])], lambda paths: None, on_rescan, rescan_seconds=0.2)
watcher.start()
try:
    with cond:
        periodic = cond.wait_for(lambda: rescans.count("degraded") >= 2, 20)
    print(json.dumps({"periodic": periodic, "alive": watcher.alive(), "health": watcher.health()}))
finally:
    watcher.stop()
"""


@pytest.mark.skipif(not _user_namespaces(), reason="needs `unshare -Ur` to lower the inotify instance limit")
def test_without_inotify_the_watcher_runs_degraded_on_rescans(root: Path) -> None:
    """inotify_init really fails with EMFILE when the namespace allows no inotify instance."""
    shell = 'echo 0 > /proc/sys/user/max_inotify_instances && exec "$0" -c "$1" "$2"'
    argv = ["unshare", "-Ur", "sh", "-c", shell, sys.executable, NO_INOTIFY_SCRIPT, str(root)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["periodic"] and result["alive"], result
    assert result["health"]["state"] == "degraded"
    assert "inotify unavailable" in result["health"]["reason"]


# -- roots that vanish, appear or are replaced ------------------------------------------------


def test_a_root_removed_and_recreated_is_watched_again(root: Path, start_watcher: Start) -> None:
    watcher, rec = start_watcher([root])
    shutil.rmtree(root)
    rec.wait_rescan(root, "root_missing")
    assert watcher.health()["roots"][0]["state"] == "missing"
    root.mkdir()
    rec.wait_rescan(root, "root_changed")
    write(root / "new.md", "fresh\n")
    rec.wait_due(root / "new.md", b"fresh\n")
    assert watcher.health()["roots"][0]["state"] == "watching"


def test_a_root_renamed_away_and_replaced_is_rewatched(root: Path, tmp_path: Path, start_watcher: Start) -> None:
    _, rec = start_watcher([root])
    root.rename(tmp_path / "old-root")
    root.mkdir()
    rec.wait_rescan(root, "root_changed")
    write(root / "new.md", "fresh\n")
    rec.wait_due(root / "new.md", b"fresh\n")


def test_a_missing_root_is_reported_once_and_watched_when_it_appears(tmp_path: Path, start_watcher: Start) -> None:
    root = tmp_path / "later"
    watcher, rec = start_watcher([root])
    rec.wait_rescan(root, "root_missing")
    health = watcher.health()
    assert health["state"] == "ok"
    assert health["roots"] == [{"path": str(root), "state": "missing", "reason": None}]
    root.mkdir()
    rec.wait_rescan(root, "root_changed")
    write(root / "first.md", "hi\n")
    rec.wait_due(root / "first.md", b"hi\n")
    assert rec.rescans.count((root, "root_missing")) == 1


def test_a_symlinked_root_is_not_followed(tmp_path: Path, root: Path, start_watcher: Start) -> None:
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    watcher, rec = start_watcher([link, root])
    health = watcher.health()
    assert health["state"] == "degraded"
    assert "symlink" in health["reason"]
    assert health["roots"][0]["state"] == "degraded"
    assert health["watched_dirs"] == 1
    write(target / "hidden.md", "through the link\n")
    write(root / "sentinel.md", "seen\n")
    rec.wait_due(root / "sentinel.md", b"seen\n")
    assert rec.paths() == {root / "sentinel.md"}


# -- the scheduler ----------------------------------------------------------------------------


def test_the_timer_asks_for_a_rescan_of_every_root(root: Path, start_watcher: Start) -> None:
    watcher, rec = start_watcher([root], rescan_seconds=0.2)
    rec.wait_rescan(None, "timer")
    assert watcher.health()["last_rescan"] is not None


def test_a_failing_callback_is_logged_and_the_scheduler_goes_on(
    root: Path, start_watcher: Start, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="braind.ingest.watcher")
    watcher, rec = start_watcher([root])
    rec.fail_next_due = True
    write(root / "first.md", "1\n")
    rec.wait_due(root / "first.md")
    write(root / "second.md", "2\n")
    rec.wait_due(root / "second.md", b"2\n")
    failures = [r.exc_info[1] for r in caplog.records if r.name == "braind.ingest.watcher" and r.exc_info]
    assert [str(exc) for exc in failures] == ["consumer failed"]
    assert watcher.alive()


def test_health_while_running(root: Path, start_watcher: Start) -> None:
    (root / "diary").mkdir()
    watcher, _ = start_watcher([root])
    health = watcher.health()
    assert health["state"] == "ok"
    assert health["roots"] == [{"path": str(root), "state": "watching", "reason": None}]
    assert health["watched_dirs"] == 2
    assert health["overflows"] == 0
    assert health["reason"] is None


IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE, IN_CLOSE_NOWRITE, IN_OPEN = 0x2, 0x4, 0x8, 0x10, 0x20
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200


def inotify_masks(inode: int) -> list[int]:
    """The masks of this process's inotify watches on one inode, as the kernel shows them in fdinfo."""
    masks = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines():
                fields = dict(part.split(":", 1) for part in line.split()[1:] if ":" in part)
                if line.startswith("inotify ") and int(fields["ino"], 16) == inode:
                    masks.append(int(fields["mask"], 16))
    return masks


def test_the_kernel_is_asked_for_changes_only(root: Path, start_watcher: Start) -> None:
    """Opens and read-only closes are never queued: each note's append would cost the daemon one more event."""
    (root / "diary").mkdir()
    start_watcher([root])
    changes = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
    for directory in (root, root / "diary"):
        masks = inotify_masks(directory.stat().st_ino)
        assert masks, f"no inotify watch on {directory}"
        assert all(mask & changes == changes for mask in masks)
        assert all(mask & (IN_OPEN | IN_CLOSE_NOWRITE) == 0 for mask in masks)


def test_stop_joins_every_thread_it_started(root: Path) -> None:
    baseline = set(threading.enumerate())
    rec = Recorder()
    watcher = Watcher([root], rec.on_due, rec.on_rescan)
    assert watcher.health()["state"] == "stopped"
    watcher.start()
    assert watcher.alive()
    assert len(set(threading.enumerate()) - baseline) == 4  # scheduler, observer, inotify reader, emitter
    watcher.stop()
    watcher.stop()
    assert set(threading.enumerate()) <= baseline
    assert not watcher.alive()
    assert watcher.health()["state"] == "stopped"


def test_a_watcher_starts_only_once(root: Path, start_watcher: Start) -> None:
    watcher, _ = start_watcher([root])
    with pytest.raises(RuntimeError, match="already started"):
        watcher.start()


def test_many_paths_of_one_root_settling_together_are_one_rescan_of_it(tmp_path: Path) -> None:
    """split_bursts: a root with BURST_PATHS due paths (or already bursting) is rescanned whole."""
    from braind.ingest.watcher import BURST_PATHS, split_bursts

    busy, quiet, other = tmp_path / "busy", tmp_path / "quiet", tmp_path / "elsewhere" / "x.md"
    many = [busy / "diary" / f"2026-01-{n:02d}.md" for n in range(1, BURST_PATHS + 1)]
    few = [quiet / "diary" / "2026-01-01.md"]
    assert split_bursts([*many, *few, other], [busy, quiet]) == ([busy], [*few, other])
    assert split_bursts(many[:-1], [busy, quiet]) == ([], many[:-1])
    assert split_bursts(few, [busy, quiet], {quiet}) == ([quiet], [])


def test_a_writer_that_stalls_mid_burst_is_still_one_rescan(root: Path, start_watcher: Start) -> None:
    """A checkout paused for longer than the quiet window (a loaded machine) stays one burst of its root."""
    from braind.ingest.watcher import BURST_PATHS

    _, rec = start_watcher([root], quiet=0.3, max_wait=5.0)
    (root / "diary").mkdir()
    for half in range(2):
        for n in range(BURST_PATHS + 8):
            write(root / "diary" / f"2026-0{half + 1}-{n % 28 + 1:02d}-{n}.md", "[08:00] pulled\n")
        time.sleep(0.5)  # past the first half's quiet window, within the burst's extra one
    rec.wait_rescan(root, "burst")
    time.sleep(1.0)
    assert rec.rescans.count((root, "burst")) == 1, rec.rescans
    assert rec.paths() <= {root / "diary"}, sorted(rec.paths())[:5]
