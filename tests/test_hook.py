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
from braind.faces.hook import (
    MAX_CHARS,
    TAIL_BYTES,
    error_code,
    fit,
    program,
    tail_lines,
    tool_calls,
    transcript_tools,
    width,
)
from braind.rpc.server import SocketServer
from tests.conftest import Daemon
from tests.test_mcp import agent_doc_blocks

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
    # the hook sent the prompt's own id as the turn: the daemon has served exactly that one
    again = daemon.call("inject", session="sess-1", turn="5d1b3c52-0e0b-4f7e-9a51-3f4e9a0c2b17")
    assert again["skipped"] == "already_injected"


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


def test_the_documented_hook_settings_run(daemon: Daemon) -> None:
    (settings,) = [json.loads(b) for b in agent_doc_blocks("json") if '"hooks"' in b]
    (example,) = [json.loads(b) for b in agent_doc_blocks("json") if "hookSpecificOutput" in b]
    daemon.call("brain_note", text="set up from the agents page for the hook")
    for name, event in (("SessionStart", start_event()), ("UserPromptSubmit", prompt_event())):
        (matcher,) = settings["hooks"][name]
        (handler,) = matcher["hooks"]
        argv = shlex.split(handler["command"])
        assert handler["type"] == "command" and argv == ["/home/you/.local/bin/braind", "hook", "claude-code"]
        done = hook(daemon.config_path, event)
        assert "set up from the agents page for the hook" in context_of(done, name)
        printed = json.loads(done.stdout)
        assert list(printed) == list(example) and list(printed["hookSpecificOutput"]) == list(
            example["hookSpecificOutput"]
        )


# -- the tools signal, from the transcript -------------------------------------------------------------

SESSION = "d8a43f07-7943-45a5-8ca2-97f2f60913ec"


