"""Typed memory end to end: the real daemon, its socket, the files on disk and the state under .braind/."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from braind.errors import BraindError
from tests.conftest import Daemon, days_ago, today, wait_until
from tests.faults import assert_index_matches_files

OPEN = {"approval": {"mode": "open"}}


def diary_text(daemon: Daemon, day: str | None = None) -> str:
    """Today's (or a day's) diary file as a person would read it."""
    path = daemon.root / "diary" / f"{day or today()}.md"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def error_of(call: Callable[[], Any]) -> BraindError:
    """The error a call fails with."""
    with pytest.raises(BraindError) as info:
        call()
    return info.value


def tree_digest(root: Path) -> dict[str, str]:
    """path -> sha256 of every file below a root, to prove nothing changed."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def write_diary(daemon: Daemon, day: str, *lines: str) -> None:
    """Append lines to a diary day the way an editor would, and wait until the last is indexed."""
    (daemon.root / "diary").mkdir(parents=True, exist_ok=True)
    with open(daemon.root / "diary" / f"{day}.md", "a", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))
    last = lines[-1].split("] ")[-1]
    wait_until(lambda: any(e["text"] == last for e in daemon.call("memory.entries", limit=500)["entries"]), 15, last)


# -- 1. types and keys --------------------------------------------------------------------------------


def test_brain_note_and_an_editor_write_the_same_syntax(make_daemon: Callable[..., Daemon]) -> None:
    """A typed note lands as `[HH:MM] [type key=K triggers] text`; a hand-typed line reads back the same."""
    daemon = make_daemon(OPEN)
    reply = daemon.call(
        "brain_note",
        text="Deploy with make ship",
        type="workflow",
        key="deploy",
        triggers=["file:Makefile", "tool:make"],
    )
    line = diary_text(daemon).splitlines()[-1]
    assert line == f"[{reply['time']}] [workflow key=deploy file:Makefile tool:make] Deploy with make ship"
    write_diary(daemon, today(), "[09:15] [error key=db err:E42 tool:psql] Postgres refuses TCP on 5433")
    listed = {e["text"]: e for e in daemon.call("memory.list")["entries"]}
    by_hand = listed["Postgres refuses TCP on 5433"]
    assert (by_hand["type"], by_hand["key"], by_hand["triggers"]) == ("error", "db", ["err:E42", "tool:psql"])
    by_note = listed["Deploy with make ship"]
    assert (by_note["fp"], by_note["type"], by_note["triggers"]) == (
        reply["fp"],
        "workflow",
        ["file:Makefile", "tool:make"],
    )
    assert_index_matches_files(daemon)


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"type": "opinion"}, "invalid_params"),
        ({"key": "two words"}, "invalid_params"),
        ({"triggers": ["dir:src"]}, "invalid_params"),
        ({"triggers": ["file:"]}, "invalid_params"),
    ],
)
def test_bad_types_keys_and_triggers_are_refused(daemon: Daemon, params: dict[str, Any], reason: str) -> None:
    """Nothing is written for a malformed typed note."""
    err = error_of(lambda: daemon.call("memory.add", text="x", **params))
    assert err.reason == reason
    assert diary_text(daemon) == ""


# -- 2. realms --------------------------------------------------------------------------------------------


def test_a_project_secret_never_reaches_another_project(make_daemon: Callable[..., Daemon], tmp_path: Path) -> None:
    """Written in project A; searched, listed, injected and addressed from project B and the user realm: never seen."""
    daemon = make_daemon(OPEN)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    secret = daemon.call(
        "memory.add", text="vault passphrase is tangerine", type="fact", triggers=["file:vault.py"], project=str(a)
    )
    assert (a / ".agents" / ".memory" / "diary").is_dir()
    assert daemon.recall("tangerine", project=str(a)) == ["vault passphrase is tangerine"]
    signals = {"cwd": str(b), "tools": [{"tool": "read", "files": [str(b / "vault.py")]}]}
    for project in (str(b), None):
        scope = {"project": project} if project else {}
        assert daemon.recall("tangerine", **scope) == []
        assert daemon.call("memory.query", term="tangerine", **scope)["entries"] == []
        assert daemon.call("memory.list", **scope)["entries"] == []
        assert daemon.call("memory.entries", term="tangerine", **scope)["entries"] == []
        assert daemon.call("memory_recall", triggers=["file:vault.py"], **scope)["entries"] == []
        assert "tangerine" not in daemon.call("inject", session=f"s-{project}", signals=signals, **scope)["text"]
        assert (
            error_of(lambda s=scope: daemon.call("memory.remove", fp=secret["fp"], approved=True, **s)).reason
            == "not_found"
        )
    assert daemon.call("memory.query", term="tangerine", project=str(a))["total"] == 1
    assert_index_matches_files(daemon, projects=[a])


