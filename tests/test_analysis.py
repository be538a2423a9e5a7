"""The analyzer, query parsing and the pure-Python matcher that mirrors the index."""

from __future__ import annotations

import pickle
import random
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braind.index import analysis, ranking
from braind.index.whoosh import analyzer

EN = analysis.language()


def tokens(text: str, languages: tuple[str, ...] = ("en",)) -> list[tuple[str, int]]:
    """(term, position) pairs as the index sees them."""
    return [(t.text, t.pos) for t in analyzer.analyzer(languages)(text, positions=True)]


def words(query: str) -> list[tuple[str, tuple[str, ...], bool]]:
    """(word, index keys, stopword) of each word of a query."""
    return [(t.word, t.keys, t.stop) for t in EN.query(query).terms]


def test_words_are_folded_stemmed_and_split_on_punctuation() -> None:
    assert tokens("Hello, CAFÉ-naïve   world_2!") == [("hello", 0), ("cafe", 1), ("naiv", 2), ("world_2", 3)]


def test_word_forms_share_one_stem() -> None:
    for group in (["drink", "drinks", "Drinking"], ["research", "researched"], ["agency", "agencies"]):
        assert len({term for text in group for term, _ in tokens(text)}) == 1, group


def test_irregular_english_forms_share_their_base_forms_stem() -> None:
    for group in (["go", "went", "gone", "going"], ["buy", "bought"], ["child", "children"], ["feel", "felt"]):
        assert len({term for text in group for term, _ in tokens(text)}) == 1, group
    assert {term for text in ("rose", "rise") for term, _ in tokens(text)} == {"rose", "rise"}  # a flower too
    assert "win" not in {term for term, _ in tokens("I won't go")}  # won't splits into won and t


def test_irregular_forms_are_english_only() -> None:
    german = analysis.language(("de",))
    assert german.stems("went") != german.stems("go")
    both = analysis.language(("de", "en"))
    assert set(both.stems("went")) == {german.stems("went")[0], "go"}  # each language's own reading


def test_possessives_and_punctuation_are_dropped() -> None:
    assert words("Caroline's") == [("caroline", ("carolin",), False), ("s", ("s",), True)]
    assert [word for word, _, _ in words("drink?!")] == ["drink"]


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
    assert [(w, k) for w, k, _ in words("API限流")] == [("api", ("api",)), ("限流", ("限流",))]


@pytest.mark.parametrize("text", ["データベース", "서버배포", "我的データ"])
def test_japanese_and_korean_are_cjk_runs(text: str) -> None:
    terms = [term for term, _ in tokens(text)]
    assert terms[0] == text[:2] and terms[-1] == text[-1] and len(terms) == len(text)


def test_character_offsets_when_asked() -> None:
    offsets = [(t.text, t.startchar, t.endchar) for t in analyzer.analyzer()("ab 茶叶", chars=True)]
    assert offsets == [("ab", 0, 2), ("茶叶", 3, 5), ("叶", 4, 5)]


def test_analyzer_pickles_with_the_schema() -> None:
    copy = pickle.loads(pickle.dumps(analyzer.analyzer(("en", "de"))))
    assert copy.languages == ("en", "de")
    assert [t.text for t in copy("Café 茶叶")] == ["cafe", "caf", "茶叶", "叶"]


def test_counts_keep_frequencies_as_weights_without_values() -> None:
    values = sorted(analyzer.Counts().word_values("kafka 茶叶 kafkas", analyzer.analyzer()))
    assert values == sorted([("kafka", 2, 2.0, b""), ("茶叶", 1, 1.0, b""), ("叶", 1, 1.0, b"")])


def test_stopwords_are_marked_and_only_required_when_nothing_else_is_asked() -> None:
    query = EN.query("What is my favorite drink?")
    assert [t.word for t in query.terms if t.stop] == ["what", "is", "my"]
    assert [t.word for t in query.required] == ["favorite", "drink"]
    assert [t.word for t in EN.query("who are you").required] == ["who", "are", "you"]


def test_words_with_one_stem_are_required_once() -> None:
    assert [t.word for t in EN.query("drink drinks Drinking").required] == ["drink"]


def test_other_languages_stem_their_own_words() -> None:
    both = analysis.language(("en", "de"))
    assert set(both.stems("hauser")) == {"hauser", "haus"}
    assert both.stopwords >= {"und", "the"}
    assert tokens("Häuser", ("en", "de")) == [("hauser", 0), ("haus", 0)]


