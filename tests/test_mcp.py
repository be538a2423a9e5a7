"""`braind mcp` driven by the MCP SDK's own clients over stdio, against a real daemon."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO, TypeVar

import anyio
import pytest
import yaml
from mcp import Client, ClientSession, StdioServerParameters, types
from mcp.client.session import ClientRequestContext, ElicitationFnT, IncomingMessage
from mcp.client.stdio import stdio_client

from braind.errors import BraindError
from braind.faces.mcp.memory import unframed
from braind.faces.mcp.server import DEFAULT_HINT, DEFAULT_TOOLS, HINTS, error_result
from tests.conftest import REPO, Daemon, run_cli
from tests.test_client import daemon_reasons

T = TypeVar("T")
SCENARIO_SECONDS = 90


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    """Run one async scenario to the end from a sync test, with an upper bound so a hang fails."""

    async def bounded() -> T:
        with anyio.fail_after(SCENARIO_SECONDS):
            return await scenario()

    return anyio.run(bounded)


def server(config: Path, *args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    """`python -m braind mcp` with the test daemon's config, as an MCP client would launch it."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "braind", "mcp", "--config", str(config), *args], env=env
    )


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    """Where the MCP server's stderr goes, to check it never crashed."""
    with open(tmp_path / "mcp-stderr.log", "w+", encoding="utf-8") as log:
        yield log


def stderr_of(log: TextIO) -> str:
    """Everything the server wrote to stderr so far."""
    log.flush()
    log.seek(0)
    return log.read()