# -- 3. trigger recall in inject -----------------------------------------------------------------------


def add(daemon: Daemon, text: str, type: str, *triggers: str, **kw: Any) -> str:
    """Add a typed memory and return its fp."""
    return str(daemon.call("memory.add", text=text, type=type, triggers=list(triggers), approved=True, **kw)["fp"])


def triggered_lines(text: str) -> list[str]:
    """The lines of the triggered section of an injection block."""
    if "## Typed memories" not in text:
        return []
    section = text.split("## Typed memories", 1)[1].split("\n\n", 1)[0]
    return [line for line in section.splitlines()[1:] if line.startswith("- [")]


def test_inject_picks_memories_by_signals_in_priority_order(make_daemon: Callable[..., Daemon]) -> None:
    """Pinned first, then workflow > error > decision > fact; each with its reason; unmatched left out."""
    daemon = make_daemon(OPEN)
    fact = add(daemon, "app.py is the entry point", "fact", "file:app.py")
    add(daemon, "choose sqlite for tests", "decision", "file:app.py")
    add(daemon, "E42 means the port is taken", "error", "err:E42")
    add(daemon, "edit then pytest", "workflow", "tool:pytest")
    add(daemon, "unrelated fact", "fact", "file:other.py")
    daemon.call("memory.pin", fp=fact)
    signals = {"cwd": "/w/p", "tools": [{"tool": "read", "files": ["/w/p/app.py"]}, {"tool": "pytest", "error": "E42"}]}
    block = daemon.call("inject", session="s1", turn=1, signals=signals)
    lines = triggered_lines(block["text"])
    assert lines == [
        "- [fact] app.py is the entry point (pinned; matched file:app.py)",
        "- [workflow] edit then pytest (matched tool:pytest)",
        "- [error] E42 means the port is taken (matched err:E42)",
        "- [decision] choose sqlite for tests (matched file:app.py)",
    ]
    assert [p["entries"] for p in block["parts"] if p["name"] == "triggered"] == [4]
    again = daemon.call("inject", session="s2", turn=1, signals=signals)
    assert triggered_lines(again["text"]) == lines  # the same signals give the same block
    assert triggered_lines(daemon.call("inject", session="s3", turn=1, signals={"cwd": "/x"})["text"]) == []


def test_trigger_budget_entries_and_characters(make_daemon: Callable[..., Daemon]) -> None:
    """inject.trigger_max_entries and trigger_max_chars hold."""
    daemon = make_daemon({**OPEN, "inject": {"trigger_max_entries": 3, "trigger_max_chars": 400}})
    for i in range(6):
        add(daemon, f"error number {i} " + "detail " * 8, "error", "err:E1")
    lines = triggered_lines(
        daemon.call("inject", session="s", signals={"tools": [{"tool": "x", "error": "E1"}]})["text"]
    )
    assert len(lines) == 3 and sum(len(line) + 1 for line in lines) <= 400
    daemon.stop()
    small = make_daemon({**OPEN, "inject": {"trigger_max_chars": 120}}, name="small")
    for i in range(4):
        add(small, f"error number {i} " + "detail " * 8, "error", "err:E1")
    lines = triggered_lines(
        small.call("inject", session="s", signals={"tools": [{"tool": "x", "error": "E1"}]})["text"]
    )
    assert len(lines) == 1


def test_memory_recall_with_triggers_and_query(make_daemon: Callable[..., Daemon]) -> None:
    """The explicit form of trigger recall, and typed search by words."""
    daemon = make_daemon(OPEN)
    add(daemon, "pytest needs the venv", "fact", "tool:pytest")
    add(daemon, "ruff before commit", "workflow", "tool:git")
    found = daemon.call("memory_recall", triggers=["tool:pytest", "tool:git"])
    assert [e["text"] for e in found["entries"]] == ["ruff before commit", "pytest needs the venv"]
    assert [e["text"] for e in daemon.call("memory_recall", query="venv")["entries"]] == ["pytest needs the venv"]
    only = daemon.call("memory_recall", triggers=["tool:pytest", "tool:git"], type="fact")
    assert [e["text"] for e in only["entries"]] == ["pytest needs the venv"]
    assert error_of(lambda: daemon.call("memory_recall", query="x", section="a")).reason == "invalid_params"


