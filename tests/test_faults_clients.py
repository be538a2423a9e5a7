"""Hostile clients against the real daemon socket: abuse, permissions, rival daemons.

Every abuse goes to a real `braind serve` over its real socket. The daemon must answer it with a
JSON-RPC error carrying `error.data.reason`, or hang up on that one connection, and then serve the
next client normally: a real note is written and recalled after each abuse. Each test ends by
comparing the index with a clean rebuild from the files.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from braind.rpc.protocol import MAX_BATCH, MAX_LINE
from tests.conftest import Daemon, today, wait_until
from tests.faults import assert_index_matches_files, refused_start

WAIT = 15.0
CAP = 16
SERVER = {"server": {"max_connections": CAP, "read_timeout_seconds": 1}}
"""A small connection cap and the shortest read timeout, so limits are reached and stalls cut fast."""

PARSE, INVALID_REQUEST, NO_METHOD, INVALID_PARAMS, APPLICATION = -32700, -32600, -32601, -32602, -32000


# -- a bare client ---------------------------------------------------------------------------------


def line(method: str, request_id: Any = 1, **params: Any) -> bytes:
    """One JSON-RPC request line; request_id=None makes a notification."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if request_id is not None:
        message["id"] = request_id
    return json.dumps(message).encode() + b"\n"


class Raw:
    """A client with no manners: raw bytes out, reply lines in, every read bounded by a timeout."""

    def __init__(self, path: Path | str, timeout: float = WAIT) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))  # blocking: with the backlog full, wait for the daemon to accept
        self.sock.settimeout(timeout)
        self.reader = self.sock.makefile("rb")

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Hang up."""
        self.reader.close()
        self.sock.close()

    def send(self, data: bytes) -> bool:
        """Send everything; False when the daemon had already hung up."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    def reply(self) -> Any:
        """The next reply line, decoded; fails when the daemon hangs up instead."""
        raw = self.reader.readline()
        assert raw.endswith(b"\n"), f"the daemon hung up instead of answering: {raw[:200]!r}"
        return json.loads(raw)

    def call(self, method: str, request_id: Any = 1, **params: Any) -> Any:
        """One request and its reply on this connection."""
        self.send(line(method, request_id, **params))
        return self.reply()

    def rest(self) -> bytes:
        """Everything until the daemon hangs up (a reset counts as hanging up)."""
        try:
            return self.reader.read()
        except ConnectionResetError:
            return b""


def error_of(reply: Any) -> tuple[int, str]:
    """The (code, data.reason) of an error reply; fails on anything else."""
    assert isinstance(reply, dict) and reply.get("jsonrpc") == "2.0", reply
    assert "result" not in reply and "error" in reply, reply
    return reply["error"]["code"], reply["error"]["data"]["reason"]


# -- the daemon keeps serving ----------------------------------------------------------------------

_survivors = iter(range(1, 1 << 30))


def assert_serves(daemon: Daemon) -> None:
    """A fresh client writes a note and recalls it: the daemon survived whatever came before."""
    word = f"survivor{next(_survivors)}x"
    text = f"{word} was written after the abuse"
    wait_until(lambda: _note(daemon, text), WAIT, "a fresh client to be served (not told busy)")
    assert text in daemon.recall(word)
    assert daemon.call("status")["state"] == "ready"


def _note(daemon: Daemon, text: str) -> bool:
    """Write a note on a fresh connection; False while the daemon is full of closing connections."""
    with Raw(daemon.socket) as peer:
        reply = peer.call("brain_note", text=text)
    if "error" in reply and reply["error"]["data"]["reason"] == "busy":
        return False
    assert "result" in reply, reply
    return True


def assert_no_crash_in_log(daemon: Daemon) -> None:
    """No request ended in an unexpected exception (the per-request boundary logs a traceback)."""
    assert "Traceback" not in daemon.log_text(), daemon.log_text()[-3000:]


BEFORE = "written before the abuse began"


@pytest.fixture
def hostile(make_daemon: Callable[..., Daemon]) -> Daemon:
    """A daemon with a low connection cap and read timeout, holding one note from before the abuse."""
    daemon = make_daemon(SERVER)
    daemon.call("brain_note", text=BEFORE)
    return daemon


def finish(daemon: Daemon) -> None:
    """The common end: still serving, nothing crashed, the index equals a rebuild from the files."""
    assert_serves(daemon)
    if BEFORE in diary(daemon).read_text():
        assert BEFORE in daemon.recall("abuse began")
    assert_no_crash_in_log(daemon)
    assert_index_matches_files(daemon)


def diary(daemon: Daemon) -> Path:
    """Today's diary file of the daemon's user root."""
    return daemon.root / "diary" / f"{today()}.md"


# -- D11: bad lines, each answered with an error, the connection kept ------------------------------

