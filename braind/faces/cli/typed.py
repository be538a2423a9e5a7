"""`braind memory ...`: the typed memory from the command line, one subcommand per memory.* method.

A fingerprint may be given by unique prefix; an ambiguous one prints the
candidates under the error line. Writes that need approval (docs/memory.md, Approval) take
--approved; without it, when the daemon answers approval_required and a
person is at the terminal, the command asks and retries approved.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from braind.config import Config
from braind.errors import BraindError
from braind.faces.cli.common import EXIT_ERROR, Args, Commands, add_common, call, emit, write
from braind.faces.cli.render import entries_text, entry_line, one_line, plural
from braind.model.entries import TYPES

Run = Callable[[argparse.Namespace, Config], int]

APPROVAL_NOTE = (
    "With approval.mode fail-closed (and no approval.command), pass --approved or answer y when asked at a "
    "terminal; otherwise the write is refused with approval_required and nothing is written."
)
PROJECT_READ = "absolute path of a project directory: its memory (<project>/.agents/.memory) besides the user's"
PROJECT_WRITE = "absolute path of a project directory: write to its memory (<project>/.agents/.memory)"
FP_HELP = (
    "fingerprint as list shows it, or a unique prefix of it (1-12 hex digits); an ambiguous prefix lists the candidates"
)
RULES = {
    1: "a newer entry with the same key supersedes the older",
    2: "facts unused for compact.fact_ttl_days, used at most once, are tombstoned",
    3: "workflows, errors and decisions unused for compact.deweight_days have their weight halved",
    4: "errors and decisions are never removed automatically",
}


# -- the `memory` command ----------------------------------------------------------


def cmd_memory(args: argparse.Namespace, config: Config) -> int:
    """Run the chosen subcommand; an ambiguous fingerprint lists its candidates under the error line."""
    try:
        return int(args.run(args, config))
    except BraindError as exc:
        if exc.reason != "ambiguous":
            raise
        print(f"braind: error: {exc.reason}: {exc.message}", file=sys.stderr)
        for match in exc.data.get("matches") or []:
            print(_candidate(match), file=sys.stderr)
        return EXIT_ERROR


def _candidate(match: dict[str, Any]) -> str:
    """One candidate of an ambiguous prefix: fp, type, text and file."""
    return (
        f"  {match.get('fp')}  [{match.get('type')}]  {one_line(str(match.get('text', '')))}  {match.get('path', '')}"
    )


def memory_args(parser: argparse.ArgumentParser) -> None:
    """The nested subcommands; each takes --config/--socket/--json too, before or after its arguments."""
    parser.epilog = "Removal is a tombstone, never a delete: `braind memory undo FP` brings an entry back."
    sub = parser.add_subparsers(dest="memory_command", required=True, metavar="SUBCOMMAND")
    for name, help_text, details, run, extra in _SUBCOMMANDS:
        cmd = sub.add_parser(name, help=help_text, description=f"{help_text}. {details}".strip())
        add_common(cmd, argparse.SUPPRESS)
        cmd.set_defaults(run=run, command_parser=cmd)
        extra(cmd)


def _write(args: argparse.Namespace, config: Config, method: str, **params: Any) -> Any:
    """A write of a subcommand that takes --approved."""
    return write(config, method, args.approved, **params)


# -- subcommands -------------------------------------------------------------------


LIST_NOTE = "(plain notes are not typed memories: `braind recall WORDS` or `braind memory entries` shows them)"


def run_list(args: argparse.Namespace, config: Config) -> int:
    """Live typed memories, in injection order, and where the plain notes are."""
    result = call(config, "memory.list", type=args.type, project=args.project, limit=args.limit)
    return emit(args, result, lambda r: entries_text(r, "typed memory") + "\n" + LIST_NOTE)


def run_query(args: argparse.Namespace, config: Config) -> int:
    """Typed memories holding every word of TERM."""
    params = {"type": args.type, "project": args.project, "limit": args.limit}
    return emit(args, call(config, "memory.query", term=" ".join(args.term), **params), entries_text)


def run_add(args: argparse.Namespace, config: Config) -> int:
    """Append a typed memory to today's diary."""
    params = {"type": args.type, "key": args.key, "triggers": args.triggers or None, "project": args.project}
    return emit(args, _write(args, config, "memory.add", text=" ".join(args.text), **params), _added)