def test_english_stemming_keeps_other_scripts_as_they_were() -> None:
    assert tokens("Москва улицы") == [("москва", 0), ("улицы", 1)]
    assert tokens("서버배포") == [("서버", 0), ("버배", 1), ("배포", 2), ("포", 3)]


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("We deployed it", "deploy"),
        ("We deployed it", "dep"),
        ("we DEPLOYS", "Deploy"),
        ("un café noir", "CAFÉ noir"),
        ("my favorite drink is oolong tea", "What is my favorite drink?"),
        ("researched adoption agencies", "agency research"),
        ("我最喜欢的饮料是乌龙茶", "乌龙茶"),
        ("我最喜欢的饮料是乌龙茶", "茶"),
        ("hit the API限流 today", "api限流"),
        ("hit the API限流 today", "限流 hit"),
    ],
)
def test_text_matches(text: str, query: str) -> None:
    assert EN.matches(text, EN.query(query).required)


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("We deployed it", "ployed"),
        ("We deployed it", "deploy missing"),
        ("我最喜欢的饮料是乌龙茶", "龙乌"),
        ("乌龙 茶", "乌龙茶"),
        ("API only", "api限流"),
    ],
)
def test_text_does_not_match(text: str, query: str) -> None:
    assert not EN.matches(text, EN.query(query).required)


def test_snippet_is_short_text_unchanged_on_one_line() -> None:
    assert EN.snippet("a\n  b", EN.query("b").terms, 240) == "a b"


def test_snippet_surrounds_the_first_match_within_the_budget() -> None:
    text = "x" * 500 + " needles " + "y" * 500
    snip = EN.snippet(text, EN.query("needle").terms, 60)
    assert len(snip) <= 60 and "needles" in snip
    assert snip.startswith("…") and snip.endswith("…")


@pytest.mark.parametrize("seed", range(5))
def test_snippet_of_ascii_text_is_placed_as_a_word_by_word_look_would_place_it(seed: int) -> None:
    rng = random.Random(seed)
    words = ["Drinks", "drank", "tea_time", "oolong's", "x2", "researched", "the", "Agencies", "deploying", "a"]
    for _ in range(200):
        text = "  ".join(rng.choice(words) for _ in range(rng.randrange(1, 90)))
        query = EN.query(" ".join(rng.sample(words, rng.randrange(1, 4))))
        flat = " ".join(text.split())
        expected = EN.first_match(flat, query.terms)
        assert EN._first_offset(flat, text, query.terms) == expected
        if len(flat) > 60:
            assert EN.snippet(text, query.terms, 60) == _snippet_at(flat, expected, 60)


def _snippet_at(flat: str, pos: int, limit: int) -> str:
    """The snippet of a one-line text around a match at pos, as Language.snippet cuts it."""
    start = max(0, min(pos - limit // 3, len(flat) - limit))
    end = start + limit
    head, tail = start > 0, end < len(flat)
    return ("…" if head else "") + flat[start + head : end - tail] + ("…" if tail else "")


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 240])
def test_snippet_never_exceeds_the_limit(limit: int) -> None:
    text = "茶" * 300 + " tail"
    assert len(EN.snippet(text, EN.query("tail").terms, limit)) <= limit


def test_words_standing_together_are_stems_in_order() -> None:
    assert EN.stand_together("The support groups met", "support", "group")
    assert not EN.stand_together("The support groups met", "group", "support")
    assert not EN.stand_together("The supporting group", "support", "grou")  # whole words only


def test_supported_languages_are_those_with_a_stemmer() -> None:
    assert {"en", "de", "fr", "ru", "tr"} <= set(analysis.supported_languages())
    assert "xx" not in analysis.supported_languages() and "zh" not in analysis.supported_languages()


MIXED = [*"abZ éÉüßİ乌龙茶饮料。-_1ﬁ", "\uff0c", "\uff12"]  # a full-width comma and digit two


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=60), st.text(alphabet=st.sampled_from(MIXED), max_size=60)))
def test_term_counts_are_what_the_tokenizer_makes(text: str) -> None:
    assert EN.term_counts(text) == dict(Counter(token.text for token in analyzer.analyzer()(text)))


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_ascii_text_splits_into_the_words_a_regular_expression_finds(text: str) -> None:
    assert analysis.split(text) == (re.findall(r"\w+", text.lower(), re.ASCII), [])


_WORDS = ["deploy", "deployed", "redeploy", "tea", "teas", "oolong", "乌龙茶", "乌龙", "龙茶", "茶", "データ", "the"]


def _counts_in(text: str, term: analysis.Term) -> bool:
    """Whether the word counts in the text's statistics, as the index scores it."""
    stats = ranking.fresh_stats(EN, [text], term)
    return bool(stats.exact or stats.longer)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(_WORDS), max_size=6).map(" ".join), max_size=12),
    st.lists(st.sampled_from([*_WORDS, "乌龙茶饮料", "龙乌"]), min_size=1, max_size=4).map(" ".join),
)
def test_a_text_set_finds_the_texts_each_query_word_holds_or_can_score_in(texts: list[str], query: str) -> None:
    """What one search over many texts says of each text is what a look at that text says."""
    found = analysis.TextSet(EN, texts)
    for term in EN.query(query).terms:
        holding, scoring = found.holding(term), found.scoring(term)
        assert holding == {t for t in texts if EN.holds(t, term)}, term
        counting = {t for t in texts if _counts_in(t, term)}
        assert holding <= scoring and counting <= scoring, term  # a CJK run scores where its pairs lie apart
