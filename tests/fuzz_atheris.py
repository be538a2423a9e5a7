"""A coverage-guided fuzzer (atheris/libFuzzer) for the parsers and the request decoder; on demand, never in CI.

    .venv/bin/pip install atheris
    .venv/bin/python tests/fuzz_atheris.py decode -max_total_time=300
    .venv/bin/python tests/fuzz_atheris.py -atheris_runs=1000000       # every target, chosen by the first byte

Targets: decode (JSON-RPC request lines), line (diary line parse/render), diary (a whole diary file),
layered (MEMORY.md and logfiles), names (tool names, titles, `at` stamps, note text). Only the typed errors
(GrammarError, BraindError) may escape; anything else stops the run and libFuzzer saves the input as crash-*.
The Hypothesis tests in test_faults_load.py run the same properties in CI.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

with atheris.instrument_imports():
    from braind.errors import BraindError
    from braind.files.validate import clean_note, parse_diary
    from braind.model import layered, names
    from braind.model.entries import GrammarError, parse_line, render_line
    from braind.rpc import protocol


def text_of(data: bytes) -> str:
    """The fuzzer's bytes as text, lone surrogates included (no file read can give them, a caller might)."""
    return atheris.FuzzedDataProvider(data).ConsumeUnicode(len(data))


def fuzz_decode(data: bytes) -> None:
    """A request line: a Request, a batch, or a typed error."""
    with contextlib.suppress(BraindError):
        protocol.decode(data)


def fuzz_line(data: bytes) -> None:
    """A diary line parses only into what renders back to the same line."""
    try:
        line = parse_line(text_of(data))
    except GrammarError:
        return
    if parse_line(render_line(line)) != line:
        raise AssertionError(f"parse(render(x)) != x for {line!r}")


def fuzz_diary(data: bytes) -> None:
    """A whole diary file never raises."""
    parse_diary("/r/diary/2026-01-01.md", text_of(data), 256)


def fuzz_layered(data: bytes) -> None:
    """MEMORY.md and logfiles of any shape never raise."""
    text = text_of(data)
    for kind in ("memory", "logfile"):
        layered.load(kind, text, 256, "/r", "user", f"/r/{kind}")


def fuzz_names(data: bytes) -> None:
    """Names, titles, stamps and note text raise only typed errors."""
    text = text_of(data)
    for check in (names.logfile_name, names.section_name, layered.check_at):
        with contextlib.suppress(BraindError):
            check(text)
    for limited in (clean_note, layered.check_content):
        with contextlib.suppress(BraindError):
            limited(text, 8192)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "decode": fuzz_decode,
    "line": fuzz_line,
    "diary": fuzz_diary,
    "layered": fuzz_layered,
    "names": fuzz_names,
}


def fuzz_all(data: bytes) -> None:
    """Every target, the first byte choosing which."""
    if data:
        list(TARGETS.values())[data[0] % len(TARGETS)](data[1:])


def main() -> None:
    """Fuzz the target named first on the command line (all of them when none is); the rest goes to libFuzzer."""
    args = sys.argv[1:]
    target = TARGETS.get(args[0], fuzz_all) if args else fuzz_all
    if args and args[0] in TARGETS:
        args = args[1:]
    atheris.Setup([sys.argv[0], *args], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
