"""The layered formats offline: name rules, tolerant reading of hand-written files, exact edits."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braind.config import FilesConfig
from braind.errors import Ambiguous, BraindError, ForbiddenHeading, InvalidName, NotFound
from braind.files.layered import logfiles
from braind.files.validate import classify
from braind.ingest.check import check_root
from braind.ingest.sync import load_file
from braind.model.layered import (
    append_section,
    check_content,
    delete_unit,
    entry_chunk,
    entry_heading,
    find_entry,
    find_section,
    parse_logfile,
    parse_memory,
    render_logfile,
    replace_unit,
)
from braind.model.names import logfile_name, section_name
from braind.model.roots import user_root

LAYERED = Path(__file__).resolve().parent.parent / "fixtures" / "roots" / "layered"
FILES = FilesConfig(max_file_bytes=4096, max_line_bytes=512)

# --- names ----------------------------------------------------------------------

VALID_NAMES = [
    ("网络历史", "网络历史"),
    ("a" * 64, "a" * 64),
    ("notes.md", "notes"),
    ("NOTES.MD", "NOTES"),
    ("x.md.md", "x.md"),
    ("v1.2 release", "v1.2 release"),
    ("日本語 メモ", "日本語 メモ"),
    ("e\u0301te\u0301", "été"),  # NFD in, NFC out
    ("-dash", "-dash"),
    ("a" * 64 + ".md", "a" * 64),
]
INVALID_NAMES = [
    "",
    ".md",
    "a" * 65,
    "网" * 65,
    "a/b",
    "a\\b",
    "../up",
    "a:b",
    "a*b",
    "a?b",
    'a"b',
    "a<b",
    "a>b",
    "a|b",
    "a\nb",
    "a\tb",
    "a\x00b",
    "a\x7fb",
    "a\u200bb",  # zero-width space (a format character)
    "a\u202eb",  # right-to-left override
    ".hidden",
    "trailing.",
    " lead",
    "trail ",
    "\u3000full-width space",
    ".",
    "..",
]


@pytest.mark.parametrize(("raw", "name"), VALID_NAMES)
def test_valid_logfile_names(raw: str, name: str) -> None:
    assert logfile_name(raw) == name


@pytest.mark.parametrize("raw", INVALID_NAMES)
def test_invalid_logfile_names(raw: str) -> None:
    with pytest.raises(InvalidName) as err:
        logfile_name(raw)
    assert err.value.reason == "invalid_name" and "64 characters" in err.value.message


def test_a_name_must_be_a_string() -> None:
    with pytest.raises(InvalidName):
        logfile_name(42)


@pytest.mark.parametrize("raw", ["", "#x", "a\nb", " x", "x ", "a" * 65, "a\x1bb"])
def test_invalid_section_names(raw: str) -> None:
    with pytest.raises(InvalidName):
        section_name(raw)


def test_section_names_may_hold_slashes_and_chinese() -> None:
    assert section_name("CI/CD 流程") == "CI/CD 流程"


@pytest.mark.parametrize(
    ("rel", "kind"),
    [("SOUL.md", "soul"), ("MEMORY.md", "memory"), ("logs/网络.md", "logfile"), ("logs/a.txt", "ignored"),
     ("logs/sub/a.md", "ignored"), ("logs/.a.md.swp", "artefact"), ("x/MEMORY.md", "ignored"),
     (".braind/bak/MEMORY.md.bak", "artefact")],
)  # fmt: skip
def test_classify_layered_paths(rel: str, kind: str) -> None:
    assert classify(Path(rel)) == kind


# --- the fixtures -----------------------------------------------------------------

EXPECTED: dict[str, tuple[int, list[tuple[int, str]]]] = {
    "SOUL.md": (0, []),
    "MEMORY.md": (3, []),
    "logs/canonical.md": (2, []),
    "logs/no-frontmatter.md": (2, []),
    "logs/bad-yaml.md": (1, [(3, "bad_frontmatter")]),
    "logs/unclosed.md": (2, [(1, "bad_frontmatter")]),
    "logs/unknown-type.md": (1, [(3, "bad_frontmatter")]),
    "logs/crlf.md": (1, []),
    "logs/free-headings.md": (3, [(15, "invalid_date")]),
}


def test_every_layered_fixture_has_an_expectation() -> None:
    found = {p.relative_to(LAYERED).as_posix() for p in LAYERED.rglob("*") if p.is_file()}
    assert found == set(EXPECTED)


@pytest.mark.parametrize(("rel", "expected"), sorted(EXPECTED.items()))
def test_layered_fixture(rel: str, expected: tuple[int, list[tuple[int, str]]]) -> None:
    loaded = load_file(user_root(LAYERED), Path(rel), FILES)
    assert loaded.record is not None
    assert (len(loaded.entries), [(p.line, p.reason) for p in loaded.problems]) == expected


def test_fixture_entries_carry_kind_key_date_and_stable_fp() -> None:
    root = user_root(LAYERED)
    sections = load_file(root, Path("MEMORY.md"), FILES).entries
    assert [(e.kind, e.key, e.line, e.date) for e in sections] == [
        ("section", None, 3, ""),
        ("section", "网络历史", 5, ""),
        ("section", "偏好", 10, ""),
    ]
    entries = load_file(root, Path("logs/canonical.md"), FILES).entries
    assert [(e.kind, e.date, e.time, e.line) for e in entries] == [
        ("logentry", "2026-11-29", "09:12", 9),
        ("logentry", "2026-11-30", "10:00", 12),
    ]
    again = load_file(root, Path("logs/canonical.md"), FILES).entries
    assert [e.fp for e in entries] == [e.fp for e in again] and len({e.fp for e in entries}) == 2


def test_fixture_catalogue_falls_back_for_sloppy_frontmatter() -> None:
    found = {lf.name: (lf.type, lf.description) for lf in logfiles(user_root(LAYERED), FILES)}
    assert found == {
        "canonical": ("reference", "Deploy notes: staging and prod"),
        "no-frontmatter": ("project", "Old project memory"),
        "bad-yaml": ("project", "Bad YAML"),
        "unclosed": ("project", "never closed"),
        "unknown-type": ("project", "a type that is not one of the five"),
        "crlf": ("user", "written on Windows"),
        "free-headings": ("situation", "headings in every shape"),
    }


def test_check_reports_the_layered_problems() -> None:
    report = check_root(LAYERED, FILES)
    assert report["rejected"] == [] and report["files"] == len(EXPECTED)
    assert sorted((Path(p["path"]).name, p["reason"]) for p in report["skipped_lines"]) == [
        ("bad-yaml.md", "bad_frontmatter"),
        ("free-headings.md", "invalid_date"),
        ("unclosed.md", "bad_frontmatter"),
        ("unknown-type.md", "bad_frontmatter"),
    ]


# --- content and edits --------------------------------------------------------------


@pytest.mark.parametrize("content", ["# h1", "## h2", "ok\n## h2", "  ## indented", "#", "##", "a\n#\tb"])
def test_heading_lines_are_refused(content: str) -> None:
    with pytest.raises(ForbiddenHeading):
        check_content(content, 8192)


def test_deeper_headings_and_hashtags_are_content() -> None:
    assert check_content("\n\n### part\n#tag and ##tag \n\n", 8192) == ["### part", "#tag and ##tag"]


@pytest.mark.parametrize(
    ("content", "reason"), [("", "empty"), (" \n ", "empty"), ("a\x00", "nul_byte"), ("a\x1bb", "control_char"),
                            ("é" * 5000, "too_large"), (7, "invalid_text")],
)  # fmt: skip
def test_bad_content(content: object, reason: str) -> None:
    with pytest.raises(BraindError) as err:
        check_content(content, 8192)
    assert err.value.reason == reason


def test_section_edits_touch_only_their_section() -> None:
    text = "# MEMORY\nhand-written intro\n\n## 网络历史\nold\n\n## 网络配置\nx\n"
    assert append_section(text, "网络历史", ["new"]) == (
        "# MEMORY\nhand-written intro\n\n## 网络历史\nold\nnew\n\n## 网络配置\nx\n",
        False,
    )
    assert append_section(text, "新", ["a"])[0] == text + "\n## 新\na\n"
    assert append_section("no newline", "新", ["a"])[0] == "no newline\n\n## 新\na\n"
    parsed = parse_memory(text, 512)
    unit = find_section(parsed, "网络历")
    assert (
        replace_unit(parsed.lines, unit, ["r"]) == "# MEMORY\nhand-written intro\n\n## 网络历史\nr\n\n## 网络配置\nx\n"
    )
    assert delete_unit(parsed.lines, unit) == "# MEMORY\nhand-written intro\n\n## 网络配置\nx\n"
    last = find_section(parsed, "网络配置")
    assert delete_unit(parsed.lines, last) == "# MEMORY\nhand-written intro\n\n## 网络历史\nold\n"


def test_prefix_ambiguity_lists_matches() -> None:
    parsed = parse_memory("## 网络历史\na\n\n## 网络配置\nb\n", 512)
    with pytest.raises(Ambiguous) as err:
        find_section(parsed, "网络")
    assert err.value.data["matches"] == [{"section": "网络历史", "line": 1}, {"section": "网络配置", "line": 4}]
    with pytest.raises(NotFound) as missing:
        find_section(parsed, "DNS")
    assert missing.value.data["sections"] == ["网络历史", "网络配置"]


def test_crlf_files_stay_crlf() -> None:
    text = (LAYERED / "logs" / "crlf.md").read_bytes().decode()
    chunk = entry_chunk(text, entry_heading("new", "2026-01-07 08:00"), ["one", "two"])
    assert (text + chunk + "\n").endswith("\r\n\r\n## [new] 2026-01-07 08:00\r\none\r\ntwo\r\n")
    parsed = parse_logfile(text, 512)
    unit = find_entry(parsed, "windows", None, "crlf")
    assert replace_unit(parsed.lines, unit, ["fixed"]).endswith("## [windows] 2026-01-06 14:00\r\nfixed\r\n")


@given(
    name=st.text(
        st.characters(blacklist_categories=("Cc", "Cs", "Cf", "Co", "Cn", "Zl", "Zp")), min_size=1, max_size=20
    ),
    description=st.text(st.characters(blacklist_categories=("Cc", "Cs", "Cf", "Co", "Cn", "Zl", "Zp")), min_size=1),
)
def test_frontmatter_round_trips_whatever_the_description(name: str, description: str) -> None:
    description = " ".join(description.split()) or "x"
    parsed = parse_logfile(render_logfile("n", "feedback", description, name.strip() or "h"), 1 << 20)
    assert parsed.problems == [] and parsed.meta is not None
    assert (parsed.meta.type, parsed.meta.description) == ("feedback", description)
