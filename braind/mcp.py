"""`braind mcp`: the agent tools as an MCP server on stdio, every call relayed to the running daemon.

Built on the official MCP Python SDK's low-level server (the optional `mcp`
extra; the CLI imports this module only for `braind mcp`). Tool names and input
schemas come from the daemon's `tools` method on every listing and every call,
so they cannot drift from what the daemon validates. Errors reach the agent as
tool results with `isError` set, carrying the daemon's reason and a hint; the
server itself never dies of one.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from braind import __version__
from braind.client import Client
from braind.errors import BraindError

log = logging.getLogger("braind.mcp")

# The default set: few tools, because every tool's schema costs the agent context. memory_creator is
# among them because memory_write_logfile only appends to a logfile that exists, and says to create it.
DEFAULT_TOOLS = (
    "brain_note",
    "brain_recall",
    "memory_recall",
    "memory_write_root",
    "memory_write_logfile",
    "memory_correct",
    "memory_creator",
)
ALL_TOOLS_ENV = "BRAIND_MCP_ALL_TOOLS"
APPROVAL_KEY = "approval"
START = "start it with `braind start` (or `systemctl --user start braind`), then call the tool again"
INSTRUCTIONS = (
    "braind is the user's long-term memory, kept as Markdown files they can read and edit. "
    "Recall before answering questions about earlier work; note facts, decisions and fixes worth keeping."
)
HINTS = {
    "daemon_unavailable": f"braind is not running: {START}.",
    "connection_closed": "braind closed the connection, perhaps while restarting: call the tool again.",
    "timeout": "braind did not answer in time: call the tool again, or ask the user to check `braind status`.",
    "busy": "braind is busy: call the tool again in a moment.",
    "approval_required": "this write needs the user's approval: ask the user, and only if they agree "
    "call the tool again with approved=true.",
    "approval_declined": "the user did not approve this write: do not retry it unless they ask for it.",
    "invalid_params": "the arguments do not match the tool's input schema: fix them and call again.",
    "unknown_tool": "braind has no such tool here: list the tools again.",
    "not_found": "nothing matched: check the scope, name, section or fp (recall or list first).",
    "ambiguous": "several units matched: call again with a more precise address (the matches are listed).",
    "exists": "it already exists: write to it instead of creating it.",
    "internal": "braind failed unexpectedly; its log has the traceback (`journalctl --user -u braind`).",
}
DEFAULT_HINT = "braind refused the call: read the message, fix the arguments and call again."
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve this write",
            "description": "Let the agent make this change to your braind memory.",
            "default": True,
        }
    },
    "required": ["approve"],
}


def serve(socket: Sequence[Path], all_tools: bool = False) -> int:
    """Serve MCP on stdin/stdout until the client hangs up."""
    bridge = Bridge(Relay(socket), all_tools or _env_flag(os.environ.get(ALL_TOOLS_ENV)))
    anyio.run(_run, build_server(bridge))
    return 0


async def _run(server: Server[Any]) -> None:
    """Run one server on the process's stdio."""
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, options)


def build_server(bridge: Bridge) -> Server[Any]:
    """The SDK's low-level server with the bridge's two handlers."""
    return Server(
        "braind",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=bridge.list_tools,
        on_call_tool=bridge.call_tool,
    )


