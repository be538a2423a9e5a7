"""ENOSPC at every step of every write that touches more than one file, in the real daemon.

Each write is first run once while `tests/inject/sitecustomize.py` records the file operations
it makes below the memory root (creating, writing, syncing, linking, renaming). Then, for each
of those steps in turn, the same write (on fresh data) is sent while that one operation fails
with ENOSPC, and sent again once the disk has room:

- the first reply is an error and nothing the user can see changed (diary, MEMORY.md,
  logfiles, statuses, compact.log), or it is a success and everything was done;
- the retry succeeds, and the write's effect is there exactly once: no duplicate line, no
  second copy of an edit, no entry left live that should be tombstoned.

The failures are injected (a real full disk cannot be aimed at one step; the real one is in
`test_faults_writes.py`); the daemon, its files and its syscalls are otherwise the real ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from braind.errors import BraindError
from tests.conftest import REPO, Daemon, days_ago, today, wait_until
from tests.faults import WrappedDaemon, assert_index_matches_files

MEMORY = "# Memory\n\n## alpha\nfirst body\n\n## middle\nmiddle body\n\n## omega\nomega body\n"
LOGFILE = "---\nname: notes\ntype: project\ndescription: notes\n---\n\n# notes\n\n## [alpha] {day} 09:00\nfirst body\n"
CAN_FAIL = ("open", "write", "pwrite", "fsync", "link", "rename", "replace", "mkdir", "exchange")


@dataclass(frozen=True)
class Write:
    """One kind of write: what to set up for run n, how to send it, and how many times its effect is there."""

    prepare: Callable[[Daemon, int], Any]
    send: Callable[[Daemon, int, Any], Any]
    effect: Callable[[Daemon, int, Any], int]


def diary_text(d: Daemon) -> str:
    """Every diary file, joined."""
    return "".join(p.read_text() for p in sorted((d.root / "diary").glob("*.md")))


def live(d: Daemon, text: str) -> list[dict[str, Any]]:
    """Live typed memories with exactly this text."""
    return [e for e in d.call("memory.dump")["entries"] if e["text"] == text and e["status"] != "tombstoned"]


def status_of(d: Daemon, fp: str) -> str:
    """An entry's status."""
    return str(next(e for e in d.call("memory.dump")["entries"] if e["fp"] == fp)["status"])


def edited(d: Daemon, n: int, old: str) -> int:
    """memory.edit's effect: the new text once, live, and the old entry tombstoned (0 when not done)."""
    count = diary_text(d).count(f"edited fact {n} wren\n")
    if count == 0:
        assert status_of(d, old) == "live"
        return 0
    assert len(live(d, f"edited fact {n} wren")) == 1 and status_of(d, old) == "tombstoned"
    return count


def superseded(d: Daemon, n: int, old: str) -> int:
    """A same-key note's effect: the new text once, the old one tombstoned and in compact.log."""
    count = diary_text(d).count(f"newer fact {n} wren\n")
    logged = (d.root / ".braind" / "compact.log").read_text() if (d.root / ".braind" / "compact.log").exists() else ""
    if count == 0:
        assert status_of(d, old) == "live" and old not in logged
        return 0
    assert status_of(d, old) == "tombstoned" and logged.count(f" {old} rule1 ") == 1
    return count


def old_fact(d: Daemon, n: int) -> str:
    """A fact written 90 days ago and never used: compaction's rule 2 evicts it."""
    day = d.root / "diary" / f"{days_ago(90)}.md"
    day.parent.mkdir(exist_ok=True)
    with day.open("a") as f:
        f.write(f"[09:00] [fact] unused fact {n} wren\n")
    wait_until(lambda: any(e["text"] == f"unused fact {n} wren" for e in d.call("memory.dump")["entries"]))
    return str(next(e["fp"] for e in d.call("memory.dump")["entries"] if e["text"] == f"unused fact {n} wren"))


def compacted(d: Daemon, n: int, fp: str) -> int:
    """memory.compact's effect: the old fact tombstoned, and its compact.log line once."""
    logged = (d.root / ".braind" / "compact.log").read_text() if (d.root / ".braind" / "compact.log").exists() else ""
    if status_of(d, fp) == "live":
        assert fp not in logged
        return 0
    return logged.count(f" {fp} rule2 tombstone ")


def read_or_empty(path: Path) -> str:
    """A file's text, empty when it is missing."""
    return path.read_text() if path.exists() else ""


def in_file(rel: str, line: str) -> Callable[[Daemon, int, Any], int]:
    """How many times a line is in a file."""
    return lambda d, n, _: (d.root / rel).read_text().split("\n").count(line.format(n=n))


