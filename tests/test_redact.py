"""Secret hygiene: one realistic case per kind, the look-alikes that must survive, PEM blocks, braces, properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import braind.model.redact
from braind.model.redact import KINDS, marker, neutralise_braces, redact

# Fake credentials are assembled from parts so that no file holds a string a
# secret scanner would flag; they have the exact shape of the real ones.
B36 = "R4nd0mT0k3nV4lu3Xy7Q2pL9sK8dF3gH1jZ0"
B48 = "T3stKeyAbCdEfGh1jKlMn0pQrStUvWxYz0123456789aBcDeF"
PEM_BODY = "MIIEowIBAAKCAQEAx1yq3nKd8vB2\nQm9vZ0ZpbGVzQXJlTm90S2V5cw==\nk3yB0dyL1n3sF0rT3st1ng"
RSA = "-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY + "\n-----END RSA PRIVATE KEY-----"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    + ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

# (kind, text as written, text as stored)
CASES = [
    (
        "private_key",
        "deploy key:\n" + RSA + "\nrotate it yearly",
        "deploy key:\n[REDACTED:private_key]\nrotate it yearly",
    ),
    (
        "url_password",
        "DATABASE_URL=postgres://app:Xk9mQ2v#w@db.internal:5432/app",
        "DATABASE_URL=postgres://app:[REDACTED:url_password]@db.internal:5432/app",
    ),
    (
        "url_password",
        "cache at redis://:" + "s3cr3tpw@localhost:6379/0",
        "cache at redis://:[REDACTED:url_password]@localhost:6379/0",
    ),
    (
        "aws_access_key",
        "aws_access_key_id = AKIA" + "IOSFODNN7EXAMPLE",
        "aws_access_key_id = [REDACTED:aws_access_key]",
    ),
    (
        "aws_access_key",
        "session creds ASIA" + "Y34FZKBOKMUTVV7A expire at 5",
        "session creds [REDACTED:aws_access_key] expire at 5",
    ),
    ("github_token", "export GITHUB_TOKEN=ghp_" + B36, "export GITHUB_TOKEN=[REDACTED:github_token]"),
    (
        "github_token",
        "fine-grained: github_pat_" + "11ABCDE2Y0" + "a" * 12 + "_" + B36,
        "fine-grained: [REDACTED:github_token]",
    ),
    ("anthropic_key", "ANTHROPIC_API_KEY=sk-ant-" + "api03-" + B48, "ANTHROPIC_API_KEY=[REDACTED:anthropic_key]"),
    ("openai_key", "OPENAI_API_KEY=sk-" + "proj-" + B48 + "_x-Y", "OPENAI_API_KEY=[REDACTED:openai_key]"),
    ("openai_key", "old key sk-" + B48 + " revoked", "old key [REDACTED:openai_key] revoked"),
    ("slack_token", "bot token xox" + "b-123456789012-1234567890123-AbCdEfGhIjKl", "bot token [REDACTED:slack_token]"),
    (
        "google_api_key",
        "maps key: AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY.",
        "maps key: [REDACTED:google_api_key].",
    ),
    ("stripe_key", "stripe sk_" + "live_4eC39HqLyjWDarjtT1zdp7dc in prod", "stripe [REDACTED:stripe_key] in prod"),
    ("stripe_key", "webhook whsec_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8", "webhook [REDACTED:stripe_key]"),
    ("jwt", "cookie session=" + JWT + "; Path=/", "cookie session=[REDACTED:jwt]; Path=/"),
    (
        "bearer_token",
        'curl -H "Authorization: Bearer abc123def456" https://api.example.com/v1',
        'curl -H "Authorization: Bearer [REDACTED:bearer_token]" https://api.example.com/v1',
    ),
    ("bearer_token", "use Bearer 9f8e7d6c5b4a3f2e1d0cAbCdEf for now", "use Bearer [REDACTED:bearer_token] for now"),
    ("basic_auth", "Authorization: Basic " + "YWxpY2U6czNjcjN0", "Authorization: Basic [REDACTED:basic_auth]"),
    ("secret_assignment", "password=Hunter22!", "password=[REDACTED:secret_assignment]"),
    ("secret_assignment", 'export DB_PASSWORD="Sup3rS3cret"', 'export DB_PASSWORD="[REDACTED:secret_assignment]"'),
    ("secret_assignment", '{"api_key": "abc123def456ghi"}', '{"api_key": "[REDACTED:secret_assignment]"}'),
    ("secret_assignment", "client_secret: 'x7!Qz9#p'", "client_secret: '[REDACTED:secret_assignment]'"),
    ("secret_assignment", "mysql --PASSWD=pa55w0rd -h db", "mysql --PASSWD=[REDACTED:secret_assignment] -h db"),
    ("secret_assignment", "Token: 4f2a9c1e8b7d. Done.", "Token: [REDACTED:secret_assignment]. Done."),
    (
        "high_entropy",
        "the signing secret is wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY for staging",
        "the signing secret is [REDACTED:high_entropy] for staging",
    ),
]

LOOK_ALIKES = [
    "fixed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8 (key change)",
    "token 123e4567-e89b-12d3-a456-426614174000 is the request id",
    "secret file sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "the password policy is strict: 12 characters and a symbol",
    "token: see docs",
    "password: changeme",
    "The key insight: tokens expire after 3600s.",
    "max_tokens=4096 and token_count: 12345678",
    "docs at https://example.com:8443/path?user=bob@example.com",
    "clone ssh://git@github.com/org/repo.git or https://bob@example.com/",
    "mail alice.smith+tag@example.co.uk about the secret santa",
    "token=${GITHUB_TOKEN} and password=$DB_PASSWORD and api_key={{ api_key }}",
    'token = os.environ["GITHUB_TOKEN"]',
    "secret: /etc/ssl/private/server2.pem",
    "pwd: /home/alice/src",
    "passwd: files systemd",
    "Bearer authentication is used for the public API",
    "Authorization: Bearer $TOKEN",
    "we use sk-learn-tutorial-for-beginners as the example",
    "the key test is test_Parse_Config_Handles_Empty_File_42",
    "api_key: <your-api-key>",
    'print(f"password={password!r}")',
    "token = (String.Double if quoted else String.Single2)",
    "def load(private_key: ed25519.Ed25519PrivateKey, token: Optional[str] = None) -> None:",
    "password = settings.DB_PASSWORD2",
    "nid_key = self._lib.NID_pbe_WithSHA1And3_Key_TripleDES_CBC",
    "AKIA is the prefix of an access key id",
    "see -----BEGIN CERTIFICATE----- for the public part",
    "",
]


@pytest.mark.parametrize(("kind", "text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_kind_is_redacted_and_the_rest_kept(kind: str, text: str, expected: str) -> None:
    assert redact(text) == (expected, [kind])
    assert redact(expected) == (expected, [])


def test_every_kind_has_a_case_and_is_documented() -> None:
    assert {c[0] for c in CASES} == set(KINDS)
    assert len(set(KINDS)) == len(KINDS)
    doc = braind.model.redact.__doc__ or ""
    assert all(f"``{kind}``" in doc for kind in KINDS)


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_are_not_redacted(text: str) -> None:
    assert redact(text) == (text, [])


def test_kinds_come_in_text_order_and_the_text_between_is_byte_identical() -> None:
    text = (
        "# notes\r\n"
        "password=Hunter22!  \r\n"
        "déploiement: postgres://app:pw9x@db/app — fine ✓\r\n"
        "Authorization: Bearer abc123def456\t\r\n"
        "AKIA" + "IOSFODNN7EXAMPLE\r\n"
    )
    out, kinds = redact(text)
    assert kinds == ["secret_assignment", "url_password", "bearer_token", "aws_access_key"]
    assert out == (
        "# notes\r\n"
        "password=[REDACTED:secret_assignment]  \r\n"
        "déploiement: postgres://app:[REDACTED:url_password]@db/app — fine ✓\r\n"
        "Authorization: Bearer [REDACTED:bearer_token]\t\r\n"
        "[REDACTED:aws_access_key]\r\n"
    )


def test_a_secret_inside_a_url_or_assignment_is_reported_once() -> None:
    text = "git remote add origin https://x-access-token:ghp_" + B36 + "@github.com/o/r.git"
    assert redact(text) == (
        "git remote add origin https://x-access-token:[REDACTED:url_password]@github.com/o/r.git",
        ["url_password"],
    )
    assert redact("token=" + JWT) == ("token=[REDACTED:jwt]", ["jwt"])


def test_markers_already_in_the_text_are_kept_and_not_reported() -> None:
    text = "password=[REDACTED:secret_assignment] and [REDACTED:jwt] and [REDACTED:made_up]"
    assert redact(text) == (text, [])


def test_private_key_folded_to_spaces() -> None:
    folded = RSA.replace("\n", " ")
    assert redact(f"key: {folded} (old)") == ("key: [REDACTED:private_key] (old)", ["private_key"])


def test_private_key_without_end_is_redacted_to_the_end() -> None:
    text = "pasted half a key\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\ncut off here"
    assert redact(text) == ("pasted half a key\n[REDACTED:private_key]", ["private_key"])


def test_private_keys_of_every_flavour_each_stop_at_their_end() -> None:
    names = ["PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "DSA PRIVATE KEY", "PGP PRIVATE KEY BLOCK"]
    blocks = [f"-----BEGIN {n}-----\nQUJD{i}ZGVm\n-----END {n}-----" for i, n in enumerate(names)]
    out, kinds = redact("\n\nbetween\n\n".join(blocks))
    assert out == "\n\nbetween\n\n".join(["[REDACTED:private_key]"] * len(names))
    assert kinds == ["private_key"] * len(names)


def test_marker_names_the_kind() -> None:
    assert marker("jwt") == "[REDACTED:jwt]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello {{user}}!", "Hello { {user} }!"),
        ("{% if admin %}x{% endif %}", "{ % if admin % }x{ % endif % }"),
        ("{# hidden #}", "{ # hidden # }"),
        ("echo ${HOME} `${x}`", "echo $ {HOME} `$ {x}`"),
        ("{{{raw}}}", "{ { {raw} } }"),
        ('{"a": {"b": 1}} $HOME $# f"{x}" 50%', '{"a": {"b": 1} } $HOME $# f"{x}" 50%'),
        ("no braces at all", "no braces at all"),
    ],
)
def test_template_braces_are_neutralised(text: str, expected: str) -> None:
    assert neutralise_braces(text) == expected
    assert neutralise_braces(expected) == expected


def test_a_megabyte_of_adversarial_text_is_scanned() -> None:
    shapes = [
        "a",
        "Ab1",
        "-----BEGIN ",
        "-----BEGIN A A A A ",
        "a://b:",
        "https://u:",
        "token:",
        "x-token= ",
        "a_",
        "a-",
        "key ",
        "eyJaaaaaaa.",
        "sk-",
        "Bearer ",
        "Authorization: ",
        "ghp_",
        "xoxb-",
        "AIza",
        "{",
        "${",
        "[REDACTED:x]",
        ":",
        "@",
        "password ",
        "\n",
    ]
    chunk = 1_000_000 // len(shapes)
    text = "".join((s * chunk)[:chunk] for s in shapes) + "-----END PRIVATE KEY-----" + "@" * chunk
    out, kinds = redact(text)
    assert redact(out) == (out, [])
    assert len(neutralise_braces(text)) > len(text)
    assert set(kinds) <= set(KINDS)


FRAGMENTS = [
    "password",
    "DB_PASSWORD",
    "token",
    "key",
    "secret",
    "=",
    ": ",
    "==",
    '"',
    "'",
    " ",
    "\n",
    "\t",
    "@",
    ":",
    "/",
    "https://",
    "u:",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "Authorization: ",
    "Bearer ",
    "Basic ",
    "eyJhbGciOiJIUzI1NiJ9",
    ".",
    "sk-",
    "ant-",
    "proj-",
    "ghp_",
    "AKIA",
    "AIza",
    "xoxb-",
    "sk_live_",
    B36,
    "Hunter22!",
    "[REDACTED:jwt]",
    "[REDACTED:",
    "]",
    "{{",
    "}}",
    "${",
    "\ud800",
    "é",
]
TEXTS = st.one_of(st.text(), st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4))).map("".join))
QUIET = st.text().filter(lambda s: not redact(s)[1])


@given(TEXTS)
def test_redaction_never_raises_and_is_idempotent(text: str) -> None:
    out, kinds = redact(text)
    assert set(kinds) <= set(KINDS)
    assert redact(out) == (out, [])
    if not kinds:
        assert out == text


@given(TEXTS)
def test_redaction_only_replaces_stretches_with_markers(text: str) -> None:
    out, kinds = redact(text)
    rest = out
    for kind in kinds:
        before, sep, rest = rest.partition(marker(kind))
        assert sep
        assert before in text


@given(QUIET, st.sampled_from(CASES), QUIET)
def test_text_around_a_secret_is_untouched(prefix: str, case: tuple[str, str, str], suffix: str) -> None:
    kind, secret, stored = case
    assert redact(f"{prefix}\n{secret}\n{suffix}") == (f"{prefix}\n{stored}\n{suffix}", [kind])


@given(TEXTS)
def test_neutralised_text_only_gains_spaces_and_holds_no_template_opener(text: str) -> None:
    out = neutralise_braces(text)
    assert out.replace(" ", "") == text.replace(" ", "")
    assert not any(pair in out for pair in ("{{", "}}", "{%", "%}", "{#", "#}", "${"))
    assert neutralise_braces(out) == out


def _spaced(text: str) -> str:
    """A space between the two characters of every opener and closer: the definition, a character at a time."""
    out = []
    for before, after in zip(text, text[1:] + "\0", strict=False):  # after the last one: nothing
        out.append(before)
        if (before == "{" and after in "{%#") or (before in "}%#" and after == "}") or (before == "$" and after == "{"):
            out.append(" ")
    return "".join(out)


@given(st.text(st.sampled_from("{}%#$ a\n")))
def test_neutralised_text_has_a_space_in_every_pair_and_nowhere_else(text: str) -> None:
    assert neutralise_braces(text) == _spaced(text)