DEEP = 100_000
DIGITS = "7" * 5000
REQ = b'{"jsonrpc":"2.0","id":1,"method":"brain_recall","params":{"query":"abuse"'
"""The start of a valid request, for payloads that break only its end."""

BAD_LINES: dict[str, list[tuple[bytes, int, str]]] = {
    "malformed_json": [
        (b'{"jsonrpc":"2.0","id":1,"method":"status"', PARSE, "parse_error"),
        (b'{"jsonrpc":"2.0","id":1,"method":"status"}{}', PARSE, "parse_error"),
        (b'{"jsonrpc":"2.0","id":1,"method":"st\x01atus"}', PARSE, "parse_error"),
        (b"{'jsonrpc':'2.0','id':1,'method':'status'}", PARSE, "parse_error"),
        (b'{"jsonrpc":"2.0",,"id":1}', PARSE, "parse_error"),
        (b'{"jsonrpc":"2.0","id":1,"method":"status",}', PARSE, "parse_error"),
        (b'// {"jsonrpc":"2.0","id":1,"method":"status"}', PARSE, "parse_error"),
        (b"status", PARSE, "parse_error"),
        (b"\x00\x00\x00\x00", PARSE, "parse_error"),
    ],
    "non_object": [
        (b"42", INVALID_REQUEST, "invalid_request"),
        (b'"status"', INVALID_REQUEST, "invalid_request"),
        (b"null", INVALID_REQUEST, "invalid_request"),
        (b"true", INVALID_REQUEST, "invalid_request"),
        (b"[]", INVALID_REQUEST, "invalid_request"),
    ],
    "not_json_rpc": [
        (b'{"id":1,"method":"status"}', INVALID_REQUEST, "invalid_request"),
        (b'{"jsonrpc":"1.0","id":1,"method":"status"}', INVALID_REQUEST, "invalid_request"),
        (b'{"jsonrpc":2.0,"id":1,"method":"status"}', INVALID_REQUEST, "invalid_request"),
        (b'{"jsonrpc":"2.0","id":1}', INVALID_REQUEST, "invalid_request"),
        (b'{"jsonrpc":"2.0","id":1,"method":42}', INVALID_REQUEST, "invalid_request"),
        (b'{"jsonrpc":"2.0","id":1,"method":""}', INVALID_REQUEST, "invalid_request"),
        (b'{"jsonrpc":"2.0","id":1,"method":"status","extra":1}', INVALID_REQUEST, "invalid_request"),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"status"}', INVALID_REQUEST, "invalid_request"),
        (b'{"jsonrpc":"2.0","id":{},"method":"status"}', INVALID_REQUEST, "invalid_request"),
        (b'{"jsonrpc":"2.0","id":true,"method":"status"}', INVALID_REQUEST, "invalid_request"),
        (b'{"jsonrpc":"2.0","id":[1],"method":"status"}', INVALID_REQUEST, "invalid_request"),
    ],
    "unknown_method": [
        (line("nope"), NO_METHOD, "unknown_method"),
        (line("STATUS"), NO_METHOD, "unknown_method"),
        (line("__init__"), NO_METHOD, "unknown_method"),
        (line("status\n"), NO_METHOD, "unknown_method"),
        (line("brain_note.__class__"), NO_METHOD, "unknown_method"),
        (line("../../status"), NO_METHOD, "unknown_method"),
    ],
    "unknown_or_bad_params": [
        (line("status", verbose=True), INVALID_PARAMS, "invalid_params"),
        (line("brain_recall", query="x", colour="red"), INVALID_PARAMS, "invalid_params"),
        (line("brain_recall"), INVALID_PARAMS, "invalid_params"),
        (line("brain_recall", query=["x"]), INVALID_PARAMS, "invalid_params"),
        (line("brain_recall", query="x", limit="5"), INVALID_PARAMS, "invalid_params"),
        (line("brain_recall", query="x", limit=True), INVALID_PARAMS, "invalid_params"),
        (line("brain_recall", query="x", limit=0), INVALID_PARAMS, "invalid_params"),
        (line("brain_recall", query="x", limit=10**19), INVALID_PARAMS, "invalid_params"),
        (line("brain_recall", query="x", type="bogus"), INVALID_PARAMS, "invalid_params"),
        (line("inject", session="s", turn=-1), INVALID_PARAMS, "invalid_params"),
        (b'{"jsonrpc":"2.0","id":1,"method":"status","params":[1,2]}', INVALID_PARAMS, "invalid_params"),
        (b'{"jsonrpc":"2.0","id":1,"method":"status","params":"x"}', INVALID_PARAMS, "invalid_params"),
        (b'{"jsonrpc":"2.0","id":1,"method":"status","params":null}', INVALID_PARAMS, "invalid_params"),
    ],
    "invalid_utf8": [
        (b"\xff\xfe not json", PARSE, "invalid_utf8"),
        (REQ + b',"limit":1,"x":"\xc0\xaf"}}', PARSE, "invalid_utf8"),
        (REQ + b' \xed\xa0\x80"}}', PARSE, "invalid_utf8"),
        (REQ + b' \xe4\xb8"}}', PARSE, "invalid_utf8"),
        (REQ + b' caf\xe9"}}', PARSE, "invalid_utf8"),
        (b"\xf8\x88\x80\x80\x80", PARSE, "invalid_utf8"),
    ],
    "nan_and_infinity": [
        (REQ + b',"limit":NaN}}', PARSE, "not_finite"),
        (REQ + b',"limit":Infinity}}', PARSE, "not_finite"),
        (REQ + b',"limit":-Infinity}}', PARSE, "not_finite"),
        (b'{"jsonrpc":"2.0","id":NaN,"method":"status"}', PARSE, "not_finite"),
    ],
    "duplicate_keys": [
        (b'{"jsonrpc":"2.0","id":1,"id":2,"method":"status"}', PARSE, "duplicate_key"),
        (b'{"jsonrpc":"2.0","id":1,"method":"status","method":"reindex"}', PARSE, "duplicate_key"),
        (REQ + b',"query":"other"}}', PARSE, "duplicate_key"),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"inject","params":{"session":"s","signals":{"cwd":"/a","cwd":"/b"}}}',
            PARSE,
            "duplicate_key",
        ),
    ],
    "lone_surrogate": [
        (REQ + b',"project":"\\ud800"}}', PARSE, "lone_surrogate"),
        (b'{"jsonrpc":"2.0","id":1,"method":"brain_recall","params":{"query":"\\udfff"}}', PARSE, "lone_surrogate"),
        (b'{"jsonrpc":"2.0","id":1,"method":"brain_note","params":{"\\ud800":"x"}}', PARSE, "lone_surrogate"),
        (b'{"jsonrpc":"2.0","id":"\\udc00\\ud800","method":"status"}', PARSE, "lone_surrogate"),
        (b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}', PARSE, "lone_surrogate"),
    ],
    "deep_nesting": [
        (b"[" * DEEP, PARSE, "too_deep"),
        (b"[" * DEEP + b"]" * DEEP, PARSE, "too_deep"),
        (b'{"a":' * (DEEP // 2), PARSE, "too_deep"),
        (REQ + b',"x":' + b"[" * 65 + b"]" * 65 + b"}}", PARSE, "too_deep"),
    ],
    "huge_numbers": [
        (b'{"jsonrpc":"2.0","id":' + DIGITS.encode() + b',"method":"status"}', PARSE, "number_too_large"),
        (REQ + b',"limit":' + DIGITS.encode() + b"}}", PARSE, "number_too_large"),
        (REQ + b',"limit":-' + DIGITS.encode() + b"}}", PARSE, "number_too_large"),
        (REQ + b',"limit":' + DIGITS.encode() + b".5}}", PARSE, "number_too_large"),
        (REQ + b',"limit":1e999999}}', PARSE, "number_too_large"),
    ],
    "oversized_batch": [
        (b"[" + b",".join([line("status").rstrip()] * (MAX_BATCH + 1)) + b"]", INVALID_REQUEST, "too_large"),
    ],
}


def test_bad_lines_are_answered_and_the_connection_lives_on(hostile: Daemon) -> None:
    with Raw(hostile.socket) as peer:
        for kind, payloads in BAD_LINES.items():
            for payload, code, reason in payloads:
                peer.send(payload + b"\n")
                assert error_of(peer.reply()) == (code, reason), f"{kind}: {payload[:120]!r}"
                assert peer.call("status", 7)["result"]["state"] == "ready", f"{kind}: the connection died"
            assert_serves(hostile)
    finish(hostile)


def test_batches_notifications_and_odd_framing_are_served(hostile: Daemon) -> None:
    batch = b"[" + b",".join([b"1", b'"x"', line("nope", 2).rstrip(), line("status", 3).rstrip()]) + b"]\n"
    padded = line("status", 6).rstrip(b"\n")
    padded += b" " * (MAX_LINE - len(padded) - 1) + b"\n"
    with Raw(hostile.socket) as peer:
        peer.send(batch)
        replies = peer.reply()
        assert [error_of(r) for r in replies[:3]] == [(INVALID_REQUEST, "invalid_request")] * 2 + [
            (NO_METHOD, "unknown_method")
        ], "a batch is answered member by member"
        assert replies[3]["id"] == 3 and replies[3]["result"]["state"] == "ready"
        peer.send(line("nope", None) + line("brain_recall", None, colour="red") + line("brain_note", None, text=""))
        assert peer.call("status", 4)["id"] == 4, "a failed notification must never be answered"
        peer.send(line("status", 5).rstrip(b"\n") + b"\r\n" + b"\n" * 100_000 + b"   \t\n")
        assert peer.reply()["id"] == 5, "CRLF and blank lines are framing, not requests"
        peer.send(padded)
        assert peer.reply()["id"] == 6, "a line of exactly the limit must be served"
    finish(hostile)


# -- D11: abuse of the connection itself -----------------------------------------------------------


@pytest.mark.parametrize("newline", [False, True], ids=["unterminated", "terminated"])
def test_a_line_over_one_mebibyte_is_refused_and_that_connection_closed(hostile: Daemon, newline: bool) -> None:
    with Raw(hostile.socket) as peer:
        peer.send(REQ + b"x" * MAX_LINE + (b"\n" if newline else b""))
        assert error_of(peer.reply()) == (INVALID_REQUEST, "too_large")
        assert peer.rest() == b""
    finish(hostile)


def test_a_silent_client_blocks_no_one(hostile: Daemon) -> None:
    with Raw(hostile.socket) as silent:
        assert_serves(hostile)
        assert_serves(hostile)
        silent.sock.settimeout(0.0)
        with pytest.raises(BlockingIOError):
            silent.sock.recv(1)  # still open, never answered: it asked nothing
    finish(hostile)


def test_silent_clients_up_to_the_cap_make_room_for_the_next_one(hostile: Daemon) -> None:
    with contextlib.ExitStack() as stack:
        silent = [stack.enter_context(admitted(hostile)) for _ in range(CAP)]
        with Raw(hostile.socket) as late:
            assert late.call("status")["result"]["state"] == "ready"
        assert error_of(silent[0].reply()) == (APPLICATION, "busy")  # the longest silent one was closed
        assert silent[0].rest() == b""
        assert all("result" in peer.call("status") for peer in silent[1:])
    finish(hostile)


@contextlib.contextmanager
def admitted(daemon: Daemon) -> Iterator[Raw]:
    """A connection the daemon has admitted (it answered once), then left silent."""
    peer = wait_until(lambda: _admit(daemon), WAIT, "a connection to be admitted")
    try:
        yield peer
    finally:
        peer.close()


def _admit(daemon: Daemon) -> Raw | None:
    """Connect and prove admission with one call; None when told busy by connections still closing."""
    peer = Raw(daemon.socket)
    if "result" in peer.call("status"):
        return peer
    peer.close()
    return None


def test_a_client_dripping_one_byte_at_a_time_is_served(hostile: Daemon) -> None:
    with Raw(hostile.socket) as peer:
        for byte in line("status", 5):
            peer.send(bytes([byte]))
            select.select([], [], [], 0.001)  # pace: one byte per write, each its own segment
        assert peer.reply()["id"] == 5
    finish(hostile)


def test_a_line_dripped_slower_than_the_read_timeout_is_cut_off(hostile: Daemon) -> None:
    payload = line("brain_note", 6, text="d" * 400)
    with Raw(hostile.socket) as peer:
        sent = 0
        while sent < len(payload) and peer.send(payload[sent : sent + 1]):
            sent += 1
            if select.select([peer.sock], [], [], 0.02)[0]:  # a byte per 20 ms, until the daemon hangs up
                break
        assert sent < len(payload), "the daemon waited for the whole dripped line"
        assert peer.rest() == b""
    assert "d" * 400 not in diary(hostile).read_text()
    finish(hostile)


def test_a_thousand_connections_at_once(hostile: Daemon) -> None:
    peers: list[Raw] = []
    try:
        for _ in range(1000):
            peers.append(Raw(hostile.socket))
        for n, peer in enumerate(peers):
            peer.send(line("status", n))
        replies = [peer.reply() for peer in peers]
    finally:
        for peer in peers:
            peer.close()
    served = [r for r in replies if "result" in r]
    refused = [error_of(r) for r in replies if "result" not in r]
    assert 1 <= len(served) <= CAP and len(served) + len(refused) == 1000
    assert set(refused) == {(APPLICATION, "busy")}
    finish(hostile)


def test_a_client_that_never_reads_its_replies_is_dropped(hostile: Daemon) -> None:
    hog = Raw(hostile.socket, timeout=60)
    outcome: list[str] = []

    def flood() -> None:
        """Pipeline requests with big replies and never read one; ends when the daemon hangs up."""
        ok = all(hog.send(line("tools", n)) for n in range(20_000))
        outcome.append("still open" if ok else "hung up")

    writer = threading.Thread(target=flood, name="hog")
    writer.start()
    try:
        assert_serves(hostile)  # served while the hog is stuck on its full socket
        wait_until(lambda: not writer.is_alive(), 60, "the daemon to drop the client that never reads")
    finally:
        with contextlib.suppress(OSError):  # already cut by the daemon, or stuck: unblock the flood
            hog.sock.shutdown(socket.SHUT_RDWR)
        writer.join()
        hog.close()
    assert outcome == ["hung up"]
    finish(hostile)


def test_a_disconnect_mid_reply_harms_nothing(hostile: Daemon) -> None:
    with Raw(hostile.socket) as peer:
        peer.send(b"".join(line("tools", n) for n in range(200)))
        assert peer.sock.recv(1000)
    finish(hostile)


def test_a_disconnect_mid_request_harms_nothing(hostile: Daemon) -> None:
    with Raw(hostile.socket) as peer:
        peer.send(line("brain_note", 1, text="never finished")[:40])
    assert_serves(hostile)
    assert "never finished" not in diary(hostile).read_text()
    finish(hostile)


def test_a_write_whose_client_left_is_still_whole_on_disk(hostile: Daemon) -> None:
    with Raw(hostile.socket) as peer:
        peer.send(line("brain_note", 1, text="acknowledged to nobody"))
        peer.sock.shutdown(socket.SHUT_WR)
        assert peer.reply()["id"] == 1  # a half-closed client still gets its answer
        assert peer.rest() == b""
    assert "acknowledged to nobody" in hostile.recall("acknowledged nobody")
    with Raw(hostile.socket) as peer:
        peer.send(line("brain_note", 2, text="written while its client hung up"))
    wait_until(lambda: "written while its client hung up" in hostile.recall("hung up"), WAIT, "the orphan note")
    lines = diary(hostile).read_text().splitlines()
    assert sum("written while its client hung up" in entry for entry in lines) == 1
    finish(hostile)


def test_a_reply_naming_a_file_with_undecodable_bytes_is_still_sent(make_daemon: Callable[..., Daemon]) -> None:
    daemon = make_daemon(SERVER, start=False)
    (daemon.root / "diary").mkdir(parents=True)
    os.close(os.open(bytes(daemon.root / "diary") + b"/\xff\xfe.md", os.O_CREAT | os.O_WRONLY, 0o600))
    daemon.start()
    rejected = daemon.rejected()
    assert rejected == {str(daemon.root / "diary") + "/\\xff\\xfe.md": "invalid_date"}, rejected
    finish(daemon)


# -- D11: path traversal in every path-like parameter ----------------------------------------------

CANARY = "canarysecret7"
PATH_PARAMS = (
    "project",
    "scope",
    "name",
    "section",
    "title",
    "at",
    "session",
    "key",
    "triggers",
    "fp",
    "type",
    "realm",
)
"""Every param that names a file, a directory, a unit in a file, or a record of the daemon's state."""
DOCUMENTED_METHODS: dict[str, dict[str, Any]] = {
    "inject": {"session": "probe", "project": None, "signals": None},
    "memory.list": {"type": None, "project": None},
    "memory.dump": {"type": None, "project": None},
    "memory.query": {"term": "probe", "project": None},
    "memory.entries": {"term": None, "project": None},
    "memory.add": {"text": "probe", "type": None, "key": None, "triggers": None, "project": None},
    "memory.edit": {"fp": "000000000000", "text": "probe"},
    "memory.remove": {"fp": "000000000000"},
    "memory.undo": {"fp": "000000000000"},
    "memory.pin": {"fp": "000000000000"},
    "memory.unpin": {"fp": "000000000000"},
}
"""Methods of docs/protocol.md that `tools` does not list: their params (None: optional), probed the same way."""


def traversals(base: Path) -> list[Any]:
    """Relative, absolute, encoded and disguised ways out of a root, aimed at the `outside` canary."""
    outside = base / "outside"
    return [
        "..",
        "../..",
        "../outside",
        "../../outside/secret",
        "../../../../../../../../../outside/secret",
        "logs/../../outside/secret",
        "diary/../../outside",
        "./../outside",
        str(outside),
        str(outside / "secret"),
        f"{base}/root/../outside/secret",
        "..\\..\\outside\\secret",
        "%2e%2e%2foutside%2fsecret",
        "....//....//outside",
        "~/outside",
        "outside/secret\x00.md",
        "secret.md/..",
        "\u2025/outside",
        "\uff0e\uff0e/outside",
        "..\u2215outside",
        "/",
        "",
        " ",
        ".",
        "secret\n../..",
        ["../outside", "/"],
        {"path": "../outside"},
    ]


def project_traversals(base: Path) -> list[Any]:
    """Ways a project path could leave the project: relative, unnormalised, not a directory, NUL."""
    return [
        "../outside",
        "proj/../outside",
        "outside",
        "~/outside",
        "./outside",
        f"{base}/nowhere/../../outside-not-there",
        f"{base}/outside/secret.md",
        f"{base}/proj\x00/../outside",
        "/nonexistent/../../nowhere",
        "",
        ["../outside"],
    ]


def probe_params(method: str, schema: dict[str, Any], param: str, value: Any, proj: str) -> dict[str, Any]:
    """Params that reach the code behind `param`: valid required ones, the scope it needs, approval given."""
    props = schema.get("properties", {})
    params: dict[str, Any] = {name: _filler(name, props[name]) for name in schema.get("required", [])}
    if "approved" in props:
        params["approved"] = True
    if "scope" in props and param != "scope":
        params["scope"] = "project" if param == "project" else "root" if param == "section" else "home"
    if params.get("scope") == "project" and param != "project":
        params["project"] = proj
    if method == "memory_correct" and params.get("scope") != "root":
        params.update(name="probe", title="probe")  # the unit it addresses: logfile `probe`, entry `probe`
    params[param] = value
    return params


def _filler(name: str, spec: dict[str, Any]) -> Any:
    """A valid value for a required param other than the one probed."""
    if "enum" in spec:
        return "home" if name == "scope" else spec["enum"][0]
    return {"string": "probe", "integer": spec.get("minimum", 1), "boolean": True, "array": []}.get(
        spec.get("type", "string"), "probe"
    )


def spec_schema(params: dict[str, Any]) -> dict[str, Any]:
    """A schema for a method known only from docs/protocol.md: required params are those with a value."""
    props = {name: {"type": "array" if name == "triggers" else "string"} for name in params}
    return {"properties": props, "required": [name for name, value in params.items() if value is not None]}


def outside_the_root(base: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under the test's base that no memory root, state or socket owns."""
    owned = ("root", "state", "run", "daemon.log", "braind.yaml", "proj/.agents")
    found: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), base)
            if not any(rel == o or rel.startswith(o + "/") for o in owned):
                info = os.lstat(os.path.join(dirpath, name))
                found[rel] = (info.st_size, info.st_mtime_ns)
    return found


