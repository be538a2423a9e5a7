"""Tokenization shared by the index and the in-memory matcher.

Words in alphabetic scripts are lower-cased and accent-folded; a query word
matches every word it begins. Chinese, Japanese and Korean have no spaces
between words, so a CJK run is indexed as its overlapping bigrams plus its
last character alone: every character then begins a term, so a one-character
query is a prefix, a two-character one a term, and a longer one the AND of its
bigrams, checked against the stored text (the index keeps no positions, which
makes it smaller and faster to write). `text_matches` gives the same answers
without an index, for entries that are not committed yet.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

from whoosh.analysis import Token, Tokenizer
from whoosh.formats import Frequency
from whoosh.matching import Matcher
from whoosh.query import And, Or, Prefix, Query, Term

ANALYZER_VERSION = 2

FIELD = "text"

# Han, Hiragana, Katakana, Hangul and their compatibility blocks.
_CJK = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3041-\u309f\u30a1-\u30fa\u30fc-\u30ff"
    "\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U0003134f"
)
# Group 1: a CJK run; group 2: a word of any other script.
_WORD = re.compile(rf"([{_CJK}]+)|([^\W{_CJK}]+)")
_MARKS = re.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")

Part = tuple[bool, str]  # (is_cjk, folded text)


def fold(word: str) -> str:
    """Lower-case and strip accents so that CAFÉ, Café and cafe are one word."""
    if word.isascii():
        return word.lower()
    return _fold_unicode(word)


@lru_cache(maxsize=65536)
def _fold_unicode(word: str) -> str:
    """The slow path of fold(), cached because words repeat across entries."""
    return _MARKS.sub("", unicodedata.normalize("NFKD", word.casefold()))


class CJKTokenizer(Tokenizer):
    """Folded words, plus CJK characters and bigrams; importable so the schema pickles."""

    def __call__(
        self,
        value: str,
        positions: bool = False,
        chars: bool = False,
        keeporiginal: bool = False,
        removestops: bool = True,
        start_pos: int = 0,
        start_char: int = 0,
        tokenize: bool = True,
        mode: str = "",
        **kwargs: Any,
    ) -> Iterator[Token]:
        """Yield one reused Token per term, the way Whoosh tokenizers do."""
        token = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        if not tokenize:
            yield _whole(token, value, start_pos, start_char)
            return
        pos = start_pos
        for match in _WORD.finditer(value):
            if match.lastindex == 1:
                yield from _cjk_tokens(token, match.group(), pos, start_char + match.start(), chars)
                pos += match.end() - match.start()
                continue
            token.text = fold(match.group())
            if not token.text:  # a word that folds away entirely
                continue
            token.pos = pos
            if chars:
                token.startchar, token.endchar = start_char + match.start(), start_char + match.end()
            pos += 1
            yield token


def _cjk_tokens(token: Token, run: str, pos: int, offset: int, chars: bool) -> Iterator[Token]:
    """Each bigram of a CJK run at the position of its first character, then the run's last character."""
    last = len(run) - 1
    for i in range(last):
        token.pos, token.text = pos + i, run[i : i + 2]
        if chars:
            token.startchar, token.endchar = offset + i, offset + i + 2
        yield token
    token.pos, token.text = pos + last, run[last]
    if chars:
        token.startchar, token.endchar = offset + last, offset + last + 1
    yield token


def _whole(token: Token, value: str, start_pos: int, start_char: int) -> Token:
    """The untokenized value as a single token (Whoosh's tokenize=False contract)."""
    token.original = token.text = value
    token.pos = start_pos
    token.startchar, token.endchar = start_char, start_char + len(value)
    return token


def analyzer() -> CJKTokenizer:
    """The analyzer of the text field."""
    return CJKTokenizer()


class Counts(Frequency):
    """Term frequencies kept only as posting weights: Frequency also stores each one again as a value."""

    posting_size = 0  # no value per posting

    def word_values(self, value: str, analyzer: Any, **kwargs: Any) -> Iterator[tuple[str, int, float, bytes]]:
        """(term, frequency, weight, no value) for each distinct term of a text."""
        counts = term_counts(value) if type(analyzer) is CJKTokenizer else _token_counts(value, analyzer, **kwargs)
        boost = self.field_boost
        return ((text, count, count * boost, b"") for text, count in counts.items())

    def decode_frequency(self, valuestring: bytes) -> int:
        """Unused: frequencies are read as weights."""
        return 1


