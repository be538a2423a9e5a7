"""The analyzer, the query translation and the pure-Python matcher that mirrors it."""

from __future__ import annotations

import pickle
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from whoosh.query import And, Term

from braind import analysis


def tokens(text: str) -> list[tuple[str, int]]:
    """(term, position) pairs as the index sees them."""
    return [(t.text, t.pos) for t in analysis.analyzer()(text, positions=True)]


def test_words_are_folded_and_split_on_punctuation() -> None:
    assert tokens("Hello, CAFÉ-naïve   world_2!") == [("hello", 0), ("cafe", 1), ("naive", 2), ("world_2", 3)]


def test_decomposed_accents_and_full_width_letters_fold_too() -> None:
    assert tokens("cafe\u0301 \uff21\uff30\uff29") == [("cafe", 0), ("api", 1)]


def test_cjk_run_gives_bigrams_at_the_first_characters_position_then_its_last_character() -> None:
    assert tokens("乌龙茶") == [("乌龙", 0), ("龙茶", 1), ("茶", 2)]
    assert tokens("茶") == [("茶", 0)]


def test_every_character_of_a_run_begins_a_term() -> None:
    text = "我最喜欢的饮料是乌龙茶"
    terms = [term for term, _ in tokens(text)]
    assert [term[0] for term in terms] == list(text)


def test_mixed_word_splits_into_script_runs() -> None:
    assert tokens("API限流 ok") == [("api", 0), ("限流", 1), ("流", 2), ("ok", 3)]


@pytest.mark.parametrize("text", ["データベース", "서버배포", "我的データ"])
def test_japanese_and_korean_are_cjk_runs(text: str) -> None:
    terms = [term for term, _ in tokens(text)]
    assert terms[0] == text[:2] and terms[-1] == text[-1] and len(terms) == len(text)


def test_character_offsets_when_asked() -> None:
    offsets = [(t.text, t.startchar, t.endchar) for t in analysis.analyzer()("ab 茶叶", chars=True)]
    assert offsets == [("ab", 0, 2), ("茶叶", 3, 5), ("叶", 4, 5)]


def test_analyzer_pickles_with_the_schema() -> None:
    copy = pickle.loads(pickle.dumps(analysis.analyzer()))
    assert [t.text for t in copy("Café 茶叶")] == ["cafe", "茶叶", "叶"]


def test_counts_keep_frequencies_as_weights_without_values() -> None:
    values = sorted(analysis.Counts().word_values("kafka 茶叶 kafka", analysis.analyzer()))
    assert values == sorted([("kafka", 2, 2.0, b""), ("茶叶", 1, 1.0, b""), ("叶", 1, 1.0, b"")])


def test_query_clauses_per_kind_of_word() -> None:
    assert [type(q) for q in analysis.query_clauses("Deploy")] == [analysis.WordPrefix]
    assert analysis.query_clauses("Deploy")[0].text == "deploy"
    assert [(type(q), q.text) for q in analysis.query_clauses("茶")] == [(analysis.WordPrefix, "茶")]
    assert analysis.query_clauses("乌龙") == [Term("text", "乌龙")]
    assert analysis.query_clauses("乌龙茶") == [And([Term("text", "乌龙"), Term("text", "龙茶")])]
    mixed = analysis.query_clauses("API限流")
    assert mixed[0].text == "api" and mixed[1] == Term("text", "限流")
    assert analysis.query_clauses("--") == []


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("We deployed it", ["deploy"]),
        ("we DEPLOYS", ["Deploy"]),
        ("un café noir", ["CAFÉ", "noir"]),
        ("我最喜欢的饮料是乌龙茶", ["乌龙茶"]),
        ("我最喜欢的饮料是乌龙茶", ["茶"]),
        ("hit the API限流 today", ["api限流"]),
        ("hit the API限流 today", ["限流", "hit"]),
        ("anything", []),
    ],
)
def test_text_matches(text: str, words: list[str]) -> None:
    assert analysis.text_matches(text, words)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("We deployed it", ["ployed"]),
        ("We deployed it", ["deploy", "missing"]),
        ("我最喜欢的饮料是乌龙茶", ["龙乌"]),
        ("乌龙 茶", ["乌龙茶"]),
        ("API only", ["api限流"]),
    ],
)
def test_text_does_not_match(text: str, words: list[str]) -> None:
    assert not analysis.text_matches(text, words)


def test_snippet_is_short_text_unchanged_on_one_line() -> None:
    parts = analysis.query_parts("b")
    assert analysis.snippet("a\n  b", parts, 240) == "a b"


def test_snippet_surrounds_the_first_match_within_the_budget() -> None:
    text = "x" * 500 + " needle " + "y" * 500
    snip = analysis.snippet(text, analysis.query_parts("needle"), 60)
    assert len(snip) <= 60 and "needle" in snip
    assert snip.startswith("…") and snip.endswith("…")


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 240])
def test_snippet_never_exceeds_the_limit(limit: int) -> None:
    text = "茶" * 300 + " tail"
    assert len(analysis.snippet(text, analysis.query_parts("tail"), limit)) <= limit


MIXED = [*"abZ éÉüßİ乌龙茶饮料。-_1ﬁ", "\uff0c", "\uff12"]  # a full-width comma and digit two


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=60), st.text(alphabet=st.sampled_from(MIXED), max_size=60)))
def test_term_counts_are_what_the_tokenizer_makes(text: str) -> None:
    assert analysis.term_counts(text) == dict(Counter(token.text for token in analysis.analyzer()(text)))