def record(kind: str, content: Any, n: int) -> dict[str, Any]:
    """One transcript line as Claude Code writes it: an envelope around a user or assistant message."""
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message = {"id": f"msg_{n:03d}", "type": "message", "model": "claude-sonnet-4-5-20250929", **message}
        message |= {"stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 120}}
    return {
        "parentUuid": f"uuid-{n - 1:03d}" if n else None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/me/shop",
        "sessionId": SESSION,
        "version": "2.1.332",
        "gitBranch": "main",
        "type": kind,
        "message": message,
        "uuid": f"uuid-{n:03d}",
        "timestamp": f"2026-05-01T10:{n // 60:02d}:{n % 60:02d}.000Z",
    }


def tool_use(use_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    """An assistant's tool_use block."""
    return {"type": "tool_use", "id": use_id, "name": name, "input": arguments}


def tool_result(use_id: str, content: Any = "ok", error: bool = False) -> dict[str, Any]:
    """A user message's tool_result block."""
    return {"tool_use_id": use_id, "type": "tool_result", "content": content, "is_error": error}


def transcript_lines(cwd: str) -> list[str]:
    """A transcript of 14 tool calls (two in parallel, one line logged twice) ending in a torn line."""
    turns: list[tuple[str, list[dict[str, Any]]]] = [
        ("user", [{"type": "text", "text": "the tests fail after the refactor, fix app.py"}]),
        ("assistant", [{"type": "thinking", "thinking": "look first", "signature": "sig"}]),
        ("assistant", [tool_use("toolu_01", "Read", file_path=f"{cwd}/old.py")]),
        ("user", [tool_result("toolu_01", [{"type": "text", "text": "     1\timport app"}])]),
        ("assistant", [tool_use("toolu_02", "Bash", command="ls -la", description="List files")]),
        ("user", [tool_result("toolu_02", "total 8\napp.py")]),
        (
            "assistant",
            [
                tool_use("toolu_03", "Glob", pattern="**/*.py", path=cwd),
                tool_use("toolu_04", "Grep", pattern="def main", path="src"),
            ],
        ),
        ("user", [tool_result("toolu_03", f"{cwd}/app.py"), tool_result("toolu_04", "src/main.py")]),
        (
            "assistant",
            [{"type": "text", "text": "Reading app.py."}, tool_use("toolu_05", "Read", file_path=f"{cwd}/app.py")],
        ),
        ("user", [tool_result("toolu_05", "     1\tdef main(): ...")]),
        ("assistant", [tool_use("toolu_06", "Edit", file_path=f"{cwd}/app.py", old_string="a", new_string="b")]),
        ("user", [tool_result("toolu_06", f"The file {cwd}/app.py has been updated.")]),
        ("assistant", [tool_use("toolu_07", "Bash", command="pytest -q tests/test_app.py", description="Run tests")]),
        (
            "user",
            [tool_result("toolu_07", "Exit code 1\nFAILED tests/test_app.py::test_main\n1 failed in 0.03s", True)],
        ),
        ("assistant", [tool_use("toolu_08", "Edit", file_path=f"{cwd}/app.py", old_string="zz", new_string="b")]),
        (
            "user",
            [tool_result("toolu_08", "<tool_use_error>String to replace not found in file.</tool_use_error>", True)],
        ),
        ("assistant", [tool_use("toolu_09", "Bash", command="FOO=1 PYTHONPATH=src ./scripts/check.sh --fast")]),
        ("user", [tool_result("toolu_09", "all good")]),
        ("assistant", [tool_use("toolu_10", "NotebookEdit", notebook_path=f"{cwd}/nb/report.ipynb", new_source="x")]),
        ("user", [tool_result("toolu_10", "Updated cell")]),
        ("assistant", [tool_use("toolu_11", "TodoWrite", todos=[{"content": "fix app.py", "status": "in_progress"}])]),
        ("user", [tool_result("toolu_11", "Todos have been modified successfully.")]),
        ("assistant", [tool_use("toolu_12", "Bash", command="git diff --stat")]),
        ("user", [tool_result("toolu_12", " app.py | 2 +-")]),
        ("assistant", [tool_use("toolu_13", "Write", file_path=f"{cwd}/tests/test_app.py", content="def test(): ...")]),
        ("user", [tool_result("toolu_13", "File created successfully")]),
        ("assistant", [tool_use("toolu_14", "Bash", command="pytest -q")]),
        ("user", [tool_result("toolu_14", [{"type": "text", "text": "Exit code 2\nERROR: usage"}], True)]),
    ]
    lines = [
        json.dumps({"type": "file-history-snapshot", "messageId": "m0", "snapshot": {}, "isSnapshotUpdate": False})
    ]
    lines += [json.dumps(record(kind, content, n)) for n, (kind, content) in enumerate(turns)]
    lines.insert(12, lines[11])  # toolu_06 logged twice
    torn = json.dumps(record("assistant", [tool_use("toolu_15", "Bash", command="rm -rf build")], 99))
    return [*lines, torn[: len(torn) // 2]]


def expected_calls(cwd: str) -> list[dict[str, Any]]:
    """The last 12 calls of transcript_lines(cwd), as the hook sends them."""
    return [
        {"tool": "Glob", "files": [cwd]},
        {"tool": "Grep", "files": ["src"]},
        {"tool": "Read", "files": [f"{cwd}/app.py"]},
        {"tool": "Edit", "files": [f"{cwd}/app.py"]},
        {"tool": "pytest", "error": "exit1"},
        {"tool": "Edit", "files": [f"{cwd}/app.py"], "error": "failed"},
        {"tool": "check.sh"},
        {"tool": "NotebookEdit", "files": [f"{cwd}/nb/report.ipynb"]},
        {"tool": "TodoWrite"},
        {"tool": "git"},
        {"tool": "Write", "files": [f"{cwd}/tests/test_app.py"]},
        {"tool": "pytest", "error": "exit2"},
    ]


def write_transcript(path: Path, lines: list[str]) -> Path:
    """Write transcript lines the way Claude Code appends them; the last may be torn (no newline)."""
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def test_the_last_12_tool_calls_of_a_transcript() -> None:
    assert tool_calls(transcript_lines("/home/me/shop")) == expected_calls("/home/me/shop")


def test_calls_without_a_result_or_an_id_and_lines_that_are_not_messages() -> None:
    lines = [
        "",
        "not json",
        "[1, 2]",
        '{"type": "user", "message": {"content": "just text"}}',
        '{"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "", "input": {}}]}}',
        '{"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Read", "input": {"path": 7}}]}}',
        '{"type": "user", "message": {"content": [{"type": "tool_result", "is_error": true, "content": "x"}]}}',
        '{"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "a", "name": "Bash", "input": []}]}}',
        '{"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "b", "name": "Bash"}]}}',
        '{"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "b", "is_error": "yes"}]}}',
        "[" * 100_000,
    ]
    assert tool_calls(lines) == [{"tool": "Read"}, {"tool": "Bash"}, {"tool": "Bash"}]


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("pytest -q", "pytest"),
        ("FOO=1 BAR='a b' ./scripts/check.sh --fast", "check.sh"),
        ("/usr/bin/git status", "git"),
        ("  python -m pytest", "python"),
        ("echo 'unbalanced", "echo"),
        ("cd src && make", "cd"),
        ("A=1", None),
        ("", None),
    ],
)
def test_a_bash_call_counts_as_its_program(command: str, name: str | None) -> None:
    assert program(command) == name


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("Exit code 1\nFAILED tests/test_app.py::test_main", "exit1"),
        ([{"type": "text", "text": "Exit code 137\n[Request interrupted by user for tool use]"}], "exit137"),
        ("Command timed out\nExit code 124", "exit124"),
        ("grep said: Exit code 5 somewhere", "failed"),
        ("<tool_use_error>File has not been read yet.</tool_use_error>", "failed"),
        (None, "failed"),
    ],
)
def test_a_failed_result_gives_an_error_code(content: Any, code: str) -> None:
    assert error_code(content) == code


