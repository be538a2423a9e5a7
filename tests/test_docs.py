"""The documentation as a reader meets it: links that resolve, and every command, method, key and reason documented."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import pkgutil
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import braind
from braind import errors
from braind.config import RANGES, Config, build_config
from braind.errors import InvalidParams, MethodNotFound
from tests.conftest import REPO, Daemon

DOCS = REPO / "docs"
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]
README_MAX_LINES = 400
# Written in two parts so that this file does not hold what it looks for.
OUTSIDE = ("../" + "shared", "SPEC" + ".md", "SPEC" + " §")
COMMON_OPTIONS = ("--config", "--socket", "--json", "--help")
EN_DASH = "\N{EN DASH}"  # between the ends of a range in the tables

FENCED = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$", re.MULTILINE)


def read(path: Path) -> str:
    """A page's text."""
    return path.read_text(encoding="utf-8")


def prose(text: str) -> str:
    """The text outside fenced blocks, code spans blanked, where links and headings live."""
    return INLINE_CODE.sub("``", FENCED.sub("", text))


def slug(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a page, a repeated heading numbered as renderers do."""
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(FENCED.sub("", read(path))):
        base = slug(match[2])
        found.add(f"{base}-{seen[base]}" if base in seen else base)
        seen[base] = seen.get(base, 0) + 1
    return found


def links(path: Path) -> list[str]:
    """The targets of a page's Markdown links."""
    return LINK.findall(prose(read(path)))


def broken(page: Path, target: str) -> str | None:
    """Why a link does not resolve inside the repository, or None when it does."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target):
        return "leads outside the repository"
    name, _, anchor = target.partition("#")
    dest = (page.parent / name).resolve() if name else page
    if not dest.is_relative_to(REPO) or not dest.exists():
        return "names no file of the repository"
    if anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
        return f"names no heading of {dest.relative_to(REPO)}"
    return None


def test_every_page_exists() -> None:
    names = {p.name for p in DOCS.glob("*.md")}
    pages = {"memory", "files", "protocol", "cli", "agents", "configuration", "operations", "performance"}
    assert {f"{name}.md" for name in [*pages, "architecture"]} <= names
    assert (REPO / "LICENSE").is_file() and "MIT License" in read(REPO / "LICENSE")


def test_every_link_resolves_inside_the_repository() -> None:
    problems = [
        f"{page.relative_to(REPO)}: ({target}) {why}"
        for page in PAGES
        for target in links(page)
        if (why := broken(page, target)) is not None
    ]
    assert problems == []
    led_to = {(REPO / target.partition("#")[0]).resolve() for target in links(REPO / "README.md")}
    assert sorted(p.name for p in DOCS.glob("*.md") if p.resolve() not in led_to) == []  # the README leads everywhere


def test_the_readme_is_short() -> None:
    assert len(read(REPO / "README.md").splitlines()) <= README_MAX_LINES


def tracked_files() -> list[Path]:
    """The repository's files as git sees them: tracked, and new ones not ignored."""
    try:
        listing = subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"needs the git checkout and git: {exc}")  # an unpacked source tree has no file list
    return [REPO / name for name in sorted(set(listing.decode("utf-8", "surrogateescape").split("\0"))) if name]


def mentions(path: Path, needles: tuple[str, ...]) -> list[str]:
    """`path:line: needle` for every line of a text file holding one of the needles."""
    if not path.is_file():
        return []
    data = path.read_bytes()
    if b"\0" in data:
        return []  # not text
    lines = data.decode("utf-8", "replace").splitlines()
    rel = path.relative_to(REPO)
    return [f"{rel}:{n}: {needle}" for n, line in enumerate(lines, 1) for needle in needles if needle in line]


def test_no_file_cites_what_lies_outside_the_repository() -> None:
    found = [hit for path in tracked_files() for hit in mentions(path, OUTSIDE)]
    assert found == []


def test_the_documentation_speaks_in_its_own_words() -> None:
    words = re.compile(r"\bSPEC\b|\bthe issue\b|\.\./shared", re.IGNORECASE)
    found = [f"{p.relative_to(REPO)}: {m[0]}" for p in PAGES for m in words.finditer(read(p))]
    assert found == []


