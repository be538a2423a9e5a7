"""Secret hygiene for memory text: redact credentials before they are written, defuse template braces before injection.

Memory is plain Markdown that is copied, synced and injected into prompts, so a
credential pasted into a note would leak everywhere the memory goes. `redact`
replaces each secret with ``[REDACTED:<kind>]`` and reports the kinds; every
other character is kept byte for byte. The kinds are stable names:

``private_key``
    a PEM block ``-----BEGIN [up to three words ]PRIVATE KEY[ BLOCK]-----`` (RSA,
    EC, DSA, OPENSSH, ENCRYPTED, PGP …) up to its
    ``-----END … PRIVATE KEY-----`` line, also when the newlines were
    folded to spaces. A BEGIN line whose END is missing is redacted to the end
    of the text: what follows it cannot be told apart from the key.
``url_password``
    the password of ``scheme://user:password@host`` (the user may be empty, the
    password runs to the last ``@`` before the host); scheme, user and host stay
    (``https://bob:[REDACTED:url_password]@example.com``).
``aws_access_key``
    ``AKIA`` or ``ASIA`` and 16 upper-case letters or digits.
``github_token``
    ``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_`` and 36 or more letters or
    digits; ``github_pat_`` and 22 or more.
``anthropic_key``
    ``sk-ant-`` and 20 or more characters.
``openai_key``
    ``sk-`` (also ``sk-proj-``, ``sk-svcacct-``, ``sk-admin-``) and 20 or more
    characters holding a letter and a digit.
``slack_token``
    ``xoxa-``, ``xoxb-``, ``xoxp-``, ``xoxr-``, ``xoxs-`` and 10 or more
    characters holding a digit.
``google_api_key``
    ``AIza`` and exactly 35 characters.
``stripe_key``
    ``sk_live_``, ``sk_test_``, ``rk_live_``, ``rk_test_`` and 16 or more letters
    and digits holding both; ``whsec_`` webhook secrets.
``jwt``
    three base64url segments joined by dots, the first starting ``eyJ``.
``bearer_token``
    the token of ``Authorization: Bearer <token>`` (8 or more characters), or of
    a bare ``Bearer <token>`` when the token is 20 or more characters holding a
    letter and a digit.
``basic_auth``
    the credentials of ``Authorization: Basic <base64>``.
``secret_assignment``
    the value of ``password=…``, ``passwd: …``, ``pwd``, ``passphrase``,
    ``secret``, ``token``, ``api_key``/``apikey``/``api-key``, ``access_key``,
    ``secret_key``, ``private_key``, ``credential(s)``, also as the last word of
    a longer name (``DB_PASSWORD``, ``client_secret``, ``x-api-key``) and
    in any case; the key and the quotes stay
    (``password=[REDACTED:secret_assignment]``). Separators are ``=``, ``:``,
    ``:=``, ``=>`` and ``==`` on the same line. The value is redacted only when
    it looks like a credential: at least 8 characters without spaces, holding a
    letter and a digit, or a letter or digit and a symbol other than
    ``_ . - / : +``; and it is not a reference (``$VAR``, ``${VAR}``,
    ``%VAR%``), a URL, a path (``/``, ``./``, ``../``, ``~/``) or code: a
    value opening with ``(``, ``[`` or ``{`` (``{{ name }}``,
    ``{password!r}``), a call or subscript (``os.environ[...]``,
    ``getenv(...)``) or a dotted name (``settings.SECRET_KEY``,
    ``ed25519.Ed25519PrivateKey``). So ``the password policy is strict``,
    ``token: see docs``, ``password: changeme`` and ``token=${GITHUB_TOKEN}``
    stay as written; a quoted value with spaces in it is not recognised.
``high_entropy``
    a run of 32 to 512 base64 characters mixing upper case, lower case and
    digits, with a Shannon entropy of at least 4 bits per character, on the same
    line as and at most 40 characters after the word key, secret, token,
    password, passphrase or credential. Hex digests (git SHAs, sha256), UUIDs,
    attributes (a run right after a dot) and names made of words joined by
    ``_`` or ``-`` (``test_Parse_Config_2``) are not redacted.

Text that is already ``[REDACTED:<kind>]`` is left alone, so redaction is
idempotent. Every pattern is bounded or anchored on a literal prefix, so the
scan is linear in the length of the text.

`neutralise_braces` is for text about to be injected into a prompt that a
template engine may render: it puts one ASCII space inside every ``{{``,
``}}``, ``{%``, ``%}``, ``{#``, ``#}`` (Mustache, Handlebars, Jinja) and ``${``
(shell, JavaScript template literals), so ``{{user}}`` becomes ``{ {user} }``.
A person reads the same text; no engine sees a placeholder. Single braces are
kept, so JSON and code read unchanged.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

KINDS = (
    "private_key",
    "url_password",
    "anthropic_key",
    "openai_key",
    "github_token",
    "aws_access_key",
    "slack_token",
    "google_api_key",
    "stripe_key",
    "jwt",
    "bearer_token",
    "basic_auth",
    "secret_assignment",
    "high_entropy",
)

_MARKER = re.compile(r"\[REDACTED:[a-z_]{1,32}\]")
_KEY_NAME = r"(?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----"
_PRIVATE_KEY = re.compile(r"(?P<secret>-----BEGIN " + _KEY_NAME + r"(?s:.*?)(?:-----END " + _KEY_NAME + r"|\Z))")
_URL_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://"
    r"[^\s:/?#@\"'<>\[\]]{0,128}:"
    r"(?P<secret>[^\s/?\"'<>]+)"
    r"@(?=[A-Za-z0-9\[])"
)
_ANTHROPIC = re.compile(r"(?<![A-Za-z0-9_-])(?P<secret>sk-ant-[A-Za-z0-9_-]{20,})")
_OPENAI = re.compile(r"(?<![A-Za-z0-9_-])(?P<secret>sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})")
_GITHUB = re.compile(r"(?<![A-Za-z0-9_])(?P<secret>gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")
_AWS = re.compile(r"(?<![A-Za-z0-9])(?P<secret>(?:AKIA|ASIA)[A-Z0-9]{16})(?![A-Za-z0-9])")
_SLACK = re.compile(r"(?<![A-Za-z0-9_-])(?P<secret>xox[abprs]-[A-Za-z0-9-]{10,})")
_GOOGLE = re.compile(r"(?<![A-Za-z0-9_-])(?P<secret>AIza[A-Za-z0-9_-]{35})(?![A-Za-z0-9_-])")
_STRIPE = re.compile(r"(?<![A-Za-z0-9_])(?P<secret>[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{20,})")
_JWT = re.compile(r"(?<![A-Za-z0-9_-])(?P<secret>eyJ[A-Za-z0-9_-]{7,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]+)")
_BEARER = re.compile(
    r"(?<![A-Za-z0-9_])(?P<header>(?ai:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?[ \t]*)?"
    r"(?ai:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]+=*)"
)
_BASIC = re.compile(
    r"(?<![A-Za-z0-9_])(?ai:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?[ \t]*"
    r"(?ai:basic)[ \t]+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})"
)
_ASSIGNMENT_KEYS = "|".join(
    (
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "token",
        "credentials?",
        "api[_-]?key",
        "access[_-]?key",
        "secret[_-]?key",
        "private[_-]?key",
    )
)
_VALUE = r"[^\s\"'`<>]"
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.])(?:[A-Za-z0-9]{1,32}[_.-]){0,6}(?ai:" + _ASSIGNMENT_KEYS + r")"
    r"[\"']?[ \t]*(?:==|=>|:=|[:=])[ \t]*[\"'`]?"
    r"(?P<secret>" + _VALUE + r"*[^\s\"'`<>.,;:)\]}])"
)
_RUN = r"[A-Za-z0-9+/_-]"
_HIGH_ENTROPY = re.compile(
    r"(?<![A-Za-z0-9])(?ai:key|secret|token|password|passwd|passphrase|credential)s?(?![A-Za-z0-9])"
    r"[^\n]{0,40}?"
    r"(?<![A-Za-z0-9+/_=.-])"
    r"(?=" + _RUN + r"{0,511}[A-Z])(?=" + _RUN + r"{0,511}[a-z])(?=" + _RUN + r"{0,511}[0-9])"
    r"(?P<secret>" + _RUN + r"{32,512}={0,2})(?![A-Za-z0-9+/_=-])"
)
_REFERENCE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_][A-Za-z0-9_]*%")
_CODE = re.compile(r"[(\[{]|[A-Za-z_][A-Za-z0-9_.]*[(\[]")
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_PATH_STARTS = ("/", "./", "../", "~/")
_LETTER = re.compile(r"[^\W\d_]")
_DIGIT = re.compile(r"[0-9]")
_SYMBOL = re.compile(r"[^\w./:+-]")
_NAME_SEPARATOR = re.compile(r"[_-]")
_NAME_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_MIN_VALUE = 8
_MIN_BARE_BEARER = 20
_MIN_HEADER_BEARER = 8
_MIN_ENTROPY = 4.0
_BRACES = re.compile(r"\{(?=[{%#])|[}%#](?=\})|\$(?=\{)")  # the first character of a pair, a space after it
_PAIRS = ("{{", "}}", "{%", "%}", "{#", "#}", "${")


@dataclass(frozen=True)
class _Rule:
    """One kind of secret: where it is (the `secret` group) and whether a match really is one."""

    kind: str
    pattern: re.Pattern[str]
    accepts: Callable[[re.Match[str]], bool] = lambda _match: True


@dataclass(frozen=True)
class _Done:
    """A stretch no later rule may look into: a fresh redaction (kind set) or one already in the text."""

    text: str
    kind: str | None = None


_Piece = str | _Done


def marker(kind: str) -> str:
    """The text that stands in for a redacted secret of this kind."""
    return f"[REDACTED:{kind}]"


def redact(text: str) -> tuple[str, list[str]]:
    """The text with every secret replaced by its marker, and the kinds redacted in text order."""
    # Private keys come first and see the whole text, markers included, so a BEGIN
    # line without its END is redacted to the true end of the text.
    pieces = _protect(_split(_KEY_RULE, text))
    for rule in _RULES:
        pieces = _apply(rule, pieces)
    out = "".join(p if isinstance(p, str) else p.text for p in pieces)
    return out, [p.kind for p in pieces if isinstance(p, _Done) and p.kind is not None]


def neutralise_braces(text: str) -> str:
    """Text a template engine renders as written: a space inside {{ }} {% %} {# #} and ${.

    Most text holds none of the pairs, which a few searches in C tell before any regex runs.
    """
    if not any(pair in text for pair in _PAIRS):
        return text
    return _BRACES.sub(r"\g<0> ", text)


def _protect(pieces: Iterable[_Piece]) -> list[_Piece]:
    """Set markers already in the text apart, so a second redaction finds nothing new."""
    out: list[_Piece] = []
    for piece in pieces:
        if isinstance(piece, _Done):
            out.append(piece)
            continue
        last = 0
        for match in _MARKER.finditer(piece):
            out += [piece[last : match.start()], _Done(match.group())]
            last = match.end()
        out.append(piece[last:])
    return [p for p in out if p != ""]


def _apply(rule: _Rule, pieces: Iterable[_Piece]) -> list[_Piece]:
    """Run one rule over the stretches still open to redaction."""
    out: list[_Piece] = []
    for piece in pieces:
        out.extend(_split(rule, piece) if isinstance(piece, str) else (piece,))
    return out


def _split(rule: _Rule, text: str) -> list[_Piece]:
    """Cut one stretch of text around the secrets a rule finds in it."""
    out: list[_Piece] = []
    last = 0
    for match in rule.pattern.finditer(text):
        if not rule.accepts(match):
            continue
        start, end = match.span("secret")
        out += [text[last:start], _Done(marker(rule.kind), rule.kind)]
        last = end
    out.append(text[last:])
    return [p for p in out if p != ""]


def _letter_and_digit(match: re.Match[str]) -> bool:
    """True when the secret mixes letters and digits, as generated keys do and words do not."""
    secret = match.group("secret")
    return bool(_LETTER.search(secret) and _DIGIT.search(secret))


def _has_digit(match: re.Match[str]) -> bool:
    """True when the secret holds a digit, as generated tokens do and hyphenated words do not."""
    return bool(_DIGIT.search(match.group("secret")))


def _bearer(match: re.Match[str]) -> bool:
    """A token after an Authorization header is always a secret; a bare one must look generated."""
    if match.group("header"):
        return len(match.group("secret")) >= _MIN_HEADER_BEARER
    return len(match.group("secret")) >= _MIN_BARE_BEARER and _letter_and_digit(match)


def _assigned_credential(match: re.Match[str]) -> bool:
    """True when the value after password=/token:/… looks like a credential rather than a word or a reference."""
    value = match.group("secret")
    if len(value) < _MIN_VALUE or _is_reference(value):
        return False
    has_letter, has_digit = bool(_LETTER.search(value)), bool(_DIGIT.search(value))
    return (has_letter and has_digit) or ((has_letter or has_digit) and bool(_SYMBOL.search(value)))


def _is_reference(value: str) -> bool:
    """True for values that name a secret kept elsewhere: variables, templates, URLs, paths, code."""
    if _REFERENCE.fullmatch(value) or _CODE.match(value) or _DOTTED_NAME.fullmatch(value):
        return True
    return "://" in value or value.startswith(_PATH_STARTS)


def _random_looking(match: re.Match[str]) -> bool:
    """True when a long run spreads over enough symbols to be generated, not written."""
    secret = match.group("secret")
    counts = Counter(secret).values()
    entropy = -sum(n / len(secret) * math.log2(n / len(secret)) for n in counts)
    return entropy >= _MIN_ENTROPY and not _is_name(secret)


def _is_name(run: str) -> bool:
    """True for identifiers such as test_Parse_Config_2: words and numbers joined by _ or -."""
    parts = _NAME_SEPARATOR.split(run)
    return len(parts) > 1 and all(_NAME_PART.fullmatch(part) for part in parts)


_KEY_RULE = _Rule("private_key", _PRIVATE_KEY)
_RULES = (
    _Rule("url_password", _URL_PASSWORD),
    _Rule("anthropic_key", _ANTHROPIC),
    _Rule("openai_key", _OPENAI, _letter_and_digit),
    _Rule("github_token", _GITHUB),
    _Rule("aws_access_key", _AWS),
    _Rule("slack_token", _SLACK, _has_digit),
    _Rule("google_api_key", _GOOGLE),
    _Rule("stripe_key", _STRIPE, _letter_and_digit),
    _Rule("jwt", _JWT),
    _Rule("bearer_token", _BEARER, _bearer),
    _Rule("basic_auth", _BASIC),
    _Rule("secret_assignment", _ASSIGNMENT, _assigned_credential),
    _Rule("high_entropy", _HIGH_ENTROPY, _random_looking),
)