def test_only_the_tail_of_a_huge_transcript_is_read(tmp_path: Path) -> None:
    """A 1 GiB transcript (sparse): a call at its head would count if the head were read; none does."""
    path = tmp_path / "huge.jsonl"
    head = json.dumps(record("assistant", [tool_use("toolu_00", "Edit", file_path="/w/head.py")], 0)) + "\n"
    padding = [{"type": "text", "text": "x" * TAIL_BYTES}, tool_use("toolu_cut", "Edit", file_path="/w/cut.py")]
    straddling = json.dumps(record("assistant", padding, 1)) + "\n"
    with path.open("wb") as out:
        out.write(head.encode("utf-8"))
        out.seek(1 << 30)
        out.write(straddling.encode("utf-8"))
        out.write("\n".join(transcript_lines("/w")[-9:]).encode("utf-8"))  # four calls and the torn line
    lines = tail_lines(path)
    assert sum(len(line) for line in lines) < TAIL_BYTES
    assert tool_calls(lines) == expected_calls("/w")[-4:]
    assert transcript_tools(path) == expected_calls("/w")[-4:]


def test_a_missing_or_unreadable_transcript_gives_no_tools(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"\xff\xfe\x00" * 1000 + b"\n{\n")
    for path in (tmp_path / "missing.jsonl", tmp_path, garbage):
        assert transcript_tools(path) == []


def recording_server(directory: Path, calls: list[dict[str, Any]], refuse: bool = False) -> SocketServer:
    """A socket server that records inject params; with refuse, it takes no signal but cwd."""

    def dispatch(method: str, params: dict[str, Any]) -> Any:
        calls.append(params)
        if refuse and params.get("signals", {}).keys() - {"cwd"}:
            raise InvalidParams("invalid_params", "unknown signals")
        return {"text": f"{FENCE_OPEN}\nserved\n</memory>\n", "bytes": 0, "parts": [], "skipped": None}

    return SocketServer(directory / "braind.sock", dispatch)


