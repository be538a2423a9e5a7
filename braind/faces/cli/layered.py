"""`braind` commands of the layered memory: one per memory_* tool (`_` becomes `-`), and `migrate`.

Each tool command is a thin face over the socket method of the same name; content
too long for an argument is read from stdin (give `-` or leave it out).
`braind migrate` works offline, like `braind check`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from braind.config import Config
from braind.faces.cli.common import Commands, call, emit, write
from braind.faces.cli.render import entries_text
from braind.model.entries import TYPES
from braind.model.layered import LOG_TYPES

SCOPES = ("root", "home", "project")
LOG_SCOPES = ("home", "project")


def _text(value: str | None) -> str:
    """An argument's text, or stdin when it was left out or given as `-`."""
    return sys.stdin.read() if value is None or value == "-" else value


def _project_arg(parser: argparse.ArgumentParser) -> None:
    """--project, needed by scope project."""
    parser.add_argument("--project", help="absolute path of the project directory (needed by scope project)")


def _recall_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind memory-recall`."""
    parser.add_argument("scope", nargs="?", default="root", choices=SCOPES, help="root (default), home or project")
    parser.add_argument("--section", help="scope root: one section, by exact name or unique prefix")
    parser.add_argument("--name", help="scope home/project: read this logfile")
    parser.add_argument(
        "--type",
        choices=(*LOG_TYPES, *TYPES),
        help="scope home/project: list only logfiles of this type; with --query/--trigger: only typed memories of it",
    )
    parser.add_argument("--query", help="search typed memories instead: every word must occur")
    parser.add_argument(
        "--trigger",
        action="append",
        dest="triggers",
        metavar="TRIGGER",
        help="typed memories carrying this trigger: file:<name>, tool:<name> or err:<code> (repeatable)",
    )
    parser.add_argument("--limit", type=int, help="with --query/--trigger: most entries to show (1-500)")
    _project_arg(parser)


def cmd_memory_recall(args: argparse.Namespace, config: Config) -> int:
    """Read MEMORY.md, a section, a logfile listing or one logfile; or search typed memories."""
    params = {"section": args.section, "name": args.name, "type": args.type, "project": args.project}
    typed = {"query": args.query, "triggers": args.triggers, "limit": args.limit}
    return emit(args, call(config, "memory_recall", scope=args.scope, **params, **typed), _recalled)


def _recalled(result: dict[str, Any]) -> str:
    """What memory_recall found, or a line saying there is nothing."""
    if result["scope"] == "typed":
        return entries_text(result)
    if result["text"]:
        return str(result["text"]).rstrip("\n")
    if result["scope"] == "root":
        return f"(MEMORY.md is empty or missing: {result['path']}; memory-write-root creates it)"
    return f"(no logfiles in {result['scope']}: {result['path']}; memory-creator creates one)"


def _write_root_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind memory-write-root`."""
    parser.add_argument("section", help="section name (the '## name' heading); created when missing")
    parser.add_argument("content", nargs="?", help="the text to append (stdin when left out or -)")
    parser.add_argument("--approved", action="store_true", help="the user approved this write")


def cmd_memory_write_root(args: argparse.Namespace, config: Config) -> int:
    """Append to a MEMORY.md section."""
    result = write(config, "memory_write_root", args.approved, section=args.section, content=_text(args.content))
    verb = "created" if result["created"] else "appended to"
    return emit(args, result, lambda r: f"{verb} section '## {r['section']}' of {r['path']} ({r['chars']} characters)")


def _write_logfile_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind memory-write-logfile`."""
    parser.add_argument("scope", choices=LOG_SCOPES, help="home or project")
    parser.add_argument("name", help="logfile name (it must exist: see memory-creator)")
    parser.add_argument("content", nargs="?", help="the entry's text (stdin when left out or -)")
    parser.add_argument("--title", help="the entry's title; the timestamp is added")
    _project_arg(parser)
    parser.add_argument("--approved", action="store_true", help="the user approved this write")


