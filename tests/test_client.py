"""The client against a real server: results, typed errors, unavailability and reconnection."""

from __future__ import annotations

import ast
import inspect
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_server import WAIT, no_leaked_threads, sock_dir, wait_for  # noqa: F401 (fixtures)

from braind import errors
from braind.errors import (
    APPLICATION_ERROR,
    BraindError,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    NotFound,
    ParseError,
    Unavailable,
)
from braind.rpc.client import Client
from braind.rpc.protocol import MAX_LINE
from braind.rpc.server import SocketServer

pytestmark = pytest.mark.usefixtures("no_leaked_threads")

RAISED: dict[str, Callable[[], Exception]] = {
    "parse": lambda: ParseError("parse_error", "not JSON"),
    "request": lambda: InvalidRequest("invalid_request", "not a request"),
    "method": lambda: MethodNotFound("unknown_method", "no such method", method="x"),
    "params": lambda: InvalidParams("bad_limit", "limit must be 1-500", key="limit", allowed=[1, 500]),
    "not_found": lambda: NotFound("no entry with that fp", fp="ab12"),
    "busy": lambda: Unavailable("busy", "try later"),
    "application": lambda: BraindError("path_escape", "outside the root", path="../x"),
    "crash": lambda: RuntimeError("boom"),
}


def dispatch(method: str, params: dict[str, Any]) -> Any:
    """Echo, or raise the error named by the method."""
    if method == "echo":
        return params
    raise RAISED[method]()


@pytest.fixture
def path(sock_dir: Path) -> Path:  # noqa: F811 (the fixture imported above)
    return sock_dir / "run" / "braind.sock"


@pytest.fixture
def server(path: Path) -> Iterator[SocketServer]:
    with SocketServer(path, dispatch) as running:
        yield running


def test_a_call_returns_the_result(server: SocketServer) -> None:
    with Client(server.path) as client:
        assert client.call("echo", text="é", n=[1, 2]) == {"text": "é", "n": [1, 2]}


def test_calls_share_one_connection(server: SocketServer) -> None:
    with Client(server.path) as client:
        for n in range(3):
            assert client.call("echo", n=n) == {"n": n}
        assert server.connection_count == 1
    wait_for(lambda: server.connection_count == 0)


@pytest.mark.parametrize(
    ("method", "cls", "code", "reason", "data"),
    [
        ("parse", ParseError, -32700, "parse_error", {}),
        ("request", InvalidRequest, -32600, "invalid_request", {}),
        ("method", MethodNotFound, -32601, "unknown_method", {"method": "x"}),
        ("params", InvalidParams, -32602, "bad_limit", {"key": "limit", "allowed": [1, 500]}),
        ("crash", InternalError, -32603, "internal", {}),
        ("not_found", NotFound, -32000, "not_found", {"fp": "ab12"}),
        ("busy", Unavailable, -32000, "busy", {}),
        ("application", BraindError, -32000, "path_escape", {"path": "../x"}),
    ],
)
def test_an_error_reply_is_raised_as_its_typed_error(
    server: SocketServer, method: str, cls: type[BraindError], code: int, reason: str, data: dict[str, Any]
) -> None:
    with Client(server.path) as client:
        with pytest.raises(BraindError) as raised:
            client.call(method)
        assert (type(raised.value), raised.value.code, raised.value.reason, raised.value.data) == (
            cls,
            code,
            reason,
            data,
        )
        assert client.call("echo", after=method) == {"after": method}


def test_no_socket_means_daemon_unavailable(path: Path) -> None:
    with Client(path) as client, pytest.raises(Unavailable) as raised:
        client.call("echo")
    assert raised.value.reason == "daemon_unavailable"
    assert str(path) in raised.value.message and "braind start" in raised.value.message


def test_a_stale_socket_means_daemon_unavailable(sock_dir: Path) -> None:  # noqa: F811
    path = sock_dir / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))
    with Client(path) as client, pytest.raises(Unavailable) as raised:
        client.call("echo")
    assert raised.value.reason == "daemon_unavailable"


