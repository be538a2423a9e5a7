"""`braind hook claude-code`: the memory block for Claude Code's prompt hooks, never failing the prompt.

Claude Code runs command hooks with the event as JSON on stdin. On
`SessionStart` and `UserPromptSubmit`, a hook that exits 0 and prints
`{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}` has
that context added for the model; context of up to 10,000 characters is passed
whole, so the output is kept within that. Any failure prints nothing, logs one
line to stderr and exits 0: memory trouble must never block a prompt.

The signals sent with `inject` are the event's `cwd`, its `prompt` and, for
trigger recall, `tools`: the last 12 tool calls in the transcript at
`transcript_path`, oldest first, read from the transcript's last 256 KiB only
(lines that are not JSON, such as one still being written, are skipped). A
call is an assistant message's `tool_use` block, `{"id", "name", "input"}`
(one logged twice with the same id counts once), and becomes `{"tool",
"files", "error"}`:

- tool: for `Bash`, the program the command runs (the basename of its first
  word after any `NAME=value` assignments: `pytest -q` gives `pytest`,
  `FOO=1 ./run.sh` gives `run.sh`); for every other tool, its name (`Edit`).
- files: the string values of the input's `file_path`, `notebook_path` and
  `path`, as given (the daemon makes them relative to cwd).
- error: only when the matching `tool_result` (by `tool_use_id`) has
  `is_error: true`: `exit<N>` when a line of its text starts with
  `Exit code N`, else `failed`.

A transcript that is missing or unreadable sends no `tools`; a daemon that
refuses signals other than `cwd` is asked again with `cwd` alone.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from braind.config import Config, load_config
from braind.errors import BraindError, InvalidParams
from braind.rpc.client import Client

AGENTS = ("claude-code",)
EVENTS = ("SessionStart", "UserPromptSubmit")
MAX_CHARS = 10_000
MAX_PROMPT_CHARS = 4_000
MAX_TOOL_CALLS = 12
PATH_INPUTS = ("file_path", "notebook_path", "path")
TAIL_BYTES = 256 * 1024
TIMEOUT = 5.0
TURN_RANGE = 1 << 40
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_EXIT_CODE = re.compile(r"^Exit code (\d+)\b", re.MULTILINE)


@dataclass(frozen=True)
class Event:
    """The parts of one hook event that choose the block."""

    name: str
    session: str
    cwd: Path | None = None
    prompt: str | None = None
    transcript: Path | None = None
    prompt_id: str | None = None


def run(agent: str, config_path: str | None, socket: str | None, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Answer one hook event; whatever goes wrong, print nothing, log one line and exit 0."""
    try:
        output = hook_output(agent, stdin.read(), _config(config_path, socket))
        stdout.write(output.encode("utf-8"))
        stdout.flush()
    except Exception as exc:
        _log(sys.stderr, exc)
    return 0


def _config(path: str | None, socket: str | None) -> Config:
    """The configuration the CLI would use, with --socket applied."""
    config = load_config(path)
    return config.with_socket(socket) if socket else config


def _log(stream: TextIO, exc: Exception) -> None:
    """One line on stderr saying why nothing was injected."""
    what = f"{exc.reason}: {exc.message}" if isinstance(exc, BraindError) else f"{type(exc).__name__}: {exc}"
    stream.write("braind hook: nothing injected: " + " ".join(what.split()) + "\n")


def hook_output(agent: str, raw: bytes, config: Config) -> str:
    """What the hook prints for one event: the JSON line, or "" when there is nothing to add."""
    if agent not in AGENTS:
        raise BraindError("unknown_agent", f"no hook for {agent!r}; known: {', '.join(AGENTS)}")
    event = parse_event(raw)
    result = inject(config.client_sockets(), inject_params(event, config))
    return fit(event.name, result.get("text") or "")