def test_the_hook_sends_the_transcripts_tool_calls_on_both_events(sock_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    cwd = str(tmp_path)
    transcript = write_transcript(tmp_path / f"{SESSION}.jsonl", transcript_lines(cwd))
    config = tmp_path / "braind.yaml"
    config.write_text(f"socket: {sock_dir / 'braind.sock'}\n", encoding="utf-8")
    calls: list[dict[str, Any]] = []
    with recording_server(sock_dir, calls):
        for name, event in (("UserPromptSubmit", prompt_event), ("SessionStart", start_event)):
            done = hook(config, event(cwd=cwd, transcript_path=str(transcript)))
            assert "served" in context_of(done, name)
    prompt_call, start_call = calls
    assert prompt_call["signals"] == {
        "cwd": cwd,
        "prompt": "Which port does the staging database use?",
        "tools": expected_calls(cwd),
    }
    assert start_call["signals"] == {"cwd": cwd, "tools": expected_calls(cwd)} and "turn" not in start_call


def test_a_daemon_refusing_the_tools_signal_is_asked_again_with_cwd_alone(sock_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    transcript = write_transcript(tmp_path / "t.jsonl", transcript_lines(str(tmp_path)))
    config = tmp_path / "braind.yaml"
    config.write_text(f"socket: {sock_dir / 'braind.sock'}\n", encoding="utf-8")
    calls: list[dict[str, Any]] = []
    with recording_server(sock_dir, calls, refuse=True):
        done = hook(config, start_event(cwd=str(tmp_path), transcript_path=str(transcript)))
        assert "served" in context_of(done, "SessionStart")
    assert [c["signals"] for c in calls] == [
        {"cwd": str(tmp_path), "tools": expected_calls(str(tmp_path))},
        {"cwd": str(tmp_path)},
    ]


def test_an_unreadable_transcript_still_gets_the_block_without_tools(sock_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    config = tmp_path / "braind.yaml"
    config.write_text(f"socket: {sock_dir / 'braind.sock'}\n", encoding="utf-8")
    calls: list[dict[str, Any]] = []
    with recording_server(sock_dir, calls):
        done = hook(config, start_event(cwd=str(tmp_path), transcript_path=str(tmp_path)))
        assert "served" in context_of(done, "SessionStart")
    assert [c["signals"] for c in calls] == [{"cwd": str(tmp_path)}]


def triggered_section(context: str) -> list[str]:
    """The lines of the block's section of typed memories picked by the turn's activity."""
    if "## Typed memories matched by this turn's activity\n" not in context:
        return []
    section = context.split("## Typed memories matched by this turn's activity\n", 1)[1]
    return section.split("\n\n", 1)[0].splitlines()


def test_an_edit_of_app_py_in_the_transcript_injects_its_typed_memory(
    make_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    """The real daemon: memories triggered by the transcript's calls are injected, one from a call cut off is not."""
    daemon = make_daemon({"approval": {"mode": "open"}})
    shop = tmp_path / "shop"
    shop.mkdir()
    for text, kind, trigger in (
        ("app.py is served by gunicorn, restart it after edits", "fact", "file:app.py"),
        ("pytest exit 1 here means the db fixture is missing", "error", "err:exit1"),
        ("old.py is dead code", "fact", "file:old.py"),
    ):
        daemon.call("memory.add", text=text, type=kind, triggers=[trigger])
    transcript = write_transcript(tmp_path / f"{SESSION}.jsonl", transcript_lines(str(shop)))
    event = prompt_event(cwd=str(shop), transcript_path=str(transcript))
    assert triggered_section(context_of(hook(daemon.config_path, event), "UserPromptSubmit")) == [
        "- [error] pytest exit 1 here means the db fixture is missing (matched err:exit1)",
        "- [fact] app.py is served by gunicorn, restart it after edits (matched file:app.py)",
    ]
    without = prompt_event(session="s2", cwd=str(shop), transcript_path=str(tmp_path / "none.jsonl"))
    assert triggered_section(context_of(hook(daemon.config_path, without), "UserPromptSubmit")) == []