def test_the_client_reconnects_after_a_daemon_restart(path: Path) -> None:
    with Client(path) as client:
        with SocketServer(path, dispatch):
            assert client.call("echo", run=1) == {"run": 1}
        with SocketServer(path, dispatch):
            assert client.call("echo", run=2) == {"run": 2}


def test_the_client_outlives_a_stopped_daemon(path: Path) -> None:
    with Client(path) as client:
        with SocketServer(path, dispatch):
            assert client.call("echo", run=1) == {"run": 1}
        with pytest.raises(Unavailable) as raised:
            client.call("echo", run=0)
        assert raised.value.reason == "daemon_unavailable"
        with SocketServer(path, dispatch):
            assert client.call("echo", run=2) == {"run": 2}


def test_busy_is_reported_when_the_daemon_is_full(path: Path) -> None:
    entered, release = threading.Event(), threading.Event()

    def hold(method: str, params: dict[str, Any]) -> Any:
        entered.set()
        return release.wait(WAIT)

    with SocketServer(path, hold, max_connections=1), socket.socket(socket.AF_UNIX) as first, Client(path) as second:
        first.connect(str(path))
        first.sendall(b'{"jsonrpc":"2.0","id":1,"method":"hold"}\n')
        assert entered.wait(WAIT)  # a request in flight: not idle, so not closed to make room
        with pytest.raises(Unavailable) as raised:
            second.call("echo")
        release.set()
        assert raised.value.reason == "busy"


def test_a_daemon_too_slow_to_answer_times_out(path: Path) -> None:
    release = threading.Event()

    def slow(method: str, params: dict[str, Any]) -> Any:
        return release.wait(WAIT) and params

    with SocketServer(path, slow), Client(path, timeout=0.2) as client:
        with pytest.raises(Unavailable) as raised:
            client.call("slow")
        release.set()
        assert raised.value.reason == "timeout"
        client.timeout = WAIT
        assert client.call("slow", again=True) == {"again": True}


def test_a_daemon_that_hangs_up_mid_request_is_reported(path: Path) -> None:
    entered, release = threading.Event(), threading.Event()

    def stuck(method: str, params: dict[str, Any]) -> Any:
        entered.set()
        return release.wait(WAIT)

    server = SocketServer(path, stuck, grace=0.0)
    server.bind()
    server.start()

    def close_once_stuck() -> None:
        entered.wait(WAIT)
        server.close()

    closer = threading.Thread(target=close_once_stuck)
    closer.start()
    with Client(path) as client, pytest.raises(Unavailable) as raised:
        client.call("stuck")
    release.set()
    closer.join(WAIT)
    assert raised.value.reason == "connection_closed"


def test_an_oversized_request_is_refused_before_sending(server: SocketServer) -> None:
    with Client(server.path) as client, pytest.raises(InvalidRequest) as raised:
        client.call("echo", text="x" * MAX_LINE)
    assert raised.value.reason == "too_large"
    assert server.connection_count == 0


def test_params_that_are_not_json_are_refused(server: SocketServer) -> None:
    with Client(server.path) as client, pytest.raises(InvalidParams) as raised:
        client.call("echo", value=object())
    assert raised.value.reason == "invalid_params"


def test_an_unreadable_reply_is_a_parse_error(path: Path) -> None:
    path.parent.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen()
        with Client(path) as client:
            answer = threading.Thread(target=reply_with, args=(listener, b'{"jsonrpc":"2.0","id":1,"result":NaN}\n'))
            answer.start()
            with pytest.raises(ParseError) as raised:
                client.call("echo")
            answer.join(WAIT)
    assert raised.value.reason == "not_finite"


def reply_with(listener: socket.socket, line: bytes) -> None:
    """A fake daemon for one request: read a line, answer with `line`, hang up."""
    conn, _ = listener.accept()
    with conn, conn.makefile("rb") as reader:
        reader.readline()
        conn.sendall(line)


