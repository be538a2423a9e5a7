"""Pure parts of typed memory: signals to triggers, ranking, budget, compaction (fake clock), chains, state."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from braind.config import CompactConfig
from braind.errors import BraindError, InvalidParams
from braind.files.state import RootState, Turn
from braind.model.entries import Entry, Line, Meta, parse_line, render_line
from braind.model.roots import user_root
from braind.services.typed import chains, compact
from braind.services.typed.triggers import choose, signal_triggers, triggered_part

NOW = dt.datetime(2026, 6, 30, 12, 0, tzinfo=dt.UTC)


def entry(text: str, type: str = "fact", date: str = "2026-06-01", key: str | None = None, **kw: object) -> Entry:
    """An entry in a root at /r, line 1 unless told."""
    fields: dict[str, object] = {"line": 1, "time": "10:00", "status": "live", "triggers": ()}
    fields.update(kw)
    return Entry(
        root="/r", realm="user", path=f"/r/diary/{date}.md", date=date, text=text, type=type, key=key, **fields
    )  # type: ignore[arg-type]


# -- signals -> triggers --------------------------------------------------------------------------


def test_signals_become_trigger_strings_in_order() -> None:
    """cwd, then per call: tool, files (basename and path below cwd), error; each once."""
    signals = {
        "cwd": "/home/u/proj",
        "tools": [
            {"tool": "read", "files": ["/home/u/proj/src/app.py"]},
            {"tool": "pytest", "files": [], "error": "E42"},
            {"tool": "read", "files": ["src/app.py"], "error": 2},
        ],
    }
    assert signal_triggers(signals) == [
        "file:proj",
        "tool:read",
        "file:app.py",
        "file:src/app.py",
        "tool:pytest",
        "err:E42",
        "err:2",
    ]


def test_only_the_last_twelve_calls_count() -> None:
    """The 13th-newest call is ignored."""
    calls = [{"tool": f"t{i}"} for i in range(20)]
    found = signal_triggers({"tools": calls})
    assert found == [f"tool:t{i}" for i in range(8, 20)]


def test_strings_that_cannot_be_triggers_are_left_out() -> None:
    """A tool name with a space or a bracket gives no trigger; the rest still does."""
    assert signal_triggers({"tools": [{"tool": "bad name"}, {"tool": "x[1]"}, {"tool": "ok"}]}) == ["tool:ok"]


@pytest.mark.parametrize(
    "signals",
    [[1], {"tools": "x"}, {"tools": [1]}, {"cwd": 5}, {"tools": [{"files": "a.py"}]}, {"tools": [{"error": 1.5}]}],
)
def test_malformed_signals_are_invalid_params(signals: object) -> None:
    """Wrong shapes are refused with a clear error, never half-read."""
    with pytest.raises(InvalidParams):
        signal_triggers(signals)  # type: ignore[arg-type]


# -- ranking and budget ---------------------------------------------------------------------------


def test_pinned_first_then_workflow_error_decision_fact() -> None:
    """The injection order of docs/memory.md, newest first within a type."""
    t = ("file:a.py",)
    found = [
        entry("a fact", "fact", triggers=t),
        entry("a decision", "decision", triggers=t),
        entry("an error", "error", triggers=t),
        entry("a workflow", "workflow", triggers=t),
        entry("pinned fact", "fact", triggers=t, status="pinned"),
        entry("newer error", "error", triggers=t, time="11:00"),
    ]
    chosen = choose(found, ["file:a.py"], {}, 10, 10_000)
    assert [c.entry.text for c in chosen] == [
        "pinned fact",
        "a workflow",
        "newer error",
        "an error",
        "a decision",
        "a fact",
    ]
    assert chosen[0].reason() == "pinned; matched file:a.py"


def test_budget_caps_entries_and_characters() -> None:
    """At most max_entries entries and max_chars characters of lines."""
    found = [
        entry(f"error number {i} " + "x" * 50, "error", triggers=("err:E1",), time=f"10:{i:02d}") for i in range(9)
    ]
    assert len(choose(found, ["err:E1"], {}, 3, 10_000)) == 3
    chosen = choose(found, ["err:E1"], {}, 8, 200)
    assert sum(len(c.line()) + 1 for c in chosen) <= 200 and len(chosen) == 2


def test_tombstoned_and_unmatched_entries_are_never_chosen() -> None:
    """Only live (or pinned) entries whose triggers match."""
    found = [entry("gone", triggers=("file:a.py",), status="tombstoned"), entry("other", triggers=("file:b.py",))]
    assert choose(found, ["file:a.py"], {}, 8, 1200) == []


def test_same_signals_give_the_same_part() -> None:
    """Deterministic: the order does not depend on the order entries arrive in."""
    found = [entry(f"fact {i}", triggers=("tool:x",), time="10:00") for i in range(6)]
    one = triggered_part(choose(found, ["tool:x"], {}, 4, 1200))
    two = triggered_part(choose(list(reversed(found)), ["tool:x"], {}, 4, 1200))
    assert one is not None and two is not None and one.text == two.text


def test_lower_weight_ranks_later_within_a_type() -> None:
    """A de-weighted error comes after a fresh one of the same type."""
    old, new = (
        entry("old error", "error", triggers=("err:1",), time="12:00"),
        entry("other", "error", triggers=("err:1",)),
    )
    chosen = choose([old, new], ["err:1"], {old.fp: 0.5}, 8, 1200)
    assert [c.entry.text for c in chosen] == ["other", "old error"]


# -- compaction with a fake clock -----------------------------------------------------------------


class Marks:
    """Marks per fp for plan(): uses and last use, weights."""

    def __init__(self) -> None:
        from braind.files.state import Mark

        self.Mark = Mark
        self.marks: dict[str, object] = {}

    def set(self, e: Entry, uses: int = 0, last_used: str | None = None, weights: tuple[tuple[str, float], ...] = ()):
        mark = self.Mark(uses=uses, last_used=last_used)
        mark.changes = [{"op": "weight", "at": at, "value": v, "fp": e.fp} for at, v in weights]
        self.marks[e.fp] = mark

    def __call__(self, e: Entry) -> object:
        return self.marks.get(e.fp) or self.Mark()


CONFIG = CompactConfig(fact_ttl_days=30, deweight_days=90)


def test_rule1_newest_of_a_key_wins_but_rule4_keeps_errors_and_decisions() -> None:
    """Same key: older facts are tombstoned; an older decision is kept and says why."""
    old_fact, new_fact = entry("v1", key="k", date="2026-06-28"), entry("v2", key="k", date="2026-06-29")
    old_dec, new_dec = (
        entry("d1", "decision", key="d", date="2026-06-28"),
        entry("d2", "decision", key="d", date="2026-06-29"),
    )
    found = compact.plan([new_fact, old_fact, old_dec, new_dec], Marks(), NOW, CONFIG)
    summary = {(d.entry.text, d.rule, d.action) for d in found}
    assert summary == {("v1", 1, "tombstone"), ("d1", 4, "keep")}


def test_rule2_fact_unused_past_ttl_with_at_most_one_use() -> None:
    """31 days idle and one use: evicted; two uses, recent use, or 29 days: kept."""
    marks = Marks()
    idle = entry("idle fact", date="2026-05-30")
    used_twice = entry("used twice", date="2026-05-30")
    recently_used = entry("recently used", date="2026-05-01")
    young = entry("young", date="2026-06-01")
    marks.set(idle, uses=1, last_used="2026-05-30T10:00:00Z")
    marks.set(used_twice, uses=2)
    marks.set(recently_used, uses=1, last_used="2026-06-25T00:00:00Z")
    found = compact.plan([idle, used_twice, recently_used, young], marks, NOW, CONFIG)
    assert [(d.entry.text, d.rule, d.action) for d in found] == [("idle fact", 2, "tombstone")]


def test_rule3_deweights_once_per_period_and_rule4_never_removes() -> None:
    """Old error/decision/workflow are halved, not removed; not halved again within the period."""
    marks = Marks()
    err, dec, wf = (
        entry("e", "error", date="2026-01-01"),
        entry("d", "decision", date="2026-01-01"),
        entry("w", "workflow", date="2026-01-01"),
    )
    marks.set(wf, weights=(("2026-06-01T00:00:00Z", 0.5),))
    found = compact.plan([err, dec, wf], marks, NOW, CONFIG)
    assert {(d.entry.text, d.action, d.weight) for d in found} == {("e", "deweight", 0.5), ("d", "deweight", 0.5)}
    later = NOW + dt.timedelta(days=100)
    again = compact.plan([wf], marks, later, CONFIG)
    assert [(d.action, d.weight) for d in again] == [("deweight", 0.25)]


def test_pinned_and_tombstoned_entries_are_never_touched() -> None:
    """plan() only considers live entries."""
    pinned = entry("pinned old fact", date="2025-01-01", status="pinned")
    gone = entry("gone", date="2025-01-01", status="tombstoned")
    assert compact.plan([pinned, gone], Marks(), NOW, CONFIG) == []


# -- workflow chains ----------------------------------------------------------------------------------


def turns(*sequences: tuple[str, ...]) -> list[Turn]:
    """Turns with the given trigger sequences."""
    return [Turn(f"2026-06-{i + 1:02d}T00:00:00Z", "s", i, seq) for i, seq in enumerate(sequences)]


def test_a_chain_appears_after_more_than_three_turns() -> None:
    """Three turns: nothing; four: the steps in their usual order."""
    seq = ("file:app.py", "tool:pytest", "tool:edit")
    assert chains.steps(turns(seq, seq, seq), "file:app.py") is None
    assert chains.steps(turns(seq, seq, seq, seq), "file:app.py") == list(seq)


def test_chain_keeps_steps_seen_in_most_turns_in_time_order() -> None:
    """A step seen once is noise; order follows the average position."""
    history = turns(
        ("file:app.py", "tool:pytest", "tool:edit"),
        ("file:app.py", "tool:grep", "tool:pytest", "tool:edit"),
        ("file:app.py", "tool:pytest", "tool:edit"),
        ("file:app.py", "tool:edit", "tool:pytest"),
        ("file:app.py", "tool:pytest", "tool:edit"),
    )
    assert chains.steps(history, "file:app.py") == ["file:app.py", "tool:pytest", "tool:edit"]


def test_chain_text_lists_steps_and_related_memories() -> None:
    """Readable: arrows between steps, related memories by type and fp."""
    err = entry("pytest needs -p no:cacheprovider", "error", triggers=("tool:pytest",))
    text = chains.text_of(["file:app.py", "tool:pytest"], chains.related([err], ["file:app.py", "tool:pytest"]))
    assert text == f"Workflow: file:app.py → tool:pytest (related: error {err.fp})"
    line = render_line(Line("10:00", text, Meta("workflow", chains.key_of(["file:app.py"]), ("file:app.py",))))
    assert parse_line(line).text == text


# -- the state files ------------------------------------------------------------------------------------


def test_state_is_never_written_into_a_missing_root(tmp_path: Path) -> None:
    """A root moved away is not recreated by a tombstone or a use count."""
    state = RootState(user_root(tmp_path / "gone"))
    with pytest.raises(BraindError) as info:
        state.record([{"op": "pin", "fp": "abc"}])
    assert info.value.reason == "root_unavailable"
    state.use(["abc"])
    state.flush()
    assert not (tmp_path / "gone").exists()


def test_state_replays_changes_undo_and_uses(tmp_path: Path) -> None:
    """Tombstone, pin, undo and use counts survive a reload; unreadable lines are skipped."""
    root = user_root(tmp_path / "root")
    (tmp_path / "root").mkdir()
    state = RootState(root)
    state.record([{"op": "tombstone", "fp": "aaa", "why": "remove"}, {"op": "pin", "fp": "bbb"}])
    state.record([{"op": "tombstone", "fp": "ccc", "why": "remove"}, {"op": "undo", "fp": "ccc"}])
    state.use(["bbb", "bbb"])
    state.flush()
    with open(tmp_path / "root" / ".braind" / "state.log", "a", encoding="utf-8") as log:
        log.write('{"op": "tombstone", "fp": "ddd"')  # a torn last line
    again = RootState(root)
    assert again.status("aaa") == "tombstoned" and again.status("bbb") == "pinned" and again.status("ccc") == "live"
    assert again.status("ddd") == "live"
    assert again.mark("bbb").uses == 2 and again.mark("bbb").last_used
    again.record([{"op": "unpin", "fp": "bbb"}])  # appends after the torn line without joining it
    lines = (tmp_path / "root" / ".braind" / "state.log").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[-1])["op"] == "unpin"
    assert RootState(root).status("bbb") == "live"