def run_edit(args: argparse.Namespace, config: Config) -> int:
    """Supersede an entry with new text."""
    result = _write(args, config, "memory.edit", fp=args.fp, text=" ".join(args.text), project=args.project)
    return emit(args, result, _edited)


def run_remove(args: argparse.Namespace, config: Config) -> int:
    """Tombstone an entry."""
    return emit(args, _write(args, config, "memory.remove", fp=args.fp, project=args.project), _removed)


def run_undo(args: argparse.Namespace, config: Config) -> int:
    """Reverse the newest change to an entry."""
    return emit(args, call(config, "memory.undo", fp=args.fp, project=args.project), _undone)


def run_pin(args: argparse.Namespace, config: Config) -> int:
    """Pin an entry."""
    result = call(config, "memory.pin", fp=args.fp, project=args.project)
    return emit(args, result, lambda r: _pinned(r, "pinned"))


def run_unpin(args: argparse.Namespace, config: Config) -> int:
    """Unpin an entry."""
    result = call(config, "memory.unpin", fp=args.fp, project=args.project)
    return emit(args, result, lambda r: _pinned(r, "unpinned"))


def run_entries(args: argparse.Namespace, config: Config) -> int:
    """Raw entries of any type and status."""
    term = " ".join(args.term) or None
    return emit(args, call(config, "memory.entries", term=term, project=args.project, limit=args.limit), entries_text)


def run_compact(args: argparse.Namespace, config: Config) -> int:
    """Apply the compaction rules, or only show them with --dry-run."""
    dry_run = args.dry_run or None
    return emit(args, _write(args, config, "memory.compact", dry_run=dry_run, project=args.project), _compacted)


def run_dump(args: argparse.Namespace, config: Config) -> int:
    """Everything typed memory holds."""
    return emit(args, call(config, "memory.dump", type=args.type, project=args.project), _dumped)


# -- human output ------------------------------------------------------------------


def _dumped(result: dict[str, Any]) -> str:
    """Every entry, then state left by entries no longer in any file, then the counts."""
    lines = [entry_line(e) for e in result["entries"]]
    for orphan in result.get("orphans", []):
        changes = plural(len(orphan.get("changes", [])), "change")
        lines.append(f"{orphan['fp']}  (state only, no entry in the files: {orphan['status']}, {changes})")
    lines.append(f"{plural(len(result['entries']), 'entry')}, {len(result.get('orphans', []))} without a file")
    return "\n".join(lines)


def _added(result: dict[str, Any]) -> str:
    """The new entry's fp and file, and what it superseded or had redacted."""
    lines = [f"added {result['fp']} in {result['path']}"]
    if result.get("superseded"):
        lines.append(f"superseded {', '.join(result['superseded'])} (same key; tombstoned, undo brings it back)")
    return "\n".join(lines + _redacted(result))


def _edited(result: dict[str, Any]) -> str:
    """The new entry's fp and file, and the entry it superseded."""
    lines = [
        f"edited {result['replaces']}: new entry {result['fp']} in {result['path']}",
        f"superseded {result['replaces']} (tombstoned; `braind memory undo {result['fp']}` reverts the edit)",
    ]
    return "\n".join(lines + _redacted(result))


def _redacted(result: dict[str, Any]) -> list[str]:
    """A line naming the kinds of secret replaced before writing, if any."""
    kinds = list(dict.fromkeys(result.get("redacted") or []))
    return [f"redacted {', '.join(kinds)} before writing"] if kinds else []


