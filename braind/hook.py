"""`braind hook claude-code`: the memory block for Claude Code's prompt hooks, never failing the prompt.

Claude Code runs command hooks with the event as JSON on stdin. On
`SessionStart` and `UserPromptSubmit`, a hook that exits 0 and prints
`{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}` has
that context added for the model; context of up to 10,000 characters is passed
whole, so the output is kept within that. Any failure prints nothing, logs one
line to stderr and exits 0: memory trouble must never block a prompt.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from braind.client import Client
from braind.config import Config, load_config
from braind.errors import BraindError, InvalidParams

AGENTS = ("claude-code",)
EVENTS = ("SessionStart", "UserPromptSubmit")
MAX_CHARS = 10_000
MAX_PROMPT_CHARS = 4_000
TIMEOUT = 5.0
TURN_RANGE = 1 << 40


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
    return replace(config, socket=Path(socket).absolute()) if socket else config


def _log(stream: TextIO, exc: Exception) -> None:
    """One line on stderr saying why nothing was injected."""
    what = f"{exc.reason}: {exc.message}" if isinstance(exc, BraindError) else f"{type(exc).__name__}: {exc}"
    stream.write("braind hook: nothing injected: " + " ".join(what.split()) + "\n")


def hook_output(agent: str, raw: bytes, config: Config) -> str:
    """What the hook prints for one event: the JSON line, or "" when there is nothing to add."""
    if agent not in AGENTS:
        raise BraindError("unknown_agent", f"no hook for {agent!r}; known: {', '.join(AGENTS)}")
    event = parse_event(raw)
    result = inject(config.socket, inject_params(event, config))
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
    signals = {"cwd": str(event.cwd)} if event.cwd else {}
    if event.prompt:
        signals["prompt"] = event.prompt[:MAX_PROMPT_CHARS]
    if signals:
        params["signals"] = signals
    return params


def turn_of(event: Event) -> int | None:
    """A turn that is new for every prompt and the same for a repeated delivery of one prompt.

    It is derived from the prompt's id when Claude Code sends one, otherwise from
    the size of the transcript, which grows with every prompt and reply. So two
    prompts never share a turn, while one prompt delivered twice (the hook
    configured twice) is served once. SessionStart (startup, resume, clear,
    compact) rebuilds the context, so it always gets the block and sends no turn.
    """
    if event.name != "UserPromptSubmit":
        return None
    if event.prompt_id is not None:
        return int.from_bytes(hashlib.sha256(event.prompt_id.encode("utf-8")).digest()[:5], "big")
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


def inject(socket: Path, params: dict[str, Any]) -> dict[str, Any]:
    """Call `inject`; a daemon whose signals take no prompt is asked again without it."""
    with Client(socket, TIMEOUT) as client:
        try:
            return dict(client.call("inject", **params))
        except InvalidParams:
            signals = params.get("signals", {})
            if "prompt" not in signals:
                raise
            rest = {k: v for k, v in signals.items() if k != "prompt"}
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