# -- the CLI -----------------------------------------------------------------------------------------------


def cli_parser() -> argparse.ArgumentParser:
    """The CLI's parser, from whichever module of the CLI builds it."""
    for module in pkgutil.walk_packages(braind.__path__, "braind."):
        if any(part.startswith("cli") for part in module.name.split(".")):
            builder = getattr(importlib.import_module(module.name), "build_parser", None)
            if callable(builder):
                return builder()
    pytest.fail("no CLI module of braind has build_parser()")


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, list[str]]]:
    """Every command and subcommand as 'memory list', with its own options (long forms)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                options = [max(a.option_strings, key=len) for a in sub._actions if a.option_strings]
                yield " ".join((*path, name)), [o for o in options if o not in COMMON_OPTIONS]
                yield from commands(sub, (*path, name))


def section(text: str, command: str) -> str | None:
    """The part of docs/cli.md under the heading `braind COMMAND ARGS...`, down to the next heading as high."""
    lines = FENCED.sub("", text).splitlines()
    start = re.compile(rf"(#+) `braind {re.escape(command)}(?: [^`a-z][^`]*)?`$")
    for index, line in enumerate(lines):
        if match := start.fullmatch(line):
            level = len(match[1])
            end = next(
                (j for j in range(index + 1, len(lines)) if (h := HEADING.fullmatch(lines[j])) and len(h[1]) <= level),
                len(lines),
            )
            return "\n".join(lines[index:end])
    return None


def test_every_command_and_option_is_in_the_cli_page() -> None:
    page = read(DOCS / "cli.md")
    found = list(commands(cli_parser()))
    assert {"note", "recall", "memory list"} <= {name for name, _ in found}
    missing = []
    for name, options in found:
        text = section(page, name)
        if text is None:
            missing.append(f"a heading `braind {name} ...`")
        else:
            missing += [f"{option} under `braind {name}`" for option in options if option not in text]
    missing += [f"{option} (common)" for option in COMMON_OPTIONS[:3] if f"`{option}" not in page]
    assert missing == []


def test_check_exit_codes_are_documented() -> None:
    check = section(read(DOCS / "cli.md"), "check")
    assert check is not None
    for code in ("0", "1", "2", "3"):
        assert re.search(rf"^\| {code} \|", check, re.MULTILINE), code


# -- the socket methods ------------------------------------------------------------------------------------

# Methods that `tools` does not list, because they are for people and harnesses rather than agents.
NOT_TOOLS = (
    "inject",
    "status",
    "reindex",
    "tools",
    "memory.list",
    "memory.query",
    "memory.entries",
    "memory.add",
    "memory.edit",
    "memory.remove",
    "memory.undo",
    "memory.pin",
    "memory.unpin",
    "memory.compact",
    "memory.dump",
    "memory.files",
    "memory.read",
)


def method_names_in_source() -> set[str]:
    """The names given to Method(...) anywhere in the package: new methods show up here before anyone lists them."""
    pattern = re.compile(r"\bMethod\(\s*\"([a-z_.]+)\"")
    return {name for path in (REPO / "braind").rglob("*.py") for name in pattern.findall(read(path))}


def exists(daemon: Daemon, method: str) -> bool:
    """True when the daemon has the method: it refuses an unknown param instead of the method."""
    try:
        daemon.call(method, not_a_param=1)
    except MethodNotFound:
        return False
    except InvalidParams:
        return True
    raise AssertionError(f"{method} accepted an unknown param")


def documented_methods(page: str) -> list[str]:
    """The methods docs/protocol.md describes, one `### `name`` heading each."""
    methods = FENCED.sub("", page).split("\n## Methods\n", 1)[1]
    return re.findall(r"^### `([^`]+)`$", methods, re.MULTILINE)


def test_every_socket_method_is_in_the_protocol_page(daemon: Daemon) -> None:
    tools = {tool["name"] for tool in daemon.call("tools")}
    assert {"brain_note", "brain_recall", "memory_correct"} <= tools
    names = tools | set(NOT_TOOLS) | method_names_in_source()
    assert [name for name in sorted(names) if not exists(daemon, name)] == []
    documented = documented_methods(read(DOCS / "protocol.md"))
    assert sorted(names - set(documented)) == []
    assert [name for name in documented if not exists(daemon, name)] == []  # nothing documented that is gone
    assert len(documented) == len(set(documented))


def reasons_in_source() -> dict[str, str]:
    """reason -> module for every error raised with a literal reason, and the reasons errors.py fixes."""
    classes = {name for name, cls in vars(errors).items() if isinstance(cls, type) and issubclass(cls, Exception)}
    found: dict[str, str] = {}
    for path in sorted((REPO / "braind").rglob("*.py")):
        for node in ast.walk(ast.parse(read(path))):
            if isinstance(node, ast.Call) and node.args and _raises(node.func, classes, path):
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.setdefault(first.value, str(path.relative_to(REPO)))
    return found


def _raises(func: ast.expr, classes: set[str], path: Path) -> bool:
    """A call that builds one of braind's errors: the class itself, or super().__init__ in errors.py."""
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name in classes or (name == "__init__" and path.name == "errors.py")


