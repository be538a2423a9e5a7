"""Commands of the diary: note, recall and inject."""

from __future__ import annotations

import argparse

from braind.config import Config
from braind.faces.cli.common import call, emit, write


def note_args(parser: argparse.ArgumentParser) -> None:
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


def recall_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind recall`."""
    parser.add_argument("words", nargs="+", help="a question or a few words, as you would ask them")
    parser.add_argument("--limit", type=int, help="most hits (1-500)")
    parser.add_argument("--days", type=int, help="only the last N days (1-36500; default: all of memory)")
    parser.add_argument("--strict", action="store_true", help="only entries holding every word")
    parser.add_argument("--type", help="only entries of this type")
    parser.add_argument("--project", help="absolute path of a project directory")
    parser.add_argument("--realm", choices=["user", "project"], help="only this realm")


def inject_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind inject`."""
    parser.add_argument("--session", required=True, help="agent session id")
    parser.add_argument(
        "--turn", help="the turn's id (any string, sent as a string); each (session, turn) is served once"
    )
    parser.add_argument("--project", help="absolute path of a project directory")


def cmd_note(args: argparse.Namespace, config: Config) -> int:
    """Append a note to today's diary; a write that needs approval is asked for at a terminal."""
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
    return emit(args, result, lambda r: f"noted {r['fp']} in {r['path']}")


def cmd_recall(args: argparse.Namespace, config: Config) -> int:
    """Search memory: entries holding every word first, then those holding some."""
    from braind.faces.cli.render import hits

    result = call(
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
    return emit(args, result, hits)


def cmd_inject(args: argparse.Namespace, config: Config) -> int:
    """Print the injection block for one turn."""
    result = call(config, "inject", session=args.session, turn=args.turn, project=args.project)
    return emit(args, result, lambda r: r["text"].rstrip("\n") if r["text"] else f"(nothing: {r['skipped']})")
