"""Commands that run the daemon and look after it: serve, start, stop, status, reindex."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from typing import Any

from braind.config import Config
from braind.faces.cli.common import call, client, emit


def serve_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind serve`."""
    parser.add_argument("--detach", action="store_true", help="run in the background, as `braind start` does")
    start_args(parser)


def start_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind start`."""
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait until the daemon is ready")


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
    return emit(args, {"pid": pid, "socket": str(config.socket)}, lambda r: f"braind started (pid {r['pid']})")


def cmd_stop(args: argparse.Namespace, config: Config) -> int:
    """Stop a daemon started with `braind start`."""
    from braind.runtime.detach import running_pid, stop

    pidfiles = [path.parent / "braind.pid" for path in config.client_sockets()]
    pid = stop(next((p for p in pidfiles if running_pid(p) is not None), pidfiles[0]))
    return emit(args, {"pid": pid}, lambda r: f"braind stopped (pid {r['pid']})")


def cmd_status(args: argparse.Namespace, config: Config) -> int:
    """Print the daemon's health."""
    from braind.faces.cli.render import status

    return emit(args, call(config, "status"), status)


def cmd_reindex(args: argparse.Namespace, config: Config) -> int:
    """Rebuild the index, with a progress bar when stderr is a terminal."""
    from braind.faces.cli.render import Progress

    if not sys.stderr.isatty() or args.json:
        return emit(args, call(config, "reindex"), _reindexed)
    progress = Progress(sys.stderr)
    done = threading.Event()
    poller = threading.Thread(target=_poll_progress, args=(config, progress, done), daemon=True)
    poller.start()
    try:
        result = call(config, "reindex")
    finally:
        done.set()
        poller.join(5)
    progress.update(result["scanned"], result["scanned"], force=True)
    progress.finish()
    return emit(args, result, _reindexed)


def _reindexed(result: dict[str, Any]) -> str:
    """The one-line summary of a reindex."""
    from braind.faces.cli.render import plural

    counts = f"{plural(result['entries'], 'entry')} from {plural(result['files'], 'file')}"
    return f"reindexed {counts} in {result['seconds']} s"


def _poll_progress(config: Config, progress: Any, done: threading.Event) -> None:
    """Draw the reindex progress from `status` until the reindex answers."""
    with client(config) as connected:
        while not done.wait(0.2):
            state = connected.call("status").get("reindex")
            if state:
                progress.update(state["done"], state["total"])


def _setup_logging() -> None:
    """Log to stderr (the journal under systemd); BRAIND_LOG_LEVEL overrides INFO."""
    level = os.environ.get("BRAIND_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