def cmd_memory_write_logfile(args: argparse.Namespace, config: Config) -> int:
    """Append an entry to a logfile."""
    result = write(
        config,
        "memory_write_logfile",
        args.approved,
        scope=args.scope,
        name=args.name,
        content=_text(args.content),
        title=args.title,
        project=args.project,
    )
    return emit(args, result, lambda r: f"appended '{r['heading']}' to {r['path']}")


def _correct_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind memory-correct`."""
    parser.add_argument("scope", choices=SCOPES, help="root (a section) or home/project (a logfile entry)")
    parser.add_argument("--section", help="scope root: the section, by exact name or unique prefix")
    parser.add_argument("--name", help="scope home/project: the logfile")
    parser.add_argument("--title", help="scope home/project: the entry's title (exact, else unique prefix)")
    parser.add_argument("--at", help="the entry's 'YYYY-MM-DD HH:MM', to choose among entries")
    change = parser.add_mutually_exclusive_group(required=True)
    change.add_argument("--content", help="the new body (- reads stdin)")
    change.add_argument("--delete", action="store_true", help="delete the unit")
    _project_arg(parser)
    parser.add_argument("--approved", action="store_true", help="the user approved this correction (needed)")


def cmd_memory_correct(args: argparse.Namespace, config: Config) -> int:
    """Rewrite or delete one section or logfile entry."""
    address = {"section": args.section, "name": args.name, "title": args.title, "at": args.at}
    content = "" if args.delete else _text(args.content)
    result = write(
        config, "memory_correct", args.approved, scope=args.scope, content=content, project=args.project, **address
    )
    return emit(args, result, _corrected)


def _corrected(result: dict[str, Any]) -> str:
    """One line: what was changed where, and where the previous version is."""
    unit = f"section '## {result['section']}'" if "section" in result else f"entry '{result['title']} @ {result['at']}'"
    return f"{result['action']} {unit} in {result['path']}; previous version: {result['backup']}"


def _creator_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind memory-creator`."""
    parser.add_argument("scope", choices=LOG_SCOPES, help="home or project")
    parser.add_argument("name", help="logfile name (up to 64 characters, no path separators)")
    parser.add_argument("--type", required=True, choices=LOG_TYPES, help="what the logfile holds")
    parser.add_argument("--description", required=True, help="one line shown in every session's catalogue")
    parser.add_argument("--heading", help="the '# heading' (default: the name)")
    _project_arg(parser)
    parser.add_argument("--approved", action="store_true", help="the user approved this write")


def cmd_memory_creator(args: argparse.Namespace, config: Config) -> int:
    """Create an empty logfile."""
    result = write(
        config,
        "memory_creator",
        args.approved,
        scope=args.scope,
        name=args.name,
        type=args.type,
        description=args.description,
        heading=args.heading or args.name,
        project=args.project,
    )
    return emit(args, result, lambda r: f"created {r['path']}")


def _migrate_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind migrate`."""
    parser.add_argument("project", help="the project directory holding a legacy .memory file or directory")


def cmd_migrate(args: argparse.Namespace, config: Config) -> int:
    """Move a project's legacy .memory into .agents/.memory now (offline; the daemon does it on first use)."""
    from braind.files.migrate import migrate

    result = migrate(Path(args.project).absolute(), config.files.max_file_bytes)
    return emit(args, result.as_dict(), lambda r: str(r["message"]))


LAYERED_COMMANDS: Commands = [
    (
        "memory-recall",
        "read MEMORY.md, a section, the logfile listing or one logfile; or search typed memories (--query, --trigger)",
        cmd_memory_recall,
        _recall_args,
    ),
    ("memory-write-root", "append to a section of MEMORY.md", cmd_memory_write_root, _write_root_args),
    ("memory-write-logfile", "append an entry to a logfile", cmd_memory_write_logfile, _write_logfile_args),
    ("memory-correct", "rewrite or delete one section or logfile entry", cmd_memory_correct, _correct_args),
    ("memory-creator", "create an empty logfile", cmd_memory_creator, _creator_args),
    ("migrate", "move a project's legacy .memory into .agents/.memory", cmd_migrate, _migrate_args),
]
