"""`braind hook claude-code` fed the hook JSON Claude Code documents, checked as Claude Code reads it."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_server import sock_dir  # noqa: F401 (fixture)

from braind.errors import InvalidParams
from braind.hook import MAX_CHARS, fit, width
from braind.server import SocketServer
from tests.conftest import Daemon
from tests.test_mcp import readme_blocks

FENCE_OPEN = '<memory source="braind" trust="untrusted-reference-data">'


def hook(config: Path, stdin: bytes | str, agent: str = "claude-code") -> subprocess.CompletedProcess[bytes]:
    """Run the hook command as Claude Code does: event JSON on stdin, the context read from stdout."""
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    cmd = [sys.executable, "-m", "braind", "hook", agent, "--config", str(config)]
    return subprocess.run(cmd, input=data, capture_output=True, timeout=60, check=False)


def prompt_event(session: str = "sess-1", **fields: Any) -> str:
    """A UserPromptSubmit input as the hooks reference shows it."""
    event = {
        "session_id": session,
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": "/",
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "Which port does the staging database use?",
        **fields,
    }
    return json.dumps(event)


def start_event(session: str = "sess-1", **fields: Any) -> str:
    """A SessionStart input as the hooks reference shows it."""
    event = {
        "session_id": session,
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": "/",
        "hook_event_name": "SessionStart",
        "source": "startup",
        "model": "claude-sonnet-4-5-20250929",
        **fields,
    }
    return json.dumps(event)


def context_of(done: subprocess.CompletedProcess[bytes], event: str) -> str:
    """The additionalContext of a hook that must have answered, after checking the exact output shape."""
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    out = done.stdout.decode("utf-8")
    assert out.endswith("\n") and out.count("\n") == 1
    assert width(out) <= MAX_CHARS
    parsed = json.loads(out)
    assert list(parsed) == ["hookSpecificOutput"]
    assert list(parsed["hookSpecificOutput"]) == ["hookEventName", "additionalContext"]
    assert parsed["hookSpecificOutput"]["hookEventName"] == event
    context = parsed["hookSpecificOutput"]["additionalContext"]
    assert context.startswith(FENCE_OPEN + "\n") and context.endswith("</memory>\n")
    return str(context)


def silent(done: subprocess.CompletedProcess[bytes]) -> str:
    """Check the hook printed nothing and exited 0; return its one stderr line (or "")."""
    assert done.returncode == 0
    assert done.stdout == b""
    err = done.stderr.decode("utf-8")
    assert err == "" or (err.count("\n") == 1 and err.startswith("braind hook: nothing injected: ")), err
    return err


def test_user_prompt_submit_gets_the_memory_block(daemon: Daemon) -> None:
    daemon.call("brain_note", text="The staging database is on port 5433")
    context = context_of(hook(daemon.config_path, prompt_event()), "UserPromptSubmit")
    assert "The staging database is on port 5433" in context


def test_session_start_gets_the_block_every_time(daemon: Daemon) -> None:
    daemon.call("brain_note", text="my favourite drink is oolong tea")
    for source in ("startup", "resume", "compact", "compact"):
        context = context_of(hook(daemon.config_path, start_event(source=source)), "SessionStart")
        assert "my favourite drink is oolong tea" in context


def test_each_new_prompt_gets_the_block_and_a_repeated_delivery_does_not(daemon: Daemon, tmp_path: Path) -> None:
    daemon.call("brain_note", text="remember the kumquats")
    transcript = tmp_path / "transcript.jsonl"
    event = prompt_event(transcript_path=str(transcript))
    assert "kumquats" in context_of(hook(daemon.config_path, event), "UserPromptSubmit")
    assert silent(hook(daemon.config_path, event)) == ""
    transcript.write_text('{"type":"user"}\n{"type":"assistant"}\n', encoding="utf-8")
    assert "kumquats" in context_of(hook(daemon.config_path, event), "UserPromptSubmit")
    with transcript.open("a", encoding="utf-8") as grown:
        grown.write('{"type":"user"}\n')
    assert "kumquats" in context_of(hook(daemon.config_path, event), "UserPromptSubmit")
    other_session = prompt_event(session="sess-2", transcript_path=str(transcript))
    assert "kumquats" in context_of(hook(daemon.config_path, other_session), "UserPromptSubmit")


def test_a_prompt_id_makes_each_prompt_a_new_turn(daemon: Daemon, tmp_path: Path) -> None:
    daemon.call("brain_note", text="remember the rambutans")
    first = prompt_event(prompt_id="a09fc235-cb92-476e-8a57-c6e5b1fd5567")
    assert "rambutans" in context_of(hook(daemon.config_path, first), "UserPromptSubmit")
    assert silent(hook(daemon.config_path, first)) == ""
    second = prompt_event(prompt_id="5d1b3c52-0e0b-4f7e-9a51-3f4e9a0c2b17")
    assert "rambutans" in context_of(hook(daemon.config_path, second), "UserPromptSubmit")


def test_the_events_claude_code_sends(daemon: Daemon, tmp_path: Path) -> None:
    """Inputs as Claude Code 2.1.332 sent them to this hook (recorded), with this machine's paths."""
    daemon.call("brain_note", text="favourite tea is oolong")
    transcript = tmp_path / "d8a43f07-7943-45a5-8ca2-97f2f60913ec.jsonl"
    recorded = {
        "session_id": "d8a43f07-7943-45a5-8ca2-97f2f60913ec",
        "transcript_path": str(transcript),
        "cwd": str(tmp_path),
    }
    start = {**recorded, "hook_event_name": "SessionStart", "source": "startup"}
    prompt = {
        **recorded,
        "prompt_id": "a09fc235-cb92-476e-8a57-c6e5b1fd5567",
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "what tea do I like",
    }
    assert "favourite tea is oolong" in context_of(hook(daemon.config_path, json.dumps(start)), "SessionStart")
    assert "favourite tea is oolong" in context_of(hook(daemon.config_path, json.dumps(prompt)), "UserPromptSubmit")


