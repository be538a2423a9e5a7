"""Recall as agents ask: own words, word forms, full matches before partial ones, all of memory, hints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TextIO

import pytest

from braind.errors import BraindError
from tests.conftest import Daemon, days_ago, run_cli, today
from tests.test_mcp import connected, errlog, ok, run, server

__all__ = ["errlog"]  # the MCP tests' fixture, used here too

DEMO = "my favorite drink is oolong tea"


def hits(d: Daemon, query: str, **params: Any) -> list[tuple[str, str, list[str]]]:
    """(text, match, matched) of every hit, best first."""
    return [(h["text"], h["match"], h["matched"]) for h in d.call("brain_recall", query=query, **params)["hits"]]


def write_day(d: Daemon, day: str, *lines: str) -> None:
    """A diary day written as an editor would, before the daemon starts."""
    diary = d.root / "diary"
    diary.mkdir(parents=True, exist_ok=True)
    (diary / f"{day}.md").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


@pytest.mark.parametrize("question", ["What is my favorite drink?", "the favorite drink", "drinks"])
def test_the_diary_demo_question_is_answered_first(daemon: Daemon, question: str) -> None:
    daemon.call("brain_note", text="we met at the harbour at noon")
    noted = daemon.call("brain_note", text=DEMO)
    daemon.call("brain_note", text="the harbour cafe closes at six")
    result = daemon.call("brain_recall", query=question)
    first = result["hits"][0]
    assert (first["fp"], first["text"], first["match"]) == (noted["fp"], DEMO, "all") and result["total"] == 1


def test_a_question_beats_a_distractor_holding_fewer_of_its_words(daemon: Daemon) -> None:
    noted = daemon.call("brain_note", text=DEMO)
    daemon.call("brain_note", text="the drinks cabinet needs a new lock")
    daemon.call("brain_note", text="my favourite drink used to be coffee")  # another spelling of favorite
    found = daemon.call("brain_recall", query="What is my favorite drink?")["hits"]
    assert found[0]["fp"] == noted["fp"] and [h["match"] for h in found] == ["all", "partial", "partial"]


def test_the_demo_through_the_cli(daemon: Daemon) -> None:
    run_cli("note", DEMO, config=daemon.config_path, check=True)
    shown = run_cli("recall", "What", "is", "my", "favorite", "drink?", config=daemon.config_path, check=True)
    fp = daemon.call("brain_recall", query="oolong")["hits"][0]["fp"]
    assert shown.stdout.splitlines()[0].endswith(f"{DEMO}  ({fp})")
    assert "1 entry holds every word" in shown.stdout


def test_the_demo_through_mcp(daemon: Daemon, errlog: TextIO) -> None:
    async def scenario() -> dict[str, Any]:
        async with connected(server(daemon.config_path), errlog) as session:
            ok(await session.call_tool("brain_note", {"text": DEMO}))
            return ok(await session.call_tool("brain_recall", {"query": "What is my favorite drink?"}))

    recalled = run(scenario)
    assert recalled["hits"][0]["text"] == DEMO and recalled["hits"][0]["match"] == "all"


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("Caroline researched adoption agencies", "What did Caroline research?"),
        ("We went camping and bought a tent", "When did we go camping and buy a tent?"),
        ("The children felt great", "how do the child feel"),
        ("She is looking at an adoption agency", "adoption agencies"),
        ("Caroline's painting won a prize", "caroline painting"),
        ("We deployed the new build", "deploy"),
        ("We deployed the new build", "depl"),
        ("un café près du port", "CAFE"),
        ("我最喜欢的饮料是乌龙茶", "乌龙茶"),
        ("我最喜欢的饮料是乌龙茶", "茶"),
        ("データベースの移行", "データ"),
    ],
)
def test_word_forms_possessives_prefixes_accents_and_cjk(daemon: Daemon, text: str, query: str) -> None:
    daemon.call("brain_note", text=text)
    assert daemon.recall(query) == [text]


def test_cjk_and_accents_do_not_match_what_they_do_not_hold(daemon: Daemon) -> None:
    daemon.call("brain_note", text="我最喜欢的饮料是乌龙茶")
    daemon.call("brain_note", text="un café près du port")
    assert daemon.recall("红茶") == [] and daemon.recall("龙乌") == [] and daemon.recall("cafard") == []


def test_full_matches_come_first_then_the_best_partial_ones(daemon: Daemon) -> None:
    daemon.call("brain_note", text="the kafka broker restarted after the upgrade")
    daemon.call("brain_note", text="kafka kafka kafka consumer lag")
    daemon.call("brain_note", text="broker notes")
    daemon.call("brain_note", text="nothing to do with it")
    result = daemon.call("brain_recall", query="kafka broker upgrade")
    found = [(h["text"], h["match"], h["matched"]) for h in result["hits"]]
    assert found[0] == ("the kafka broker restarted after the upgrade", "all", ["kafka", "broker", "upgrade"])
    assert sorted(found[1:]) == [
        ("broker notes", "partial", ["broker"]),
        ("kafka kafka kafka consumer lag", "partial", ["kafka"]),
    ]
    assert (result["total"], result["partial_total"]) == (1, 2)


def test_strict_returns_only_full_matches_as_the_diary_did(daemon: Daemon) -> None:
    daemon.call("brain_note", text="alpha beta")
    daemon.call("brain_note", text="alpha only")
    result = daemon.call("brain_recall", query="alpha beta", strict=True)
    assert [h["text"] for h in result["hits"]] == ["alpha beta"] and result["partial_total"] == 1  # counted, not shown
    shown = run_cli("recall", "--strict", "alpha", "beta", config=daemon.config_path, check=True).stdout
    assert "alpha only" not in shown and "alpha beta" in shown


def test_an_old_entry_is_found_without_a_window(make_daemon: Callable[..., Daemon]) -> None:
    d = make_daemon(start=False)
    old = days_ago(800)
    write_day(d, old, "[09:15] the lighthouse keeper retired")
    write_day(d, days_ago(3), "[10:00] something recent")
    d.start()
    hit = d.call("brain_recall", query="When did the lighthouse keeper retire?")["hits"][0]
    assert (hit["date"], hit["text"], hit["match"]) == (old, "the lighthouse keeper retired", "all")
    narrowed = d.call("brain_recall", query="lighthouse keeper", days=30)
    assert narrowed["hits"] == [] and "last 30 days" in narrowed["hint"]
    assert d.call("brain_recall", query="lighthouse", days=36500)["total"] == 1


def test_a_recall_that_finds_nothing_says_why(daemon: Daemon) -> None:
    daemon.call("brain_note", text="alpha beta")
    daemon.call("brain_note", text="gamma")
    result = daemon.call("brain_recall", query="zyxwv")
    assert result["hits"] == [] and "'zyxwv'" in result["hint"]
    strict = daemon.call("brain_recall", query="alpha gamma", strict=True)
    assert strict["hits"] == [] and "without strict" in strict["hint"]
    assert "hint" not in daemon.call("brain_recall", query="alpha")
    shown = run_cli("recall", "zyxwv", config=daemon.config_path, check=True).stdout
    assert "hint: no entry holds 'zyxwv'" in shown


def test_a_question_of_stopwords_only_still_needs_its_words(daemon: Daemon) -> None:
    daemon.call("brain_note", text="who are you")
    daemon.call("brain_note", text="you are here")
    assert daemon.recall("Who are you?") == ["who are you"]


def test_a_question_ranks_a_phrase_it_holds_higher(daemon: Daemon) -> None:
    daemon.call("brain_note", text="group support for the new team")
    daemon.call("brain_note", text="the support group met on Tuesday")
    assert daemon.recall("the support group")[0] == "the support group met on Tuesday"


def test_a_smaller_limit_shows_the_first_hits_of_a_larger_one(make_daemon: Callable[..., Daemon]) -> None:
    d = make_daemon(start=False)
    write_day(d, days_ago(1), "[09:00] group support for the team")  # shorter and newer: first before the bonus
    write_day(d, days_ago(3), "[09:00] the support group met on Tuesday at the hall")
    for day in range(5, 20):
        write_day(d, days_ago(day), f"[09:00] the hall was booked for a group of {day}")
    d.start()
    ranked = [text for text, _, _ in hits(d, "the support group", limit=20)]
    assert ranked[0] == "the support group met on Tuesday at the hall"
    for limit in (1, 2, 5):
        assert [text for text, _, _ in hits(d, "the support group", limit=limit)] == ranked[:limit]


def test_a_short_reply_is_lifted_by_the_question_before_it(make_daemon: Callable[..., Daemon]) -> None:
    d = make_daemon(start=False)
    write_day(
        d,
        days_ago(2),
        "[09:00] Melanie: did you go to the pottery workshop?",
        "[09:01] Caroline: Yes, last Tuesday, it was great",
        "[09:02] Melanie: lovely weather today",
    )
    write_day(d, days_ago(5), "[09:00] a Tuesday like any other")
    d.start()
    found = [text for text, _, _ in hits(d, "When did Caroline go to the pottery workshop? Tuesday")]
    assert found.index("Caroline: Yes, last Tuesday, it was great") < found.index("a Tuesday like any other")


def test_a_statement_is_lifted_by_the_reply_after_it(make_daemon: Callable[..., Daemon]) -> None:
    d = make_daemon(start=False)
    write_day(
        d,
        days_ago(3),
        "[09:00] Caroline: I went out early with my brushes",
        "[09:01] Melanie: A sunrise painting at the lake, how lovely",
    )
    write_day(d, days_ago(1), "[09:00] Caroline: I went out early for fresh bread")  # newer: first on a tie
    d.start()
    found = [text for text, _, _ in hits(d, "Caroline went out early to paint at the lake")]
    assert found.index("Caroline: I went out early with my brushes") < found.index(
        "Caroline: I went out early for fresh bread"
    )


def test_typed_memory_queries_rank_partial_matches_after_full_ones(daemon: Daemon) -> None:
    daemon.call("brain_note", text="Tests run with pytest -x", type="fact", key="tests")
    daemon.call("brain_note", text="pytest is slow on CI", type="fact")
    result = daemon.call("memory.query", term="pytest tests run")
    assert [(e["text"], e["match"]) for e in result["entries"]] == [
        ("Tests run with pytest -x", "all"),
        ("pytest is slow on CI", "partial"),
    ]
    assert (result["total"], result["partial_total"]) == (1, 1)
    strict = daemon.call("memory.query", term="pytest tests run", strict=True)
    assert [e["text"] for e in strict["entries"]] == ["Tests run with pytest -x"]
    entries = daemon.call("memory.entries", term="pytest tests run")["entries"]
    assert [(e["text"], e["match"]) for e in entries] == [
        ("Tests run with pytest -x", "all"),
        ("pytest is slow on CI", "partial"),
    ]


def test_layered_memory_is_recalled_in_own_words(daemon: Daemon) -> None:
    daemon.call("memory_write_root", section="preferences", content="I prefer green tea in the mornings")
    hit = daemon.call("brain_recall", query="What tea do I prefer?")["hits"][0]
    assert "green tea" in hit["text"] and hit["match"] == "all"


def test_the_tool_says_how_to_ask(daemon: Daemon) -> None:
    (recall,) = [t for t in daemon.call("tools") if t["name"] == "brain_recall"]
    text = recall["description"]
    assert "own words" in text and "every word come first" in text and "strict" in text and "days" in text
    assert recall["inputSchema"]["properties"]["strict"]["type"] == "boolean"
    assert recall["inputSchema"]["properties"]["days"]["maximum"] == 36500


@pytest.mark.parametrize("days", [0, -1, 36501])
def test_a_window_out_of_range_is_refused(daemon: Daemon, days: int) -> None:
    with pytest.raises(BraindError) as err:
        daemon.call("brain_recall", query="x", days=days)
    assert err.value.reason == "invalid_params"


def test_a_change_of_languages_rebuilds_the_index(make_daemon: Callable[..., Daemon]) -> None:
    d = make_daemon(start=False)
    write_day(d, today(), "[09:00] les chevaux du port")
    d.start()
    assert d.recall("cheval") == []  # English stems only: chevaux stays chevaux
    d.stop()
    d.settings["recall"] = {"languages": ["en", "fr"]}
    d.start()
    assert d.recall("cheval") == ["les chevaux du port"]
