"""Commands that work on a memory root's files without a daemon: check and git-init."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from braind.config import Config
from braind.faces.cli.common import emit

# `braind check`: 0 clean, 1 a rejected file (or the root itself unusable), 3 skipped lines only.
EXIT_REJECTED = 1
EXIT_SKIPPED_LINES = 3


def check_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind check`."""
    parser.add_argument("root", nargs="?", help="memory root to validate (default: memory_root from the config)")


def cmd_check(args: argparse.Namespace, config: Config) -> int:
    """Validate a root offline and print every problem once; the exit status says the worst kind."""
    from braind.ingest.check import check_root

    root = Path(args.root).absolute() if args.root else config.memory_root
    report = check_root(root, config.files)
    emit(args, report, _check_human)
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


def git_init_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of `braind git-init`."""
    parser.add_argument("root", nargs="?", help="memory root to keep in git (default: memory_root from the config)")


def cmd_git_init(args: argparse.Namespace, config: Config) -> int:
    """Make a root a git repository with union merges for append-only files and ignores for local ones."""
    from braind.files.git import git_init

    root = Path(args.root).absolute() if args.root else config.memory_root
    return emit(args, git_init(root), _git_initialised)


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
