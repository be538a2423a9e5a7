"""A person's editor and braind writing the same file at once: nothing either of them wrote is lost.

The editor is a real second process (`tests/racers.py`) that saves MEMORY.md or a logfile again
and again, each save adding one line at the end: by an O_APPEND write, by a rename of a temp
file over the file (vim), or by truncate-then-write in place, the last two either checking first
that the file is unchanged since read (as vim does) or not at all (as a script). Meanwhile the test
sends braind rewrites (`memory_correct`, `memory_write_root` to a middle section) or appends
(`memory_write_root` to the last section, `memory_write_logfile`) of another unit of the same
file, as fast as they are answered. Afterwards (the daemon stopped, so the last look at a
replaced file's old inode has been taken) the file must hold every editor line exactly once and
every acknowledged braind write, and no write braind refused. The one loss that is not braind's:
an editor that saves a copy it read before braind's write was acknowledged replaces that write,
as it would anyone's; such a write is counted as "overwritten by the editor", never as lost.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from braind.errors import BraindError
from braind.model.layered import parse_logfile, parse_memory
from braind.rpc.client import Client
from tests.conftest import REPO, Daemon, today, wait_until
from tests.faults import assert_index_matches_files

SECONDS = 2.5
SOAK_SECONDS = 20.0
EDITORS = ["append", "rename", "inplace", "rename-naive", "inplace-naive"]
MEMORY = "# Memory\n\n## alpha\nfirst body\n\n## middle\nmiddle body\n\n## omega\nomega body\n"
LOGFILE = (
    "---\nname: notes\ntype: project\ndescription: race notes\n---\n\n# notes\n\n"
    "## [alpha] {day} 09:00\nfirst body\n\n## [middle] {day} 09:30\nmiddle body\n\n## [omega] {day} 10:00\nomega body\n"
)


@dataclass
class Ack:
    """One braind write: the value it wrote, when it was sent and when it was answered (None: refused)."""

    value: str
    sent: float
    answered: float | None


@dataclass
class Race:
    """What one race did, for the assertions and the figures."""

    text: str = ""
    log: str = ""
    editor_lines: list[str] = field(default_factory=list)
    saves: list[tuple[float, float]] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # refusals other than busy

    @property
    def acknowledged(self) -> list[Ack]:
        """The writes braind answered with success."""
        return [a for a in self.acks if a.answered is not None]

    def overwritten(self, ack: Ack) -> bool:
        """True when an editor save read the file before this write was answered and wrote it after it was sent."""
        assert ack.answered is not None
        return any(read < ack.answered and wrote > ack.sent for read, wrote in self.saves)


@dataclass(frozen=True)
class Case:
    """A braind operation racing the editor: the file, the request for value k, and how to find values in it."""

    rel: str
    method: str
    params: Callable[[int], dict[str, Any]]
    values: Callable[[str], list[str]]  # the braind values the final text holds, in file order
    replaces: bool  # True: each write replaces the last (memory_correct); False: each adds one


def section_body(text: str, name: str) -> list[str]:
    """The body lines of one MEMORY.md section."""
    parsed = parse_memory(text, 1 << 20)
    unit = next(u for u in parsed.units if u.title == name)
    return [line for line in parsed.lines[unit.start + 1 : unit.end] if line.strip()]


def entry_body(text: str, title: str) -> list[str]:
    """The body lines of one logfile entry."""
    parsed = parse_logfile(text, 1 << 20)
    unit = next(u for u in parsed.units if u.title == title)
    return [line for line in parsed.lines[unit.start + 1 : unit.end] if line.strip()]


def tagged(text: str, tag: str) -> list[str]:
    """Every line of the text that starts with a tag."""
    return [line for line in text.split("\n") if line.startswith(tag + " ")]


CASES = {
    "correct-section": Case(
        "MEMORY.md",
        "memory_correct",
        lambda k: {"scope": "root", "section": "alpha", "content": f"braind {k}", "approved": True},
        lambda text: section_body(text, "alpha"),
        True,
    ),
    "correct-entry": Case(
        "logs/notes.md",
        "memory_correct",
        lambda k: {"scope": "home", "name": "notes", "title": "alpha", "content": f"braind {k}", "approved": True},
        lambda text: entry_body(text, "alpha"),
        True,
    ),
    "write-middle-section": Case(
        "MEMORY.md",
        "memory_write_root",
        lambda k: {"section": "middle", "content": f"braind {k}"},
        lambda text: tagged(text, "braind"),
        False,
    ),
    "write-last-section": Case(
        "MEMORY.md",
        "memory_write_root",
        lambda k: {"section": "omega", "content": f"braind {k}"},
        lambda text: tagged(text, "braind"),
        False,
    ),
    "write-logfile": Case(
        "logs/notes.md",
        "memory_write_logfile",
        lambda k: {"scope": "home", "name": "notes", "content": f"braind {k}"},
        lambda text: tagged(text, "braind"),
        False,
    ),
}


def hand_written(d: Daemon) -> None:
    """MEMORY.md and a logfile written by a person before the daemon starts."""
    d.root.joinpath("logs").mkdir(parents=True)
    d.root.joinpath("MEMORY.md").write_text(MEMORY, encoding="utf-8")
    d.root.joinpath("logs", "notes.md").write_text(LOGFILE.format(day=today()), encoding="utf-8")


def editor(mode: str, path: Path, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    """Start the editor process."""
    argv = [sys.executable, "-m", "tests.racers", mode, str(path), str(seconds), "editor", str(out)]
    return subprocess.Popen(argv, cwd=REPO)


def braind_writes(d: Daemon, case: Case, until: float, race: Race) -> None:
    """Send the case's request again and again until `until`; `busy` is a refusal, anything else fails."""
    with Client(d.socket, timeout=30) as client:
        k = 0
        while time.monotonic() < until:
            ack = Ack(f"braind {k}", time.monotonic(), None)
            try:
                client.call(case.method, **case.params(k))
                ack.answered = time.monotonic()
            except BraindError as exc:
                if exc.reason != "busy":
                    race.errors.append(str(exc))
            race.acks.append(ack)
            k += 1