def test_injected_text_neutralises_template_braces(make_daemon: Callable[..., Daemon]) -> None:
    """`{{` in memory never reaches the agent as a template placeholder."""
    daemon = make_daemon(OPEN)
    daemon.call("brain_note", text="render {{ user.name }} in the header")
    text = daemon.call("inject", session="s")["text"]
    assert "render" in text and "{{" not in text and "}}" not in text


# -- 4. the command set ---------------------------------------------------------------------------------


def test_edit_tombstones_the_old_entry_and_undo_reverses_it(make_daemon: Callable[..., Daemon]) -> None:
    """Edit appends the new text linked to the old; undo (by either fp) brings the old back."""
    daemon = make_daemon(OPEN)
    old = add(daemon, "the staging host is blue", "fact", "file:deploy.sh")
    edited = daemon.call("memory.edit", fp=old[:5], text="the staging host is green")
    assert edited["replaces"] == old
    lines = diary_text(daemon).splitlines()
    assert lines[0].endswith("the staging host is blue") and lines[1].endswith("the staging host is green")
    assert daemon.recall("staging host") == ["the staging host is green"]
    dumped = {e["fp"]: e for e in daemon.call("memory.dump")["entries"]}
    assert (dumped[old]["status"], dumped[old]["why"], dumped[old]["by"]) == ("tombstoned", "edit", edited["fp"])
    undone = daemon.call("memory.undo", fp=edited["fp"])
    assert undone["fp"] == old and undone["tombstoned"] == [edited["fp"]]
    assert daemon.recall("staging host") == ["the staging host is blue"]
    assert len(diary_text(daemon).splitlines()) == 2  # nothing deleted from the file
    assert_index_matches_files(daemon)


def test_remove_pin_unpin_undo(make_daemon: Callable[..., Daemon]) -> None:
    """Remove is a tombstone (undo restores); pin survives removal and comes back with undo."""
    daemon = make_daemon(OPEN)
    fp = add(daemon, "cache lives in /var/cache/app", "fact", "file:cache.py")
    assert daemon.call("memory.pin", fp=fp)["status"] == "pinned"
    assert daemon.call("memory.remove", fp=fp)["status"] == "tombstoned"
    assert daemon.recall("cache") == [] and daemon.call("memory.list")["entries"] == []
    assert daemon.call("memory.remove", fp=fp)["changed"] is False
    assert daemon.call("memory.undo", fp=fp)["status"] == "pinned"
    assert daemon.recall("cache") == ["cache lives in /var/cache/app"]
    assert daemon.call("memory.unpin", fp=fp)["status"] == "live"
    assert daemon.call("memory.undo", fp=fp)["status"] == "pinned"  # undo of the unpin
    log = [json.loads(line) for line in (daemon.root / ".braind" / "state.log").read_text().splitlines()]
    assert [r["op"] for r in log] == ["pin", "tombstone", "undo", "unpin", "undo"]
    assert "cache lives in /var/cache/app" in diary_text(daemon)
    assert_index_matches_files(daemon)


def test_fingerprint_prefixes_unique_ambiguous_and_unknown(make_daemon: Callable[..., Daemon]) -> None:
    """A unique prefix resolves; an ambiguous one lists the candidates; junk is invalid."""
    daemon = make_daemon(OPEN)
    fps: dict[str, str] = {}
    n = 0
    while True:
        fp = add(daemon, f"note number {n}", "fact")
        n += 1
        if fp[0] in fps:
            break
        fps[fp[0]] = fp
    err = error_of(lambda: daemon.call("memory.pin", fp=fp[0]))
    assert err.reason == "ambiguous"
    assert {m["fp"] for m in err.data["matches"]} >= {fp, fps[fp[0]]}
    assert daemon.call("memory.pin", fp=fp[:12])["fp"] == fp
    assert error_of(lambda: daemon.call("memory.pin", fp="zz")).reason == "invalid_params"
    assert error_of(lambda: daemon.call("memory.pin", fp="0123456789ab")).reason == "not_found"


