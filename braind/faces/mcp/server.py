"""`braind mcp`: the agent tools as an MCP server on stdio, every call relayed to the running daemon.

Built on the official MCP Python SDK's low-level server (the optional `mcp`
extra; the CLI imports this module only for `braind mcp`). Tool names and input
schemas come from the daemon's `tools` method on every listing and every call,
so they cannot drift from what the daemon validates. Errors reach the agent as
tool results with `isError` set, carrying the daemon's reason and a hint; the
server itself never dies of one.

Besides tools it offers the memory files as resources (read through the
daemon, with list and subscription updates while files change), two prompts,
completions of their argument, logging at the level the client sets, and
progress notifications for a reindex (a tool under --all-tools).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from braind import __version__
from braind.errors import BraindError
from braind.faces.mcp import memory
from braind.rpc.client import Client

log = logging.getLogger(__name__)

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
REINDEX_TOOL = "reindex"
REINDEX = {
    "name": REINDEX_TOOL,
    "description": "Rebuild braind's index from the memory files (slow on a large memory; reports progress). "
    "Only needed when recall seems to miss what the files hold.",
    "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
}
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
WATCH_SECONDS = 2.0
PROGRESS_SECONDS = 0.2
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


def serve(socket: Sequence[Path], all_tools: bool = False, project: str | None = None) -> int:
    """Serve MCP on stdin/stdout until the client hangs up."""
    bridge = Bridge(Relay(socket), all_tools or _env_flag(os.environ.get(ALL_TOOLS_ENV)), project)
    anyio.run(_run, bridge)
    return 0


async def _run(bridge: Bridge) -> None:
    """Run one server on the process's stdio, and watch memory for changes while it runs."""
    server = build_server(bridge)
    changes = NotificationOptions(tools_changed=True, resources_changed=True)
    options = server.create_initialization_options(changes)
    async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as tasks:
        tasks.start_soon(bridge.watch)
        await server.run(read_stream, write_stream, options)
        tasks.cancel_scope.cancel()