@pytest.fixture
def traversal_daemon(make_daemon: Callable[..., Daemon]) -> Daemon:
    """A daemon with a project, a logfile and a section to aim at, and a canary beside the root."""
    daemon = make_daemon(SERVER)
    outside = daemon.base / "outside"
    for rel in ("secret", "secret.md", "logs/secret.md", f"diary/{today()}.md", "MEMORY.md"):
        (outside / rel).parent.mkdir(parents=True, exist_ok=True)
        (outside / rel).write_text(f"[09:00] {CANARY}\n## {CANARY}\n{CANARY}\n")
    (daemon.base / "proj").mkdir()
    for scope in ("home", "project"):
        daemon.call(
            "memory_creator",
            scope=scope,
            name="probe",
            type="project",
            description="d",
            heading="h",
            project=str(daemon.base / "proj"),
            approved=True,
        )
        daemon.call(
            "memory_write_logfile",
            scope=scope,
            name="probe",
            content="probe body",
            title="probe",
            project=str(daemon.base / "proj"),
            approved=True,
        )
    daemon.call("memory_write_root", section="probe", content="probe body", approved=True)
    daemon.call("brain_note", text="traversal probe note")
    return daemon


def method_schemas(daemon: Daemon) -> dict[str, dict[str, Any]]:
    """Every method to probe: the `tools` listing with its schemas, plus the other documented methods."""
    schemas = {tool["name"]: tool["inputSchema"] for tool in daemon.call("tools")}
    for method, params in DOCUMENTED_METHODS.items():
        schemas.setdefault(method, spec_schema(params))
    return schemas


