"""What every `braind` command shares: the common options, one call to the daemon, output, approval at a terminal."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from braind.config import Config
from braind.errors import BraindError

EXIT_ERROR = 1
Command = Callable[[argparse.Namespace, Config], Any]
Args = Callable[[argparse.ArgumentParser], None]
# A command group's table: name, help, the function that runs it, the function that adds its arguments.
Commands = list[tuple[str, str, Callable[..., Any], Args]]


def add_common(parser: argparse.ArgumentParser, default: object) -> None:
    """--config, --socket and --json; on commands they must not reset what came before the command."""
    parser.add_argument(
        "--config", default=default, help="config file (default: $BRAIND_CONFIG, then ~/.config/braind/braind.yaml)"
    )
    parser.add_argument("--socket", default=default, help="daemon socket path (default: from the config)")
    parser.add_argument("--json", action="store_true", default=default or False, help="print machine-readable JSON")


def no_args(parser: argparse.ArgumentParser) -> None:
    """A command without arguments of its own."""


def client(config: Config) -> Any:
    """A connected client for the configured socket."""
    from braind.rpc.client import Client

    return Client(config.client_sockets())


def call(config: Config, method: str, **params: Any) -> Any:
    """Call one method, leaving out the params the user did not give."""
    with client(config) as connected:
        return connected.call(method, **{k: v for k, v in params.items() if v is not None})


def emit(args: argparse.Namespace, result: Any, human: Callable[[Any], str]) -> int:
    """Print a result as JSON with --json, else in the command's human form (nothing when that is empty)."""
    text = json.dumps(result, ensure_ascii=False, indent=2) if args.json else human(result)
    if text:
        print(text)
    return 0


def write(config: Config, method: str, approved: bool, **params: Any) -> Any:
    """Call a write that may need approval, the same way for every command.

    --approved sends it approved; else, when the daemon asks for approval, a
    person at a terminal is asked once, and without a terminal the error says
    to run the command again with --approved.
    """
    try:
        return call(config, method, approved=approved or None, **params)
    except BraindError as exc:
        if exc.reason != "approval_required" or approved:
            raise
        what = exc.data.get("what") or exc.message.partition(" needs approval")[0]
        if not _at_terminal():
            raise BraindError(
                "approval_required", f"{what} needs approval: run the command again with --approved", **exc.data
            ) from None
        if not _ask(what):
            raise BraindError(
                "approval_declined", f"{what} was not approved; nothing was written", **exc.data
            ) from None
    return call(config, method, approved=True, **params)


def _at_terminal() -> bool:
    """Whether a person can be asked: stdin and stderr are a terminal."""
    return sys.stdin.isatty() and sys.stderr.isatty()


def _ask(what: str) -> bool:
    """Ask on stderr whether to approve; anything but y or yes declines."""
    sys.stderr.write(f"braind: {what} needs approval. Approve? [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")
