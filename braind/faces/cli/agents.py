"""Commands for agents: the tool listing, the MCP bridge and the prompt hook."""

from __future__ import annotations

import argparse
import sys

from braind.config import Config
from braind.errors import BraindError
from braind.faces.cli.common import call, emit


def cmd_tools(args: argparse.Namespace, config: Config) -> int:
    """List the agent tools and their input schemas."""
    return emit(args, call(config, "tools"), lambda r: "\n".join(f"{t['name']}: {t['description']}" for t in r))


def mcp_args(parser: argparse.ArgumentParser) -> None:
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


def hook_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind hook`; it reports its own errors, so a bad config never blocks a prompt."""
    parser.add_argument("agent", help="whose hook JSON arrives on stdin: claude-code")
    parser.set_defaults(own_errors=True)


def cmd_hook(args: argparse.Namespace, config: Config | None) -> int:
    """Print the memory block for an agent's prompt hook; on any error print nothing and exit 0."""
    from braind.faces.hook import run

    return run(args.agent, args.config, args.socket, sys.stdin.buffer, sys.stdout.buffer)