def test_path_traversal_in_every_path_like_param_is_refused_or_harmless(traversal_daemon: Daemon) -> None:
    daemon, base = traversal_daemon, traversal_daemon.base
    proj = str(base / "proj")
    before = outside_the_root(base)
    reasons: dict[tuple[str, str], set[str]] = {}
    for method, schema in method_schemas(daemon).items():
        for param in [p for p in schema["properties"] if p in PATH_PARAMS or p == "signals"]:
            found = reasons.setdefault((method, param), set())
            for value in _values(param, base):
                found.add(_probe(daemon, method, probe_params(method, schema, param, value, proj)))
                assert outside_the_root(base) == before, f"{method} {param}={value!r} touched files outside the root"
            assert_serves(daemon)
    probed = {method for method, _ in reasons}
    assert {
        "brain_note",
        "brain_recall",
        "inject",
        "memory_recall",
        "memory_write_logfile",
        "memory_correct",
        "memory_creator",
        "memory_write_root",
    } <= probed
    for method in ("memory_recall", "memory_write_logfile", "memory_correct", "memory_creator"):
        assert "invalid_name" in reasons[(method, "name")], reasons[(method, "name")]
        assert "path_escape" in reasons[(method, "project")], reasons[(method, "project")]
    for method in ("brain_note", "brain_recall", "inject"):
        assert "path_escape" in reasons[(method, "project")], reasons[(method, "project")]
    finish_with_project(daemon, base / "proj")