def test_a_project_cwd_brings_its_memory(daemon: Daemon, tmp_path: Path) -> None:
    project = tmp_path / "app"
    (project / ".agents" / ".memory").mkdir(parents=True)
    (project / "src").mkdir()
    daemon.call("brain_note", text="the app deploys with fly", project=str(project))
    daemon.call("brain_note", text="user prefers short answers")
    inside = context_of(hook(daemon.config_path, prompt_event(cwd=str(project / "src"))), "UserPromptSubmit")
    assert "the app deploys with fly" in inside and "user prefers short answers" in inside
    outside = context_of(hook(daemon.config_path, prompt_event(session="s2", cwd=str(tmp_path))), "UserPromptSubmit")
    assert "the app deploys with fly" not in outside and "user prefers short answers" in outside


def test_missing_optional_fields_still_inject(daemon: Daemon) -> None:
    daemon.call("brain_note", text="bare events work too")
    for name in ("UserPromptSubmit", "SessionStart"):
        event = json.dumps({"session_id": "s", "hook_event_name": name})
        assert "bare events work too" in context_of(hook(daemon.config_path, event), name)


def test_no_memory_prints_nothing(daemon: Daemon) -> None:
    assert silent(hook(daemon.config_path, prompt_event())) == ""


def test_a_large_memory_is_cut_to_claude_codes_limit_on_character_boundaries(
    make_daemon: Callable[..., Daemon],
) -> None:
    daemon = make_daemon({"inject": {"max_bytes": 1 << 20, "max_chars": 1 << 20, "max_lines": 100000}})
    for n in range(100):
        daemon.call("brain_note", text=f'note {n:02d} 我最喜欢的饮料是乌龙茶 🍵 "quoted" ' + "茶" * 120)
    done = hook(daemon.config_path, prompt_event())
    context = context_of(done, "UserPromptSubmit")
    assert MAX_CHARS - 200 < width(done.stdout.decode("utf-8", errors="strict")) <= MAX_CHARS
    assert "note 00 " in context and "note 99 " not in context
    assert "more lines left out to stay within Claude Code's 10,000-character hook limit" in context


