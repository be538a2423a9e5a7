"""Concurrency, load and fuzzing: many writers, readers under load, hostile inputs.

E13 runs writer processes that note through the real socket while an editor appends to the same
diary: nothing acknowledged is lost, no line is torn or interleaved, every note is recallable.
E14 keeps recall and inject clients running through that load and counts their answers (latency
is reported for the record, never asserted). E15 fuzzes the entry parsers, the layered parsers,
the request decoder and, over the socket, every method's params: only typed errors may escape.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from braind.errors import BraindError
from braind.files.validate import clean_note, parse_diary
from braind.model import layered, names
from braind.model.entries import TYPES, GrammarError, Line, Meta, parse_line, render_line
from braind.rpc.client import Client
from braind.rpc.protocol import MAX_LINE, Request, decode, decode_response, encode_error, encode_result, error_from_wire
from tests.conftest import REPO, Daemon, today
from tests.faults import assert_index_matches_files

# -- E13/E14: writers, an editor and readers on one diary ------------------------------------------

WRITERS = 8
BATCH = 50
"""Notes per recall check: a batch token is shared by this many notes of one writer."""

WRITER = r"""
import json, sys
from pathlib import Path
from braind.rpc.client import Client
from braind.errors import BraindError
socket, writer, count, batch = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with Client(socket, timeout=300) as client:
    for i in range(count):
        text = f"ldw{writer}n{i}z batch{writer}k{i // batch}z load note {i} from writer {writer}"
        try:
            fp = client.call("brain_note", text=text)["fp"]
            print(json.dumps({"text": text, "fp": fp}), flush=True)
        except BraindError as err:
            print(json.dumps({"text": text, "error": err.reason}), flush=True)
"""

READER = r"""
import json, os, sys, time
from pathlib import Path
from braind.rpc.client import Client
from braind.errors import BraindError
socket, kind, stop = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
latencies, errors, n = [], {}, 0
with Client(socket, timeout=300) as client:
    while not stop.exists():
        n += 1
        started = time.perf_counter()
        try:
            if kind == "recall":
                client.call("brain_recall", query=f"batch{n % 8}k0z load", limit=20)
            else:
                reply = client.call("inject", session=f"reader{os.getpid()}", turn=n)
                assert reply["skipped"] is None or reply["skipped"] == "empty", reply
            latencies.append(time.perf_counter() - started)
        except BraindError as err:
            errors[err.reason] = errors.get(err.reason, 0) + 1
        time.sleep(0.1)  # an agent's pace, not a flood: the writers are the load
latencies.sort()
def at(q):
    return round(1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))], 2) if latencies else None