def _values(param: str, base: Path) -> list[Any]:
    """The traversal values for one param: signals get them in cwd and files, projects their own list."""
    if param == "project":
        return project_traversals(base)
    if param == "signals":
        return [{"cwd": v, "tools": [{"tool": "edit", "files": [v]}]} for v in traversals(base) if isinstance(v, str)]
    return traversals(base)


def _probe(daemon: Daemon, method: str, params: dict[str, Any]) -> str:
    """Send one probe; its outcome is 'ok' or the error's reason, never an internal error or the canary."""
    with Raw(daemon.socket) as peer:
        peer.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode() + b"\n")
        raw = peer.reader.readline()
    assert CANARY not in raw.decode(), f"{method} {params} leaked a file from outside the root"
    reply = json.loads(raw)
    if "result" in reply:
        return "ok"
    _code, reason = error_of(reply)
    assert reason != "internal", f"{method} {params} crashed the request: {reply}"
    return reason


def finish_with_project(daemon: Daemon, project: Path) -> None:
    """The common end for a daemon that also served a project."""
    assert_serves(daemon)
    assert_no_crash_in_log(daemon)
    assert_index_matches_files(daemon, projects=[project])


# -- D12: permissions, other uids, what lies at the socket path, a rival daemon --------------------

OTHER_UID = 65534
CHILD = r"""
import json, socket, sys
result = {}
try:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(sys.argv[1])
        try:
            sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"brain_recall","params":{"query":"secret"}}\n')
        except OSError:
            pass
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
        result["reply"] = data.decode()
except OSError as exc:
    result["errno"] = exc.errno
print(json.dumps(result))
"""


Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]