@pytest.mark.parametrize(
    "stdin",
    [
        b"",
        b"not json",
        b"[]",
        b"{}",
        b"\xff\xfe{}",
        json.dumps({"hook_event_name": "UserPromptSubmit"}).encode(),
        json.dumps({"session_id": "", "hook_event_name": "UserPromptSubmit"}).encode(),
        json.dumps({"session_id": "s", "hook_event_name": "Stop"}).encode(),
        json.dumps({"session_id": 7, "hook_event_name": "SessionStart"}).encode(),
    ],
    ids=["empty", "garbage", "array", "no-fields", "bad-utf8", "no-session", "blank-session", "other-event", "int-id"],
)
def test_bad_input_prints_nothing_and_exits_0(daemon: Daemon, stdin: bytes) -> None:
    daemon.call("brain_note", text="never shown for bad input")
    assert silent(hook(daemon.config_path, stdin)) != ""


def test_daemon_down_prints_nothing_and_exits_0(make_daemon: Callable[..., Daemon]) -> None:
    daemon = make_daemon(start=False)
    daemon.write_config()
    assert "daemon_unavailable" in silent(hook(daemon.config_path, prompt_event()))


def test_a_broken_config_or_unknown_agent_never_blocks_the_prompt(daemon: Daemon, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("recall: {max_results: 0}\n", encoding="utf-8")
    assert "invalid_config" in silent(hook(broken, prompt_event()))
    assert "unknown_agent" in silent(hook(daemon.config_path, prompt_event(), agent="codex"))


def test_a_daemon_without_prompt_signals_is_asked_again_without_it(sock_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    """A real socket server stands in for a daemon whose `signals` schema has no `prompt`: this one accepts it."""
    calls: list[dict[str, Any]] = []

    def strict_inject(method: str, params: dict[str, Any]) -> Any:
        calls.append(params)
        if "prompt" in params.get("signals", {}):
            raise InvalidParams("invalid_params", "unknown signal 'prompt'")
        return {"text": f"{FENCE_OPEN}\nserved\n</memory>\n", "bytes": 0, "parts": [], "skipped": None}

    config = tmp_path / "braind.yaml"
    config.write_text(f"socket: {sock_dir / 'braind.sock'}\n", encoding="utf-8")
    with SocketServer(sock_dir / "braind.sock", strict_inject):
        context = context_of(hook(config, prompt_event(cwd=str(tmp_path))), "UserPromptSubmit")
    assert "served" in context
    assert [c["signals"] for c in calls] == [
        {"cwd": str(tmp_path), "prompt": "Which port does the staging database use?"},
        {"cwd": str(tmp_path)},
    ]


def test_fit_keeps_whole_lines_then_part_of_one_and_closes_the_fence() -> None:
    lines = [f"line {n} " + "乌龙" * 50 for n in range(200)]
    block = FENCE_OPEN + "\n" + "\n".join(lines) + "\n</memory>\n"
    out = fit("UserPromptSubmit", block, limit=3000)
    assert width(out) <= 3000
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert context.startswith(FENCE_OPEN + "\nline 0 ") and context.endswith("</memory>\n")
    assert "…\n[braind: " in context
    one_long_line = FENCE_OPEN + "\n" + "🍵" * 5000 + "\n</memory>\n"
    out = fit("SessionStart", one_long_line, limit=1000)
    assert 990 <= width(out) <= 1000
    assert "🍵…\n[braind: 1 more line left out" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert fit("SessionStart", "") == "" and fit("SessionStart", block, limit=10) == ""


def test_the_readme_hook_settings_run(daemon: Daemon) -> None:
    (settings,) = [json.loads(b) for b in readme_blocks("json") if '"hooks"' in b]
    (example,) = [json.loads(b) for b in readme_blocks("json") if "hookSpecificOutput" in b]
    daemon.call("brain_note", text="set up from the README for the hook")
    for name, event in (("SessionStart", start_event()), ("UserPromptSubmit", prompt_event())):
        (matcher,) = settings["hooks"][name]
        (handler,) = matcher["hooks"]
        assert handler["type"] == "command" and shlex.split(handler["command"]) == ["braind", "hook", "claude-code"]
        done = hook(daemon.config_path, event)
        assert "set up from the README for the hook" in context_of(done, name)
        printed = json.loads(done.stdout)
        assert list(printed) == list(example) and list(printed["hookSpecificOutput"]) == list(
            example["hookSpecificOutput"]
        )