def build_server(bridge: Bridge) -> Server[Any]:
    """The SDK's low-level server with the bridge's handlers."""
    with warnings.catch_warnings():
        # Logging is deprecated by the 2026-07-28 protocol only; clients of 2025-11-25 set the level with it.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return Server(
            "braind",
            version=__version__,
            instructions=INSTRUCTIONS,
            on_list_tools=bridge.list_tools,
            on_call_tool=bridge.call_tool,
            on_list_resources=bridge.list_resources,
            on_read_resource=bridge.read_resource,
            on_subscribe_resource=bridge.subscribe,
            on_unsubscribe_resource=bridge.unsubscribe,
            on_list_prompts=bridge.list_prompts,
            on_get_prompt=bridge.get_prompt,
            on_completion=bridge.complete,
            on_set_logging_level=bridge.set_level,
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
    project: str | None = None
    listed_placeholders: bool = field(default=False, init=False)
    session: ServerSession | None = field(default=None, init=False)
    level: str = field(default="warning", init=False)
    subscribed: dict[str, str] = field(default_factory=dict, init=False)  # uri -> digest of its text

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """The daemon's tools; while it is down, placeholders that say so."""
        self.session = ctx.session
        try:
            tools = await self.exposed()
        except BraindError as err:
            log.warning("listing placeholder tools: %s", err)
            await self.log("warning", f"braind is unavailable: {err.message}")
            self.listed_placeholders = True
            return types.ListToolsResult(tools=[_tool(t) for t in placeholder_tools(err)])
        return types.ListToolsResult(tools=[_tool(t) for t in tools.values()])

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Relay one call; every failure becomes a tool error, never a crashed server."""
        self.session = ctx.session
        try:
            return await self._call(ctx, params.name, dict(params.arguments or {}), params.input_responses)
        except BraindError as err:
            await self.log("warning" if err.reason == "daemon_unavailable" else "info", f"{params.name}: {err}")
            return error_result(err)
        except Exception:
            log.exception("tool call %r failed", params.name)
            return error_result(BraindError("internal", "the braind MCP bridge failed; its stderr has the traceback"))

    async def exposed(self) -> dict[str, dict[str, Any]]:
        """The daemon's agent tools this server offers, by name."""
        tools = await self._relay("tools")
        picked = {t["name"]: t for t in pick_tools(tools, self.all_tools)}
        return {**picked, REINDEX_TOOL: REINDEX} if self.all_tools else picked

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
        if name == REINDEX_TOOL:
            return success_result(await self._reindex(ctx))
        if answers and APPROVAL_KEY in answers:
            return await self._approved_call(name, args, answers[APPROVAL_KEY])
        try:
            return success_result(await self._relay(name, args), framed=name in memory.FRAMED_TOOLS)
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
        return success_result(await self._relay(name, {**args, "approved": True}), framed=name in memory.FRAMED_TOOLS)

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

    # -- progress -------------------------------------------------------------------

    async def _reindex(self, ctx: ServerRequestContext[Any]) -> Any:
        """Run the daemon's reindex, reporting its progress (files done of total) while it runs."""
        await self.log("info", "reindex started")
        done = threading.Event()
        result: dict[str, Any] = {}

        def run() -> None:
            try:
                result["value"] = self.relay.call("reindex")
            except BraindError as err:
                result["error"] = err
            finally:
                done.set()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(anyio.to_thread.run_sync, run)
            while not done.is_set():
                await self._report(ctx)
                await anyio.sleep(PROGRESS_SECONDS)
        if "error" in result:
            raise result["error"]
        value = result["value"]
        await ctx.session.report_progress(value["scanned"], value["scanned"], "reindexed")
        await self.log("info", f"reindex done: {value['entries']} entries from {value['files']} files")
        return value

    async def _report(self, ctx: ServerRequestContext[Any]) -> None:
        """One progress notification from the daemon's status, if it says how far the reindex is."""
        try:
            state = (await self._relay("status")).get("reindex")
        except BraindError:
            return
        if state:
            await ctx.session.report_progress(state["done"], state["total"], f"{state['done']}/{state['total']} files")

    # -- logging -------------------------------------------------------------------

    async def set_level(self, ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
        """The lowest level of log message the client wants."""
        self.session = ctx.session
        self.level = params.level
        return types.EmptyResult()

    async def log(self, level: str, message: str) -> None:
        """Send a log message to the client when it asked for this level; never fail because of it."""
        if self.session is None or LEVELS.index(level) < LEVELS.index(self.level):
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await self.session.send_log_message(level, message, logger="braind")  # type: ignore[arg-type]
        except Exception as exc:
            log.info("could not send a log message: %s", exc)

    # -- resources -------------------------------------------------------------------

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """Every memory file the daemon sees (and each MEMORY.md section), as memory:// resources."""
        self.session = ctx.session
        listing = await self._files()
        return types.ListResourcesResult(resources=[memory.resource(r) for r in listing])

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        """A memory file's text, read through the daemon; a refusal is an MCP error with its reason."""
        self.session = ctx.session
        return memory.contents(await self._daemon_or_error("memory.read", {"uri": params.uri, **self._scope()}))

    async def subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        """Send notifications/resources/updated when the file behind this URI changes."""
        self.session = ctx.session
        self.subscribed[params.uri] = await self._digest(params.uri)
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        """Stop the updates of one URI."""
        self.subscribed.pop(params.uri, None)
        return types.EmptyResult()

    async def watch(self) -> None:
        """While the server runs: tell the client when the list of files or a subscribed file changes."""
        seen: list[str] | None = None
        while True:
            await anyio.sleep(WATCH_SECONDS)
            try:
                seen = await self._look(seen)
            except Exception:
                log.exception("watching memory for changes failed; trying again")

    async def _look(self, seen: list[str] | None) -> list[str] | None:
        """One look at the daemon's files: notify what changed since `seen`, return what is there now."""
        session = self.session
        if session is None:
            return seen
        try:
            listing = await self._relay("memory.files", self._scope())
        except BraindError:
            return seen  # the daemon is down or restarting: nothing to compare until it answers
        uris = [r["uri"] for r in listing["resources"]]
        if seen is not None and uris != seen:
            await self._notify(session.send_resource_list_changed())
        for uri, digest in list(self.subscribed.items()):
            now = await self._digest(uri)
            if now != digest and uri in self.subscribed:
                self.subscribed[uri] = now
                await self._notify(session.send_resource_updated(uri))
        return uris

    async def _notify(self, sending: Any) -> None:
        """Send one notification; a client that went away is not an error of the server."""
        try:
            await sending
        except Exception as exc:
            log.info("could not send a notification: %s", exc)

    async def _digest(self, uri: str) -> str:
        """A digest of a resource's text ('' while it cannot be read), to notice changes."""
        try:
            text = (await self._relay("memory.read", {"uri": uri, **self._scope()}))["text"]
        except BraindError:
            return ""
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    async def _files(self) -> list[dict[str, Any]]:
        """The daemon's listing of memory files, raised as an MCP error when it cannot answer."""
        return list((await self._daemon_or_error("memory.files", self._scope()))["resources"])

    def _scope(self) -> dict[str, Any]:
        """The project this server was started for, if any."""
        return {"project": self.project} if self.project else {}

    async def _daemon_or_error(self, method: str, params: Mapping[str, Any]) -> Any:
        """A daemon call outside tools: a refusal becomes an MCP error carrying the reason and a hint."""
        try:
            return await self._relay(method, params)
        except BraindError as err:
            await self.log("warning", f"{method}: {err}")
            hint = HINTS.get(err.reason, DEFAULT_HINT)
            code = types.INVALID_PARAMS if err.reason in ("invalid_params", "not_found") else types.INTERNAL_ERROR
            raise MCPError(code, f"braind error {err.reason}: {err.message} ({hint})", {"reason": err.reason}) from None

    # -- prompts ---------------------------------------------------------------------

    async def list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        """The recall and load_memory prompts."""
        return types.ListPromptsResult(prompts=memory.prompts())

    async def get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        """A prompt filled from the daemon: recalled entries for a topic, or the session's memory block."""
        self.session = ctx.session
        arguments = params.arguments or {}
        if params.name == memory.RECALL_PROMPT:
            topic = arguments.get("topic", "").strip()
            if not topic:
                raise MCPError(types.INVALID_PARAMS, "the recall prompt needs a topic")
            found = await self._daemon_or_error("brain_recall", {"query": topic, **self._scope()})
            return memory.recall_prompt(topic, found)
        if params.name == memory.LOAD_PROMPT:
            session = f"mcp-{os.getpid()}-{id(ctx.session)}"
            return memory.load_prompt(await self._daemon_or_error("inject", {"session": session, **self._scope()}))
        raise MCPError(types.INVALID_PARAMS, f"braind has no prompt {params.name!r}")

    async def complete(
        self, ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        """Topics for the recall prompt: MEMORY.md sections and logfile names that begin with what was typed."""
        ref = params.ref
        if not isinstance(ref, types.PromptReference) or ref.name != memory.RECALL_PROMPT:
            return types.CompleteResult(completion=types.Completion(values=[]))
        try:
            listing = await self._files()
        except MCPError:
            return types.CompleteResult(completion=types.Completion(values=[]))
        return memory.topic_completions(listing, params.argument.value)


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


def success_result(result: Any, framed: bool = False) -> types.CallToolResult:
    """The daemon's result as JSON text (fenced as reference data when it carries memory), and structured."""
    text = memory.framed_json(result) if framed else json.dumps(result, ensure_ascii=False)
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