@asynccontextmanager
async def connected(
    params: StdioServerParameters,
    errlog: TextIO,
    elicitation: ElicitationFnT | None = None,
    messages: list[IncomingMessage] | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialised ClientSession (the 2025-11-25 handshake) on a freshly launched server."""

    async def keep(message: IncomingMessage) -> None:
        if messages is not None:
            messages.append(message)

    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(
            read, write, read_timeout_seconds=60, elicitation_callback=elicitation, message_handler=keep
        ) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: types.CallToolResult) -> str:
    """The text content of a tool result."""
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def ok(result: types.CallToolResult) -> dict[str, Any]:
    """The structured result of a call that must have succeeded (its text the same JSON, fenced when memory)."""
    assert not result.is_error, text_of(result)
    assert isinstance(result.structured_content, dict)
    assert json.loads(unframed(text_of(result))) == result.structured_content
    return result.structured_content


def failed(result: types.CallToolResult, reason: str) -> dict[str, Any]:
    """The error detail of a call that must have failed with reason."""
    assert result.is_error, text_of(result)
    assert isinstance(result.structured_content, dict)
    error = result.structured_content["error"]
    assert error["reason"] == reason, text_of(result)
    assert f"braind error {reason}: " in text_of(result) and "Hint: " in text_of(result)
    return dict(error)


class Asker:
    """An elicitation callback that records what it was asked and answers with a fixed action."""

    def __init__(self, action: str = "accept", approve: bool = True) -> None:
        self.action = action
        self.approve = approve
        self.asked: list[str] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params.message)
        content = {"approve": self.approve} if self.action == "accept" else None
        return types.ElicitResult(action=self.action, content=content)  # type: ignore[arg-type]


def daemon_tools(daemon: Daemon) -> list[dict[str, Any]]:
    """The daemon's own `tools` listing."""
    return list(daemon.call("tools"))


def test_default_tools_are_the_daemons_few_with_its_schemas(daemon: Daemon, errlog: TextIO) -> None:
    async def scenario() -> list[types.Tool]:
        async with connected(server(daemon.config_path), errlog) as session:
            return (await session.list_tools()).tools

    listed = run(scenario)
    expected = [t for t in daemon_tools(daemon) if t["name"] in DEFAULT_TOOLS]
    assert 0 < len(listed) <= 7
    assert [(t.name, t.description, t.input_schema) for t in listed] == [
        (t["name"], t["description"], t["inputSchema"]) for t in expected
    ]
    assert "Traceback" not in stderr_of(errlog)


@pytest.mark.parametrize("how", ["flag", "env"])
def test_all_tools_exposes_the_full_set(daemon: Daemon, errlog: TextIO, how: str) -> None:
    params = (
        server(daemon.config_path, "--all-tools")
        if how == "flag"
        else server(daemon.config_path, env={"BRAIND_MCP_ALL_TOOLS": "1"})
    )

    async def scenario() -> list[str]:
        async with connected(params, errlog) as session:
            return [t.name for t in (await session.list_tools()).tools]

    assert run(scenario) == [*(t["name"] for t in daemon_tools(daemon)), "reindex"]


def test_note_then_recall_through_mcp(daemon: Daemon, errlog: TextIO) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with connected(server(daemon.config_path), errlog) as session:
            noted = ok(await session.call_tool("brain_note", {"text": "the staging database listens on 5433"}))
            recalled = ok(await session.call_tool("brain_recall", {"query": "staging 5433"}))
            return noted, recalled

    noted, recalled = run(scenario)
    assert recalled["total"] == 1
    assert recalled["hits"][0]["fp"] == noted["fp"]
    assert recalled["hits"][0]["text"] == "the staging database listens on 5433"


def test_correct_through_mcp(daemon: Daemon, errlog: TextIO) -> None:
    names = {t["name"] for t in daemon_tools(daemon)}
    if not {"memory_write_root", "memory_correct", "memory_recall"} <= names:
        pytest.skip("the daemon has no memory_write_root/memory_correct/memory_recall tools yet")
    asker = Asker()

    async def scenario() -> str:
        async with connected(server(daemon.config_path), errlog, elicitation=asker) as session:
            ok(await session.call_tool("memory_write_root", {"section": "Tea", "content": "- favourite: oolong"}))
            ok(
                await session.call_tool(
                    "memory_correct", {"scope": "root", "section": "Tea", "content": "- favourite: sencha"}
                )
            )
            return json.dumps(ok(await session.call_tool("memory_recall", {"scope": "root", "section": "Tea"})))

    read_back = run(scenario)
    assert "sencha" in read_back and "oolong" not in read_back
    assert len(asker.asked) == 1 and "memory_correct" in asker.asked[0]


def test_a_note_made_through_mcp_is_recalled_by_the_cli_and_vice_versa(daemon: Daemon, errlog: TextIO) -> None:
    run_cli("note", "the", "cli", "wrote", "rambutan", config=daemon.config_path, check=True)

    async def scenario() -> dict[str, Any]:
        async with connected(server(daemon.config_path), errlog) as session:
            ok(await session.call_tool("brain_note", {"text": "mcp wrote kumquat"}))
            return ok(await session.call_tool("brain_recall", {"query": "rambutan"}))

    from_cli = run(scenario)
    assert [h["text"] for h in from_cli["hits"]] == ["the cli wrote rambutan"]
    by_cli = run_cli("recall", "kumquat", "--json", config=daemon.config_path, check=True).stdout
    assert [h["text"] for h in json.loads(by_cli)["hits"]] == ["mcp wrote kumquat"]


def test_bad_calls_are_tool_errors_and_the_server_keeps_serving(daemon: Daemon, errlog: TextIO) -> None:
    async def scenario() -> list[types.CallToolResult]:
        async with connected(server(daemon.config_path), errlog) as session:
            return [
                await session.call_tool("brain_recall", {"query": 42}),
                await session.call_tool("brain_note", {"text": "x", "colour": "red"}),
                await session.call_tool("brain_note", {"text": "bad\x00byte"}),
                await session.call_tool("reindex", {}),
                await session.call_tool("inject", {"session": "s"}),
                await session.call_tool("brain_recall", {"query": "still alive"}),
            ]

    wrong_type, unknown_param, nul, reindex, inject, last = run(scenario)
    assert "must be of type string" in failed(wrong_type, "invalid_params")["message"]
    assert "colour" in failed(unknown_param, "invalid_params")["message"]
    assert failed(nul, "nul_byte")["hint"]
    failed(reindex, "unknown_tool")
    failed(inject, "unknown_tool")
    assert ok(last)["total"] == 0
    assert "Traceback" not in stderr_of(errlog)


def test_daemon_down_is_a_clear_tool_error_until_it_starts(make_daemon: Callable[..., Daemon], errlog: TextIO) -> None:
    daemon = make_daemon(start=False)
    daemon.write_config()
    messages: list[IncomingMessage] = []

    async def scenario() -> tuple[list[str], types.CallToolResult, types.CallToolResult, list[str]]:
        async with connected(server(daemon.config_path), errlog, messages=messages) as session:
            placeholders = [t.name for t in (await session.list_tools()).tools]
            down = await session.call_tool("brain_note", {"text": "noted while down"})
            daemon.start()
            up = await session.call_tool("brain_note", {"text": "noted once up"})
            real = [t.name for t in (await session.list_tools()).tools]
            return placeholders, down, up, real

    placeholders, down, up, real = run(scenario)
    assert placeholders == list(DEFAULT_TOOLS)
    error = failed(down, "daemon_unavailable")
    assert "not running" in error["message"] and str(daemon.socket) in error["message"]
    assert "braind start" in error["hint"]
    assert ok(up)["fp"]
    assert real == [t["name"] for t in daemon_tools(daemon) if t["name"] in DEFAULT_TOOLS]
    assert any(isinstance(m, types.ToolListChangedNotification) for m in messages)
    assert daemon.recall("noted") == ["noted once up"]
    assert "Traceback" not in stderr_of(errlog)


DECISION = {"text": "Keep SQLAlchemy and drop the raw SQL layer", "type": "decision"}


def test_approval_without_elicitation_is_a_tool_error_explaining_approval(daemon: Daemon, errlog: TextIO) -> None:
    async def scenario() -> types.CallToolResult:
        async with connected(server(daemon.config_path), errlog) as session:
            return await session.call_tool("brain_note", DECISION)

    error = failed(run(scenario), "approval_required")
    assert "approved=true" in error["hint"] and "ask the user" in error["hint"]
    assert daemon.recall("SQLAlchemy") == []


def test_approval_is_asked_by_elicitation_and_written_on_accept(daemon: Daemon, errlog: TextIO) -> None:
    asker = Asker("accept")

    async def scenario() -> types.CallToolResult:
        async with connected(server(daemon.config_path), errlog, elicitation=asker) as session:
            return await session.call_tool("brain_note", DECISION)

    assert ok(run(scenario))["fp"]
    assert len(asker.asked) == 1 and "brain_note" in asker.asked[0] and DECISION["text"] in asker.asked[0]
    assert daemon.recall("SQLAlchemy") == [DECISION["text"]]


@pytest.mark.parametrize(("action", "approve"), [("decline", True), ("cancel", True), ("accept", False)])
def test_approval_refused_by_the_user_writes_nothing(
    daemon: Daemon, errlog: TextIO, action: str, approve: bool
) -> None:
    asker = Asker(action, approve)

    async def scenario() -> types.CallToolResult:
        async with connected(server(daemon.config_path), errlog, elicitation=asker) as session:
            return await session.call_tool("brain_note", DECISION)

    assert "do not retry" in failed(run(scenario), "approval_declined")["hint"]
    assert len(asker.asked) == 1
    assert daemon.recall("SQLAlchemy") == []


def test_an_agent_that_already_has_approval_is_not_asked_again(daemon: Daemon, errlog: TextIO) -> None:
    asker = Asker("decline")

    async def scenario() -> types.CallToolResult:
        async with connected(server(daemon.config_path), errlog, elicitation=asker) as session:
            return await session.call_tool("brain_note", {**DECISION, "approved": True})

    assert ok(run(scenario))["fp"]
    assert asker.asked == []


@pytest.mark.parametrize("action", ["accept", "decline"])
def test_approval_on_the_stateless_protocol_asks_through_input_required(
    daemon: Daemon, errlog: TextIO, action: str
) -> None:
    asker = Asker(action)

    async def scenario() -> tuple[str, types.CallToolResult]:
        transport = stdio_client(server(daemon.config_path), errlog=errlog)
        async with Client(transport, elicitation_callback=asker) as client:  # type: ignore[arg-type]
            return client.protocol_version, await client.call_tool("brain_note", DECISION)

    version, result = run(scenario)
    assert version == "2026-07-28"
    assert len(asker.asked) == 1
    if action == "accept":
        assert ok(result)["fp"] and daemon.recall("SQLAlchemy") == [DECISION["text"]]
    else:
        failed(result, "approval_declined")
        assert daemon.recall("SQLAlchemy") == []


@pytest.mark.parametrize("reason", sorted({reason for _, reason in daemon_reasons()} | {"approval_declined"}))
def test_every_reason_becomes_a_tool_error_with_a_hint(reason: str) -> None:
    result = error_result(BraindError(reason, "what happened", path="/x"))
    assert result.is_error and isinstance(result.structured_content, dict)
    error = result.structured_content["error"]
    assert (error["reason"], error["message"], error["path"]) == (reason, "what happened", "/x")
    assert error["hint"] == HINTS.get(reason, DEFAULT_HINT)
    assert text_of(result) == f"braind error {reason}: what happened\nHint: {error['hint']}"


def test_without_the_mcp_extra_the_cli_works_and_mcp_says_how_to_install(daemon: Daemon) -> None:
    blocked = (
        "import sys; sys.modules['mcp'] = None; from braind.faces.cli import main; "
        "code = main(sys.argv[1:]); assert 'mcp' not in [m.split('.')[0] for m in sys.modules if sys.modules[m]]; "
        "sys.exit(code)"
    )
    config = ["--config", str(daemon.config_path)]
    status = subprocess.run([sys.executable, "-c", blocked, "status", *config], capture_output=True, text=True)
    assert status.returncode == 0 and "ready" in status.stdout, status.stderr
    refused = subprocess.run([sys.executable, "-c", blocked, "mcp", *config], capture_output=True, text=True)
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr.count("\n") == 1
    assert refused.stderr.startswith("braind: error: missing_extra: ")
    assert "run ./install.sh again in the braind checkout" in refused.stderr
    assert f"{sys.executable} -m pip install '/path/to/the/braind/checkout[mcp]'" in refused.stderr


def agent_doc_blocks(language: str) -> list[str]:
    """The fenced blocks of one language in docs/agents.md, the page on connecting agents."""
    page = (REPO / "docs" / "agents.md").read_text(encoding="utf-8")
    return re.findall(rf"```{language}\n(.*?)```", page, flags=re.DOTALL)


def documented_mcp_command_lines() -> dict[str, list[str]]:
    """Each client's MCP server command line as docs/agents.md configures it."""
    claude = next(line for block in agent_doc_blocks("sh") for line in block.splitlines() if "claude mcp add" in line)
    (codex,) = [tomllib.loads(block)["mcp_servers"]["braind"] for block in agent_doc_blocks("toml")]
    cursor = next(json.loads(b)["mcpServers"]["braind"] for b in agent_doc_blocks("json") if "mcpServers" in b)
    (rows,) = [yaml.safe_load(block) for block in agent_doc_blocks("yaml")]
    dsh = rows[0]["config"]
    assert rows[0]["name"] == "@deepseek-ai/dsh-mcp-client" and dsh["transport"] == "stdio"
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,32}", dsh["serverName"])
    assert codex["env_vars"] == ["XDG_RUNTIME_DIR"]
    claude_argv = shlex.split(claude.split("#")[0])
    return {
        "claude-code": claude_argv[claude_argv.index("--") + 1 :],
        "codex": [codex["command"], *codex["args"]],
        "cursor": [cursor["command"], *cursor["args"]],
        "deepseek-harness": [dsh["command"], *dsh["args"]],
    }


@pytest.mark.parametrize("client", ["claude-code", "codex", "cursor", "deepseek-harness"])
def test_the_documented_setup_runs(daemon: Daemon, errlog: TextIO, client: str) -> None:
    command, *args = documented_mcp_command_lines()[client]
    assert command in ("/home/you/.local/bin/braind", "$HOME/.local/bin/braind"), command  # what install.sh prints
    assert args == ["mcp"]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "braind", *args, "--config", str(daemon.config_path)]
    )

    async def scenario() -> tuple[list[str], dict[str, Any]]:
        async with connected(params, errlog) as session:
            names = [t.name for t in (await session.list_tools()).tools]
            ok(await session.call_tool("brain_note", {"text": f"set up from the agents page for {client}"}))
            return names, ok(await session.call_tool("brain_recall", {"query": f"agents page {client}"}))

    names, recalled = run(scenario)
    assert names == [t["name"] for t in daemon_tools(daemon) if t["name"] in DEFAULT_TOOLS]
    assert recalled["total"] == 1