def parse_event(raw: bytes) -> Event:
    """The hook input Claude Code sends: session_id, hook_event_name, cwd, transcript_path, prompt, prompt_id."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        raise BraindError("invalid_hook_input", f"stdin is not a JSON hook event: {exc}") from None
    if not isinstance(data, dict):
        raise BraindError("invalid_hook_input", "the hook event is not a JSON object")
    name, session = data.get("hook_event_name"), data.get("session_id")
    if name not in EVENTS:
        raise BraindError("unsupported_event", f"hook_event_name {name!r} is not one of {', '.join(EVENTS)}")
    if not isinstance(session, str) or not session:
        raise BraindError("invalid_hook_input", "the hook event has no session_id")
    return Event(
        name,
        session,
        _absolute(data.get("cwd")),
        _text(data.get("prompt")),
        _absolute(data.get("transcript_path")),
        _text(data.get("prompt_id")),
    )


def _text(value: Any) -> str | None:
    """A non-empty string from the event, or None for anything else."""
    return value if isinstance(value, str) and value else None


def _absolute(value: Any) -> Path | None:
    """An absolute path from the event, or None for anything else."""
    return Path(value) if isinstance(value, str) and value.startswith("/") else None


def inject_params(event: Event, config: Config) -> dict[str, Any]:
    """The `inject` params for an event: session, turn, project and signals."""
    params: dict[str, Any] = {"session": event.session}
    turn = turn_of(event)
    if turn is not None:
        params["turn"] = turn
    project = project_of(event.cwd, config)
    if project is not None:
        params["project"] = str(project)
    signals: dict[str, Any] = {"cwd": str(event.cwd)} if event.cwd else {}
    if event.prompt:
        signals["prompt"] = event.prompt[:MAX_PROMPT_CHARS]
    tools = transcript_tools(event.transcript) if event.transcript else []
    if tools:
        signals["tools"] = tools
    if signals:
        params["signals"] = signals
    return params


def turn_of(event: Event) -> str | int | None:
    """A turn that is new for every prompt and the same for a repeated delivery of one prompt.

    It is the prompt's own id when Claude Code sends one, otherwise the size of
    the transcript, which grows with every prompt and reply. So two
    prompts never share a turn, while one prompt delivered twice (the hook
    configured twice) is served once. SessionStart (startup, resume, clear,
    compact) rebuilds the context, so it always gets the block and sends no turn.
    """
    if event.name != "UserPromptSubmit":
        return None
    if event.prompt_id is not None:
        return event.prompt_id
    if event.transcript is None:
        return None
    try:
        return event.transcript.stat().st_size % TURN_RANGE
    except FileNotFoundError:
        return 0
    except OSError:
        return None


def project_of(cwd: Path | None, config: Config) -> Path | None:
    """The project cwd belongs to: a configured one containing it, else the nearest with .agents/.memory."""
    if cwd is None:
        return None
    for project in config.projects:
        if cwd == project or project in cwd.parents:
            return project
    for directory in (cwd, *cwd.parents):
        if (directory / ".agents" / ".memory").is_dir():
            return directory
    return None


def transcript_tools(path: Path) -> list[dict[str, Any]]:
    """The tools signal from a transcript; any trouble reading it gives none, since the block matters more."""
    try:
        return tool_calls(tail_lines(path))
    except Exception:
        return []


def tail_lines(path: Path, limit: int = TAIL_BYTES) -> list[str]:
    """The whole lines in the last `limit` bytes of a file: transcripts grow without bound."""
    with path.open("rb") as stream:
        size = stream.seek(0, 2)
        start = max(0, size - limit)
        stream.seek(start)
        data = stream.read(limit)
    if start > 0:
        data = data.partition(b"\n")[2]
    return data.decode("utf-8", errors="replace").splitlines()


def tool_calls(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The last 12 tool calls in transcript lines, oldest first, each as {tool, files, error}."""
    uses: dict[Any, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    for n, block in enumerate(_content_blocks(lines)):
        kind, use_id = block.get("type"), block.get("tool_use_id")
        if kind == "tool_use" and isinstance(block.get("name"), str) and block["name"]:
            uses.setdefault(_use_id(block) or n, block)
        elif kind == "tool_result" and block.get("is_error") is True and isinstance(use_id, str) and use_id:
            errors[use_id] = error_code(block.get("content"))
    return [_call(use, errors) for use in list(uses.values())[-MAX_TOOL_CALLS:]]


def _use_id(block: dict[str, Any]) -> str | None:
    """A tool_use block's id, which its result names and which a repeated line repeats."""
    value = block.get("id")
    return value if isinstance(value, str) and value else None


def _content_blocks(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The content blocks of every message in the lines, skipping lines that are not JSON messages."""
    for line in lines:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        message = record.get("message") if isinstance(record, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            yield from (block for block in content if isinstance(block, dict))


def _call(use: dict[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    """One tool call as the daemon's signals take it, with the error its result reported."""
    given = use.get("input")
    arguments = given if isinstance(given, dict) else {}
    call: dict[str, Any] = {"tool": tool_name(use["name"], arguments)}
    files = [arguments[key] for key in PATH_INPUTS if isinstance(arguments.get(key), str) and arguments[key]]
    if files:
        call["files"] = files
    use_id = _use_id(use)
    if use_id in errors:
        call["error"] = errors[use_id]
    return call


def tool_name(name: str, arguments: dict[str, Any]) -> str:
    """The tool a call counts as: Bash's program, so `pytest` and `git` are told apart; else the tool."""
    command = arguments.get("command")
    if name != "Bash" or not isinstance(command, str):
        return name
    return program(command) or name


def program(command: str) -> str | None:
    """The basename of a command's first word after any NAME=value assignments, or None."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for word in words:
        if not _ASSIGNMENT.match(word):
            return posixpath.basename(word.rstrip("/")) or None
    return None


def error_code(content: Any) -> str:
    """A failed result's code: exit<N> for a line starting `Exit code N`, else failed."""
    found = _EXIT_CODE.search(_result_text(content))
    return f"exit{found.group(1)}" if found else "failed"


def _result_text(content: Any) -> str:
    """A tool result's text: a string, or the text blocks of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def inject(socket: Sequence[Path], params: dict[str, Any]) -> dict[str, Any]:
    """Call `inject`; a daemon that refuses the signals is asked again with `cwd` alone, which every daemon takes."""
    with Client(socket, TIMEOUT) as client:
        try:
            return dict(client.call("inject", **params))
        except InvalidParams:
            signals = params.get("signals", {})
            if not signals.keys() - {"cwd"}:
                raise
            rest = {k: v for k, v in signals.items() if k == "cwd"}
            return dict(client.call("inject", **{**params, "signals": rest}))


def render(event: str, text: str) -> str:
    """The JSON line Claude Code reads: the text as additionalContext for the event."""
    output = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
    return json.dumps(output, ensure_ascii=False) + "\n"


def width(text: str) -> int:
    """Length as Claude Code (JavaScript) counts it: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def fit(event: str, text: str, limit: int = MAX_CHARS) -> str:
    """The output for text, within limit characters: whole lines kept, then part of the next, fence closed."""
    if not text:
        return ""
    whole = render(event, text)
    if width(whole) <= limit:
        return whole
    lines = text.rstrip("\n").split("\n")
    close = lines.pop() if lines and lines[-1].startswith("</memory") else None

    def output(kept: int, part: str = "") -> str:
        return render(event, _cut_block(lines, kept, part, close))

    kept = _largest(lambda n: width(output(n)) <= limit, len(lines))
    if kept < 0:
        return ""
    if kept < len(lines):
        line = lines[kept]
        chars = _largest(lambda n: width(output(kept, line[:n] + "…")) <= limit, len(line) - 1)
        if chars > 0:
            return output(kept, line[:chars] + "…")
    return output(kept)


def _cut_block(lines: list[str], kept: int, part: str, close: str | None) -> str:
    """The first `kept` lines, an optional partial line, a note on what was left out, and the fence's end."""
    left_out = len(lines) - kept
    note = (
        f"[braind: {left_out} more line{'s' if left_out != 1 else ''} left out to stay within "
        "Claude Code's 10,000-character hook limit; brain_recall finds them]"
    )
    shown = [*lines[:kept], *([part] if part else []), note, *([close] if close else [])]
    return "\n".join(shown) + "\n"


def _largest(fits: Callable[[int], bool], high: int) -> int:
    """The largest n in 0..high with fits(n), for a fits that only turns false as n grows; -1 if none."""
    low, best = 0, -1
    while low <= high:
        middle = (low + high) // 2
        if fits(middle):
            best, low = middle, middle + 1
        else:
            high = middle - 1
    return best