# Reasons docs/protocol.md names that a daemon may send even before this one raises them.
CONTRACT_REASONS = (
    "invalid_date",
    "symlink",
    "path_escape",
    "too_large",
    "nul_byte",
    "not_found",
    "ambiguous",
    "exists",
    "invalid_name",
    "forbidden_heading",
    "budget_exceeded",
    "approval_required",
    "unauthorized",
    "busy",
    "internal",
)
ERROR_CLASSES: dict[str, type[BraindError]] = {
    name: cls for name, cls in vars(errors).items() if isinstance(cls, type) and issubclass(cls, BraindError)
}
# What a client raises: one class per JSON-RPC code, and for application errors a few reasons told apart by type.
CODE_TYPES: dict[int, type[BraindError]] = {
    ParseError.code: ParseError,
    InvalidRequest.code: InvalidRequest,
    MethodNotFound.code: MethodNotFound,
    InvalidParams.code: InvalidParams,
    InternalError.code: InternalError,
}
CLIENT_TYPES: dict[str, type[BraindError]] = {
    "not_found": NotFound,
    "busy": Unavailable,
    "unauthorized": Unavailable,
    "already_running": Unavailable,
    "daemon_unavailable": Unavailable,
}


def fixed_reason(cls: type[BraindError]) -> str | None:
    """The reason a class sets itself (NotFound and the like), or None when the caller passes one."""
    takes_reason = list(inspect.signature(cls.__init__).parameters)[1] == "reason"
    return None if takes_reason else cls("raised on purpose").reason  # type: ignore[call-arg]


def daemon_reasons() -> list[tuple[str, str]]:
    """(error class, reason) for every reason braind's code raises, plus the contract's."""
    found: set[tuple[str, str]] = {("BraindError", reason) for reason in CONTRACT_REASONS}
    for source in sorted((Path(__file__).resolve().parent.parent / "braind").rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ERROR_CLASSES):
                continue
            fixed = fixed_reason(ERROR_CLASSES[node.func.id])
            if fixed is not None:
                found.add((node.func.id, fixed))
            elif node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.add((node.func.id, node.args[0].value))
    return sorted(found)


def raise_named(method: str, params: dict[str, Any]) -> Any:
    """A daemon stand-in that raises the error class and reason it is asked for."""
    cls = ERROR_CLASSES[params["cls"]]
    if fixed_reason(cls) is not None:
        raise cls("raised on purpose")  # type: ignore[call-arg]
    raise cls(params["reason"], "raised on purpose")


@pytest.mark.parametrize(("cls_name", "reason"), daemon_reasons())
def test_every_reason_the_daemon_uses_reaches_the_client_typed(path: Path, cls_name: str, reason: str) -> None:
    sent = ERROR_CLASSES[cls_name]
    expected = CLIENT_TYPES.get(reason, BraindError) if sent.code == APPLICATION_ERROR else CODE_TYPES[sent.code]
    with SocketServer(path, raise_named), Client(path) as client, pytest.raises(BraindError) as raised:
        client.call("raise", cls=cls_name, reason=reason)
    assert (type(raised.value), raised.value.code, raised.value.reason) == (expected, sent.code, reason)
    assert raised.value.message == "raised on purpose"


def test_the_first_socket_that_answers_is_used(server: SocketServer, sock_dir: Path) -> None:  # noqa: F811
    """Clients of a default socket try each place it may be; one that is missing or stale is passed over."""
    stale = sock_dir / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(stale))
    with Client([sock_dir / "missing.sock", stale, server.path]) as client:
        assert client.call("echo", n=1) == {"n": 1}
        assert client.path == server.path


def test_daemon_unavailable_lists_every_place_looked(sock_dir: Path) -> None:  # noqa: F811
    places = [sock_dir / "a" / "braind.sock", sock_dir / "b" / "braind.sock"]
    with Client(places) as client, pytest.raises(Unavailable) as raised:
        client.call("echo")
    assert raised.value.reason == "daemon_unavailable"
    assert raised.value.data["tried"] == [str(p) for p in places]
    assert all(f"no socket at {p}" in raised.value.message for p in places)