def test_query_entries_list_and_dump(make_daemon: Callable[..., Daemon]) -> None:
    """query searches typed memories (text, key, triggers); entries shows raw entries with their status."""
    daemon = make_daemon(OPEN)
    daemon.call("brain_note", text="plain note about redis")
    fact = add(daemon, "redis runs on 6380", "fact", "file:redis.conf", key="redis-port")
    gone = add(daemon, "redis used to run on 6379", "fact")
    daemon.call("memory.remove", fp=gone)
    assert [e["fp"] for e in daemon.call("memory.query", term="redis")["entries"]] == [fact]
    assert [e["fp"] for e in daemon.call("memory.query", term="redis.conf")["entries"]] == [fact]
    raw = {e["text"]: e["status"] for e in daemon.call("memory.entries", term="redis")["entries"]}
    assert raw == {
        "plain note about redis": "live",
        "redis runs on 6380": "live",
        "redis used to run on 6379": "tombstoned",
    }
    newest = daemon.call("memory.entries", limit=2)["entries"]
    assert [e["text"] for e in newest] == ["redis used to run on 6379", "redis runs on 6380"]
    assert [e["fp"] for e in daemon.call("memory.list", type="fact")["entries"]] == [fact]
    dumped = {e["fp"]: e["status"] for e in daemon.call("memory.dump")["entries"]}
    assert dumped == {fact: "live", gone: "tombstoned"}


# -- 5. compaction -----------------------------------------------------------------------------------------


def test_compaction_rules_dry_run_and_log(make_daemon: Callable[..., Daemon]) -> None:
    """Old facts are evicted, old errors de-weighted, never removed; dry run changes nothing; all logged."""
    daemon = make_daemon(OPEN)
    write_diary(
        daemon,
        days_ago(45),
        "[09:00] [fact] the old build server was jenkins",
        "[09:01] [error] old flaky test in test_io",
        "[09:02] [decision] we chose tabs",
        "[09:03] [fact] pinned old fact",
    )
    write_diary(daemon, days_ago(100), "[08:00] [workflow] release: tag, build, upload")
    pinned = daemon.call("memory.query", term="pinned")["entries"][0]["fp"]
    daemon.call("memory.pin", fp=pinned)
    before = tree_digest(daemon.root)
    planned = daemon.call("memory.compact", dry_run=True)
    assert tree_digest(daemon.root) == before
    summary = sorted((d["text"], d["rule"], d["action"]) for d in planned["decisions"])
    assert summary == [
        ("release: tag, build, upload", 3, "deweight"),
        ("the old build server was jenkins", 2, "tombstone"),
    ]
    done = daemon.call("memory.compact")
    assert done["decisions"] == planned["decisions"]
    assert daemon.recall("jenkins", days=365) == []
    assert daemon.recall("flaky", days=365) == ["old flaky test in test_io"]
    log = (daemon.root / ".braind" / "compact.log").read_text(encoding="utf-8").splitlines()
    assert len(log) == 2 and all(len(line.split(" ", 4)) == 5 for line in log)
    assert {line.split(" ")[2] for line in log} == {"rule2", "rule3"}
    weights = {e["text"]: e["weight"] for e in daemon.call("memory.list")["entries"]}
    assert weights["release: tag, build, upload"] == 0.5 and weights["pinned old fact"] == 1.0
    assert daemon.call("memory.compact", dry_run=True)["decisions"] == []  # not halved again this period
    assert_index_matches_files(daemon)


def test_use_counts_and_state_survive_restart_and_a_deleted_index(make_daemon: Callable[..., Daemon]) -> None:
    """Tombstones, pins and use counts are in the root, not the index: delete the index, restart, all intact."""
    daemon = make_daemon(OPEN)
    used = add(daemon, "use uv for installs", "fact", "tool:pip")
    gone = add(daemon, "obsolete tip", "fact")
    pinned = add(daemon, "always run ruff", "workflow", "tool:git")
    daemon.call("memory.remove", fp=gone)
    daemon.call("memory.pin", fp=pinned)
    daemon.recall("uv installs")
    daemon.call("inject", session="s", signals={"tools": [{"tool": "pip"}]})
    daemon.stop()
    shutil.rmtree(daemon.state)
    daemon.start()
    state = {e["fp"]: e for e in daemon.call("memory.dump")["entries"]}
    assert state[gone]["status"] == "tombstoned" and state[pinned]["status"] == "pinned"
    assert state[used]["uses"] == 2 and state[used]["last_used"]
    assert daemon.recall("obsolete") == []
    assert_index_matches_files(daemon)


# -- 6. workflow chains -------------------------------------------------------------------------------------