def other_uid_runner() -> Runner:
    """Run Python as another uid (as root, or through passwordless sudo), or skip saying why we cannot."""
    pythons = [p for p in (sys.executable, "/usr/bin/python3", shutil.which("python3")) if p]
    for python in pythons:
        for run in _switchers(python):
            if run(["-c", "pass"]).returncode == 0:
                return run
    if os.geteuid() != 0 and not shutil.which("sudo"):
        pytest.skip(f"not root and no sudo: this machine cannot run a process as uid {OTHER_UID}")
    pytest.skip(f"no way found to run a Python interpreter as uid {OTHER_UID} (not root, or sudo needs a password)")


def _switchers(python: str) -> list[Runner]:
    """The ways to run `python` as OTHER_UID this machine may allow."""
    found = []
    if os.geteuid() == 0:
        found.append(_runner([python], {"user": OTHER_UID, "group": OTHER_UID, "extra_groups": []}))
    if shutil.which("sudo"):
        found.append(_runner(["sudo", "-n", "-u", f"#{OTHER_UID}", python], {}))
    return found


def _runner(prefix: list[str], switch: dict[str, Any]) -> Runner:
    """A runner of `prefix -I args...`; a refusal to start counts as a failed run."""

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run([*prefix, "-I", *args], capture_output=True, text=True, timeout=60, cwd="/", **switch)
        except OSError as exc:
            return subprocess.CompletedProcess(prefix, 126, "", str(exc))

    return run


