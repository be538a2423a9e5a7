"""The text field's analysis inside Whoosh: the tokenizer and the frequency format of `braind.index.analysis`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from whoosh.analysis import Token, Tokenizer
from whoosh.formats import Frequency

from braind.index.analysis import DEFAULT_LANGUAGES, WORDS, Language, fold, language


class CJKTokenizer(Tokenizer):
    """Folded, stemmed words, plus CJK characters and bigrams; importable so the schema pickles."""

    def __init__(self, languages: tuple[str, ...] = DEFAULT_LANGUAGES) -> None:
        self.languages = tuple(languages)

    @property
    def language(self) -> Language:
        """The shared stemmers and stopwords of this tokenizer's languages."""
        return language(self.languages)

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
        pos, stems = start_pos, self.language.stems
        for match in WORDS.finditer(value):
            if match.lastindex == 1:
                yield from _cjk_tokens(token, match.group(), pos, start_char + match.start(), chars)
                pos += match.end() - match.start()
                continue
            folded = fold(match.group())
            if not folded:  # a word that folds away entirely
                continue
            for stem in stems(folded):
                token.text, token.pos = stem, pos
                if chars:
                    token.startchar, token.endchar = start_char + match.start(), start_char + match.end()
                yield token
            pos += 1


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


def analyzer(languages: tuple[str, ...] = DEFAULT_LANGUAGES) -> CJKTokenizer:
    """The analyzer of the text field."""
    return CJKTokenizer(languages)


class Counts(Frequency):
    """Term frequencies kept only as posting weights: Frequency also stores each one again as a value."""

    posting_size = 0  # no value per posting

    def word_values(self, value: str, analyzer: Any, **kwargs: Any) -> Iterator[tuple[str, int, float, bytes]]:
        """(term, frequency, weight, no value) for each distinct term of a text."""
        boost = self.field_boost
        return ((text, count, count * boost, b"") for text, count in self.term_counts(value, analyzer).items())

    def term_counts(self, value: str, analyzer: Any, **kwargs: Any) -> dict[str, int]:
        """Each distinct term of a text with its frequency: what the writer indexes, without a tuple per term."""
        if type(analyzer) is CJKTokenizer:
            return analyzer.language.term_counts(value)
        return _token_counts(value, analyzer, **kwargs)

    def decode_frequency(self, valuestring: bytes) -> int:
        """Unused: frequencies are read as weights."""
        return 1


def _token_counts(value: str, analyzer: Any, **kwargs: Any) -> dict[str, int]:
    """The counts of the terms another analyzer makes."""
    counts: dict[str, int] = {}
    for token in analyzer(value, **kwargs):
        counts[token.text] = counts.get(token.text, 0) + 1
    return counts
