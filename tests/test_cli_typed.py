"""`braind memory ...` and `braind memory-recall --query/--trigger` as a person runs them, on a real daemon."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
from typing import Any

import pytest

from braind.faces.cli.typed import LIST_NOTE
from tests.conftest import Daemon, run_cli, today, wait_until

SUBCOMMANDS = ("list", "query", "add", "edit", "remove", "undo", "pin", "unpin", "entries", "compact", "dump")
FP = re.compile(r"^[0-9a-f]{12}$")
LINE = re.compile(r"^(?P<fp>[0-9a-f]{12})  \[(?P<tags>[^\]]*)\]  (?P<when>\S+ \S+|\(undated\))  (?P<rest>.*)$")
REFUSED = "braind: error: approval_required: "


def cli(d: Daemon, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run `braind ARGS` against the daemon (the config goes last, after the subcommand)."""
    return run_cli(*args, config=d.config_path, **kw)


def ok(d: Daemon, *args: str) -> str:
    """Stdout of a command that must succeed."""
    result = cli(d, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def as_json(d: Daemon, *args: str) -> Any:
    """The --json reply of a command that must succeed."""
    return json.loads(ok(d, *args, "--json"))


def lines_of(out: str) -> dict[str, re.Match[str]]:
    """fp -> parsed entry line of human list/query/entries/dump output."""
    found = (LINE.match(line) for line in out.splitlines())
    return {m["fp"]: m for m in found if m}


def add(d: Daemon, text: str, *options: str) -> str:
    """Add an entry with the CLI; its fp."""
    fp = as_json(d, "memory", "add", text, *options)["fp"]
    assert FP.match(fp)
    return str(fp)


def state_files(d: Daemon) -> dict[str, str]:
    """Every file of the root (diary and state) with its text: what a refused write must leave alone."""
    return {str(p.relative_to(d.root)): p.read_text() for p in sorted(d.root.rglob("*")) if p.is_file()}


def assert_refused(result: subprocess.CompletedProcess[str], what: str) -> None:
    """Exit 1 with the one approval_required error line."""
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(REFUSED + what) and result.stderr.count("\n") == 1, result.stderr


# -- help ----------------------------------------------------------------------------


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommand_has_help_with_common_options(sub: str) -> None:
    out = run_cli("memory", sub, "--help", check=True).stdout
    for option in ("--config", "--socket", "--json", "--project"):
        assert option in out


def test_help_tells_the_truth() -> None:
    def text(*args: str) -> str:
        return " ".join(run_cli(*args, "--help", check=True).stdout.split())

    top = text("memory")
    assert all(sub in top for sub in SUBCOMMANDS) and "tombstone" in top
    for sub in ("edit", "remove", "undo", "pin", "unpin"):
        assert "unique prefix" in text("memory", sub) and "ambiguous prefix lists the candidates" in text("memory", sub)
    for sub in ("add", "edit", "remove", "compact"):
        assert "--approved" in text("memory", sub) and "approval_required" in text("memory", sub)
    for sub in ("undo", "pin", "unpin"):
        assert "Needs no approval" in text("memory", sub) and "--approved" not in text("memory", sub)
    assert "A decision, and an entry whose key a live entry already holds" in text("memory", "add")
    assert "Removal is a tombstone, never a delete" in text("memory", "remove")
    assert "--dry-run prints the same decisions and changes nothing" in text("memory", "compact")
    assert "--limit" in text("memory", "list") and "--limit" in text("memory", "entries")
    recall = text("memory-recall")
    assert "--query" in recall and "--trigger" in recall and "search typed memories" in recall


# -- reading ---------------------------------------------------------------------------


def test_add_list_query_human_and_json(daemon: Daemon) -> None:
    out = ok(daemon, "memory", "add", "the", "database", "is", "postgres", "--type", "fact", "--key", "db",
             "--trigger", "file:app.py", "--trigger", "tool:pytest")  # fmt: skip
    fp = out.split()[1]
    assert out == f"added {fp} in {daemon.root / 'diary' / today()}.md\n" and FP.match(fp)
    assert (
        (daemon.root / "diary" / f"{today()}.md")
        .read_text()
        .endswith("[fact key=db file:app.py tool:pytest] the database is postgres\n")
    )
    listed = ok(daemon, "memory", "list").splitlines()
    assert listed[-2:] == ["1 typed memory", LIST_NOTE]
    line = LINE.match(listed[0])
    assert line and line["fp"] == fp and line["tags"] == "fact key=db file:app.py tool:pytest"
    assert line["when"].startswith(today()) and line["rest"] == "the database is postgres"
    reply = as_json(daemon, "memory", "list")
    assert (
        reply["total"] == 1
        and reply["entries"][0]["fp"] == fp
        and reply["entries"][0]["triggers"]
        == [
            "file:app.py",
            "tool:pytest",
        ]
    )
    queried = ok(daemon, "memory", "query", "postgres", "database")
    assert list(lines_of(queried)) == [fp] and queried.endswith("\n1 entry\n")
    assert as_json(daemon, "memory", "query", "pytest")["entries"][0]["fp"] == fp  # triggers match too
    assert ok(daemon, "memory", "query", "mysql") == "0 entries\n"
    # both queries that found it counted a use; uses are written in batches, so wait for the flush
    wait_until(lambda: "(2 uses)" in ok(daemon, "memory", "list"), 10, "two uses listed")


def test_limit_and_type_filter(daemon: Daemon) -> None:
    for n in range(3):
        add(daemon, f"limited fact {n}", "--type", "fact")
    add(daemon, "an error about limits", "--type", "error")
    out = ok(daemon, "memory", "list", "--limit", "2")
    assert len(lines_of(out)) == 2 and out.endswith(f"\n4 typed memories, 2 shown (--limit)\n{LIST_NOTE}\n")
    assert as_json(daemon, "memory", "list", "--type", "error")["total"] == 1
    assert len(lines_of(ok(daemon, "memory", "query", "limited", "--limit", "1"))) == 1
    assert len(as_json(daemon, "memory", "entries", "--limit", "3")["entries"]) == 3


def test_entries_shows_raw_entries_newest_first_including_tombstones(daemon: Daemon) -> None:
    ok(daemon, "note", "a plain note about kiwis")
    old = daemon.root / "diary" / "2020-01-01.md"
    old.parent.mkdir(parents=True, exist_ok=True)
    old.write_text("[09:00] [fact] an old fact about kiwis\n")
    daemon.call("reindex")
    gone = add(daemon, "a removed fact about kiwis", "--type", "fact")
    ok(daemon, "memory", "remove", gone, "--approved")
    out = ok(daemon, "memory", "entries", "kiwis")
    rows = [LINE.match(line) for line in out.splitlines()[:-1]]
    assert all(rows) and out.endswith("\n3 entries\n")
    assert [r["rest"].split("  (")[0] for r in rows if r] == [
        "a removed fact about kiwis",
        "a plain note about kiwis",
        "an old fact about kiwis",
    ]
    assert rows[-1] and rows[-1]["when"] == "2020-01-01 09:00"
    assert lines_of(out)[gone]["rest"].endswith("(tombstoned: remove)")
    assert lines_of(out)[gone]["tags"] == "fact"
    newest = as_json(daemon, "memory", "entries")
    assert newest["entries"][0]["date"] == today() and newest["total"] >= 3
    assert {e["type"] for e in newest["entries"]} >= {"note", "fact"}


def test_dump_human_and_json_include_tombstones(daemon: Daemon) -> None:
    kept = add(daemon, "dumped fact", "--type", "fact", "--key", "dump")
    newer = as_json(daemon, "memory", "add", "dumped fact, newer", "--type", "fact", "--key", "dump", "--approved")
    assert newer["superseded"] == [kept]
    out = ok(daemon, "memory", "dump")
    rows = lines_of(out)
    assert rows[kept]["rest"] == f"dumped fact  (tombstoned: key → {newer['fp']})"
    assert rows[newer["fp"]]["rest"] == "dumped fact, newer"
    assert out.endswith("\n2 entries, 0 without a file\n")
    reply = as_json(daemon, "memory", "dump")
    assert {e["fp"]: e["status"] for e in reply["entries"]} == {kept: "tombstoned", newer["fp"]: "live"}
    assert reply["orphans"] == []
    assert as_json(daemon, "memory", "dump", "--type", "decision")["entries"] == []


def test_project_option_reads_and_writes_the_project_memory(daemon: Daemon) -> None:
    project = daemon.base / "proj"
    project.mkdir()
    fp = add(daemon, "the project builds with make", "--type", "fact", "--project", str(project))
    assert (project / ".agents" / ".memory" / "diary" / f"{today()}.md").exists()
    assert fp not in lines_of(ok(daemon, "memory", "list"))
    listed = lines_of(ok(daemon, "memory", "list", "--project", str(project)))
    assert listed[fp]["tags"] == "fact project"
    assert fp in lines_of(ok(daemon, "memory", "query", "make", "--project", str(project)))
    assert fp in lines_of(ok(daemon, "memory", "dump", "--project", str(project)))
    assert fp in lines_of(ok(daemon, "memory", "entries", "builds", "--project", str(project)))
    unseen = cli(daemon, "memory", "pin", fp)
    assert unseen.returncode == 1 and unseen.stderr.startswith("braind: error: not_found: ")
    assert ok(daemon, "memory", "pin", fp[:6], "--project", str(project)) == f"pinned {fp}\n"


# -- approval ----------------------------------------------------------------------------


def test_decision_is_refused_without_approval_and_nothing_is_written(daemon: Daemon) -> None:
    before = state_files(daemon)
    refused = cli(daemon, "memory", "add", "we use postgres", "--type", "decision")
    assert_refused(refused, "a decision entry needs approval")
    assert state_files(daemon) == before
    assert as_json(daemon, "memory", "dump")["entries"] == []
    out = ok(daemon, "memory", "add", "we use postgres", "--type", "decision", "--approved")
    assert out.startswith("added ")
    assert "[decision] we use postgres" in (daemon.root / "diary" / f"{today()}.md").read_text()


def test_same_key_overwrite_needs_approval_and_says_what_it_superseded(daemon: Daemon) -> None:
    old = add(daemon, "the port is 8080", "--type", "fact", "--key", "port")
    before = state_files(daemon)
    assert_refused(cli(daemon, "memory", "add", "the port is 9090", "--key", "port", "--type", "fact"), "overwriting")
    assert state_files(daemon) == before
    out = ok(daemon, "memory", "add", "the port is 9090", "--key", "port", "--type", "fact", "--approved")
    new = out.split()[1]
    assert out.splitlines()[1] == f"superseded {old} (same key; tombstoned, undo brings it back)"
    assert list(lines_of(ok(daemon, "memory", "list"))) == [new]


def test_edit_supersedes_and_undo_reverts(daemon: Daemon) -> None:
    old = add(daemon, "lunch is at noon", "--type", "fact", "--trigger", "tool:calendar")
    before = state_files(daemon)
    assert_refused(cli(daemon, "memory", "edit", old[:8], "lunch", "is", "at", "one"), f"editing entry {old}")
    assert state_files(daemon) == before
    out = ok(daemon, "memory", "edit", old[:8], "lunch", "is", "at", "one", "--approved").splitlines()
    new = out[0].split()[4]
    assert out == [
        f"edited {old}: new entry {new} in {daemon.root / 'diary' / today()}.md",
        f"superseded {old} (tombstoned; `braind memory undo {new}` reverts the edit)",
    ]
    listed = lines_of(ok(daemon, "memory", "list"))
    assert list(listed) == [new] and listed[new]["tags"] == "fact tool:calendar"
    assert lines_of(ok(daemon, "memory", "dump"))[old]["rest"] == f"lunch is at noon  (tombstoned: edit → {new})"
    undone = ok(daemon, "memory", "undo", new)
    assert undone == f"undid tombstone (edit) on {old}: now live; tombstoned {new} (the edit's new entry)\n"
    assert list(lines_of(ok(daemon, "memory", "list"))) == [old]


def test_remove_is_a_tombstone_and_undo_brings_it_back(daemon: Daemon) -> None:
    fp = add(daemon, "the cat is called Miso", "--type", "fact")
    day = daemon.root / "diary" / f"{today()}.md"
    before = state_files(daemon)
    assert_refused(cli(daemon, "memory", "remove", fp), f"removing entry {fp}")
    assert state_files(daemon) == before
    out = ok(daemon, "memory", "remove", fp, "--approved")
    assert out == f"tombstoned {fp} (it stays in its file; `braind memory undo {fp}` brings it back)\n"
    assert "the cat is called Miso" in day.read_text()  # never a physical delete
    assert ok(daemon, "memory", "list") == f"0 typed memories\n{LIST_NOTE}\n"
    assert ok(daemon, "memory", "remove", fp, "--approved") == f"{fp} was already tombstoned\n"
    assert as_json(daemon, "memory", "remove", fp, "--approved") == {"fp": fp, "status": "tombstoned", "changed": False}
    assert ok(daemon, "memory", "undo", fp) == f"undid tombstone (remove) on {fp}: now live\n"
    assert list(lines_of(ok(daemon, "memory", "list"))) == [fp]
    nothing = cli(daemon, "memory", "undo", fp)
    assert nothing.returncode == 1 and nothing.stderr == f"braind: error: not_found: entry {fp} has no change to undo\n"


def test_pin_and_unpin(daemon: Daemon) -> None:
    first = add(daemon, "deploys go through CI", "--type", "workflow")
    second = add(daemon, "a fact pinned later", "--type", "fact")
    assert ok(daemon, "memory", "pin", second) == f"pinned {second}\n"
    listed = ok(daemon, "memory", "list")
    assert list(lines_of(listed)) == [second, first]  # pinned first
    assert lines_of(listed)[second]["rest"] == "a fact pinned later  (pinned)"
    assert ok(daemon, "memory", "pin", second) == f"{second} was already pinned\n"
    assert ok(daemon, "memory", "unpin", second) == f"unpinned {second}\n"
    assert ok(daemon, "memory", "unpin", second) == f"{second} was already unpinned\n"
    assert as_json(daemon, "memory", "pin", second) == {"fp": second, "status": "pinned", "changed": True}
    assert ok(daemon, "memory", "undo", second) == f"undid pin on {second}: now live\n"


def test_approval_is_asked_at_a_terminal(daemon: Daemon) -> None:
    fp = add(daemon, "asked at a terminal", "--type", "fact")
    declined, said_no = _at_terminal(daemon, "n\n", "memory", "remove", fp)
    assert declined.returncode == 1
    assert f"braind: removing entry {fp} needs approval. Approve? [y/N] " in said_no
    assert f"braind: error: approval_declined: removing entry {fp} was not approved; nothing was written" in said_no
    assert list(lines_of(ok(daemon, "memory", "list"))) == [fp]
    approved, said_yes = _at_terminal(daemon, "y\n", "memory", "remove", fp)
    assert approved.returncode == 0, said_yes
    assert "Approve? [y/N]" in said_yes and approved.stdout.startswith(f"tombstoned {fp}")
    assert ok(daemon, "memory", "list") == f"0 typed memories\n{LIST_NOTE}\n"


def _at_terminal(d: Daemon, answer: str, *args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run a command with stdin and stderr on a terminal that types `answer`; what the terminal showed."""
    leader, follower = pty.openpty()
    try:
        os.write(leader, answer.encode())
        result = cli(d, *args, stdin=follower, stderr=follower)
        os.close(follower)
        shown = _drain(leader)
    finally:
        os.close(leader)
    return result, shown


def _drain(fd: int) -> str:
    """Everything written to a pty whose writer has closed."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


# -- compaction ------------------------------------------------------------------------


def test_compact_dry_run_changes_nothing_and_approved_compact_applies(daemon: Daemon) -> None:
    old = daemon.root / "diary" / "2020-01-01.md"
    old.parent.mkdir(parents=True)
    old.write_text("[09:00] [fact] an unused old fact\n[09:01] [decision] an unused old decision\n")
    daemon.call("reindex")
    fact, decision = (e["fp"] for e in as_json(daemon, "memory", "dump")["entries"])
    before = state_files(daemon)
    dry = ok(daemon, "memory", "compact", "--dry-run").splitlines()
    assert dry[0].startswith("rule 2: facts unused for compact.fact_ttl_days")
    assert dry[1].startswith(f"  {fact}  tombstone  fact unused for ")
    assert dry[2].startswith("rule 3: ")
    assert dry[3].startswith(f"  {decision}  deweight  decision unused for ") and dry[3].endswith("weight 1 → 0.5")
    assert dry[4] == "2 decisions (dry run: nothing changed)"
    assert state_files(daemon) == before
    assert_refused(cli(daemon, "memory", "compact"), "compaction evicting 1 entry")
    assert state_files(daemon) == before
    applied = as_json(daemon, "memory", "compact", "--approved")
    assert applied["dry_run"] is False and applied["by_rule"] == {"rule2": 1, "rule3": 1}
    assert [(d["fp"], d["action"]) for d in applied["decisions"]] == [(fact, "tombstone"), (decision, "deweight")]
    rows = lines_of(ok(daemon, "memory", "dump"))
    assert rows[fact]["rest"] == "an unused old fact  (tombstoned: compact)"
    assert rows[decision]["rest"] == "an unused old decision  (weight 0.5)"
    log = (daemon.root / ".braind" / "compact.log").read_text()
    assert f" {fact} rule2 tombstone " in log and f" {decision} rule3 deweight " in log
    assert ok(daemon, "memory", "compact") == "nothing to compact\n"
    assert ok(daemon, "memory", "undo", fact) == f"undid tombstone (compact) on {fact}: now live\n"


# -- errors and options -------------------------------------------------------------------


def test_ambiguous_prefix_lists_the_candidates(daemon: Daemon) -> None:
    by_digit: dict[str, str] = {}
    shared = ""
    for n in range(40):
        fp = daemon.call("brain_note", text=f"ambiguity probe number {n}", type="fact")["fp"]
        if fp[0] in by_digit:
            shared = fp[0]
            pair = {by_digit[fp[0]], fp}
            break
        by_digit[fp[0]] = fp
    assert shared, "forty fingerprints with sixteen first digits must share one"
    result = cli(daemon, "memory", "pin", shared)
    assert result.returncode == 1 and result.stdout == ""
    first, *rest = result.stderr.splitlines()
    assert first.startswith(f"braind: error: ambiguous: fingerprint prefix {shared} matches 2 entries")
    assert len(rest) == 2 and {line.split()[0] for line in rest} == pair
    assert all("[fact]" in line and "ambiguity probe number" in line for line in rest)
    assert all(e["status"] != "pinned" for e in as_json(daemon, "memory", "list")["entries"])


def test_bad_and_unknown_fingerprints_are_one_error_line(daemon: Daemon) -> None:
    bad = cli(daemon, "memory", "undo", "xyz")
    assert (
        bad.returncode == 1
        and bad.stderr == "braind: error: invalid_params: 'xyz' is not a fingerprint: 1 to 12 hex digits\n"
    )
    missing = cli(daemon, "memory", "unpin", "0123456789ab")
    assert missing.returncode == 1 and missing.stderr.startswith("braind: error: not_found: ")
    assert cli(daemon, "memory").returncode == 2  # a subcommand is required


def test_common_options_before_between_and_after_the_subcommand(daemon: Daemon) -> None:
    fp = add(daemon, "options anywhere", "--type", "fact")
    config, socket = str(daemon.config_path), str(daemon.socket)
    for argv in (
        ("--json", "--config", config, "memory", "list"),
        ("memory", "--json", "--config", config, "list"),
        ("memory", "list", "--json", "--config", config),
        ("memory", "--config", config, "list", "--socket", socket, "--json"),
        ("--socket", "/nonexistent.sock", "memory", "list", "--socket", socket, "--json", "--config", config),
    ):
        result = run_cli(*argv)
        assert result.returncode == 0, (argv, result.stderr)
        assert json.loads(result.stdout)["entries"][0]["fp"] == fp
    lost = run_cli("memory", "list", "--config", config, "--socket", str(daemon.base / "none.sock"))
    assert lost.returncode == 1 and lost.stderr.startswith("braind: error: daemon_unavailable: ")


def test_redaction_is_reported(daemon: Daemon) -> None:
    secret = "sk-ant-api03-" + "a1B2c3D4e5" * 4
    out = ok(daemon, "memory", "add", f"the key is {secret}", "--type", "fact").splitlines()
    assert len(out) == 2 and out[1].startswith("redacted ") and out[1].endswith(" before writing")
    assert secret not in (daemon.root / "diary" / f"{today()}.md").read_text()


# -- memory-recall --query / --trigger -------------------------------------------------------


def test_memory_recall_query_and_trigger_print_like_memory_query(daemon: Daemon) -> None:
    fp = add(daemon, "run pytest with -x", "--type", "workflow", "--trigger", "tool:pytest")
    add(daemon, "unrelated fact", "--type", "fact")
    by_query = ok(daemon, "memory-recall", "--query", "pytest")
    assert list(lines_of(by_query)) == [fp] and by_query.endswith("\n1 entry\n")
    assert lines_of(by_query)[fp]["tags"] == "workflow tool:pytest"
    by_trigger = ok(daemon, "memory-recall", "--trigger", "file:none.py", "--trigger", "tool:pytest")
    assert list(lines_of(by_trigger)) == [fp]
    reply = as_json(daemon, "memory-recall", "--trigger", "tool:pytest", "--type", "workflow", "--limit", "5")
    assert reply["scope"] == "typed" and [e["fp"] for e in reply["entries"]] == [fp]
    both = ok(daemon, "memory-recall", "--trigger", "tool:pytest", "--query", "nothing-like-this")
    assert both == "0 entries\n"
    plain = ok(daemon, "memory-recall")
    assert plain.startswith("(MEMORY.md is empty or missing")


def test_every_subcommand_answers_json(daemon: Daemon) -> None:
    fp = add(daemon, "json everywhere", "--type", "fact")
    replies = {
        "list": as_json(daemon, "memory", "list"),
        "query": as_json(daemon, "memory", "query", "json"),
        "entries": as_json(daemon, "memory", "entries", "json"),
        "dump": as_json(daemon, "memory", "dump"),
        "pin": as_json(daemon, "memory", "pin", fp),
        "unpin": as_json(daemon, "memory", "unpin", fp),
        "undo": as_json(daemon, "memory", "undo", fp),
        "compact": as_json(daemon, "memory", "compact", "--dry-run"),
        "edit": as_json(daemon, "memory", "edit", fp, "json edited", "--approved"),
    }
    edited = replies["edit"]["fp"]
    replies["remove"] = as_json(daemon, "memory", "remove", edited, "--approved")
    assert replies["list"]["entries"][0]["fp"] == fp and replies["query"]["total"] == 1
    assert replies["entries"]["entries"][0]["text"] == "json everywhere" and replies["dump"]["orphans"] == []
    assert replies["pin"]["status"] == "pinned" and replies["unpin"]["status"] == "live"
    assert replies["undo"]["undone"] == "unpin" and replies["undo"]["status"] == "pinned"
    assert replies["compact"] == {"dry_run": True, "decisions": [], "by_rule": {}}
    assert replies["edit"]["replaces"] == fp and FP.match(edited)
    assert replies["remove"] == {"fp": edited, "status": "tombstoned", "changed": True}


# -- one approval story for every write -------------------------------------------------------


def approval_cases(d: Daemon) -> dict[str, list[str]]:
    """A write of each command that needs approval under fail-closed."""
    edited = add(d, "an entry to edit", "--type", "fact")
    removed = add(d, "an entry to remove", "--type", "fact")
    ok(d, "memory-write-root", "core", "a section to correct")
    return {
        "note": ["note", "--type", "decision", "use postgres"],
        "memory add": ["memory", "add", "--type", "decision", "use sqlite"],
        "memory edit": ["memory", "edit", edited, "edited text"],
        "memory remove": ["memory", "remove", removed],
        "memory-correct": ["memory-correct", "root", "--section", "core", "--content", "corrected"],
    }


def test_every_write_that_needs_approval_names_the_cli_option_without_a_terminal(daemon: Daemon) -> None:
    for command, argv in approval_cases(daemon).items():
        before = state_files(daemon)
        refused = cli(daemon, *argv, stdin=subprocess.DEVNULL)
        assert refused.returncode == 1 and refused.stdout == "", command
        assert refused.stderr.startswith(REFUSED) and refused.stderr.count("\n") == 1, refused.stderr
        assert refused.stderr.endswith("needs approval: run the command again with --approved\n"), refused.stderr
        assert "approved=true" not in refused.stderr
        assert state_files(daemon) == before, command


def test_every_write_that_needs_approval_asks_at_a_terminal(daemon: Daemon) -> None:
    for command, argv in approval_cases(daemon).items():
        result, shown = _at_terminal(daemon, "y\n", *argv)
        assert "needs approval. Approve? [y/N] " in shown, command
        assert result.returncode == 0, shown