def connect_as_other_uid(run: Runner, path: Path) -> dict[str, Any]:
    """What a process of another uid gets from the socket: a connect errno, or the bytes sent back."""
    done = run(["-c", CHILD, str(path)])
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def open_up(*paths: Path, mode: int = 0o711) -> None:
    """Let other uids walk through the test's own directories."""
    for path in paths:
        os.chmod(path, mode)


def test_the_socket_is_0600_in_a_0700_directory_of_ours(hostile: Daemon) -> None:
    sock, directory = os.lstat(hostile.socket), os.lstat(hostile.socket.parent)
    assert stat.S_ISSOCK(sock.st_mode) and stat.S_IMODE(sock.st_mode) == 0o600
    assert stat.S_ISDIR(directory.st_mode) and stat.S_IMODE(directory.st_mode) == 0o700
    assert sock.st_uid == directory.st_uid == os.getuid()
    finish(hostile)


def test_another_uid_is_refused_by_the_filesystem(hostile: Daemon) -> None:
    run = other_uid_runner()
    open_up(hostile.base.parent, hostile.base)
    assert connect_as_other_uid(run, hostile.socket) == {"errno": errno.EACCES}, "the 0700 directory let it in"
    open_up(hostile.socket.parent)
    assert connect_as_other_uid(run, hostile.socket) == {"errno": errno.EACCES}, "the 0600 socket let it in"
    finish(hostile)


