"""How text becomes terms, for the index and for the in-memory matcher alike.

Words in alphabetic scripts are lower-cased, accent-folded and reduced to
their stem by the Snowball stemmer of each configured language (PyStemmer,
Snowball's C library), so that
`drinks`, `drink` and `Drinking` are one term; in English an irregular form is
read as its base form first (`went` as `go`, `forms.py`); punctuation splits words, and
the `s` of a possessive is a stopword of its own. A query word matches every
term it begins, so `deploy` finds `deployed` and `dep` finds both. Stopwords
(`what`, `is`, `my`, ...) are indexed like any word, but a query needs them
only when it holds nothing else.

Chinese, Japanese and Korean have no spaces between words, so a CJK run is
indexed as its overlapping bigrams plus its last character alone: every
character then begins a term, so a one-character query is a prefix, a
two-character one a term, and a longer one the AND of its bigrams, checked
against the stored text (the index keeps no positions, which makes it smaller
and faster to write). `Language.matches` gives the same answers without an
index, for entries that are not committed yet and for typed memory.
"""

from __future__ import annotations

import bisect
import itertools
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import Stemmer

from braind.index.forms import BASE_FORMS
from braind.index.stopwords import stopwords

ANALYZER_VERSION = 5

FIELD = "text"
DEFAULT_LANGUAGES = ("en",)

# Han, Hiragana, Katakana, Hangul and their compatibility blocks.
_CJK = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3041-\u309f\u30a1-\u30fa\u30fc-\u30ff"
    "\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U0003134f"
)
# Group 1: a CJK run; group 2: a word of any other script.
WORDS = re.compile(rf"([{_CJK}]+)|([^\W{_CJK}]+)")
_ASCII_WORDS = re.compile(r"\w+", re.ASCII)  # WORDS on ASCII text: no CJK, nothing to fold but case
# What `_ASCII_WORDS` splits lower-cased ASCII text on, as a byte table: every byte but [a-z0-9_] becomes a space.
_ASCII_SPACES = bytes(c if chr(c) in "abcdefghijklmnopqrstuvwxyz0123456789_" else 32 for c in range(256))
_MARKS = re.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")
_STEM_CACHE = 1 << 18  # distinct words whose stems are kept: a few tens of MB at most
# ISO 639-1 codes of the languages Snowball stems, and the names of its algorithms.
_ALGORITHMS = {
    "ar": "arabic", "ca": "catalan", "cs": "czech", "da": "danish", "de": "german", "el": "greek",
    "en": "english", "es": "spanish", "et": "estonian", "eu": "basque", "fa": "persian", "fi": "finnish",
    "fr": "french", "ga": "irish", "hi": "hindi", "hu": "hungarian", "hy": "armenian", "id": "indonesian",
    "it": "italian", "lt": "lithuanian", "ne": "nepali", "nl": "dutch", "no": "norwegian", "pl": "polish",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "sv": "swedish", "ta": "tamil",
    "tr": "turkish", "yi": "yiddish",
}  # fmt: skip


def fold(word: str) -> str:
    """Lower-case and strip accents so that CAFÉ, Café and cafe are one word."""
    if word.isascii():
        return word.lower()
    return _fold_unicode(word)


@lru_cache(maxsize=65536)
def _fold_unicode(word: str) -> str:
    """The slow path of fold(), cached because words repeat across entries."""
    return _MARKS.sub("", unicodedata.normalize("NFKD", word.casefold()))


def split(text: str) -> tuple[list[str], list[str]]:
    """A text's folded words in order, and its CJK runs; ASCII text (the common case) in one pass in C."""
    if text.isascii():  # _ASCII_WORDS.findall(text.lower()), done by a byte table in half the time
        return text.lower().encode("ascii").translate(_ASCII_SPACES).decode("ascii").split(), []
    words: list[str] = []
    runs: list[str] = []
    for run, word in WORDS.findall(text):
        if run:
            runs.append(run)
        elif folded := fold(word):
            words.append(folded)
    return words, runs


def supported_languages() -> tuple[str, ...]:
    """The language codes `recall.languages` accepts: those with a Snowball stemmer."""
    known = set(Stemmer.algorithms())
    return tuple(code for code, name in _ALGORITHMS.items() if name in known)


@dataclass(frozen=True)
class Term:
    """One word of a query: as written (folded), and the index terms it looks up."""

    word: str
    cjk: bool
    keys: tuple[str, ...]  # its stems (one per language that stems it differently), or the CJK run
    stop: bool = False


@dataclass(frozen=True)
class Query:
    """A parsed query: every word in order, and the ones an entry must hold to match fully."""

    terms: tuple[Term, ...]

    @property
    def required(self) -> tuple[Term, ...]:
        """The words a full match holds: all but stopwords, or every word of a query of stopwords only."""
        content = [term for term in self.terms if not term.stop]
        return _distinct(content or self.terms)


