"""The command line: pick a plan, run each corpus size, print and write the report; or measure recall quality."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import baselines, locomo, plan, proc, profile, quality, quality_report, report
from bench.daemon import DaemonFailed
from bench.run import SizeRun, say
from braind.config import RecallConfig

OUT = Path(__file__).resolve().parent / "out"


def build_parser() -> argparse.ArgumentParser:
    """The options of `python -m bench`."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark the real braind daemon over its socket against baselines on the same corpus.",
        epilog="`python -m bench quality PATH...` measures recall quality instead (see its --help).",
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="the 10k corpus with fewer rounds (1-2 minutes)")
    size.add_argument("--smoke", action="store_true", help="a tiny corpus and few rounds: checks the suite works")
    parser.add_argument("--entries", type=int, action="append", metavar="N", help="corpus size (repeatable)")
    parser.add_argument("--huge", action="store_true", help="add the 1,000,000-entry corpus (slow)")
    parser.add_argument(
        "--soak", type=float, metavar="SECONDS", help="add the mixed soak of 4 clients for SECONDS (600: the full one)"
    )
    parser.add_argument(
        "--busy-day",
        type=int,
        action="append",
        metavar="N",
        help="entries already in today's diary for a busy-day run (repeatable; replaces the plan's)",
    )
    parser.add_argument("--seed", type=int, default=1, help="corpus and query seed (default 1)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"results and cached corpora (default {OUT})")
    parser.add_argument(
        "--profile", action="store_true", help="attach py-spy to the daemon in each phase (slows it; writes profile-*)"
    )
    return parser


def build_quality_parser() -> argparse.ArgumentParser:
    """The options of `python -m bench quality`."""
    parser = argparse.ArgumentParser(
        prog="python -m bench quality",
        description="Recall quality on LoCoMo-format conversations: every question asked as written of the real "
        "daemon, beside SQLite FTS5 BM25 and the diary plugin's scan on the same entries.",
    )
    parser.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="a LoCoMo-format JSON file: one conversation or a list"
    )
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the report is written (default {OUT})")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; exit status 1 when it could not run."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["quality"]:
        return run_quality(argv[1:])
    args = build_parser().parse_args(argv)
    if args.entries and min(args.entries) < 100:
        build_parser().error("--entries must be at least 100")
    if args.soak is not None and args.soak < 0:
        build_parser().error("--soak must be at least 0")
    if args.busy_day and min(args.busy_day) < 1:
        build_parser().error("--busy-day must be at least 1")
    if not baselines.fts5_available():
        print("bench: error: this Python's SQLite has no FTS5", file=sys.stderr)
        return 1
    if args.profile and profile.py_spy() is None:
        print("bench: error: --profile needs py-spy (pip install py-spy)", file=sys.stderr)
        return 1
    chosen = plan.choose(args.smoke, args.quick, args.entries, args.huge, args.soak, args.busy_day)
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    hardware = proc.hardware()
    results = run_all(chosen, args.out, args.seed, args.profile)
    hardware["load_end"] = proc.loadavg()
    md, js = report.write(args.out, stamp, hardware, results)
    print(md.read_text(encoding="utf-8"))
    say(f"wrote {md} and {js}")
    return 0


def run_all(chosen: plan.Plan, out: Path, seed: int, profiled: bool) -> list[dict[str, Any]]:
    """Every corpus size of the plan, smallest first."""
    say(f"{chosen.name} run: {', '.join(f'{n:,}' for n in chosen.sizes)} entries")
    return [SizeRun(n, chosen, out, seed, profiled).run() for n in sorted(chosen.sizes)]


def names(paths: Sequence[Path]) -> list[str]:
    """A label for each file: its name, or its whole path when two files share a name."""
    counts = Counter(p.name for p in paths)
    return [p.name if counts[p.name] == 1 else str(p) for p in paths]


def run_quality(argv: Sequence[str]) -> int:
    """Measure recall quality; exit status 1 when a file is not a conversation, FTS5 is missing or the daemon failed."""
    args = build_quality_parser().parse_args(argv)
    if not baselines.fts5_available():
        print("bench: error: this Python's SQLite has no FTS5", file=sys.stderr)
        return 1
    conversations = []
    for path, name in zip(args.paths, names(args.paths), strict=True):  # every file is read before anything runs
        try:
            conversations += locomo.load(path, name)
        except locomo.NotLocomo as exc:
            print(f"bench: error: {exc}", file=sys.stderr)
            return 1
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    hardware = proc.hardware()
    try:
        results = quality.run_all(conversations)
    except DaemonFailed as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 1
    hardware["load_end"] = proc.loadavg()
    doc = quality_report.document(hardware, results, RecallConfig().scan_days)
    md, js = quality_report.write(args.out, stamp, doc)
    print(md.read_text(encoding="utf-8"))
    say(f"wrote {md} and {js}")
    return 0