def test_another_uid_is_refused_by_peer_credentials_when_the_socket_is_opened_up(hostile: Daemon) -> None:
    run = other_uid_runner()
    open_up(hostile.base.parent, hostile.base, hostile.socket.parent)
    os.chmod(hostile.socket, 0o666)
    got = connect_as_other_uid(run, hostile.socket)
    assert "errno" not in got, "could not even connect to the opened-up socket"
    replies = [json.loads(raw) for raw in got["reply"].splitlines()]
    assert [error_of(r) for r in replies] == [(APPLICATION, "unauthorized")], got
    assert "before the abuse" not in got["reply"]
    finish(hostile)


def _dangling(path: Path) -> None:
    path.symlink_to(path.parent / "nowhere.sock")


def _to_stale_socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path.parent / "stale.sock"))
    path.symlink_to(path.parent / "stale.sock")


def _to_file(path: Path) -> None:
    (path.parent / "target").write_text("a file the symlink points at\n")
    path.symlink_to(path.parent / "target")


def _regular_file(path: Path) -> None:
    path.write_text("someone's precious file\n")


def _directory(path: Path) -> None:
    path.mkdir()
    (path / "inside").write_text("kept\n")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


OBSTACLES = {
    "dangling_symlink": _dangling,
    "symlink_to_stale_socket": _to_stale_socket,
    "symlink_to_file": _to_file,
    "regular_file": _regular_file,
    "directory": _directory,
    "fifo": _fifo,
}


def fingerprint(path: Path) -> tuple[Any, ...]:
    """What must not change about whatever sits at a path: kind, inode, link target, content."""
    info = os.lstat(path)
    target = os.readlink(path) if stat.S_ISLNK(info.st_mode) else None
    content = path.read_bytes() if stat.S_ISREG(info.st_mode) else None
    listing = sorted(os.listdir(path)) if stat.S_ISDIR(info.st_mode) else None
    return info.st_mode, info.st_ino, target, content, listing


def remove(path: Path) -> None:
    """Take away whatever the test put at a path."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def test_what_is_not_a_socket_at_the_socket_path_is_refused_and_left_in_place(
    make_daemon: Callable[..., Daemon],
) -> None:
    daemon = make_daemon(SERVER, start=False)
    daemon.socket.parent.mkdir(mode=0o700, parents=True)
    for kind, make in OBSTACLES.items():
        make(daemon.socket)
        before = fingerprint(daemon.socket)
        assert "not_a_socket" in refused_start(daemon), kind
        assert fingerprint(daemon.socket) == before, f"{kind} was touched"
        remove(daemon.socket)
    daemon.start()
    finish(daemon)


def test_a_second_daemon_on_the_same_state_dir_refuses_to_start(make_daemon: Callable[..., Daemon]) -> None:
    """Another socket, even the first one's socket file gone: the state directory still has one daemon."""
    first = make_daemon(SERVER)
    first.call("brain_note", text="the first daemon holds this")
    shared = {**SERVER, "memory_root": str(first.root), "state_dir": str(first.state)}
    second = make_daemon(shared, start=False, name="second")
    second.root, second.state = first.root, first.state  # what the helpers below look at
    logged = refused_start(second)
    assert "already_running" in logged and str(first.state) in logged, "with a socket of its own"
    first.socket.unlink()  # what a person clearing a "stale" socket by hand does
    assert "already_running" in refused_start(second), "after the first one's socket file was removed"
    first.stop()
    second.start()  # the lock goes with the daemon that held it
    assert "the first daemon holds this" in second.recall("first daemon")
    finish(second)


def test_a_second_daemon_on_a_live_socket_refuses_to_start(make_daemon: Callable[..., Daemon]) -> None:
    first = make_daemon(SERVER)
    first.call("brain_note", text="the first daemon holds this")
    before = fingerprint(first.socket)
    second = make_daemon({**SERVER, "socket": str(first.socket)}, start=False, name="second")
    assert "already_running" in refused_start(second), "beside a serving daemon"
    with contextlib.ExitStack() as stack:
        for _ in range(CAP):
            stack.enter_context(admitted(first))
        assert "already_running" in refused_start(second), "beside a daemon with every connection taken"
    assert first.proc is not None
    first.proc.send_signal(signal.SIGSTOP)
    try:
        assert "already_running" in refused_start(second), "beside a wedged (SIGSTOPped) daemon"
    finally:
        first.proc.send_signal(signal.SIGCONT)
    assert fingerprint(first.socket) == before
    assert "the first daemon holds this" in first.recall("first daemon")
    finish(first)
    assert_index_matches_files(second)