def run_race(d: Daemon, case: Case, mode: str, seconds: float) -> Race:
    """The editor and braind on one file for `seconds`; then stop the daemon and read what is left."""
    race = Race()
    out = d.base / "editor.json"
    proc = editor(mode, d.root / case.rel, seconds, out)
    writer = threading.Thread(target=braind_writes, args=(d, case, time.monotonic() + seconds, race))
    writer.start()
    writer.join(seconds + 120)
    assert proc.wait(120) == 0 and not writer.is_alive()
    report = json.loads(out.read_text())
    race.editor_lines, race.saves = report["lines"], [tuple(s) for s in report["saves"]]
    wait_until(lambda: settled(d, case), 30, "the watcher to index the editor's last save")
    assert_index_matches_files(d)  # stops the daemon: its last look at replaced files' old inodes
    race.text = (d.root / case.rel).read_text(encoding="utf-8")
    race.log = "\n".join(line for line in d.log_text().splitlines() if "braind.files.rewrite" in line)
    return race


def settled(d: Daemon, case: Case) -> bool:
    """True once the index holds the file as it is on disk (the watcher has seen the last save)."""
    path = d.root / case.rel
    text = path.read_text(encoding="utf-8")
    last = text.rstrip("\n").rsplit("\n", 1)[-1]
    hits = d.call("brain_recall", query=last, limit=500)["hits"]
    return any(h["path"] == str(path) and h["text"].endswith(last) for h in hits) and path.read_text() == text


def check_race(case: Case, race: Race, mode: str) -> dict[str, int]:
    """0 editor lines lost or doubled; every acknowledged write kept (or overwritten by the editor), no refused one."""
    assert not race.errors, f"braind refused with other reasons than busy: {race.errors[:3]}"
    lines = Counter(race.text.split("\n"))
    lost = [line for line in race.editor_lines if lines[line] == 0]
    doubled = [line for line in race.editor_lines if lines[line] > 1]
    assert not lost and not doubled, f"editor lines lost {lost[:5]} doubled {doubled[:5]}\n{race.log[-3000:]}"
    found = Counter(case.values(race.text))
    refused = [a.value for a in race.acks if a.answered is None and found[a.value]]
    assert not refused, f"writes that were refused are in the file: {refused[:5]}"
    assert all(n == 1 for n in found.values()), f"braind values doubled: {found.most_common(3)}\n{race.log[-3000:]}"
    acked = race.acknowledged
    assert acked, "no braind write got through"
    gone = [a for a in (acked[-1:] if case.replaces else acked) if not found[a.value]]
    lost_acks = [a.value for a in gone if mode == "append" or not race.overwritten(a)]
    assert not lost_acks, f"acknowledged braind writes lost: {lost_acks[:5]}\n{race.log[-3000:]}"
    if case.replaces:  # the unit holds the last acknowledged value, or one an editor's late save brought back
        body = list(found)
        assert body == [acked[-1].value] or (gone and len(body) == 1 and body[0] in {a.value for a in acked}), body
    busy = len(race.acks) - len(acked)
    return {
        "editor": len(race.editor_lines),
        "braind": len(acked),
        "busy": busy,
        "overwritten by the editor": len(gone),
    }


def race_once(make_daemon: Callable[..., Daemon], name: str, mode: str, seconds: float) -> dict[str, int]:
    """One race on a fresh root; the counts it made."""
    d = make_daemon({"inject": {"max_chars": 1 << 20}}, start=False)  # a fast editor makes MEMORY.md grow quickly
    hand_written(d)
    d.start()
    case = CASES[name]
    race = run_race(d, case, mode, seconds)
    counts = check_race(case, race, mode)
    print(f"race {name} vs {mode}: {counts}")
    return counts


@pytest.mark.parametrize("mode", EDITORS)
@pytest.mark.parametrize("name", list(CASES))
def test_braind_and_an_editor_on_one_file_lose_nothing(
    make_daemon: Callable[..., Daemon], name: str, mode: str
) -> None:
    race_once(make_daemon, name, mode, SECONDS)


@pytest.mark.soak
@pytest.mark.parametrize("mode", EDITORS)
@pytest.mark.parametrize("name", list(CASES))
def test_races_soak(make_daemon: Callable[..., Daemon], name: str, mode: str) -> None:
    race_once(make_daemon, name, mode, SOAK_SECONDS)