def _removed(result: dict[str, Any]) -> str:
    """One line: tombstoned, or already was."""
    if not result["changed"]:
        return f"{result['fp']} was already tombstoned"
    return f"tombstoned {result['fp']} (it stays in its file; `braind memory undo {result['fp']}` brings it back)"


def _undone(result: dict[str, Any]) -> str:
    """One line: which change was reversed and the entry's status now."""
    line = f"undid {result['undone']} on {result['fp']}: now {result['status']}"
    if result.get("tombstoned"):
        line += f"; tombstoned {', '.join(result['tombstoned'])} (the edit's new entry)"
    return line


def _pinned(result: dict[str, Any], verb: str) -> str:
    """One line: pinned/unpinned, or already was, and the status when it is tombstoned."""
    line = f"{verb} {result['fp']}" if result["changed"] else f"{result['fp']} was already {verb}"
    return line + (" (it is tombstoned: undo brings it back)" if result["status"] == "tombstoned" else "")


def _compacted(result: dict[str, Any]) -> str:
    """The decisions grouped by rule, each with fp, action and detail, then a summary."""
    lines: list[str] = []
    decisions = result["decisions"]
    for rule in sorted({d["rule"] for d in decisions}):
        lines.append(f"rule {rule}: {RULES.get(rule, '')}".rstrip(": "))
        lines += [f"  {d['fp']}  {d['action']}  {d['detail']}" for d in decisions if d["rule"] == rule]
    summary = plural(len(decisions), "decision") if decisions else "nothing to compact"
    lines.append(summary + (" (dry run: nothing changed)" if result["dry_run"] else ""))
    return "\n".join(lines)


# -- arguments ---------------------------------------------------------------------


def _project(parser: argparse.ArgumentParser, help_text: str = PROJECT_READ) -> None:
    """--project, which every subcommand takes."""
    parser.add_argument("--project", help=help_text)


def _limit(parser: argparse.ArgumentParser) -> None:
    """--limit of the reading subcommands."""
    parser.add_argument("--limit", type=int, help="most entries to show (1-10000)")


def _type_filter(parser: argparse.ArgumentParser) -> None:
    """--type of the reading subcommands."""
    parser.add_argument("--type", choices=TYPES, help="only entries of this type")


def _approved(parser: argparse.ArgumentParser) -> None:
    """--approved of the writes that need approval."""
    parser.add_argument("--approved", action="store_true", help="the user approved this write (see above)")


def _fp(parser: argparse.ArgumentParser) -> None:
    """The FP argument and --project."""
    parser.add_argument("fp", metavar="FP", help=FP_HELP)
    _project(parser)


def _list_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind memory list` (and, with TERM, `query`)."""
    _type_filter(parser)
    _project(parser)
    _limit(parser)


def _dump_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind memory dump`."""
    _type_filter(parser)
    _project(parser)


def _query_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind memory query`."""
    parser.add_argument("term", metavar="TERM", nargs="+", help="words that must all occur")
    _list_args(parser)


def _add_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind memory add`."""
    parser.add_argument("text", metavar="TEXT", nargs="+", help="what to remember")
    parser.add_argument(
        "--type",
        choices=TYPES,
        help="kind of memory (default note: a plain diary note, which list shows only with a key, trigger or pin)",
    )
    parser.add_argument(
        "--key", help="a key; a live entry with the same key is superseded (tombstoned): needs approval"
    )
    parser.add_argument(
        "--trigger",
        action="append",
        default=[],
        dest="triggers",
        metavar="TRIGGER",
        help="file:<name>, tool:<name> or err:<code>: recalled when an agent turn touches it (repeatable)",
    )
    _project(parser, PROJECT_WRITE)
    _approved(parser)


def _edit_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind memory edit`."""
    _fp(parser)
    parser.add_argument("text", metavar="TEXT", nargs="+", help="the new text")
    _approved(parser)


def _remove_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind memory remove`."""
    _fp(parser)
    _approved(parser)