WRITES = {
    "memory.edit": Write(
        lambda d, n: d.call("brain_note", text=f"fact {n} wren", type="fact")["fp"],
        lambda d, n, fp: d.call("memory.edit", fp=fp, text=f"edited fact {n} wren", approved=True),
        lambda d, n, fp: edited(d, n, fp),
    ),
    "same-key note": Write(
        lambda d, n: d.call("brain_note", text=f"older fact {n} wren", type="fact", key=f"k{n}")["fp"],
        lambda d, n, _: d.call("brain_note", text=f"newer fact {n} wren", type="fact", key=f"k{n}", approved=True),
        lambda d, n, fp: superseded(d, n, fp),
    ),
    "memory.compact": Write(
        old_fact,
        lambda d, n, _: d.call("memory.compact", approved=True),
        lambda d, n, fp: compacted(d, n, fp),
    ),
    "memory_correct": Write(
        lambda d, n: None,
        lambda d, n, _: d.call("memory_correct", scope="root", section="alpha", content=f"body {n}", approved=True),
        in_file("MEMORY.md", "body {n}"),
    ),
    "memory_write_root (rewrite)": Write(
        lambda d, n: None,
        lambda d, n, _: d.call("memory_write_root", section="middle", content=f"middle {n}"),
        in_file("MEMORY.md", "middle {n}"),
    ),
    "memory_write_root (append)": Write(
        lambda d, n: None,
        lambda d, n, _: d.call("memory_write_root", section="omega", content=f"omega {n}"),
        in_file("MEMORY.md", "omega {n}"),
    ),
    "memory_write_logfile": Write(
        lambda d, n: None,
        lambda d, n, _: d.call("memory_write_logfile", scope="home", name="notes", content=f"entry {n}"),
        in_file("logs/notes.md", "entry {n}"),
    ),
    "memory_creator": Write(
        lambda d, n: (d.root / "logs" / "made.md").unlink(missing_ok=True),  # the same name each time
        lambda d, n, _: d.call(
            "memory_creator", scope="home", name="made", type="project", description=f"made {n}", heading="h"
        ),
        lambda d, n, _: int(f"description: made {n}\n" in read_or_empty(d.root / "logs" / "made.md")),
    ),
}


class Injector:
    """The plan file the daemon's sitecustomize reads."""

    def __init__(self, base: Path) -> None:
        self.control = base / "inject.json"
        self.record = base / "steps.txt"
        self.control.write_text("{}")

    def plan(self, plan: dict[str, Any]) -> None:
        """Set the plan (written whole, then renamed in, so the daemon never reads half of it)."""
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(json.dumps(plan))
        tmp.replace(self.control)

    def steps(self, d: Daemon, send: Callable[[], Any]) -> list[tuple[str, str, int]]:
        """Record the operations one write makes: (call, name, k-th time on that name)."""
        self.record.write_text("")
        self.plan({"record": str(self.record)})
        send()
        self.plan({})
        seen: dict[tuple[str, str], int] = {}
        steps = []
        for line in self.record.read_text().splitlines():
            call, name = line.split(" ", 1)
            seen[(call, name)] = seen.get((call, name), 0) + 1
            if call in CAN_FAIL:
                steps.append((call, name, seen[(call, name)]))
        return steps


def visible(d: Daemon) -> tuple[Any, ...]:
    """What a person sees: the memory files, statuses and compact.log (state.log may gain a closed intent)."""
    files = {
        str(p.relative_to(d.root)): p.read_bytes() for p in sorted(d.root.rglob("*.md")) if ".braind" not in p.parts
    }
    compact = d.root / ".braind" / "compact.log"
    statuses = sorted((e["fp"], e["status"]) for e in d.call("memory.dump")["entries"])
    return files, statuses, compact.read_bytes() if compact.exists() else b""


def step_daemon(short_tmp: Path) -> tuple[Daemon, Injector]:
    """A daemon whose file operations below its root can be failed on cue."""
    base = short_tmp / "steps"
    base.mkdir()
    injector = Injector(base)
    env = {
        "PYTHONPATH": f"{REPO / 'tests' / 'inject'}:{REPO}",
        "BRAIND_TEST_INJECT": str(injector.control),
        "BRAIND_TEST_ROOT": str(base / "root"),
    }
    d = WrappedDaemon(base, {"approval": {"mode": "open"}}, env=env)
    d.root.joinpath("logs").mkdir(parents=True)
    d.root.joinpath("MEMORY.md").write_text(MEMORY)
    d.root.joinpath("logs", "notes.md").write_text(LOGFILE.format(day=today()))
    d.start()
    return d, injector


def every_step(d: Daemon, injector: Injector, name: str) -> dict[str, int]:
    """Fail each step of one kind of write in turn; the counts of errors and successes."""
    write = WRITES[name]
    n = 0
    ctx = write.prepare(d, n)
    steps = injector.steps(d, lambda: write.send(d, n, ctx))
    assert steps, f"{name}: no file operation recorded"
    assert write.effect(d, n, ctx) == 1
    counts = {"steps": len(steps), "errors": 0, "successes": 0}
    for call, file, k in steps:
        n += 1
        ctx = write.prepare(d, n)
        before = visible(d)
        injector.plan({"fail": [call, file, k]})
        try:
            write.send(d, n, ctx)
            counts["successes"] += 1
            assert write.effect(d, n, ctx) == 1, (name, call, file, k)
        except BraindError as exc:
            counts["errors"] += 1
            assert exc.reason != "internal", (name, call, file, k, exc)
            assert "written" in exc.data or visible(d) == before, (name, call, file, k, exc)
        finally:
            injector.plan({})
        if write.effect(d, n, ctx) == 0:
            write.send(d, n, ctx)  # the retry, with room again
        assert write.effect(d, n, ctx) == 1, (name, "after the retry", call, file, k)
    return counts


@pytest.mark.parametrize("name", list(WRITES))
def test_enospc_at_every_step_leaves_all_or_nothing(short_tmp: Path, name: str) -> None:
    d, injector = step_daemon(short_tmp)
    try:
        print(f"ENOSPC steps of {name}:", every_step(d, injector, name))
        assert_index_matches_files(d)
    finally:
        d.stop()