print(json.dumps({"kind": kind, "ok": len(latencies), "errors": errors, "p50_ms": at(0.5), "p99_ms": at(0.99)}))
"""


@dataclass
class Load:
    """What one load run did: the notes acknowledged, refused, and what the editor and readers saw."""

    acked: list[str]
    refused: list[dict[str, Any]]
    editor: list[str]
    readers: list[dict[str, Any]]


def spawn(code: str, args: list[str], out: Path) -> subprocess.Popen[bytes]:
    """A client process of its own (its own GIL), writing its report to a file rather than a pipe."""
    with open(out, "wb") as sink:
        return subprocess.Popen([sys.executable, "-c", code, *args], cwd=REPO, stdout=sink, stderr=subprocess.STDOUT)


def finished(proc: subprocess.Popen[bytes], out: Path, timeout: float) -> list[dict[str, Any]]:
    """Wait for a client process to exit cleanly and parse its JSON report lines."""
    code = proc.wait(timeout)
    text = out.read_text()
    assert code == 0, text[-3000:]
    return [json.loads(row) for row in text.splitlines()]


class Editor:
    """A person appending whole lines to today's diary in an editor, one write per line, spread over the run."""

    def __init__(self, diary: Path, lines: int, note_bytes: int) -> None:
        self.diary = diary
        self.lines = lines
        self.step = note_bytes / lines
        self.written: list[str] = []
        self.own = 0
        self.finish = threading.Event()
        self.thread = threading.Thread(target=self._type, name="editor")

    def _type(self) -> None:
        """Line j goes in once the daemon has appended j/lines of the notes (or the writers are done)."""
        self.diary.parent.mkdir(parents=True, exist_ok=True)
        for j in range(self.lines):
            while not self._due(j) and not self.finish.wait(0.005):
                pass
            self._append(f"edl{j}z edbatch{j // BATCH}z the editor typed line {j}")

    def _due(self, j: int) -> bool:
        """Whether the daemon's share of the diary has grown enough for line j."""
        with contextlib.suppress(FileNotFoundError):
            return os.stat(self.diary).st_size - self.own >= j * self.step
        return j == 0

    def _append(self, text: str) -> None:
        """One whole line in one write(), as an editor's append does."""
        data = f"[12:00] {text}\n".encode()
        fd = os.open(self.diary, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self.own += len(data)
        self.written.append(text)

    def __enter__(self) -> Editor:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.finish.set()
        self.thread.join()


def note_text(writer: int, i: int) -> str:
    """The text of writer's i-th note; the writer processes build the same (see WRITER)."""
    return f"ldw{writer}n{i}z batch{writer}k{i // BATCH}z load note {i} from writer {writer}"


def run_load(daemon: Daemon, notes: int, editor_lines: int) -> Load:
    """WRITERS processes of `notes` notes each, an editor, and a recall and an inject client, all at once."""
    work = daemon.base / "load"
    work.mkdir()
    stop = work / "stop"
    readers = [
        (spawn(READER, [str(daemon.socket), kind, str(stop)], work / kind), work / kind)
        for kind in ("recall", "inject")
    ]
    writers = [
        (spawn(WRITER, [str(daemon.socket), str(w), str(notes), str(BATCH)], work / f"w{w}"), work / f"w{w}")
        for w in range(WRITERS)
    ]
    note_bytes = sum(len(f"[00:00] {note_text(w, i)}\n") for w in range(WRITERS) for i in range(notes))
    with Editor(daemon.root / "diary" / f"{today()}.md", editor_lines, note_bytes) as editor:
        rows = [row for proc, out in writers for row in finished(proc, out, 3600)]
    stop.touch()
    seen = [row for proc, out in readers for row in finished(proc, out, 300)]
    acked = [row["text"] for row in rows if row.get("fp")]
    refused = [row for row in rows if not row.get("fp")]
    return Load(acked, refused, editor.written, seen)


def diary_lines(daemon: Daemon) -> list[str]:
    """Every line of every diary file of the user root (a run may cross midnight)."""
    return [line for path in sorted((daemon.root / "diary").glob("*.md")) for line in path.read_text().split("\n")]


ENTRY = re.compile(r"\[\d\d:\d\d\] (?P<text>.+)")


def check_the_diary(daemon: Daemon, load: Load) -> None:
    """0 lost, 0 interleaved: every line is one whole note or editor line, each exactly once."""
    lines = diary_lines(daemon)
    assert lines[-1] == "", "the diary does not end with a whole line"
    texts = [m["text"] if (m := ENTRY.fullmatch(line)) else f"<torn: {line!r}>" for line in lines[:-1]]
    counts = Counter(texts)
    expected = set(load.acked) | set(load.editor)
    lost = expected - set(counts)
    interleaved = [t for t in counts if t not in expected]
    doubled = [t for t, n in counts.items() if n > 1]
    assert not lost and not interleaved and not doubled, (
        f"{len(lost)} lost, e.g. {sorted(lost)[:3]}; {len(interleaved)} interleaved or torn, e.g. {interleaved[:3]}; "
        f"{len(doubled)} doubled, e.g. {doubled[:3]}"
    )


def check_recall(daemon: Daemon, notes: int, load: Load) -> None:
    """Every note is recallable: each batch token brings back exactly its batch, editor lines included."""
    last = load.editor[-1]
    daemon.wait_recall(last.split()[0], last)  # editor lines land after the watcher's debounce
    for writer in range(WRITERS):
        for batch in range(-(-notes // BATCH)):
            want = {t for t in load.acked if f" batch{writer}k{batch}z " in t}
            assert set(daemon.recall(f"batch{writer}k{batch}z", limit=500)) == want, (writer, batch)
    for batch in range(-(-len(load.editor) // BATCH)):
        want = {t for t in load.editor if f" edbatch{batch}z " in t}
        assert set(daemon.recall(f"edbatch{batch}z", limit=500)) == want, ("editor", batch)


def check_readers(load: Load) -> None:
    """Recall and inject kept answering throughout: some answers each, no refusals."""
    by_kind = {row["kind"]: row for row in load.readers}
    assert set(by_kind) == {"recall", "inject"}
    for kind, row in by_kind.items():
        assert row["ok"] > 0 and not row["errors"], f"{kind} under load: {row}"


def report(load: Load, notes: int) -> None:
    """The figures of a run, printed for the benchmark record (shown with pytest -s)."""
    print(
        f"\nE13/E14: {WRITERS} writers x {notes} notes + editor {len(load.editor)} lines: "
        f"{len(load.acked)} acknowledged, {len(load.refused)} refused, 0 lost, 0 interleaved; "
        + "; ".join(f"{r['kind']}: {r['ok']} answers, p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms" for r in load.readers)
    )


def load_test(daemon: Daemon, notes: int) -> None:
    """The whole of E13 and E14 at one size."""
    load = run_load(daemon, notes, editor_lines=notes)
    assert not load.refused, load.refused[:5]
    assert sorted(load.acked) == sorted(note_text(w, i) for w in range(WRITERS) for i in range(notes))
    check_the_diary(daemon, load)
    check_recall(daemon, notes, load)
    check_readers(load)
    report(load, notes)
    assert_index_matches_files(daemon)


DEFAULT_NOTES = 100
"""Per writer in the default run. Each note re-reads and re-parses its whole day file, so a day of n
notes costs O(n^2): measured on 2 cores, 8 x 100 notes take ~15 s and 8 x 250 ~95 s, which puts the
full 8 x 1,000 near half an hour; it runs on demand with `-m soak`."""


def test_eight_writers_and_an_editor_lose_nothing_while_readers_keep_answering(
    make_daemon: Callable[..., Daemon],
) -> None:
    load_test(make_daemon(), DEFAULT_NOTES)


@pytest.mark.soak
def test_eight_writers_times_a_thousand_notes_and_an_editor_lose_nothing(make_daemon: Callable[..., Daemon]) -> None:
    load_test(make_daemon(), 1000)


# -- E15: fuzzing the parsers and the request decoder ----------------------------------------------

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""About correctness, not speed: no deadline, no timing assertions."""

DIARY_BITS = [
    "[",
    "]",
    " ",
    "  ",
    "\t",
    "\r",
    "\n",
    "\r\n",
    "\x00",
    "\x1b",
    "\x7f",
    "\x85",
    "\u2028",
    "\ufeff",
    "\ud800",
    "[09:15] ",
    "[23:59]",
    "[24:00] ",
    "[9:15] ",
    "[fact",
    "[decision ",
    "key=",
    "key=k ",
    "file:",
    "tool:x ",
    "err:E1 ",
    "note",
    "workflow",
    "]",
    "#",
    "# ",
    "## ",
    "乌龙茶",
    "é",
    "e\u0301",
    "x",
    "text",
]
LAYERED_BITS = [
    *DIARY_BITS,
    "---\n",
    "...\n",
    "name: n\n",
    "type: user\n",
    "type: bogus\n",
    "description: d\n",
    "description:\n",
    "- a\n",
    "{a: [",
    "&a x\n",
    "*a\n",
    "!!python/object:os.system\n",
    "? \n",
    ": \n",
    "|\n  x\n",
    ">\n",
    "## [t] 2026-01-02 10:00\n",
    "## 2026-02-30 25:61\n",
    "## [t]\n",
    "## t 2026-01-02 10:00\n",
    "### sub\n",
    "\n\n",
    "'",
    '"',
    "%YAML 1.1\n",
    "--- !!map\n",
]
JSON_BITS = [
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    '"',
    "\\",
    "\\u",
    "d800",
    "\\ud800",
    "\\udc00",
    "\\ud83d\\ude00",
    '"jsonrpc"',
    '"2.0"',
    '"method"',
    '"id"',
    '"params"',
    '"result"',
    '"error"',
    '"code"',
    '"data"',
    '"reason"',
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "-",
    "0",
    "1" * 30,
    "1.5",
    "true",
    "false",
    "null",
    " ",
    "\n",
    "\t",
    "\x00",
    "é",
    "\U0001f600",
    "-32000",
    "-32700",
    '"status"',
    '"brain_note"',
    "[" * 70,
    "]" * 70,
]


def built(bits: list[str], size: int = 60) -> st.SearchStrategy[str]:
    """Text made of format fragments mixed with arbitrary characters, so the fuzzer reaches deep branches."""
    return st.lists(st.one_of(st.sampled_from(bits), st.text(max_size=4)), max_size=size).map("".join)


TEXT = st.one_of(st.text(), built(DIARY_BITS))


@FUZZ
@given(TEXT)
def test_a_diary_line_parses_or_raises_only_a_grammar_error(raw: str) -> None:
    try:
        line = parse_line(raw)
    except GrammarError:
        return
    assert parse_line(render_line(line)) == line


@FUZZ
@given(
    st.text(max_size=8),
    TEXT,
    st.one_of(st.sampled_from(TYPES), st.text(max_size=6)),
    st.one_of(st.none(), st.text(max_size=8)),
    st.lists(
        st.one_of(st.sampled_from(["file:a.py", "tool:x", "err:E1", "url:x", "file:", "file:a b"]), st.text()),
        max_size=3,
    ),
)
def test_rendering_any_line_gives_back_the_same_line_or_a_grammar_error(
    time: str, text: str, kind: str, key: str | None, triggers: list[str]
) -> None:
    line = Line(time, text, Meta(kind, key, tuple(triggers)))
    try:
        rendered = render_line(line)
    except GrammarError:
        return
    assert "\n" not in rendered and parse_line(rendered) == line


@FUZZ
@given(st.one_of(st.text(), built(DIARY_BITS, 200)), st.integers(64, 200))
def test_a_diary_file_never_raises_and_accounts_for_every_line(text: str, max_line_bytes: int) -> None:
    good, skipped = parse_diary("/r/diary/2026-01-01.md", text, max_line_bytes)
    numbers = [n for n, _ in good] + [p.line for p in skipped if p.line is not None]
    assert len(numbers) == len(set(numbers)) and all(1 <= n <= text.count("\n") + 1 for n in numbers)
    assert all(p.reason for p in skipped)


@FUZZ
@given(st.one_of(st.text(), built(LAYERED_BITS, 120)), st.sampled_from(["memory", "logfile", "soul"]))
def test_a_layered_file_never_raises(text: str, kind: str) -> None:
    entries, problems = layered.load(kind, text, 256, "/r", "user", f"/r/{kind}")
    lines = text.count("\n") + 1
    assert all(1 <= e.line <= lines for e in entries)
    assert all(p.reason and (p.line is None or 1 <= p.line <= lines) for p in problems)


@FUZZ
@given(
    st.one_of(st.text(), built(LAYERED_BITS, 80)), st.one_of(st.text(max_size=10), st.sampled_from(["t", "a", "##"]))
)
def test_tool_edits_of_any_hand_written_file_raise_only_typed_errors(text: str, name: str) -> None:
    with contextlib.suppress(BraindError):
        parsed = layered.parse_memory(text, 256)
        unit = layered.find_section(parsed, names.section_name(name))
        layered.parse_memory(layered.replace_unit(parsed.lines, unit, ["new body"]), 256)
        layered.parse_memory(layered.delete_unit(parsed.lines, unit), 256)
    with contextlib.suppress(BraindError):
        layered.parse_memory(layered.append_section(text, names.section_name(name), ["more"])[0], 256)
    with contextlib.suppress(BraindError):
        parsed = layered.parse_logfile(text, 256)
        layered.find_entry(parsed, names.section_name(name, "title"), None, "fuzz")


@FUZZ
@given(st.one_of(st.text(), st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2), built(DIARY_BITS, 12)))
def test_names_notes_and_content_raise_only_typed_errors(value: Any) -> None:
    for check in (names.logfile_name, names.section_name, layered.check_at, layered.is_empty):
        with contextlib.suppress(BraindError):
            check(value)
    for limited in (clean_note, layered.check_content):
        with contextlib.suppress(BraindError):
            limited(value, 8192)


REQUEST_BYTES = st.one_of(
    st.binary(max_size=300),
    built(JSON_BITS, 80).map(lambda text: text.encode("utf-8", "surrogatepass")),
)


@FUZZ
@given(REQUEST_BYTES)
def test_the_request_decoder_raises_only_typed_errors(data: bytes) -> None:
    try:
        decoded = decode(data)
    except BraindError:
        return
    for request in decoded if isinstance(decoded, list) else [decoded]:
        assert isinstance(request, Request) and (request.error is None or request.error.reason)
        assert request.error is not None or isinstance(request.params, dict)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(FUZZ, max_examples=200)
@given(st.one_of(JSON_VALUES, st.dictionaries(st.sampled_from(["code", "message", "data", "reason"]), JSON_VALUES)))
def test_reply_decoding_and_error_encoding_never_fail(value: Any) -> None:
    with contextlib.suppress(BraindError):
        decode_response(json.dumps({"jsonrpc": "2.0", "id": 1, "error": value}, allow_nan=True).encode())
    with contextlib.suppress(BraindError):
        err = error_from_wire(value)
        assert decode_response(encode_error(1, err)).error is not None
    with contextlib.suppress(TypeError, ValueError):
        assert len(encode_result(1, value)) > 0


# -- E15: fuzzing every method's params through the real daemon ------------------------------------

STRINGS = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        [
            "",
            " ",
            ".",
            "..",
            "../x",
            "/",
            "a/b",
            "x.md",
            ".md",
            "#",
            "## x",
            "# x",
            "a\nb",
            "a\r\nb",
            "\t",
            "\u2028",
            "\u0085",
            "\ufeff",
            "e\u0301",
            "2026-01-02 10:00",
            "2026-02-30 25:61",
            "2026-01-02",
            "root",
            "home",
            "project",
            "note",
            "fact",
            "decision",
            "error",
            "workflow",
            "user",
            "reference",
            "file:x",
            "tool:y",
            "err:E1",
            "x" * 70,
            "中文",
            "---",
            "[09:00] x",
            "[fact key=k] t",
            "<memory>",
            "</memory>",
            "{cwd}",
            "00000000",
            "fuzz",
        ]
    ),
)
SIGNALS = st.dictionaries(
    st.sampled_from(["cwd", "tools", "bogus"]),
    st.one_of(
        STRINGS,
        st.lists(
            st.dictionaries(
                st.sampled_from(["tool", "files", "error", "bogus"]), st.one_of(STRINGS, st.lists(STRINGS, max_size=3))
            ),
            max_size=14,
        ),
    ),
    max_size=3,
)
ANY_VALUE = st.one_of(
    STRINGS, st.integers(-3, 600), st.integers(), st.booleans(), st.none(), st.lists(STRINGS, max_size=4), SIGNALS
)
_STRING, _BOOLEAN = {"type": "string"}, {"type": "boolean"}
_TURN = {"type": "integer", "minimum": 0, "maximum": 1 << 40}
_KIND = {"enum": list(TYPES)}
NOT_TOOLS: dict[str, dict[str, Any]] = {
    "inject": {"session": _STRING, "turn": _TURN, "project": _STRING, "signals": {"type": "object"}},
    "status": {},
    "tools": {},
    "memory.list": {"type": _KIND, "project": _STRING},
    "memory.dump": {"type": _KIND, "project": _STRING},
    "memory.query": {"term": _STRING, "project": _STRING},
    "memory.entries": {"term": _STRING, "project": _STRING},
    "memory.edit": {"fp": _STRING, "text": _STRING},
    "memory.remove": {"fp": _STRING},
    "memory.undo": {"fp": _STRING},
    "memory.pin": {"fp": _STRING},
    "memory.unpin": {"fp": _STRING},
    "memory.compact": {"dry_run": _BOOLEAN},
}
"""Methods of docs/protocol.md that the tool listing leaves out, with their params; `reindex` is left out for speed."""
REQUIRED = {"inject": ["session"], "memory.query": ["term"], "memory.edit": ["fp", "text"]} | {
    f"memory.{name}": ["fp"] for name in ("remove", "undo", "pin", "unpin")
}


@dataclass(frozen=True)
class Target:
    """What the fuzzer aims at: each method's params and required params, a project, real fingerprints."""

    methods: dict[str, tuple[dict[str, Any], list[str]]]
    project: str
    fps: list[str]


def method_params(daemon: Daemon) -> dict[str, tuple[dict[str, Any], list[str]]]:
    """Every method with its params' schemas and required params: the tool listing, plus what it leaves out."""
    found = {name: (props, REQUIRED.get(name, [])) for name, props in NOT_TOOLS.items()}
    for tool in daemon.call("tools"):
        found[tool["name"]] = (tool["inputSchema"]["properties"], tool["inputSchema"].get("required", []))
    return found


def valid_value(name: str, spec: dict[str, Any], target: Target) -> st.SearchStrategy[Any]:
    """Values of the declared shape (choices, range, type), hostile inside that shape."""
    if "enum" in spec:
        return st.sampled_from(spec["enum"])
    kind = spec.get("type", "string")
    if kind == "integer":
        return st.integers(spec.get("minimum", -3), spec.get("maximum", 1 << 40))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(st.one_of(STRINGS, st.sampled_from(["file:app.py", "tool:pytest", "err:E1"])), max_size=4)
    if kind == "object":
        return SIGNALS
    if name == "fp":
        return st.one_of(st.sampled_from(target.fps), st.sampled_from([fp[:4] for fp in target.fps]), STRINGS)
    if name == "project":  # never another real directory ("/" is one): writes would land outside the test
        return st.one_of(STRINGS.filter(lambda text: not os.path.isdir(text)), st.just(target.project))
    return st.one_of(STRINGS, st.just(target.project), st.just("fuzz"))


@st.composite
def calls(draw: st.DrawFn, target: Target) -> tuple[str, dict[str, Any]]:
    """A method and params for it: required ones and some optional ones of the declared shapes, a few bent."""
    method = draw(st.sampled_from(sorted(target.methods)))
    props, required = target.methods[method]
    optional = sorted(set(props) - set(required))
    keys = [*required, *draw(st.lists(st.sampled_from(optional), unique=True))] if optional else list(required)
    params = {key: draw(valid_value(key, props[key], target)) for key in keys}
    if draw(st.sampled_from([False] * 9 + [True])):
        params[draw(st.sampled_from([*props, "bogus"]))] = draw(ANY_VALUE)
    return method, params


@pytest.fixture
def fuzzed(make_daemon: Callable[..., Daemon]) -> Iterator[tuple[Daemon, Path, list[str]]]:
    """A daemon with approval open (so writes reach the code behind it), a project, a logfile and some notes."""
    daemon = make_daemon({"approval": {"mode": "open"}})
    project = daemon.base / "proj"
    project.mkdir()
    daemon.call("memory_creator", scope="home", name="fuzz", type="project", description="d", heading="h")
    daemon.call("memory_write_logfile", scope="home", name="fuzz", content="body", title="t")
    fps = [daemon.call("brain_note", text=f"fuzz target {n}", type=kind)["fp"] for n, kind in enumerate(TYPES)]
    yield daemon, project, fps


def test_every_method_with_fuzzed_params_answers_a_result_or_a_typed_error(
    fuzzed: tuple[Daemon, Path, list[str]],
) -> None:
    daemon, project, fps = fuzzed
    target = Target(method_params(daemon), str(project), fps)
    outcomes: Counter[str] = Counter()
    answered: set[str] = set()
    with Client(daemon.socket, timeout=60) as client:

        @settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(calls(target))
        def one_call(call: tuple[str, dict[str, Any]]) -> None:
            method, params = call
            if len(json.dumps(params)) > MAX_LINE // 2:
                return
            try:
                client.call(method, **params)
                outcomes["ok"] += 1
                answered.add(method)
            except BraindError as err:
                assert err.reason != "internal", f"{method} {params!r} failed inside the daemon"
                outcomes[err.reason] += 1

        one_call()
    assert len(answered) >= len(target.methods) // 2, f"too few methods got past validation: {answered}; {outcomes}"
    assert "Traceback" not in daemon.log_text(), daemon.log_text()[-3000:]
    assert daemon.call("status")["state"] == "ready"
    assert_index_matches_files(daemon, projects=[project])