def _env_flag(value: str | None) -> bool:
    """Whether an environment switch is on."""
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Relay:
    """Blocking calls to the daemon, each on its own connection (handlers run concurrently)."""

    socket: Sequence[Path]
    timeout: float = 30.0

    def call(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """One daemon method; raises the BraindError it was refused with."""
        with Client(self.socket, self.timeout) as client:
            return client.call(method, **(params or {}))


@dataclass
class Bridge:
    """The MCP handlers: tools from the daemon, calls relayed, approval asked of the user."""

    relay: Relay
    all_tools: bool = False
    listed_placeholders: bool = field(default=False, init=False)

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """The daemon's tools; while it is down, placeholders that say so."""
        try:
            tools = await self.exposed()
        except BraindError as err:
            log.warning("listing placeholder tools: %s", err)
            self.listed_placeholders = True
            return types.ListToolsResult(tools=[_tool(t) for t in placeholder_tools(err)])
        return types.ListToolsResult(tools=[_tool(t) for t in tools.values()])

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Relay one call; every failure becomes a tool error, never a crashed server."""
        try:
            return await self._call(ctx, params.name, dict(params.arguments or {}), params.input_responses)
        except BraindError as err:
            return error_result(err)
        except Exception:
            log.exception("tool call %r failed", params.name)
            return error_result(BraindError("internal", "the braind MCP bridge failed; its stderr has the traceback"))

    async def exposed(self) -> dict[str, dict[str, Any]]:
        """The daemon's agent tools this server offers, by name."""
        tools = await self._relay("tools")
        return {t["name"]: t for t in pick_tools(tools, self.all_tools)}

    async def _call(
        self,
        ctx: ServerRequestContext[Any],
        name: str,
        args: dict[str, Any],
        answers: Mapping[str, Any] | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Check the tool is offered, relay it, and turn approval_required into a question to the user."""
        tool = (await self.exposed()).get(name)
        if tool is None:
            raise BraindError("unknown_tool", f"braind offers no tool {name!r} here")
        await self._tools_are_back(ctx)
        if answers and APPROVAL_KEY in answers:
            return await self._approved_call(name, args, answers[APPROVAL_KEY])
        try:
            return success_result(await self._relay(name, args))
        except BraindError as err:
            if err.reason != "approval_required" or args.get("approved") or not _takes_approval(tool):
                raise
            return await self._ask_approval(ctx, name, args, err)

    async def _ask_approval(
        self, ctx: ServerRequestContext[Any], name: str, args: dict[str, Any], err: BraindError
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Ask the user through MCP elicitation; without it, the approval_required error explains what to do."""
        if not _can_elicit(ctx.session.client_capabilities):
            raise err
        message = approval_message(name, args)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return approval_request(message)
        if not ctx.session.can_send_request:
            raise err
        try:
            answer = await ctx.session.elicit_form(message, APPROVAL_SCHEMA, related_request_id=ctx.request_id)
        except MCPError as exc:
            log.warning("the client could not ask for approval: %s", exc)
            raise err from None
        return await self._approved_call(name, args, answer)

    async def _approved_call(self, name: str, args: dict[str, Any], answer: Any) -> types.CallToolResult:
        """Relay with approved=true if the user accepted; otherwise say they did not."""
        if not approved(answer):
            raise BraindError("approval_declined", f"the user did not approve this {name} call")
        return success_result(await self._relay(name, {**args, "approved": True}))

    async def _tools_are_back(self, ctx: ServerRequestContext[Any]) -> None:
        """After placeholders were listed, tell the client the real tools can be fetched now."""
        if not self.listed_placeholders:
            return
        self.listed_placeholders = False
        try:
            await ctx.session.send_tool_list_changed()
        except Exception as exc:
            log.info("could not announce the tool list: %s", exc)

    async def _relay(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """A daemon call in a worker thread, so the event loop keeps serving."""
        return await anyio.to_thread.run_sync(self.relay.call, method, params)


def pick_tools(tools: list[dict[str, Any]], all_tools: bool) -> list[dict[str, Any]]:
    """All the daemon's tools, or only the default few it has, in its order."""
    return tools if all_tools else [t for t in tools if t["name"] in DEFAULT_TOOLS]


def placeholder_tools(err: BraindError) -> list[dict[str, Any]]:
    """The default tools with open schemas, for a listing made while the daemon cannot be reached."""
    note = f"Unavailable: {err.message} Calling it reports the same until the daemon answers."
    return [{"name": name, "description": note, "inputSchema": {"type": "object"}} for name in DEFAULT_TOOLS]


def _tool(tool: Mapping[str, Any]) -> types.Tool:
    """A daemon tool description as an MCP Tool."""
    return types.Tool(name=tool["name"], description=tool.get("description"), input_schema=tool["inputSchema"])


def _takes_approval(tool: Mapping[str, Any]) -> bool:
    """Whether the tool's schema has the `approved` flag a retry sets."""
    return "approved" in tool["inputSchema"].get("properties", {})


def _can_elicit(capabilities: types.ClientCapabilities | None) -> bool:
    """Whether the client declared form elicitation (an empty `elicitation` object means form)."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def approval_message(name: str, args: Mapping[str, Any], limit: int = 600) -> str:
    """What the user is asked: the tool and its arguments, shortened."""
    shown = json.dumps({k: v for k, v in args.items() if k != "approved"}, ensure_ascii=False)
    if len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    return f"The agent asks braind to run {name} with {shown}. braind needs your approval for this write. Allow it?"


def approval_request(message: str) -> types.InputRequiredResult:
    """The 2026-07-28 form of an elicitation: an input request the client answers on its retry."""
    ask = types.ElicitRequestFormParams(message=message, requested_schema=APPROVAL_SCHEMA)
    return types.InputRequiredResult(input_requests={APPROVAL_KEY: types.ElicitRequest(params=ask)})


def approved(answer: Any) -> bool:
    """Whether an elicitation answer accepts the write."""
    if not isinstance(answer, types.ElicitResult) or answer.action != "accept":
        return False
    return (answer.content or {}).get("approve") is True


def success_result(result: Any) -> types.CallToolResult:
    """The daemon's result as JSON text, and as structured content when it is an object."""
    text = json.dumps(result, ensure_ascii=False)
    structured = result if isinstance(result, dict) else None
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured)


def error_result(err: BraindError) -> types.CallToolResult:
    """A tool error carrying the reason, the message and a hint for the agent."""
    hint = HINTS.get(err.reason, DEFAULT_HINT)
    detail = {"reason": err.reason, "message": err.message, "hint": hint, **err.data}
    text = f"braind error {err.reason}: {err.message}\nHint: {hint}"
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content={"error": detail}, is_error=True
    )
