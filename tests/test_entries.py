"""The diary line grammar: documented examples, refusals, parse(render(x)) == x, fingerprints."""

from __future__ import annotations

import pickle
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braind.model.entries import (
    TRIGGER_KINDS,
    TYPES,
    Entry,
    GrammarError,
    Line,
    Meta,
    diary_entries,
    make_meta,
    parse_line,
    render_line,
    render_meta,
    with_status,
)

# --- strategies: exactly the values the grammar promises to carry -------------

TIMES = st.builds(lambda h, m: f"{h:02d}:{m:02d}", st.integers(0, 23), st.integers(0, 59))

# A key or trigger name: one word, no brackets, no control or space characters.
WORDS = st.text(
    st.characters(exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp"), exclude_characters="[]"),
    min_size=1,
    max_size=16,
)
TRIGGERS = st.builds(lambda kind, name: f"{kind}:{name}", st.sampled_from(TRIGGER_KINDS), WORDS)
METAS = st.builds(
    Meta,
    type=st.sampled_from(TYPES),
    key=st.none() | WORDS,
    triggers=st.lists(TRIGGERS, max_size=4).map(tuple),
)

# Entry text: any Unicode but control characters (a tab is allowed), stripped and non-empty.
PLAIN = st.text(st.characters(exclude_categories=("Cc", "Cs"), include_characters="\t"), min_size=1).map(str.strip)
BRACKETS = st.one_of(
    METAS.map(render_meta),
    st.sampled_from(TYPES).map(lambda t: f"[{t} not-a-trigger]"),
    st.sampled_from(TYPES).map(lambda t: f"[{t}  key=double-space]"),
    PLAIN.map(lambda s: f"[{s}]"),
    st.just("[]"),
)
PREFIXED = st.builds(
    lambda group, sep, rest: (group + sep + rest).strip(), BRACKETS, st.sampled_from(["", " ", "  "]), PLAIN
)
SAMPLES = st.sampled_from(
    [
        "我最喜欢的饮料是乌龙茶",
        "emoji 🚀🧠",
        "[",
        "]",
        "[[fact]]",
        "[fact]",
        "[note]",
        "key=x",
        "file:x",
        "Ça va ? naïve",
    ]
)
TEXTS = st.one_of(PLAIN, PREFIXED, SAMPLES).filter(bool)
LINES = st.builds(Line, time=TIMES, text=TEXTS, meta=METAS)

# Raw lines built from grammar fragments, most of them invalid.
FRAGMENTS = st.sampled_from(
    ["[", "]", " ", "  ", "\t", "fact", "note", "error", "key=", "file:", "err:", "x", "乌", ":"]
)
RAW = st.builds(
    lambda time, body: f"[{time}] {body}",
    TIMES,
    st.lists(st.one_of(FRAGMENTS, st.characters()), max_size=24).map("".join),
)


# --- properties ---------------------------------------------------------------


@given(LINES)
def test_parse_render_round_trip(line: Line) -> None:
    assert parse_line(render_line(line)) == line


@given(LINES)
def test_render_is_one_line(line: Line) -> None:
    rendered = render_line(line)
    assert "\n" not in rendered
    assert "\r" not in rendered
    assert rendered.startswith(f"[{line.time}] ")


@given(RAW)
def test_parse_accepts_only_what_render_reproduces(raw: str) -> None:
    try:
        line = parse_line(raw)
    except GrammarError:
        return
    rendered = render_line(line)
    assert parse_line(rendered) == line
    assert render_line(parse_line(rendered)) == rendered


@given(st.lists(st.tuples(TIMES, TEXTS), max_size=12), st.integers(1, 5))
def test_fingerprint_ignores_line_numbers(pairs: list[tuple[str, str]], shift: int) -> None:
    lines = [Line(time, text) for time, text in pairs]
    before = diary_entries("/r", "user", "diary/2026-01-01.md", "2026-01-01", list(enumerate(lines, start=1)))
    after = diary_entries("/r", "user", "diary/2026-01-01.md", "2026-01-01", list(enumerate(lines, start=1 + shift)))
    assert [e.fp for e in before] == [e.fp for e in after]
    assert len({e.fp for e in before}) == len(before)


# --- the documented syntax ----------------------------------------------------

EXAMPLES = [
    ("[14:05] Deployed v2.", Line("14:05", "Deployed v2.")),
    ("[00:00] midnight", Line("00:00", "midnight")),
    ("[23:59] 我最喜欢的饮料是乌龙茶", Line("23:59", "我最喜欢的饮料是乌龙茶")),
    ("[09:00] [fact] The sky is blue.", Line("09:00", "The sky is blue.", Meta("fact"))),
    ("[09:00] [fact key=sky] Blue.", Line("09:00", "Blue.", Meta("fact", "sky"))),
    (
        "[14:05] [decision key=db file:app.py tool:pytest err:E42] Use Postgres.",
        Line("14:05", "Use Postgres.", Meta("decision", "db", ("file:app.py", "tool:pytest", "err:E42"))),
    ),
    ("[10:00] [error err:ENOENT] Missing file.", Line("10:00", "Missing file.", Meta("error", None, ("err:ENOENT",)))),
    (
        "[10:00] [workflow tool:git tool:git] twice",
        Line("10:00", "twice", Meta("workflow", None, ("tool:git", "tool:git"))),
    ),
    ("[10:00] [note key=todo] Buy tea.", Line("10:00", "Buy tea.", Meta("note", "todo"))),
    ("[10:00] [note] plain", Line("10:00", "plain")),
    ("[10:00] [note] [fact] literal", Line("10:00", "[fact] literal")),
    ("[10:00] [fact] [fact] literal", Line("10:00", "[fact] literal", Meta("fact"))),
    ("[10:00] [see above] bracket text", Line("10:00", "[see above] bracket text")),
    ("[10:00] [Fact] capitalised is text", Line("10:00", "[Fact] capitalised is text")),
    ("[10:00] [fact]no space is text", Line("10:00", "[fact]no space is text")),
    ("[10:00] [fact\tkey=x] tab is text", Line("10:00", "[fact\tkey=x] tab is text")),
    ("[10:00] file:a.py is just text", Line("10:00", "file:a.py is just text")),
    ("[10:00]    padded   ", Line("10:00", "padded")),
    ("[10:00] [fact]    padded", Line("10:00", "padded", Meta("fact"))),
    ("[10:00] tab\tinside", Line("10:00", "tab\tinside")),
    ("[10:00] [fact key=a=b file:C:x] colons", Line("10:00", "colons", Meta("fact", "a=b", ("file:C:x",)))),
]


@pytest.mark.parametrize(("raw", "expected"), EXAMPLES)
def test_documented_examples(raw: str, expected: Line) -> None:
    assert parse_line(raw) == expected


@pytest.mark.parametrize(
    ("line", "rendered"),
    [
        (Line("14:05", "Deployed v2."), "[14:05] Deployed v2."),
        (Line("09:00", "Blue.", Meta("fact", "sky")), "[09:00] [fact key=sky] Blue."),
        (Line("09:00", "x", Meta("error", None, ("err:E1", "file:a"))), "[09:00] [error err:E1 file:a] x"),
        (Line("09:00", "x", Meta("note", "k")), "[09:00] [note key=k] x"),
        (Line("09:00", "[fact] literal"), "[09:00] [note] [fact] literal"),
        (Line("09:00", "[fact err] x"), "[09:00] [note] [fact err] x"),
        (Line("09:00", "[fact]"), "[09:00] [note] [fact]"),
        (Line("09:00", "[see above] x"), "[09:00] [see above] x"),
        (Line("09:00", "[fact]x"), "[09:00] [fact]x"),
    ],
)
def test_render_examples(line: Line, rendered: str) -> None:
    assert render_line(line) == rendered


@pytest.mark.parametrize(
    "raw",
    [
        "[25:00] x",
        "[24:00] x",
        "[9:05] x",
        "[12:60] x",
        "[12:5] x",
        "[\uff11\uff12:\uff10\uff10] full-width digits",
        "no time here",
        "12:00 x",
        "[12:00]",
        "[12:00] ",
        "[12:00]    ",
        "[12:00]x",
        "[12:00]\tx",
        " [12:00] leading space",
        "[12:00] [fact]",
        "[12:00] [fact] ",
        "[12:00] bell \x07",
        "[12:00] two\nlines",
        "[12:00] c1 \x9b control",
    ],
)
def test_grammar_rejections(raw: str) -> None:
    with pytest.raises(GrammarError):
        parse_line(raw)


@pytest.mark.parametrize(
    "line",
    [
        Line("25:00", "x"),
        Line("9:05", "x"),
        Line("12:00", ""),
        Line("12:00", " x"),
        Line("12:00", "x "),
        Line("12:00", "two\nlines"),
        Line("12:00", "carriage\rreturn"),
        Line("12:00", "escape \x1b[31m"),
        Line("12:00", "lone \ud800 surrogate"),
        Line("12:00", "x", Meta("bogus")),
        Line("12:00", "x", Meta("fact", "two words")),
        Line("12:00", "x", Meta("fact", "")),
        Line("12:00", "x", Meta("fact", None, ("path:x",))),
        Line("12:00", "x", Meta("fact", None, ("file:a]",))),
    ],
)
def test_render_refuses_what_would_not_read_back(line: Line) -> None:
    with pytest.raises(GrammarError):
        render_line(line)


# --- make_meta ----------------------------------------------------------------


def test_make_meta_accepts_valid_values() -> None:
    assert make_meta() == Meta()
    assert make_meta("decision", "db", ("file:a.py", "tool:pytest", "err:E42")) == Meta(
        "decision", "db", ("file:a.py", "tool:pytest", "err:E42")
    )
    assert make_meta("fact", "乌龙茶", ["file:文件.md"]) == Meta("fact", "乌龙茶", ("file:文件.md",))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"type": "Fact"}, "invalid type"),
        ({"type": "task"}, "invalid type"),
        ({"type": ""}, "invalid type"),
        ({"key": ""}, "invalid key"),
        ({"key": "two words"}, "invalid key"),
        ({"key": "tab\tkey"}, "invalid key"),
        ({"key": "a[b"}, "invalid key"),
        ({"key": "a]"}, "invalid key"),
        ({"key": "nbsp\u00a0key"}, "invalid key"),
        ({"key": "esc\x1b"}, "invalid key"),
        ({"key": "c1\x9b"}, "invalid key"),
        ({"key": "del\x7f"}, "invalid key"),
        ({"triggers": ("file",)}, "invalid trigger"),
        ({"triggers": ("file:",)}, "invalid trigger"),
        ({"triggers": ("path:x",)}, "invalid trigger"),
        ({"triggers": ("File:x",)}, "invalid trigger"),
        ({"triggers": (":x",)}, "invalid trigger"),
        ({"triggers": ("file:a b",)}, "invalid trigger"),
        ({"triggers": ("tool:a]",)}, "invalid trigger"),
        ({"triggers": ("err:\n",)}, "invalid trigger"),
        ({"triggers": ("file:ok", "bad")}, "invalid trigger"),
    ],
)
def test_make_meta_rejections(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(GrammarError, match=re.escape(message)):
        make_meta(**kwargs)  # type: ignore[arg-type]


# --- fingerprints -------------------------------------------------------------


def _entry(**changes: object) -> Entry:
    base: dict[str, object] = {
        "root": "/home/a/.local/share/braind",
        "realm": "user",
        "path": "diary/2026-11-29.md",
        "line": 3,
        "date": "2026-11-29",
        "time": "09:30",
        "text": "我最喜欢的饮料是乌龙茶",
    }
    base.update(changes)
    return Entry(**base)  # type: ignore[arg-type]


def test_fingerprint_is_short_hex_and_stable() -> None:
    fp = _entry().fp
    assert re.fullmatch(r"[0-9a-f]{12}", fp)
    assert _entry().fp == fp
    assert _entry(line=40).fp == fp
    assert _entry(root="/mnt/copy/braind").fp == fp
    assert with_status(_entry(), "pinned").fp == fp


@pytest.mark.parametrize(
    "change",
    [
        {"text": "我最喜欢的饮料是绿茶"},
        {"time": "09:31"},
        {"date": "2026-11-30"},
        {"path": "diary/2026-11-30.md"},
        {"realm": "project"},
        {"occurrence": 1},
    ],
)
def test_fingerprint_changes_with_identity(change: dict[str, object]) -> None:
    assert _entry(**change).fp != _entry().fp


def test_duplicate_lines_get_distinct_fingerprints() -> None:
    same = Line("18:00", "Deployed v2 🚀 to staging.")
    entries = diary_entries(
        "/r", "user", "diary/2026-11-29.md", "2026-11-29", [(1, same), (2, Line("18:01", "x")), (3, same)]
    )
    assert [e.occurrence for e in entries] == [0, 0, 1]
    assert entries[0].fp != entries[2].fp
    assert [e.line for e in entries] == [1, 2, 3]
    # Deleting the line between them keeps both duplicates' fingerprints.
    kept = diary_entries("/r", "user", "diary/2026-11-29.md", "2026-11-29", [(1, same), (2, same)])
    assert [e.fp for e in kept] == [entries[0].fp, entries[2].fp]


def test_diary_entries_carry_the_metadata() -> None:
    line = Line("14:05", "Use Postgres.", Meta("decision", "db", ("file:app.py",)))
    (entry,) = diary_entries("/r", "project", "diary/2026-11-29.md", "2026-11-29", [(7, line)])
    assert (entry.type, entry.key, entry.triggers) == ("decision", "db", ("file:app.py",))
    assert (entry.root, entry.realm, entry.line, entry.kind, entry.status) == ("/r", "project", 7, "diary", "live")


@pytest.mark.parametrize(
    "raw",
    [
        "[12:00] [fact err] x",
        "[12:00] [fact file:] x",
        "[12:00] [fact path:x] x",
        "[12:00] [fact FILE:x] x",
        "[12:00] [fact key=] x",
        "[12:00] [fact key=a key=b] x",
        "[12:00] [note to self] call Bob",
        "[12:00] [error budget] is spent",
        "[12:00] [fact file:x key=a] key after a trigger",
        "[12:00] [fact  key=a] double space",
        "[12:00] [fact ] trailing space",
    ],
)
def test_brackets_that_are_not_metadata_stay_text(raw: str) -> None:
    line = parse_line(raw)
    assert line.meta == Meta() and line.text == raw[8:]
    assert parse_line(render_line(line)) == line


def test_an_entry_pickles_to_an_equal_one_keeping_a_computed_fingerprint() -> None:
    """Worker processes of a rebuild get entries pickled: every field comes back, and the fingerprint once known."""
    entry = Entry(
        "/r", "user", "/r/diary/2026-01-02.md", 3, "2026-01-02", "10:00", "chose Postgres",
        kind="diary", type="decision", key="db", triggers=("file:app.py",), status="tombstoned", occurrence=2,
    )  # fmt: skip
    fresh = pickle.loads(pickle.dumps(entry))
    assert fresh == entry and fresh._fp is None
    fingerprint = entry.fp
    known = pickle.loads(pickle.dumps(entry))
    assert known == entry and known._fp == fingerprint == known.fp
