"""The `braind` command: a thin face over the client, one module per command group, plus serve/start/stop/check."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from braind import __version__
from braind.config import load_config
from braind.errors import BraindError
from braind.faces.cli import agents, control, diary, offline
from braind.faces.cli.common import EXIT_ERROR, Commands, add_common, no_args
from braind.faces.cli.layered import LAYERED_COMMANDS
from braind.faces.cli.typed import TYPED_COMMANDS


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run one command, and turn errors into one line on stderr."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "own_errors", False):
        return int(args.func(args, None) or 0)
    try:
        config = load_config(args.config)
        if args.socket:
            config = config.with_socket(args.socket)
        return int(args.func(args, config) or 0)
    except BraindError as exc:
        print(f"braind: error: {exc.reason}: {exc.message}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `braind status | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors suggest the nearest command or option to a mistyped one."""

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """Parse, reporting unknown options on the (sub)command they were given to."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            target = getattr(parsed, "command_parser", None) or self
            target.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def error(self, message: str) -> NoReturn:
        """Exit 2 with argparse's message and, when one is close, the name that was probably meant."""
        super().error(message + suggestion(message, self))


def suggestion(message: str, parser: argparse.ArgumentParser) -> str:
    """'; did you mean ...?' for an invalid choice or an unknown option, or ''."""
    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        word, known = choice[1], re.findall(r"'([^']*)'", choice[2])
    elif message.startswith("unrecognized arguments: "):
        word = message.split()[2].partition("=")[0]
        known = sorted(set(re.findall(r"--[\w-]+", parser.format_help())))
    else:
        return ""
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def build_parser() -> argparse.ArgumentParser:
    """Every command with its help; the common options work before or after the command."""
    parser = Parser(prog="braind", description="Local memory daemon for AI agents.")
    add_common(parser, None)
    parser.add_argument("--version", action="version", version=f"braind {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text, func, extra in _COMMANDS:
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        add_common(cmd, argparse.SUPPRESS)
        cmd.set_defaults(func=func, command_parser=cmd)
        extra(cmd)
    return parser


_COMMANDS: Commands = [
    ("serve", "run the daemon in the foreground (systemd runs this)", control.cmd_serve, control.serve_args),
    ("start", "start the daemon in the background (refused under systemd)", control.cmd_start, control.start_args),
    ("stop", "stop a daemon started with `braind start`", control.cmd_stop, no_args),
    ("status", "show health, roots, index state and rejected files", control.cmd_status, no_args),
    ("note", "append a note to today's diary", diary.cmd_note, diary.note_args),
    (
        "recall",
        "search memory: entries holding every word first, then the best holding some",
        diary.cmd_recall,
        diary.recall_args,
    ),
    ("inject", "print the memory block for one agent turn", diary.cmd_inject, diary.inject_args),
    ("reindex", "rebuild the index from the memory files", control.cmd_reindex, no_args),
    (
        "check",
        "validate a memory root offline and print every problem; exit 0 clean, 1 a rejected file, 3 skipped lines only",
        offline.cmd_check,
        offline.check_args,
    ),
    ("tools", "list the agent tools with their JSON Schemas", agents.cmd_tools, no_args),
    (
        "git-init",
        "make a memory root a git repository that merges appends from several machines",
        offline.cmd_git_init,
        offline.git_init_args,
    ),
    ("mcp", "serve the agent tools over MCP on stdio, relayed to the daemon", agents.cmd_mcp, agents.mcp_args),
    ("hook", "print the memory block for an agent's prompt hook (claude-code)", agents.cmd_hook, agents.hook_args),
    *LAYERED_COMMANDS,
    *TYPED_COMMANDS,
]
