"""What braind writes survives rivals and accidents: a second daemon, a full disk, kill -9, merges, hard links.

- Two daemons on one memory root (each with its own state directory and socket): the second
  refuses to start, naming the first; on a root both first meet at run time, one writes and the
  other is refused, and no acknowledged write is lost.
- A full disk at every step of every write that touches several files: the reply is an error
  and nothing changed, or a success and everything was done; a retry never makes a duplicate.
- kill -9 during rewrites: the next start removes braind's leftovers (saying so in its log), the
  files hold the last acknowledged version or the one in flight, and compact.log misses no
  eviction whose tombstone was written.
- git conflict markers are reported, never indexed, and block rewrites; a hard-linked file is
  refused a rewrite rather than split.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from braind.errors import BraindError
from braind.files.durable import leftover
from braind.rpc.client import Client
from tests.conftest import Daemon, days_ago, run_cli, today, wait_until
from tests.faults import assert_index_matches_files, fill, refused_start, tiny_tmpfs

SEED = int(os.environ.get("BRAIND_FAULT_SEED", "7"))
MEMORY = "# Memory\n\n## alpha\nfirst body\n\n## middle\nmiddle body\n\n## omega\nomega body\n"
LOGFILE = (
    "---\nname: notes\ntype: project\ndescription: notes\n---\n\n# notes\n\n"
    "## [alpha] {day} 09:00\nfirst body\n\n## [omega] {day} 10:00\nomega body\n"
)


def refusal(d: Daemon, method: str, **params: Any) -> BraindError:
    """The error a request is refused with."""
    with pytest.raises(BraindError) as err:
        d.call(method, **params)
    return err.value


def hand_written(d: Daemon) -> None:
    """MEMORY.md and a logfile as a person wrote them."""
    d.root.joinpath("logs").mkdir(parents=True, exist_ok=True)
    d.root.joinpath("MEMORY.md").write_text(MEMORY, encoding="utf-8")
    d.root.joinpath("logs", "notes.md").write_text(LOGFILE.format(day=today()), encoding="utf-8")


def tree(root: Path) -> dict[str, bytes]:
    """Every file below a root with its bytes (the daemon's lock file left out: it says who runs)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and p.name != "daemon.lock"
    }


def leftovers(root: Path) -> list[str]:
    """braind's own temp files anywhere below a root."""
    return [str(p) for p in root.rglob("*") if leftover(p.name) is not None]


# -- one daemon per memory root -------------------------------------------------------------------


def test_a_second_daemon_on_the_same_root_refuses_naming_the_first(make_daemon: Callable[..., Daemon]) -> None:
    first = make_daemon()
    first.call("brain_note", text="written by the first daemon")
    second = make_daemon({"memory_root": str(first.root)}, start=False, name="second")
    logged = refused_start(second)
    assert first.proc is not None
    for said in ("already_running", f"pid {first.proc.pid}", str(first.state), str(first.socket)):
        assert said in logged, (said, logged[-1500:])
    holder = json.loads(first.root.joinpath(".braind", "daemon.lock").read_text())
    assert holder == {"pid": first.proc.pid, "state_dir": str(first.state), "socket": str(first.socket)}
    first.stop()
    second.start()  # the lock goes with the daemon that held it
    assert second.recall("first daemon") == ["written by the first daemon"]
    assert_index_matches_files(second)


def test_a_project_root_is_written_by_one_daemon_only(make_daemon: Callable[..., Daemon], short_tmp: Path) -> None:
    """A project first named at run time is locked before its first write; the other daemon may still read it."""
    one, two = make_daemon(name="one"), make_daemon(name="two")
    project = short_tmp / "project"
    project.mkdir()
    params = {"scope": "project", "project": str(project), "name": "shared"}
    one.call("memory_creator", **params, type="project", description="shared notes", heading="shared")
    one.call("memory_write_logfile", **params, content="from the first daemon")
    err = refusal(two, "memory_write_logfile", **params, content="from the second daemon")
    assert err.reason == "already_running" and str(one.state) in err.message, err
    assert "from the first daemon" in two.call("memory_recall", **params)["text"]
    assert refusal(two, "brain_note", text="a project note", project=str(project)).reason == "already_running"
    one.stop()
    two.call("memory_write_logfile", **params, content="from the second daemon")
    text = (project / ".agents" / ".memory" / "logs" / "shared.md").read_text()
    assert "from the first daemon" in text and "from the second daemon" in text
    assert_index_matches_files(two, [project])