def _entries_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind memory entries`."""
    parser.add_argument(
        "term", metavar="TERM", nargs="*", help="words that must all occur (default: the newest entries)"
    )
    _project(parser)
    _limit(parser)


def _compact_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind memory compact`."""
    parser.add_argument("--dry-run", action="store_true", help="only print the decisions; change nothing")
    _project(parser)
    _approved(parser)


_SUBCOMMANDS: Sequence[tuple[str, str, str, Run, Args]] = [
    (
        "list",
        "list live typed memories (not plain notes)",
        "Facts, decisions, errors and workflows, and any entry with a key, a trigger or a pin; "
        "pinned first, then workflow > error > decision > fact, as injection orders them. Plain notes are not "
        "listed: `braind recall WORDS` finds them, `braind memory entries` shows the newest.",
        run_list,
        _list_args,
    ),
    (
        "query",
        "search typed memories",
        "Every word of TERM must occur in the entry's text, key or triggers; tombstoned entries are left out. "
        "Each entry shown counts as a use.",
        run_query,
        _query_args,
    ),
    (
        "add",
        "add a typed memory to today's diary",
        "A decision, and an entry whose key a live entry already holds (that entry is then tombstoned), "
        f"need approval. {APPROVAL_NOTE}",
        run_add,
        _add_args,
    ),
    (
        "edit",
        "replace an entry's text",
        "The new text is appended to today's diary with the old entry's type, key and triggers; the old entry "
        "is tombstoned and linked to it (`undo` reverts). Diary entries only: MEMORY.md sections and logfile entries "
        f"are rewritten with `braind memory-correct`. Needs approval. {APPROVAL_NOTE}",
        run_edit,
        _edit_args,
    ),
    (
        "remove",
        "remove an entry",
        "Removal is a tombstone, never a delete: the line stays in its file, but is no longer recalled, "
        f"injected or listed; `undo` brings it back. Needs approval. {APPROVAL_NOTE}",
        run_remove,
        _remove_args,
    ),
    (
        "undo",
        "reverse the newest change to an entry",
        "A removal, an edit (given the old or the new entry), a compaction eviction or de-weighting, a pin or an "
        "unpin. Needs no approval.",
        run_undo,
        _fp,
    ),
    (
        "pin",
        "pin an entry",
        "A pinned entry is injected first when its triggers fire and is never compacted. Needs no approval.",
        run_pin,
        _fp,
    ),
    ("unpin", "unpin an entry", "Needs no approval.", run_unpin, _fp),
    (
        "entries",
        "show raw entries of any type and status",
        "Notes, typed entries, MEMORY.md sections and logfile entries, tombstoned ones included, newest first: "
        "those holding every word of TERM, or the newest when TERM is left out.",
        run_entries,
        _entries_args,
    ),
    (
        "compact",
        "apply the compaction rules",
        "Rule 1: a newer entry with the same key supersedes the older; 2: facts long unused are removed "
        "(tombstoned); 3: long-unused workflows, errors and decisions have their weight halved; 4: errors and "
        "decisions are never removed automatically; pinned entries are never touched. Every change is written to "
        "<root>/.braind/compact.log. --dry-run prints the same decisions and changes nothing. Removing entries "
        f"needs approval (a dry run or de-weighting alone does not). {APPROVAL_NOTE}",
        run_compact,
        _compact_args,
    ),
    (
        "dump",
        "show everything typed memory holds",
        "Typed, pinned and tombstoned entries, oldest first, with weights and uses, and state left by entries "
        "no longer in any file.",
        run_dump,
        _dump_args,
    ),
]

TYPED_COMMANDS: Commands = [
    (
        "memory",
        "typed memory: list, query, add, edit, remove, undo, pin, unpin, entries, compact, dump",
        cmd_memory,
        memory_args,
    ),
]