def test_a_repeated_pattern_becomes_a_workflow_entry(make_daemon: Callable[..., Daemon]) -> None:
    """More than 3 turns with the same trigger: one readable workflow line, injected first, refreshed on change."""
    daemon = make_daemon(OPEN)
    err = add(daemon, "pytest fails without the fixture dir", "error", "tool:pytest")
    steps = [{"tool": "read", "files": ["/w/app.py"]}, {"tool": "pytest"}, {"tool": "edit", "files": ["/w/app.py"]}]
    for turn in range(3):
        daemon.call("inject", session="s", turn=turn, signals={"cwd": "/w", "tools": steps})
    assert "[workflow" not in diary_text(daemon)
    daemon.call("inject", session="s", turn=3, signals={"cwd": "/w", "tools": steps})
    chain = [line for line in diary_text(daemon).splitlines() if "[workflow" in line]
    assert len(chain) == 1
    assert chain[0].endswith(f"Workflow: tool:read → file:app.py → tool:pytest → tool:edit (related: error {err})")
    block = daemon.call("inject", session="s", turn=4, signals={"cwd": "/w", "tools": [{"tool": "read"}]})
    assert triggered_lines(block["text"])[0].startswith("- [workflow key=chain:tool:read] Workflow: tool:read →")
    daemon.call("inject", session="s", turn=5, signals={"cwd": "/w", "tools": steps})
    assert len([line for line in diary_text(daemon).splitlines() if "[workflow" in line]) == 1  # unchanged: no rewrite
    changed = [{"tool": "read", "files": ["/w/app.py"]}, {"tool": "ruff"}, {"tool": "pytest"}]
    for turn in range(6, 14):
        daemon.call("inject", session="s", turn=turn, signals={"cwd": "/w", "tools": changed})
    live = [e for e in daemon.call("memory.list", type="workflow")["entries"]]
    assert len(live) == 1 and "tool:ruff" in live[0]["text"] and "tool:edit" not in live[0]["text"]
    assert_index_matches_files(daemon)


# -- 7. approval ----------------------------------------------------------------------------------------------


def test_important_writes_fail_closed_and_write_nothing(daemon: Daemon) -> None:
    """Decision, same-key overwrite, edit, remove, compaction: approval_required and nothing on disk changes."""
    fact = daemon.call("memory.add", text="port is 8080", type="fact", key="port")["fp"]
    before = tree_digest(daemon.root)
    attempts: list[Callable[[], Any]] = [
        lambda: daemon.call("brain_note", text="we use postgres", type="decision"),
        lambda: daemon.call("memory.add", text="port is 9090", type="fact", key="port"),
        lambda: daemon.call("memory.edit", fp=fact, text="port is 9091"),
        lambda: daemon.call("memory.remove", fp=fact),
    ]
    for attempt in attempts:
        assert error_of(attempt).reason == "approval_required"
    assert tree_digest(daemon.root) == before
    assert daemon.call("memory.add", text="port is 9090", type="fact", key="port", approved=True)["superseded"] == [
        fact
    ]
    assert daemon.call("brain_note", text="we use postgres", type="decision", approved=True)["fp"]


@pytest.mark.parametrize(
    ("script", "outcome"), [("exit 0", "ok"), ("exit 3", "approval_declined"), ("sleep 30", "approval_required")]
)
def test_an_approval_command_is_asked(
    make_daemon: Callable[..., Daemon], tmp_path: Path, script: str, outcome: str
) -> None:
    """Exit 0 approves, another exit declines, no answer in time fails closed; it sees what is asked."""
    seen = tmp_path / "seen.json"
    command = f"sh -c 'cat > {seen}; {script}'"
    daemon = make_daemon({"approval": {"mode": "fail-closed", "command": command, "timeout_seconds": 1}})
    call = lambda: daemon.call("brain_note", text="we deploy on fridays", type="decision")  # noqa: E731
    if outcome == "ok":
        assert call()["fp"]
        assert "we deploy on fridays" in diary_text(daemon)
    else:
        assert error_of(call).reason == outcome
        assert diary_text(daemon) == ""
    asked = json.loads(seen.read_text(encoding="utf-8"))
    assert asked["what"] == "a decision entry" and asked["request"]["text"] == "we deploy on fridays"


def test_open_mode_lets_important_writes_through(make_daemon: Callable[..., Daemon]) -> None:
    """approval.mode: open needs no approved flag."""
    daemon = make_daemon(OPEN)
    assert daemon.call("brain_note", text="we use postgres", type="decision")["fp"]


# -- 8. secret hygiene -------------------------------------------------------------------------------------------


def test_secrets_are_redacted_before_they_are_written(make_daemon: Callable[..., Daemon]) -> None:
    """API keys and URL passwords never reach the disk; the reply says what was redacted."""
    daemon = make_daemon(OPEN)
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    reply = daemon.call("brain_note", text=f"push with {token} to https://bob:hunter2pass@git.example.com/x.git")
    text = diary_text(daemon)
    assert token not in text and "hunter2pass" not in text
    assert "[REDACTED:github_token]" in text and "https://bob:[REDACTED:url_password]@git.example.com" in text
    assert sorted(reply["redacted"]) == ["github_token", "url_password"]