def _distinct(terms: Sequence[Term]) -> tuple[Term, ...]:
    """Terms that look up different index terms, the first of each kept (drink, drinks → drink)."""
    seen: dict[tuple[bool, tuple[str, ...]], Term] = {}
    for term in terms:
        seen.setdefault((term.cjk, term.keys), term)
    return tuple(seen.values())


class Language:
    """Stemming and stopwords for a list of languages; one shared instance per list (see `language()`)."""

    def __init__(self, codes: tuple[str, ...]) -> None:
        self.codes = codes
        self._local = threading.local()  # a stemmer is not thread-safe: one set per thread
        self.stopwords = frozenset(fold(word) for code in codes for word in stopwords(code))
        self._bases = [BASE_FORMS if code == "en" else {} for code in codes]  # irregular forms, per language
        self._stem: Callable[[str], str] | None = None
        self.stems: Callable[[str], tuple[str, ...]] = lru_cache(maxsize=_STEM_CACHE)(self._stems)
        if len(codes) == 1:  # one stem a word: texts are stemmed by a map in C, over one cache
            stem = self._stem = lru_cache(maxsize=_STEM_CACHE)(self._first)
            self.stems = lambda word: (stem(word),)

    def _stems(self, word: str) -> tuple[str, ...]:
        """The distinct stems of a folded word, first language first."""
        stemmers = getattr(self._local, "stemmers", None)
        if stemmers is None:
            stemmers = self._local.stemmers = [Stemmer.Stemmer(_ALGORITHMS[code]).stemWord for code in self.codes]
        if len(stemmers) == 1:
            return (stemmers[0](self._bases[0].get(word, word)) or word,)
        readings = zip(stemmers, self._bases, strict=True)
        return tuple(dict.fromkeys(stem(bases.get(word, word)) or word for stem, bases in readings))

    def _first(self, word: str) -> str:
        """The stem of a folded word in the one language."""
        return self._stems(word)[0]

    def _all_stems(self, words: list[str]) -> Iterable[str]:
        """The stems of folded words, in order."""
        if self._stem is not None:
            return map(self._stem, words)
        stems = self.stems
        return (stem for word in words for stem in stems(word))

    def cached_counts(self, text: str) -> dict[str, int]:
        """term_counts() of a text, kept for the next search: uncommitted entries are scored by every search."""
        return _counts_cache(self, text)

    def term_counts(self, text: str) -> dict[str, int]:
        """The terms the tokenizer makes of a text, with their counts (indexing's hot loop)."""
        words, runs = split(text)
        counts = Counter(self._all_stems(words))
        for run in runs:
            counts.update(run[i : i + 2] for i in range(len(run) - 1))
            counts[run[-1]] += 1
        return counts

    def query(self, text: str) -> Query:
        """Every word of a query, split into script runs (API限流 → api, 限流), folded and stemmed."""
        terms: list[Term] = []
        for match in WORDS.finditer(text):
            if match.lastindex == 1:
                terms.append(Term(match.group(), True, (match.group(),)))
            elif folded := fold(match.group()):
                terms.append(Term(folded, False, self.stems(folded), folded in self.stopwords))
        return Query(tuple(terms))

    def terms_of(self, text: str) -> tuple[str, str]:
        """The stems of a text's words, each after a newline, and its CJK runs joined by newlines.

        A stem begins a term exactly when "\n" + stem occurs in the first string, a search done in C.
        """
        words, runs = split(text)
        stems = "\n".join(self._all_stems(words))
        return ("\n" + stems if stems else ""), "\n".join(runs)

    def holds(self, text: str, term: Term) -> bool:
        """Whether a text holds a query word, with the index's semantics (prefixes, CJK runs)."""
        words, runs = _terms_cache(self, text)
        if term.cjk:
            return term.keys[0] in runs
        return any("\n" + key in words for key in term.keys)

    def matches(self, text: str, terms: Sequence[Term]) -> bool:
        """True when the text holds every one of the terms."""
        return all(self.holds(text, term) for term in terms)

    def first_match(self, text: str, terms: Sequence[Term]) -> int:
        """The character offset of the earliest place where any term matches, or 0."""
        prefixes = tuple(key for term in terms if not term.cjk for key in term.keys)
        runs = [term.keys[0] for term in terms if term.cjk]
        if text.isascii():  # no CJK run can match, and lower-casing keeps every offset
            return next(
                (m.start() for m in _ASCII_WORDS.finditer(text.lower()) if self._begins(m.group(), prefixes)), 0
            )
        for match in WORDS.finditer(text):
            if match.lastindex == 2:
                if self._begins(fold(match.group()), prefixes):
                    return match.start()
                continue
            hits = [offset for offset in (match.group().find(run) for run in runs) if offset >= 0]
            if hits:
                return match.start() + min(hits)
        return 0

    def _begins(self, folded: str, prefixes: tuple[str, ...]) -> bool:
        """Whether a folded word's stem begins with one of the prefixes."""
        return bool(prefixes and folded) and any(stem.startswith(prefixes) for stem in self.stems(folded))

    def snippet(self, text: str, terms: Sequence[Term], limit: int) -> str:
        """At most `limit` characters of the text, on one line, around its first match."""
        flat = " ".join(text.split())
        if len(flat) <= limit:
            return flat
        pos = self._first_offset(flat, text, terms)
        start = max(0, min(pos - limit // 3, len(flat) - limit))
        end = start + limit
        head = start > 0 and limit > 2
        tail = end < len(flat) and limit > 2
        body = flat[start + head : end - tail]
        return ("…" if head else "") + body + ("…" if tail else "")

    def _first_offset(self, flat: str, text: str, terms: Sequence[Term]) -> int:
        """first_match() of a text on one line; in one language, ASCII found in the text's cached stems.

        The phrase bonus has just split and stemmed each hit's text, so the earliest matching
        word is a few searches in C: which stem begins with a query word first, then that word's
        offset. Stems and words line up one to one in one language, and spaces do not split words.
        """
        if self._stem is None or not flat.isascii():
            return self.first_match(flat, terms)
        stems = _terms_cache(self, text)[0]
        found = [at for at in (stems.find("\n" + key) for t in terms if not t.cjk for key in t.keys) if at >= 0]
        if not found:
            return 0
        index = stems.count("\n", 0, min(found) + 1) - 1
        word = next(itertools.islice(_ASCII_WORDS.finditer(flat), index, None), None)
        return word.start() if word is not None else 0

    def stand_together(self, text: str, first: str, second: str) -> bool:
        """Whether a text holds two stems as consecutive words, for phrase ranking."""
        return self.pairs_together(text, ((first, second),)) == 1

    def pairs_together(self, text: str, pairs: Sequence[tuple[str, str]]) -> int:
        """How many of the pairs of stems stand in the text as consecutive words."""
        if not pairs:
            return 0
        words = _terms_cache(self, text)[0] + "\n"
        return sum(f"\n{first}\n{second}\n" in words for first, second in pairs)


class TextSet:
    """Many texts searched for a query word at once: one search in C over all their stems, not one a text.

    The texts' stems (and their CJK runs) are joined with NULs, which no query word holds, so a match
    never spans two texts; a match's offset tells its text.
    """

    def __init__(self, language: Language, texts: Iterable[str]) -> None:
        self.texts = list(dict.fromkeys(texts))
        pairs = [_terms_cache(language, text) for text in self.texts]
        self._words, self._word_starts = _joined(w for w, _ in pairs)
        self._runs, self._run_starts = _joined(r for _, r in pairs)

    def holding(self, term: Term) -> set[str]:
        """The texts that hold a query word, as Language.holds says."""
        if term.cjk:
            return self._found(self._runs, self._run_starts, term.keys[:1])
        return self._found(self._words, self._word_starts, tuple("\n" + key for key in term.keys))

    def scoring(self, term: Term) -> set[str]:
        """The texts a query word can give a score: those holding it, and for a CJK run its first pair."""
        if term.cjk and len(term.keys[0]) > 2:
            return self._found(self._runs, self._run_starts, (term.keys[0][:2],))
        return self.holding(term)

    def _found(self, joined: str, starts: list[int], needles: Sequence[str]) -> set[str]:
        """The texts in which any of the needles occurs."""
        found: set[str] = set()
        for needle in needles:
            at = joined.find(needle)
            while at != -1:
                i = bisect.bisect_right(starts, at) - 1
                found.add(self.texts[i])
                at = joined.find(needle, starts[i + 1]) if i + 1 < len(starts) else -1
        return found


def _joined(parts: Iterable[str]) -> tuple[str, list[int]]:
    """Strings joined by NULs, and where each begins."""
    starts, at, kept = [], 0, []
    for part in parts:
        starts.append(at)
        kept.append(part)
        at += len(part) + 1
    return "\0".join(kept), starts


@lru_cache(maxsize=4096)
def _counts_cache(language: Language, text: str) -> dict[str, int]:
    """Language.term_counts, cached (the dicts are never changed by their readers)."""
    return language.term_counts(text)


@lru_cache(maxsize=8192)
def _terms_cache(language: Language, text: str) -> tuple[str, str]:
    """Language.terms_of, cached: uncommitted entries are matched on every search until committed."""
    return language.terms_of(text)


@lru_cache(maxsize=16)
def language(codes: tuple[str, ...] = DEFAULT_LANGUAGES) -> Language:
    """The shared Language of a list of codes."""
    return Language(codes)


def bigrams(run: str) -> list[str]:
    """The overlapping character pairs of a CJK run."""
    return [run[i : i + 2] for i in range(len(run) - 1)]
