"""The `braind` command: a thin face over the client, plus serve/start/stop/check."""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from braind import __version__
from braind.config import Config, load_config
from braind.errors import BraindError
from braind.faces.cli.layered import LAYERED_COMMANDS
from braind.faces.cli.typed import TYPED_COMMANDS

EXIT_ERROR = 1
EXIT_USAGE = 2
# `braind check`: 0 clean, 1 a rejected file (or the root itself unusable), 3 skipped lines only.
EXIT_REJECTED = 1
EXIT_SKIPPED_LINES = 3
Command = Callable[[argparse.Namespace, Config], Any]


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
        known = [o for o in parser._option_string_actions if o.startswith("--")]
    else:
        return ""
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def build_parser() -> argparse.ArgumentParser:
    """Every command with its help; the common options work before or after the command."""
    parser = Parser(prog="braind", description="Local memory daemon for AI agents.")
    _common(parser, None)
    parser.add_argument("--version", action="version", version=f"braind {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text, func, extra in _COMMANDS:
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        _common(cmd, argparse.SUPPRESS)
        cmd.set_defaults(func=func, command_parser=cmd)
        extra(cmd)
    return parser


def _common(parser: argparse.ArgumentParser, default: object) -> None:
    """--config, --socket and --json; on commands they must not reset what came before the command."""
    parser.add_argument(
        "--config", default=default, help="config file (default: $BRAIND_CONFIG, then ~/.config/braind/braind.yaml)"
    )
    parser.add_argument("--socket", default=default, help="daemon socket path (default: from the config)")
    parser.add_argument("--json", action="store_true", default=default or False, help="print machine-readable JSON")


def _none(parser: argparse.ArgumentParser) -> None:
    """A command without arguments of its own."""


def _note_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind note`."""
    parser.add_argument("text", nargs="+", help="what to remember")
    parser.add_argument("--type", default="note", help="note, fact, decision, error or workflow")
    parser.add_argument("--key", help="a key; a newer entry with the same key supersedes the older")
    parser.add_argument(
        "--trigger",
        action="append",
        default=[],
        dest="triggers",
        help="file:<name>, tool:<name> or err:<code> (repeatable)",
    )
    parser.add_argument("--project", help="absolute path of a project directory")
    parser.add_argument("--approved", action="store_true", help="the user approved this write")


def _recall_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind recall`."""
    parser.add_argument("words", nargs="+", help="a question or a few words, as you would ask them")
    parser.add_argument("--limit", type=int, help="most hits (1-500)")
    parser.add_argument("--days", type=int, help="only the last N days (1-36500; default: all of memory)")
    parser.add_argument("--strict", action="store_true", help="only entries holding every word")
    parser.add_argument("--type", help="only entries of this type")
    parser.add_argument("--project", help="absolute path of a project directory")
    parser.add_argument("--realm", choices=["user", "project"], help="only this realm")


def _inject_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind inject`."""
    parser.add_argument("--session", required=True, help="agent session id")
    parser.add_argument(
        "--turn", help="the turn's id (any string, sent as a string); each (session, turn) is served once"
    )
    parser.add_argument("--project", help="absolute path of a project directory")


def _check_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind check`."""
    parser.add_argument("root", nargs="?", help="memory root to validate (default: memory_root from the config)")


def _serve_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind serve`."""
    parser.add_argument("--detach", action="store_true", help="run in the background, as `braind start` does")
    _start_args(parser)


def _start_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind start`."""
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait until the daemon is ready")


def _client(config: Config) -> Any:
    """A connected client for the configured socket."""
    from braind.rpc.client import Client

    return Client(config.client_sockets())


def _call(config: Config, method: str, **params: Any) -> Any:
    """Call one method, dropping params the user did not give."""
    with _client(config) as client:
        return client.call(method, **{k: v for k, v in params.items() if v is not None})


def _emit(args: argparse.Namespace, result: Any, human: Callable[[Any], str]) -> int:
    """Print a result as JSON with --json, else in the command's human form."""
    text = json.dumps(result, ensure_ascii=False, indent=2) if args.json else human(result)
    if text:
        print(text)
    return 0


def cmd_serve(args: argparse.Namespace, config: Config) -> int:
    """Run the daemon in the foreground (what systemd starts), or detached with --detach."""
    from braind.runtime.daemon import Daemon

    if args.detach:
        return cmd_start(args, config)
    _setup_logging()
    Daemon(config).run()
    return 0


def cmd_start(args: argparse.Namespace, config: Config) -> int:
    """Start the daemon in the background and wait until it answers."""
    from braind.runtime.start import start

    pid = start(config, args.timeout)
    return _emit(args, {"pid": pid, "socket": str(config.socket)}, lambda r: f"braind started (pid {r['pid']})")


def cmd_stop(args: argparse.Namespace, config: Config) -> int:
    """Stop a daemon started with `braind start`."""
    from braind.runtime.detach import running_pid, stop

    pidfiles = [path.parent / "braind.pid" for path in config.client_sockets()]
    pid = stop(next((p for p in pidfiles if running_pid(p) is not None), pidfiles[0]))
    return _emit(args, {"pid": pid}, lambda r: f"braind stopped (pid {r['pid']})")


def cmd_status(args: argparse.Namespace, config: Config) -> int:
    """Print the daemon's health."""
    from braind.faces.cli.render import status

    return _emit(args, _call(config, "status"), status)


def cmd_note(args: argparse.Namespace, config: Config) -> int:
    """Append a note to today's diary; a write that needs approval is asked for at a terminal."""
    from braind.faces.cli.typed import write

    result = write(
        config,
        "brain_note",
        args.approved,
        text=" ".join(args.text),
        type=args.type,
        key=args.key,
        triggers=args.triggers or None,
        project=args.project,
    )
    return _emit(args, result, lambda r: f"noted {r['fp']} in {r['path']}")


def cmd_recall(args: argparse.Namespace, config: Config) -> int:
    """Search memory: entries holding every word first, then those holding some."""
    from braind.faces.cli.render import hits

    result = _call(
        config,
        "brain_recall",
        query=" ".join(args.words),
        limit=args.limit,
        days=args.days,
        type=args.type,
        project=args.project,
        realm=args.realm,
        strict=args.strict or None,
    )
    return _emit(args, result, hits)


def cmd_inject(args: argparse.Namespace, config: Config) -> int:
    """Print the injection block for one turn."""
    result = _call(config, "inject", session=args.session, turn=args.turn, project=args.project)
    return _emit(args, result, lambda r: r["text"].rstrip("\n") if r["text"] else f"(nothing: {r['skipped']})")


def cmd_reindex(args: argparse.Namespace, config: Config) -> int:
    """Rebuild the index, with a progress bar when stderr is a terminal."""
    from braind.faces.cli.render import Progress

    if not sys.stderr.isatty() or args.json:
        return _emit(args, _call(config, "reindex"), _reindexed)
    progress = Progress(sys.stderr)
    done = threading.Event()
    poller = threading.Thread(target=_poll_progress, args=(config, progress, done), daemon=True)
    poller.start()
    try:
        result = _call(config, "reindex")
    finally:
        done.set()
        poller.join(5)
    progress.update(result["scanned"], result["scanned"], force=True)
    progress.finish()
    return _emit(args, result, _reindexed)


def _reindexed(result: dict[str, Any]) -> str:
    """The one-line summary of a reindex."""
    from braind.faces.cli.render import plural

    counts = f"{plural(result['entries'], 'entry')} from {plural(result['files'], 'file')}"
    return f"reindexed {counts} in {result['seconds']} s"


def _poll_progress(config: Config, progress: Any, done: threading.Event) -> None:
    """Draw the reindex progress from `status` until the reindex answers."""
    with _client(config) as client:
        while not done.wait(0.2):
            state = client.call("status").get("reindex")
            if state:
                progress.update(state["done"], state["total"])


def cmd_check(args: argparse.Namespace, config: Config) -> int:
    """Validate a root offline and print every problem once; the exit status says the worst kind."""
    from braind.files.check import check_root

    root = Path(args.root).absolute() if args.root else config.memory_root
    report = check_root(root, config.files)
    _emit(args, report, _check_human)
    if report["rejected"]:
        return EXIT_REJECTED
    return EXIT_SKIPPED_LINES if report["skipped_lines"] else 0


def _check_human(report: dict[str, Any]) -> str:
    """Every problem on its own line, then a summary."""
    from braind.faces.cli.render import plural, problem

    lines = [problem(p) for p in report["rejected"] + report["skipped_lines"]]
    counts = [
        plural(report["files"], "file"),
        plural(report["entries"], "entry"),
        plural(len(report["rejected"]), "rejected file"),
        plural(len(report["skipped_lines"]), "skipped line"),
    ]
    return "\n".join([*lines, ", ".join(counts)])


def _git_init_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind git-init`."""
    parser.add_argument("root", nargs="?", help="memory root to keep in git (default: memory_root from the config)")


def cmd_git_init(args: argparse.Namespace, config: Config) -> int:
    """Make a root a git repository with union merges for append-only files and ignores for local ones."""
    from braind.files.git import git_init

    root = Path(args.root).absolute() if args.root else config.memory_root
    return _emit(args, git_init(root), _git_initialised)


def _git_initialised(result: dict[str, Any]) -> str:
    """What git-init did, and what to run next."""
    if result["initialised"]:
        where = "initialised a git repository"
    elif result["repository"] == result["root"]:
        where = "already a git repository"
    else:
        where = f"inside the repository {result['repository']} (its own .gitattributes and .gitignore apply here)"
    lines = [f"{result['root']}: {where}"]
    for name in ("gitattributes", "gitignore"):
        added = result[name]
        lines.append(f"  .{name}: added {', '.join(added)}" if added else f"  .{name}: nothing to add")
    root = result["root"]
    lines.append(f"next: git -C {root} add -A && git -C {root} commit -m memory, then add a remote and push")
    return "\n".join(lines)


def cmd_tools(args: argparse.Namespace, config: Config) -> int:
    """List the agent tools and their input schemas."""
    return _emit(args, _call(config, "tools"), lambda r: "\n".join(f"{t['name']}: {t['description']}" for t in r))


def _mcp_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind mcp`."""
    parser.add_argument(
        "--all-tools", action="store_true", help="offer every agent tool and reindex (or BRAIND_MCP_ALL_TOOLS=1)"
    )
    parser.add_argument(
        "--project", help="absolute path of the project the agent works in: its memory:// project resources too"
    )


def cmd_mcp(args: argparse.Namespace, config: Config) -> int:
    """Serve the agent tools over MCP on stdio, relaying each call to the running daemon."""
    from importlib.util import find_spec

    if find_spec("mcp") is None:
        raise BraindError(
            "missing_extra",
            "`braind mcp` needs the MCP SDK (braind's mcp extra): run ./install.sh again in the braind checkout, "
            f"which installs it, or {sys.executable} -m pip install '/path/to/the/braind/checkout[mcp]'",
        )
    from braind.faces.mcp.server import serve

    return serve(config.client_sockets(), all_tools=args.all_tools, project=args.project)


def _hook_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind hook`; it reports its own errors, so a bad config never blocks a prompt."""
    parser.add_argument("agent", help="whose hook JSON arrives on stdin: claude-code")
    parser.set_defaults(own_errors=True)


def cmd_hook(args: argparse.Namespace, config: Config | None) -> int:
    """Print the memory block for an agent's prompt hook; on any error print nothing and exit 0."""
    from braind.faces.hook import run

    return run(args.agent, args.config, args.socket, sys.stdin.buffer, sys.stdout.buffer)


def _setup_logging() -> None:
    """Log to stderr (the journal under systemd); BRAIND_LOG_LEVEL overrides INFO."""
    level = os.environ.get("BRAIND_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


_COMMANDS: list[tuple[str, str, Command, Callable[[argparse.ArgumentParser], None]]] = [
    ("serve", "run the daemon in the foreground (systemd runs this)", cmd_serve, _serve_args),
    ("start", "start the daemon in the background (refused under systemd)", cmd_start, _start_args),
    ("stop", "stop a daemon started with `braind start`", cmd_stop, _none),
    ("status", "show health, roots, index state and rejected files", cmd_status, _none),
    ("note", "append a note to today's diary", cmd_note, _note_args),
    ("recall", "search memory: entries holding every word first, then the best holding some", cmd_recall, _recall_args),
    ("inject", "print the memory block for one agent turn", cmd_inject, _inject_args),
    ("reindex", "rebuild the index from the memory files", cmd_reindex, _none),
    (
        "check",
        "validate a memory root offline and print every problem; exit 0 clean, 1 a rejected file, 3 skipped lines only",
        cmd_check,
        _check_args,
    ),
    ("tools", "list the agent tools with their JSON Schemas", cmd_tools, _none),
    (
        "git-init",
        "make a memory root a git repository that merges appends from several machines",
        cmd_git_init,
        _git_init_args,
    ),
    ("mcp", "serve the agent tools over MCP on stdio, relayed to the daemon", cmd_mcp, _mcp_args),
    ("hook", "print the memory block for an agent's prompt hook (claude-code)", cmd_hook, _hook_args),
    *LAYERED_COMMANDS,
    *TYPED_COMMANDS,
]

if __name__ == "__main__":
    sys.exit(main())