def term_counts(text: str) -> dict[str, int]:
    """The terms CJKTokenizer makes of a text, with their counts, without its Token objects (indexing's hot loop)."""
    counts: dict[str, int] = {}
    get = counts.get
    for run, word in _WORD.findall(text):
        if run:
            for i in range(len(run) - 1):
                pair = run[i : i + 2]
                counts[pair] = get(pair, 0) + 1
            counts[run[-1]] = get(run[-1], 0) + 1
        elif folded := fold(word):
            counts[folded] = get(folded, 0) + 1
    return counts


def _token_counts(value: str, analyzer: Any, **kwargs: Any) -> dict[str, int]:
    """The counts of the terms another analyzer makes."""
    counts: dict[str, int] = {}
    for token in analyzer(value, **kwargs):
        counts[token.text] = counts.get(token.text, 0) + 1
    return counts


class WordPrefix(Prefix):
    """A scored prefix query whose expansions are summed in preloaded arrays.

    Whoosh's default binary tree of union matchers costs several times more
    when a short prefix expands to many words.
    """

    def matcher(self, searcher: Any, context: Any = None) -> Matcher:
        """Union the expanded terms with an array matcher."""
        terms = [Term(self.fieldname, text) for text in self._btexts(searcher.reader())]
        if len(terms) < 2:
            return super().matcher(searcher, context)
        union = Or(terms, boost=self.boost)
        union.matcher_type = Or.ARRAY_MATCHER
        return union.matcher(searcher, context)


def word_parts(word: str) -> list[Part]:
    """Split one query word into its folded script runs (API限流 → api, 限流)."""
    parts = [
        (match.lastindex == 1, match.group() if match.lastindex == 1 else fold(match.group()))
        for match in _WORD.finditer(word)
    ]
    return [part for part in parts if part[1]]


def query_parts(query: str) -> list[Part]:
    """Every part of every whitespace-separated word of a query; all are required."""
    return [part for word in query.split() for part in word_parts(word)]


def part_query(part: Part) -> Query:
    """One required part as a Whoosh query on the text field; a CJK run longer than two also needs checking.

    The AND of a long run's bigrams also finds texts holding them apart: parts_match() on the
    stored text tells which hold the run itself.
    """
    is_cjk, text = part
    if not is_cjk or len(text) == 1:
        return WordPrefix(FIELD, text, constantscore=False)
    if len(text) == 2:
        return Term(FIELD, text)
    return And([Term(FIELD, bigram) for bigram in bigrams(text)])


def bigrams(run: str) -> list[str]:
    """The overlapping character pairs of a CJK run."""
    return [run[i : i + 2] for i in range(len(run) - 1)]


def query_clauses(word: str) -> list[Query]:
    """How one query word becomes required Whoosh clauses (empty if it has no letters)."""
    return [part_query(part) for part in word_parts(word)]


@lru_cache(maxsize=2048)
def _folded_terms(text: str) -> tuple[str, str]:
    """The folded non-CJK words of a text, each after a newline, and its CJK runs joined by newlines.

    A word starts with a prefix exactly when "\n" + prefix occurs in the first string, a search
    done in C. Cached: uncommitted entries are matched on every search until their file is committed.
    """
    words: list[str] = []
    runs: list[str] = []
    for match in _WORD.finditer(text):
        if match.lastindex == 2:
            words.append(fold(match.group()))
        else:
            runs.append(match.group())
    return "".join("\n" + word for word in words), "\n".join(runs)


def parts_match(text: str, parts: Sequence[Part]) -> bool:
    """True when the text holds every part, with the index's semantics."""
    words, runs = _folded_terms(text)
    return all(part in runs if is_cjk else "\n" + part in words for is_cjk, part in parts)


def text_matches(text: str, words: Sequence[str]) -> bool:
    """Match an uncommitted entry exactly as the index would: every word, prefixes, CJK runs."""
    return parts_match(text, [part for word in words for part in word_parts(word)])


def first_match(text: str, parts: Sequence[Part]) -> int:
    """The character offset of the earliest place where any part matches, or 0."""
    prefixes = tuple(part for cjk, part in parts if not cjk)
    runs = [part for cjk, part in parts if cjk]
    for match in _WORD.finditer(text):
        if match.lastindex == 2:
            if prefixes and fold(match.group()).startswith(prefixes):
                return match.start()
            continue
        hits = [offset for offset in (match.group().find(run) for run in runs) if offset >= 0]
        if hits:
            return match.start() + min(hits)
    return 0


def snippet(text: str, parts: Sequence[Part], limit: int) -> str:
    """At most `limit` characters of the text, on one line, around its first match."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    pos = first_match(flat, parts)
    start = max(0, min(pos - limit // 3, len(flat) - limit))
    end = start + limit
    head = start > 0 and limit > 2
    tail = end < len(flat) and limit > 2
    body = flat[start + head : end - tail]
    return ("…" if head else "") + body + ("…" if tail else "")