def write_loop(d: Daemon, tag: str, until: float, acked: list[str], refused: Counter[str]) -> None:
    """memory_write_root as fast as it is answered, until `until`."""
    with Client(d.socket, timeout=30) as client:
        n = 0
        while time.monotonic() < until:
            line = f"{tag} {n}"
            try:
                client.call("memory_write_root", section="shared", content=line)
                acked.append(line)
            except BraindError as exc:
                refused[exc.reason] += 1
            n += 1


def test_two_daemons_meeting_a_root_at_run_time_lose_no_acknowledged_write(
    make_daemon: Callable[..., Daemon], short_tmp: Path
) -> None:
    """An empty root is locked at its first write: one daemon writes, the other is refused, nothing is lost."""
    shared = short_tmp / "shared"
    shared.mkdir()
    one = make_daemon({"memory_root": str(shared)}, name="one")
    two = make_daemon({"memory_root": str(shared)}, name="two")
    acked: dict[str, list[str]] = {"one": [], "two": []}
    refused: Counter[str] = Counter()
    until = time.monotonic() + 2.0
    writers = [
        threading.Thread(target=write_loop, args=(d, tag, until, acked[tag], refused))
        for d, tag in ((one, "one"), (two, "two"))
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    text = (shared / "MEMORY.md").read_text()
    lines = Counter(text.split("\n"))
    assert [tag for tag in acked if acked[tag]] in (["one"], ["two"]), {t: len(a) for t, a in acked.items()}
    assert set(refused) == {"already_running"} and sum(refused.values()) > 0, refused
    lost = [line for lines_ in acked.values() for line in lines_ if lines[line] != 1]
    assert not lost, lost[:5]
    print(f"two daemons: {sum(map(len, acked.values()))} acknowledged, {refused['already_running']} refused, 0 lost")


# -- git conflict markers --------------------------------------------------------------------------

CONFLICTED = (
    "# Memory\n\n## alpha\nbefore the merge\n<<<<<<< HEAD\nours heron\n=======\ntheirs egret\n>>>>>>> branch\n"
    "\n## omega\nomega body\n"
)


def test_conflict_markers_are_reported_skipped_and_block_rewrites(daemon: Daemon) -> None:
    daemon.root.mkdir(exist_ok=True)  # a first start creates the user root
    memory = daemon.root / "MEMORY.md"
    memory.write_text(CONFLICTED, encoding="utf-8")
    logs = daemon.root / "logs"
    logs.mkdir()
    logfile = logs / "notes.md"
    logfile.write_text(LOGFILE.format(day=today()) + "<<<<<<< HEAD\nlog ours\n=======\nlog theirs\n>>>>>>> b\n")
    diary = daemon.root / "diary" / f"{today()}.md"
    diary.parent.mkdir()
    diary.write_text("[09:00] kept kite\n<<<<<<< HEAD\n[09:01] ours ibis\n=======\n[09:02] theirs ibis\n>>>>>>> b\n")

    def reported() -> set[tuple[str, int]]:
        return {
            (p["path"], p["line"]) for p in daemon.call("status")["skipped_lines"] if p["reason"] == "conflict_markers"
        }

    want = {(str(memory), n) for n in (5, 7, 9)} | {(str(logfile), n) for n in (14, 16, 18)}
    want |= {(str(diary), n) for n in (2, 4, 6)}
    wait_until(lambda: reported() == want, what="the conflict markers in status")
    assert daemon.recall("before merge") == ["alpha\nbefore the merge"]  # the rest of the section is indexed
    for word in ("heron", "egret", "HEAD", "ibis", "theirs"):
        assert daemon.recall(word) == [], word  # neither side of a conflict nor its markers are memory text
    assert daemon.recall("kite") == ["kept kite"]
    before = memory.read_bytes(), logfile.read_bytes()
    err = refusal(daemon, "memory_correct", scope="root", section="omega", content="new", approved=True)
    assert err.reason == "conflict_markers" and err.data["line"] == 5 and f"{memory}:5" in err.message, err
    assert refusal(daemon, "memory_write_root", section="omega", content="more").reason == "conflict_markers"
    err = refusal(daemon, "memory_write_logfile", scope="home", name="notes", content="more")
    assert err.reason == "conflict_markers" and err.data["line"] == 14, err
    assert (memory.read_bytes(), logfile.read_bytes()) == before
    daemon.call("brain_note", text="a diary still takes appends")  # a diary is never rewritten
    check = run_cli("check", str(daemon.root), "--json", config=daemon.config_path)
    assert check.returncode == 3  # skipped lines only: the rest of each file is indexed
    listed = {
        (p["path"], p["line"]) for p in json.loads(check.stdout)["skipped_lines"] if p["reason"] == "conflict_markers"
    }
    assert listed == want
    memory.write_text(CONFLICTED.replace("<<<<<<< HEAD\n", "").replace("=======\n", "").replace(">>>>>>> branch\n", ""))
    daemon.wait_recall("egret", "alpha\nbefore the merge\nours heron\ntheirs egret")
    daemon.call("memory_correct", scope="root", section="omega", content="resolved", approved=True)
    assert memory.read_text().endswith("## omega\nresolved\n")
    assert_index_matches_files(daemon)


# -- hard links -----------------------------------------------------------------------------------


def test_a_hard_linked_memory_file_is_never_split(daemon: Daemon) -> None:
    """A rewrite would give MEMORY.md a new inode: refused, logged; appends keep the link and work."""
    daemon.root.mkdir(exist_ok=True)
    memory = daemon.root / "MEMORY.md"
    memory.write_text(MEMORY, encoding="utf-8")
    other = daemon.base / "memory-elsewhere.md"
    os.link(memory, other)
    daemon.wait_recall("omega", "omega\nomega body")
    err = refusal(daemon, "memory_correct", scope="root", section="alpha", content="new", approved=True)
    assert err.reason == "hard_link" and err.data["links"] == 2 and str(memory) in err.message, err
    assert memory.read_text() == MEMORY and os.path.samefile(memory, other)
    assert "refused to rewrite" in daemon.log_text() and "2 hard links" in daemon.log_text()
    daemon.call("memory_write_root", section="omega", content="appended through the link")
    assert os.path.samefile(memory, other) and other.read_text().endswith("appended through the link\n")
    os.unlink(other)
    daemon.call("memory_correct", scope="root", section="alpha", content="rewritten once alone", approved=True)
    assert "## alpha\nrewritten once alone\n" in memory.read_text()
    assert_index_matches_files(daemon)


def test_the_backup_left_linked_by_a_crash_is_not_a_hard_link(make_daemon: Callable[..., Daemon]) -> None:
    """After a crash between keeping the backup link and the swap, MEMORY.md and its .bak share an inode."""
    d = make_daemon(start=False)
    hand_written(d)
    bak = d.root / ".braind" / "bak"
    bak.mkdir(parents=True)
    os.link(d.root / "MEMORY.md", bak / "MEMORY.md.bak")
    d.start()
    d.call("memory_correct", scope="root", section="alpha", content="rewritten", approved=True)
    assert (bak / "MEMORY.md.bak").read_text() == MEMORY and "rewritten" in (d.root / "MEMORY.md").read_text()
    assert_index_matches_files(d)


# -- a full disk, for real ---------------------------------------------------------------------------


def full_root(d: Daemon) -> None:
    """The root's disk full, with room left in the diary's last page but none for state.log to grow."""
    state_log = d.root / ".braind" / "state.log"
    state_log.parent.mkdir(exist_ok=True)
    size = state_log.stat().st_size if state_log.exists() else 0
    with state_log.open("ab") as f:
        f.write(b"\n" * (-size % 4096 or 4096))  # blank lines, read as nothing: state.log ends on a page boundary
    fill(d.root / "ballast")


@pytest.mark.parametrize("how", ["edit", "same-key note"])
def test_a_full_disk_between_the_diary_line_and_its_state_changes_nothing(
    make_daemon: Callable[..., Daemon], how: str
) -> None:
    """The new line fits in the diary's last page, its tombstone not in state.log: io_error, nothing written."""
    d = make_daemon({"approval": {"mode": "open"}}, start=False)
    with tiny_tmpfs(d.root, "64k"):
        d.start()
        old = d.call("brain_note", text="the old wording of a fact", type="fact", key="port")["fp"]
        full_root(d)
        before = tree(d.root)

        def write() -> dict[str, Any]:
            if how == "edit":
                return dict(d.call("memory.edit", fp=old, text="the new wording of a fact"))
            return dict(d.call("brain_note", text="the new wording of a fact", type="fact", key="port"))

        with pytest.raises(BraindError) as err:
            write()
        assert err.value.reason == "io_error" and "nothing was written" in err.value.message, err.value
        assert tree(d.root) == before
        assert [e["text"] for e in d.call("memory.list")["entries"]] == ["the old wording of a fact"]
        (d.root / "ballast").unlink()
        done = write()
        diary = (d.root / "diary" / f"{today()}.md").read_text()
        assert diary.count("the new wording of a fact") == 1 and diary.count("the old wording of a fact") == 1
        listed = d.call("memory.list")["entries"]
        assert [(e["fp"], e["text"]) for e in listed] == [(done["fp"], "the new wording of a fact")]
        assert d.call("memory.dump")["entries"][0]["status"] == "tombstoned"
        assert_index_matches_files(d)


def test_a_full_state_directory_never_fails_a_durable_note(make_daemon: Callable[..., Daemon]) -> None:
    """The month's index partition cannot be created: every note still answers, reads go on, the index catches up."""
    d = make_daemon(start=False)
    diary = d.root / "diary"
    diary.mkdir(parents=True)
    (diary / f"{days_ago(40)}.md").write_text("[10:00] an older note about a puffin\n")
    with tiny_tmpfs(d.state, "1m"):
        d.start()
        fill(d.state / "ballast")
        notes = [f"note {n} while the index is full guillemot" for n in range(30)]
        fps = [d.call("brain_note", text=note)["fp"] for note in notes]
        assert all(fps) and len(set(fps)) == len(notes)
        assert (diary / f"{today()}.md").read_text().count("guillemot") == len(notes)
        assert d.recall("puffin", days=365) == ["an older note about a puffin"]  # reads keep working
        assert d.call("status")["state"] == "ready"
        (d.state / "ballast").unlink()
        d.call("brain_note", text="the first note once there is room again guillemot")
        wait_until(lambda: len(d.recall("guillemot", limit=100)) == len(notes) + 1, 30, "the index to catch up")
        wait_until(lambda: d.call("status")["index"]["queued"] == 0, 30, "every note committed: no commit kept a lock")
        assert_index_matches_files(d)


# -- kill -9 during rewrites ----------------------------------------------------------------------


def rewrite_loop(d: Daemon, acked: list[str], sent: list[str]) -> None:
    """memory_correct of a section and a logfile entry, alternately, until the daemon is killed."""
    try:
        with Client(d.socket, timeout=30) as client:
            for n in range(100_000):
                value = f"value {n}"
                sent.append(value)
                if n % 2:
                    client.call("memory_correct", scope="root", section="alpha", content=value, approved=True)
                else:
                    params = {"scope": "home", "name": "notes", "title": "alpha", "content": value}
                    client.call("memory_correct", **params, approved=True)
                acked.append(value)
    except (BraindError, OSError):
        return


def section(text: str, name: str) -> list[str]:
    """The body lines of a `## name` (or `## [name] …`) unit."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line == f"## {name}" or line.startswith(f"## [{name}]"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [line for line in lines[start + 1 : end] if line.strip()]


def kill_during_rewrites(make_daemon: Callable[..., Daemon], rounds: int) -> dict[str, int]:
    """Rounds of rewrites killed at a random moment; after each restart, nothing half done is left."""
    rng = random.Random(SEED)
    d = make_daemon(start=False)
    hand_written(d)
    cleaned = 0
    for _ in range(rounds):
        d.start()
        assert not leftovers(d.root), leftovers(d.root)
        acked: list[str] = []
        sent: list[str] = []
        writer = threading.Thread(target=rewrite_loop, args=(d, acked, sent))
        writer.start()
        wait_until(lambda acked=acked: len(acked) >= 2, 30, "some rewrites")
        time.sleep(rng.random() * 0.03)  # the kill moment: anywhere inside a rewrite
        logged = len(d.log_text())
        d.kill()
        writer.join(30)
        found = leftovers(d.root)
        d.start()
        log = d.log_text()[logged:]
        cleaned += len(found)
        for path in found:
            assert f"leftover {path}" in log, (path, log[-2000:])
        assert not leftovers(d.root), leftovers(d.root)
        last, flight = acked[-1], sent[-1]
        for rel, name in (("MEMORY.md", "alpha"), ("logs/notes.md", "alpha")):
            text = (d.root / rel).read_text()
            body = section(text, name)
            assert len(body) == 1 and body[0] in sent, (rel, body)
            assert acked.index(body[0]) >= len(acked) - 2 if body[0] in acked else body[0] == flight, (body, last)
        assert section((d.root / "MEMORY.md").read_text(), "omega") == ["omega body"]
        d.stop()
    d.start()
    assert_index_matches_files(d)
    return {"rounds": rounds, "leftovers cleaned": cleaned}


def test_kill_9_during_rewrites_leaves_whole_files_and_no_leftovers(make_daemon: Callable[..., Daemon]) -> None:
    print("kill -9 during rewrites:", kill_during_rewrites(make_daemon, 12))


@pytest.mark.soak
def test_kill_9_during_rewrites_soak(make_daemon: Callable[..., Daemon]) -> None:
    print("kill -9 during rewrites:", kill_during_rewrites(make_daemon, 150))


def key_note_loop(d: Daemon, acked: list[str]) -> None:
    """Same-key notes, each superseding the one before (a tombstone and a compact.log line each)."""
    try:
        with Client(d.socket, timeout=30) as client:
            for n in range(100_000):
                client.call("brain_note", text=f"the port is {n}", type="fact", key="port", approved=True)
                acked.append(str(n))
    except (BraindError, OSError):
        return


def compact_log_after_kills(make_daemon: Callable[..., Daemon], rounds: int) -> int:
    """Kill -9 during same-key notes; after each start, compact.log lists every tombstone state.log holds."""
    rng = random.Random(SEED)
    d = make_daemon()
    for _ in range(rounds):
        acked: list[str] = []
        writer = threading.Thread(target=key_note_loop, args=(d, acked))
        writer.start()
        wait_until(lambda acked=acked: len(acked) >= 2, 30, "some notes")
        time.sleep(rng.random() * 0.02)
        d.kill()
        writer.join(30)
        d.start()
        state = [
            json.loads(line) for line in (d.root / ".braind" / "state.log").read_text().splitlines() if line.strip()
        ]
        keyed = Counter(r["fp"] for r in state if r.get("op") == "tombstone" and r.get("why") == "key")
        logged = Counter(line.split(" ")[1] for line in (d.root / ".braind" / "compact.log").read_text().splitlines())
        assert keyed == logged, (keyed - logged, logged - keyed)
        live = [e["text"] for e in d.call("memory.list")["entries"]]
        assert len(live) == 1 and live[0].split()[-1] in {*acked[-1:], str(len(acked))}, (live, acked[-2:])
    assert_index_matches_files(d)
    return sum(keyed.values())


def test_compact_log_misses_no_eviction_after_kill_9(make_daemon: Callable[..., Daemon]) -> None:
    print("compact.log after kill -9:", compact_log_after_kills(make_daemon, 10), "evictions, 0 missing")


def test_leftovers_from_older_versions_are_cleaned_at_start(make_daemon: Callable[..., Daemon]) -> None:
    """The fixed temp names of older versions, and a backup link of a version no longer in place."""
    d = make_daemon(start=False)
    hand_written(d)
    bak = d.root / ".braind" / "bak"
    (bak / "logs").mkdir(parents=True)
    (d.root / ".MEMORY.md.braind-tmp").write_text("## alpha\nan unacknowledged rewrite\n")
    (d.root / "logs" / ".notes.md.braind-tmp-123-4").write_text("half a logfile")
    (bak / ".MEMORY.md.bak-tmp").write_text(MEMORY)
    shutil.copy(d.root / "logs" / "notes.md", bak / "logs" / ".notes.md.braind-old-123-5")  # not the current inode
    os.link(d.root / "MEMORY.md", bak / ".MEMORY.md.braind-old-123-6")  # the current inode
    d.start()
    assert not leftovers(d.root), leftovers(d.root)
    log = d.log_text()
    assert log.count("clean-up of") == 5, log
    assert f"removed leftover {d.root / '.MEMORY.md.braind-tmp'} (an unfinished write)" in log
    assert f"kept leftover {bak / 'logs' / '.notes.md.braind-old-123-5'} as the backup notes.md.bak" in log
    assert (bak / "logs" / "notes.md.bak").read_text() == LOGFILE.format(day=today())
    assert (d.root / "MEMORY.md").read_text() == MEMORY
    assert_index_matches_files(d)


def test_text_a_crash_left_being_carried_over_is_put_in_at_start(make_daemon: Callable[..., Daemon]) -> None:
    """`<name>.carry` holds what was on its way into a file when braind died; the next start puts it in, once."""
    d = make_daemon(start=False)
    hand_written(d)
    bak = d.root / ".braind" / "bak"
    (bak / "logs").mkdir(parents=True)
    (bak / "MEMORY.md.carry").write_text("a line an editor appended to an old version\n")
    (bak / "logs" / "notes.md.carry").write_text("omega body\n")  # already in the file: not added again
    d.start()
    assert (d.root / "MEMORY.md").read_text() == MEMORY + "a line an editor appended to an old version\n"
    assert (d.root / "logs" / "notes.md").read_text() == LOGFILE.format(day=today())
    assert not list(bak.rglob("*.carry"))
    assert "put in " in d.log_text() and str(d.root / "MEMORY.md") in d.log_text()
    d.wait_recall("editor appended", "omega\nomega body\na line an editor appended to an old version")
    assert_index_matches_files(d)