def test_every_error_reason_is_in_the_protocol_page() -> None:
    found = reasons_in_source()
    assert {"invalid_params", "approval_required", "conflict_markers", "not_found"} <= set(found)
    page = read(DOCS / "protocol.md")
    assert {reason: module for reason, module in found.items() if f"`{reason}`" not in page} == {}


def test_every_file_problem_is_in_the_files_page() -> None:
    pattern = re.compile(r"\bProblem\([^,]+,[^,]+,\s*\"([a-z_]+)\"")
    found = {reason for path in (REPO / "braind").rglob("*.py") for reason in pattern.findall(read(path))}
    found |= {"bad_line", "torn_line", "line_too_long", "bad_frontmatter", "invalid_utf8", "nul_byte", "too_large"}
    page = read(DOCS / "files.md")
    assert sorted(reason for reason in found if f"`{reason}`" not in page) == []


# -- the configuration -------------------------------------------------------------------------------------


def config_keys() -> Iterator[tuple[str, Any]]:
    """Every configuration key with its built-in default, nested ones as section.key."""
    defaults = build_config({}, {"HOME": "/home/you"}, "test")
    for field in dataclasses.fields(Config):
        if field.name in ("source", "socket_search"):
            continue
        value = getattr(defaults, field.name)
        if dataclasses.is_dataclass(value):
            yield from ((f"{field.name}.{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value))
        else:
            yield field.name, value


def row(page: str, key: str) -> str | None:
    """The table row of a key in docs/configuration.md."""
    return next((line for line in page.splitlines() if line.startswith(f"| `{key}` |")), None)


def shows(line: str, key: str, default: Any) -> list[str]:
    """What the key's row leaves out of its default and its allowed range."""
    allowed = RANGES.get(key)
    wanted: list[str] = []
    if isinstance(default, int):
        wanted.append(f"| {default}")
    elif isinstance(default, tuple):
        wanted += list(default)
    if allowed and isinstance(allowed[0], int):
        wanted.append(f"{allowed[0]}{EN_DASH}{allowed[1]}")
    elif allowed:
        wanted += [f"`{choice}`" for choice in allowed]
    return [f"{key}: {item}" for item in wanted if item not in line]


def test_every_config_key_is_in_the_configuration_page() -> None:
    page = read(DOCS / "configuration.md")
    keys = dict(config_keys())
    assert {"memory_root", "inject.max_lines", "server.workers", "recall.languages"} <= set(keys)
    assert [key for key in keys if row(page, key) is None] == []
    assert [gap for key, value in keys.items() for gap in shows(row(page, key) or "", key, value)] == []
    shipped = read(REPO / "config" / "braind.yaml")
    assert [key for key in keys if f"{key.rpartition('.')[2]}:" not in shipped] == []


# -- connecting agents ---------------------------------------------------------------------------------------


def test_the_readme_agent_setup_is_the_documented_one() -> None:
    readme = read(REPO / "README.md").split("## Connecting agents", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(?:sh|json)\n(.*?)```", readme, flags=re.DOTALL)
    assert len(blocks) >= 2  # the MCP line and the hook settings
    agents = read(DOCS / "agents.md")
    assert [block for block in blocks if block not in agents] == []
    assert "/home/you/.local/bin/braind" in readme
