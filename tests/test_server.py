"""The socket server on real Unix sockets: framing, limits, peer checks and lifecycle."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from braind.errors import InvalidParams, MethodNotFound, Unavailable
from braind.rpc.methods import answers_inline
from braind.rpc.protocol import MAX_LINE
from braind.rpc.server import SocketServer
from tests.conftest import Daemon, wait_until

WAIT = 10.0


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fail any test that leaves a thread running once its fixtures are torn down."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + WAIT
    for thread in set(threading.enumerate()) - before:
        thread.join(max(0.0, deadline - time.monotonic()))
    leaked = sorted(thread.name for thread in set(threading.enumerate()) - before)
    assert not leaked, f"threads left running: {leaked}"


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short private directory: AF_UNIX paths are limited to 108 bytes and tmp_path is longer."""
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="bd"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Toy:
    """A dispatcher with one method per behaviour the server has to survive."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.noted: list[dict[str, Any]] = []
        self.waiting = 0  # slow requests in flight right now
        self._count = threading.Lock()

    def __call__(self, method: str, params: dict[str, Any]) -> Any:
        if method == "echo":
            return params
        if method == "note":
            self.noted.append(params)
            return None
        if method == "refuse":
            raise InvalidParams("bad_limit", "limit must be 1-500", key="limit")
        if method == "crash":
            raise RuntimeError("boom")
        if method == "unserialisable":
            return {"value": object()}
        if method == "slow":
            return self.slow()
        if method in ("where", "where_inline"):
            return threading.current_thread().name
        raise MethodNotFound("unknown_method", f"no method {method!r}")

    def slow(self) -> str:
        """Block until the test releases us, so a request can be caught in flight."""
        with self._count:
            self.waiting += 1
        self.entered.set()
        try:
            if not self.release.wait(WAIT):
                raise TimeoutError("the test never released the slow method")
        finally:
            with self._count:
                self.waiting -= 1
        return "done"


@pytest.fixture
def toy() -> Iterator[Toy]:
    dispatcher = Toy()
    yield dispatcher
    dispatcher.release.set()


# Every method of the toy but the one that blocks, answered on the event loop: what the daemon's reads are.
INLINE = ("echo", "note", "refuse", "crash", "unserialisable", "where_inline")


def inline(method: str, params: object) -> bool:
    """The toy requests the loop answers itself."""
    return method in INLINE


@pytest.fixture(params=[False, True], ids=["on-workers", "inline"])
def server(sock_dir: Path, toy: Toy, request: pytest.FixtureRequest) -> Iterator[SocketServer]:
    """The server with every method handed to a worker, and with the quick ones answered on the loop."""
    with SocketServer(
        sock_dir / "run" / "braind.sock", toy, inline=inline if request.param else lambda method, params: False
    ) as running:
        yield running


def request(method: str, request_id: Any = 1, **params: Any) -> bytes:
    """One request line; request_id=None makes a notification."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if request_id is not None:
        message["id"] = request_id
    return json.dumps(message).encode() + b"\n"


class Peer:
    """A raw client: bytes out, whole lines in, a deadline on every read."""

    def __init__(self, address: Path | str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(WAIT)
        try:
            self.sock.connect(str(address))
        except OSError:
            self.sock.close()
            raise
        self.reader = self.sock.makefile("rb")

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.reader.close()
        self.sock.close()

    def send(self, data: bytes) -> None:
        """Send everything, tolerating a server that hangs up while we are still writing."""
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.sock.sendall(data)

    def reply(self) -> Any:
        """The next reply line, decoded."""
        line = self.reader.readline()
        assert line.endswith(b"\n"), f"connection ended mid-reply: {line[:80]!r}"
        return json.loads(line)

    def call(self, method: str, request_id: Any = 1, **params: Any) -> Any:
        self.send(request(method, request_id, **params))
        return self.reply()

    def rest(self) -> bytes:
        """Everything until the server hangs up; a reset counts as hanging up."""
        try:
            return self.reader.read()
        except ConnectionResetError:
            return b""


def patient_peer(address: Path | str) -> Peer:
    """Connect, waiting while the listen backlog is full (a Unix socket then refuses with EAGAIN)."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            return Peer(address)
        except BlockingIOError:
            assert time.monotonic() < deadline, "the server never made room in its backlog"
            time.sleep(0.001)


def reason(reply: dict[str, Any]) -> str:
    """The machine reason of an error reply, the part clients branch on."""
    return str(reply["error"]["data"]["reason"])


def wait_for(condition: Callable[[], bool]) -> None:
    """Poll until the condition holds, failing the test after WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def still_serves(path: Path | str) -> bool:
    """A fresh connection gets an answer: the daemon survived whatever came before."""
    with Peer(path) as peer:
        return bool(peer.call("echo", 99, alive=True)["result"] == {"alive": True})


def test_a_request_is_answered(server: SocketServer) -> None:
    with Peer(server.path) as peer:
        assert peer.call("echo", 7, text="é") == {"jsonrpc": "2.0", "id": 7, "result": {"text": "é"}}


def test_pipelined_requests_are_answered_in_order(server: SocketServer, toy: Toy) -> None:
    methods = ["echo", "refuse", "crash", "nope", "unserialisable"]
    lines = [request(methods[n % 5], n, n=n) + request("note", None, n=n) for n in range(100)]
    with Peer(server.path) as peer:
        peer.send(b"".join(lines) + request("echo", 100))
        replies = [peer.reply() for _ in range(101)]
    assert [reply["id"] for reply in replies] == list(range(101))
    outcomes = [reply["result"]["n"] if "result" in reply else reply["error"]["code"] for reply in replies[:5]]
    assert outcomes == [0, -32602, -32603, -32601, -32603]
    assert toy.noted == [{"n": n} for n in range(100)]


def test_errors_are_answered_and_the_connection_lives_on(
    server: SocketServer, caplog: pytest.LogCaptureFixture
) -> None:
    with Peer(server.path) as peer:
        refused = peer.call("refuse")["error"]
        assert refused == {
            "code": -32602,
            "message": "limit must be 1-500",
            "data": {"reason": "bad_limit", "key": "limit"},
        }
        assert (peer.call("nope")["error"]["code"], reason(peer.call("nope"))) == (-32601, "unknown_method")
        for method in ("crash", "unserialisable"):
            assert peer.call(method)["error"]["code"] == -32603
            assert reason(peer.call(method)) == "internal"
        assert peer.call("echo", ok=1)["result"] == {"ok": 1}
    tracebacks = [record for record in caplog.records if record.name == "braind.rpc.server" and record.exc_info]
    assert {record.getMessage() for record in tracebacks} == {
        "request 'crash' failed",
        "request 'unserialisable' failed",
    }


def test_notifications_are_run_but_never_answered(server: SocketServer, toy: Toy) -> None:
    with Peer(server.path) as peer:
        peer.send(request("note", None, a=1) + request("crash", None) + request("nope", None))
        assert peer.call("echo", 2)["id"] == 2
    assert toy.noted == [{"a": 1}]


def test_a_batch_is_answered_in_one_line(server: SocketServer) -> None:
    batch = [
        json.loads(request("echo", 1, a=1)),
        json.loads(request("note", None)),
        7,
        json.loads(request("refuse", 2)),
    ]
    with Peer(server.path) as peer:
        peer.send(json.dumps(batch).encode() + b"\n" + json.dumps(batch[1:2]).encode() + b"\n")
        replies = peer.reply()
        assert [(reply["id"], "error" in reply) for reply in replies] == [(1, False), (None, True), (2, True)]
        assert peer.call("echo", 3)["id"] == 3


def test_blank_lines_are_ignored(server: SocketServer) -> None:
    with Peer(server.path) as peer:
        peer.send(b"\n  \r\n")
        assert peer.call("echo", 1)["id"] == 1


def test_garbage_is_answered_and_breaks_nothing(server: SocketServer) -> None:
    with Peer(server.path) as peer:
        peer.send(b"\xff\xfe\x00garbage\n{not json\n" + b"[" * 100_000 + b"\n")
        replies = [peer.reply() for _ in range(3)]
        assert [(reply["id"], reason(reply)) for reply in replies] == [
            (None, "invalid_utf8"),
            (None, "parse_error"),
            (None, "too_deep"),
        ]
        assert peer.call("echo", 2)["id"] == 2
    assert still_serves(server.path)


def test_a_line_of_exactly_the_limit_is_accepted(server: SocketServer) -> None:
    line = request("echo", 1).rstrip(b"\n")
    with Peer(server.path) as peer:
        peer.send(line + b" " * (MAX_LINE - len(line) - 1) + b"\n")
        assert peer.reply()["result"] == {}


@pytest.mark.parametrize("extra", [b"", b"\n", b"x" * MAX_LINE])
def test_an_oversized_line_is_refused_and_the_connection_closed(server: SocketServer, extra: bytes) -> None:
    line = request("echo", 1).rstrip(b"\n")
    with Peer(server.path) as peer:
        peer.send(line + b" " * (MAX_LINE - len(line)) + extra)
        reply = peer.reply()
        assert (reply["id"], reply["error"]["code"], reason(reply)) == (None, -32600, "too_large")
        assert peer.rest() == b""
    assert still_serves(server.path)


def test_beyond_the_cap_the_longest_idle_connection_makes_room(sock_dir: Path, toy: Toy) -> None:
    with SocketServer(sock_dir / "s", toy, max_connections=2) as server, Peer(server.path) as first:
        with Peer(server.path) as second:
            assert first.call("echo")["id"] == second.call("echo")["id"] == 1
            assert second.call("echo", 2)["id"] == 2  # second was used last: first has been idle longer
            with Peer(server.path) as third:
                assert third.call("echo", 3)["id"] == 3
                assert reason(first.reply()) == "busy"
                assert first.rest() == b""
                assert second.call("echo", 4)["id"] == 4
                assert server.connection_count == 2
        wait_for(lambda: server.connection_count == 0)
        assert still_serves(server.path)


def test_when_every_connection_has_a_request_in_flight_a_new_one_is_told_busy(sock_dir: Path, toy: Toy) -> None:
    with SocketServer(sock_dir / "s", toy, max_connections=2) as server:
        with Peer(server.path) as first, Peer(server.path) as second:
            first.send(request("slow", 1))
            second.send(request("slow", 2))
            wait_for(lambda: toy.waiting == 2)
            with Peer(server.path) as third:
                assert reason(third.reply()) == "busy"
                assert third.rest() == b""
            toy.release.set()
            assert first.reply()["result"] == second.reply()["result"] == "done"
        assert still_serves(server.path)


IDLE_PEERS = 1000


@pytest.fixture
def many_descriptors() -> Iterator[None]:
    """Room in this process for both ends of IDLE_PEERS connections, or a skip saying why there is none."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = 2 * IDLE_PEERS + 256
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"the hard open-file limit is {hard}; {needed} descriptors are needed")
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.usefixtures("many_descriptors")
def test_a_thousand_idle_connections_take_no_thread_and_another_client_is_served(sock_dir: Path, toy: Toy) -> None:
    workers = 4
    before = threading.active_count()
    with SocketServer(sock_dir / "s", toy, workers=workers) as server, contextlib.ExitStack() as stack:
        idle = [stack.enter_context(patient_peer(server.path)) for _ in range(IDLE_PEERS)]
        wait_for(lambda: server.connection_count == IDLE_PEERS)
        assert threading.active_count() - before <= workers + 2
        assert still_serves(server.path)
        for n, peer in enumerate(idle):
            peer.send(request("echo", n))
        assert [peer.reply()["id"] for peer in idle] == list(range(IDLE_PEERS))
        assert threading.active_count() - before <= workers + 2


@pytest.mark.usefixtures("many_descriptors")
def test_the_daemon_raises_its_open_file_limit_to_hold_many_connections(make_daemon: Callable[..., Daemon]) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    daemon = make_daemon(start=False)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))  # inherited: the daemon starts with too few
    try:
        daemon.start(wait=False)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    wait_until(daemon.ready, 60, "the daemon to be ready")
    assert daemon.proc is not None
    assert open_file_limits(daemon.proc.pid) == (hard, hard)
    with contextlib.ExitStack() as stack:
        held = [stack.enter_context(patient_peer(daemon.socket)) for _ in range(400)]
        for n, peer in enumerate(held):
            peer.send(request("status", n))
        assert [peer.reply()["id"] for peer in held] == list(range(400))
        assert daemon.call("status")["state"] == "ready"


def open_file_limits(pid: int) -> tuple[int, int]:
    """A process's soft and hard open-file limits, as the kernel reports them."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError(f"no open-file limit for pid {pid}")


def test_the_idle_timeout_closes_only_idle_connections(sock_dir: Path, toy: Toy) -> None:
    server = SocketServer(sock_dir / "s", toy, idle_timeout=1.0, read_timeout=WAIT)
    with server, Peer(server.path) as busy, Peer(server.path) as midline:
        busy.send(request("slow", 1))
        assert toy.entered.wait(WAIT)
        line = request("echo", 2)
        midline.send(line[:10])
        with Peer(server.path) as idle:
            assert idle.call("echo", 3)["id"] == 3
            assert idle.rest() == b""  # closed without a word, idle_timeout after its reply
        midline.send(line[10:])  # opened before idle, mid-line ever since, and still served
        assert midline.reply()["id"] == 2
        toy.release.set()
        assert busy.reply() == {"jsonrpc": "2.0", "id": 1, "result": "done"}


def test_a_peer_that_never_reads_its_replies_is_dropped_and_the_others_go_on(sock_dir: Path, toy: Toy) -> None:
    outcome: list[str] = []
    with SocketServer(sock_dir / "s", toy, read_timeout=0.5) as server, Peer(server.path) as hog:

        def flood() -> None:
            """Pipeline requests with big replies and never read one; ends when the server hangs up."""
            try:
                for n in range(1000):
                    hog.sock.sendall(request("echo", n, pad="x" * 65536))
            except (BrokenPipeError, ConnectionResetError):
                outcome.append("hung up")
            except TimeoutError:
                outcome.append("stuck")
            else:
                outcome.append("still open")

        writer = threading.Thread(target=flood, name="hog")
        writer.start()
        try:
            assert still_serves(server.path)
            writer.join(WAIT)
            dropped = not writer.is_alive()
        finally:
            with contextlib.suppress(OSError):  # cut already, or stuck: unblock the flood either way
                hog.sock.shutdown(socket.SHUT_RDWR)
            writer.join()
        assert dropped, "the server kept a peer that never read its replies"
        assert outcome == ["hung up"]
        assert still_serves(server.path)


def test_a_slow_request_holds_up_only_its_own_connection(server: SocketServer, toy: Toy) -> None:
    with Peer(server.path) as slow, Peer(server.path) as other:
        slow.send(request("slow", 1) + request("echo", 2) + request("echo", 3))
        assert toy.entered.wait(WAIT)
        assert [other.call("echo", n)["id"] for n in range(10, 13)] == [10, 11, 12]
        slow.sock.settimeout(0.0)
        with pytest.raises(BlockingIOError):
            slow.sock.recv(1)  # echo 2 waits for slow 1: a connection's lines are answered in order
        slow.sock.settimeout(WAIT)
        toy.release.set()
        assert [slow.reply()["id"] for _ in range(3)] == [1, 2, 3]


def test_inline_methods_run_on_the_loop_and_the_others_on_a_worker(sock_dir: Path, toy: Toy) -> None:
    with SocketServer(sock_dir / "braind.sock", toy, inline=inline) as running, Peer(running.path) as peer:
        assert peer.call("where_inline")["result"] == "braind-server"
        assert peer.call("where")["result"] == "braind-worker"
        batch = json.dumps([json.loads(request("where_inline", 1))]).encode() + b"\n"
        peer.send(batch)
        assert [reply["result"] for reply in peer.reply()] == ["braind-worker"]  # a batch always goes to a worker


def test_an_inline_request_is_answered_while_a_worker_waits_and_after_its_own_connections(
    sock_dir: Path, toy: Toy
) -> None:
    running = SocketServer(sock_dir / "braind.sock", toy, inline=inline)
    with running, Peer(running.path) as slow, Peer(running.path) as other:
        slow.send(request("slow", 1) + request("echo", 2) + request("where_inline", 3))
        assert toy.entered.wait(WAIT)
        assert other.call("where_inline", 9)["result"] == "braind-server"
        slow.sock.settimeout(0.0)
        with pytest.raises(BlockingIOError):
            slow.sock.recv(1)  # the inline lines after `slow` wait for its answer
        slow.sock.settimeout(WAIT)
        toy.release.set()
        assert [(r["id"], r["result"]) for r in (slow.reply() for _ in range(3))] == [
            (1, "done"),
            (2, {}),
            (3, "braind-server"),
        ]


def test_a_stalled_line_is_cut_off_but_an_idle_connection_is_kept(sock_dir: Path, toy: Toy) -> None:
    with SocketServer(sock_dir / "s", toy, read_timeout=0.2) as server, Peer(server.path) as idle:
        assert idle.call("echo", 1)["id"] == 1
        with Peer(server.path) as stalled:
            stalled.send(b'{"jsonrpc": "2.0", "method"')
            assert stalled.rest() == b""
        assert idle.call("echo", 2)["id"] == 2


def test_another_uid_is_refused(sock_dir: Path, toy: Toy) -> None:
    if os.getuid() != 0:
        pytest.skip("switching to uid 65534 needs root")
    address = f"\0braind-test-{uuid.uuid4().hex}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)  # abstract: no file permissions, so SO_PEERCRED is the only guard
    listener.listen()
    with SocketServer(sock_dir / "unused", toy, listen_socket=listener):
        reply = json.loads(read_as_uid(65534, address))
        assert (reply["error"]["code"], reason(reply)) == (-32000, "unauthorized")
        assert still_serves(address)


def read_as_uid(uid: int, address: str) -> bytes:
    """What a process of another uid gets from the socket: fork, setuid, connect, read to EOF."""
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # newer Pythons warn on fork with threads
        pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child_read_as_uid(uid, address, write_end)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        output = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child could not switch uid or connect"
    return output


def _child_read_as_uid(uid: int, address: str, out: int) -> None:
    """The forked child: only system calls, then _exit, never back into pytest."""
    code = 1
    try:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(WAIT)
            sock.connect(address)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # refused before or after we wrote
                sock.sendall(request("echo"))
            with contextlib.suppress(ConnectionResetError):  # a hang-up with our request unread
                while chunk := sock.recv(4096):
                    os.write(out, chunk)
        code = 0
    finally:
        os._exit(code)


def test_a_stale_socket_is_replaced(sock_dir: Path, toy: Toy) -> None:
    path = sock_dir / "s"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))
    with SocketServer(path, toy):
        assert still_serves(path)


def test_a_live_socket_is_left_to_its_daemon(server: SocketServer, toy: Toy) -> None:
    rival = SocketServer(server.path, toy)
    with pytest.raises(Unavailable) as refused:
        rival.bind()
    rival.close()
    assert refused.value.reason == "already_running"
    assert still_serves(server.path)


def make_file(path: Path) -> None:
    path.write_text("precious")


def make_dir(path: Path) -> None:
    path.mkdir()


def make_symlink_to_socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path.with_name("target")))
    path.symlink_to(path.with_name("target"))


def make_dangling_symlink(path: Path) -> None:
    path.symlink_to(path.with_name("nowhere"))


@pytest.mark.parametrize("make", [make_file, make_dir, make_symlink_to_socket, make_dangling_symlink])
def test_a_path_that_is_not_a_socket_is_never_removed(sock_dir: Path, toy: Toy, make: Callable[[Path], None]) -> None:
    path = sock_dir / "s"
    make(path)
    before = path.lstat()
    with pytest.raises(Unavailable) as refused:
        SocketServer(path, toy).bind()
    assert refused.value.reason == "not_a_socket"
    assert path.lstat() == before


def test_the_socket_is_0600_in_a_0700_directory(server: SocketServer) -> None:
    assert (server.path.stat().st_mode & 0o7777, server.path.parent.stat().st_mode & 0o7777) == (0o600, 0o700)


def test_a_loose_directory_of_ours_is_tightened(sock_dir: Path, toy: Toy) -> None:
    loose = sock_dir / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    with SocketServer(loose / "s", toy):
        assert loose.stat().st_mode & 0o7777 == 0o700


def test_a_directory_of_another_uid_is_refused(sock_dir: Path, toy: Toy) -> None:
    if os.getuid() != 0:
        pytest.skip("giving a directory to another uid needs root")
    theirs = sock_dir / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(Unavailable) as refused:
        SocketServer(theirs / "s", toy).bind()
    assert refused.value.reason == "unsafe_directory"
    assert list(theirs.iterdir()) == []


def test_a_shared_sticky_directory_is_refused(sock_dir: Path, toy: Toy) -> None:
    shared = sock_dir / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(Unavailable) as refused:
        SocketServer(shared / "s", toy).bind()
    assert refused.value.reason == "unsafe_directory"
    assert shared.stat().st_mode & 0o7777 == 0o1777


def test_close_removes_our_socket(server: SocketServer) -> None:
    server.close()
    assert not server.path.exists()


def test_close_leaves_a_successor_socket_alone(server: SocketServer) -> None:
    server.path.unlink()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as successor:
        successor.bind(str(server.path))
        inode = server.path.stat().st_ino
        server.close()
        assert server.path.stat().st_ino == inode


def test_a_socket_passed_in_is_served_and_left_in_place(sock_dir: Path, toy: Toy) -> None:
    path = sock_dir / "activated.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    with SocketServer(path, toy, listen_socket=listener):
        assert still_serves(path)
    assert path.exists() and listener.fileno() == -1


def test_close_lets_an_in_flight_request_finish(server: SocketServer, toy: Toy) -> None:
    with Peer(server.path) as peer:
        peer.send(request("slow", 1) + request("echo", 2))
        assert toy.entered.wait(WAIT)
        closer = threading.Thread(target=server.close)
        closer.start()
        wait_for(lambda: not server.path.exists())
        toy.release.set()
        assert peer.reply() == {"jsonrpc": "2.0", "id": 1, "result": "done"}
        assert peer.rest() == b""
        closer.join(WAIT)


def test_close_hangs_up_on_idle_connections(server: SocketServer) -> None:
    with Peer(server.path) as peer:
        assert peer.call("echo")["id"] == 1
        server.close()
        assert peer.rest() == b""
    assert server.connection_count == 0


def test_a_client_that_hangs_up_mid_request_harms_nothing(server: SocketServer, toy: Toy) -> None:
    with Peer(server.path) as peer:
        peer.send(request("slow", 1))
        assert toy.entered.wait(WAIT)
    toy.release.set()
    wait_for(lambda: server.connection_count == 0)
    assert still_serves(server.path)


def test_accepting_survives_running_out_of_file_descriptors(sock_dir: Path) -> None:
    path = sock_dir / "s"
    with subprocess.Popen(
        [sys.executable, "-c", FD_STARVED_SERVER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as child:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        with Peer(path) as first, Peer(path) as second:
            assert first.call("echo", 1)["id"] == 1
            second.send(request("echo", 2))
            read_until(child, b"Too many open files")
            first.sock.close()
            first.reader.close()
            assert second.reply()["id"] == 2
        _, err = child.communicate(timeout=WAIT)
    assert child.returncode == 0, err.decode()


FD_STARVED_SERVER = """
import logging, os, resource, sys, time
from pathlib import Path
from braind.rpc.client import Client
from braind.rpc.server import SocketServer
from tests.conftest import Daemon, wait_until

logging.basicConfig(level=logging.WARNING)
server = SocketServer(Path(sys.argv[1]), lambda method, params: params)
server.bind()
server.start()
with Client(server.path) as client:
    client.call("echo", warm="up")
while server.connection_count:
    time.sleep(0.01)
in_use = len(os.listdir("/proc/self/fd")) - 1
resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
print("ready", flush=True)
sys.stdin.read()
server.close()
"""


def read_until(child: subprocess.Popen[bytes], text: bytes) -> bytes:
    """Read the child's stderr until `text` shows up, failing after WAIT seconds."""
    assert child.stderr is not None
    seen = b""
    deadline = time.monotonic() + WAIT
    with selectors.DefaultSelector() as selector:
        selector.register(child.stderr, selectors.EVENT_READ)
        while text not in seen:
            assert selector.select(max(0.0, deadline - time.monotonic())), f"no {text!r} in {seen!r}"
            chunk = os.read(child.stderr.fileno(), 4096)
            assert chunk, f"child ended without {text!r}: {seen!r}"
            seen += chunk
    return seen


@pytest.mark.parametrize(
    ("method", "params", "on_loop"),
    [
        ("brain_recall", {"query": "tea"}, True),
        ("memory.query", {}, True),
        ("inject", {"session": "s"}, True),
        ("inject", {"session": "s", "signals": {"cwd": "/p"}}, True),
        ("inject", {"session": "s", "signals": {"cwd": "/p", "tools": [{"tool": "Edit"}]}}, False),
        ("brain_note", {"text": "x"}, False),
        ("memory_recall", {"query": "tea"}, False),
        ("status", {}, False),
    ],
)
def test_the_daemon_answers_on_the_loop_only_what_cannot_write_or_wait(method: str, params: Any, on_loop: bool) -> None:
    """An inject with tool calls may write a workflow entry, so it goes to a worker like every write."""
    assert answers_inline(method, params) is on_loop


def test_a_sessions_first_inject_goes_to_a_worker_and_its_next_ones_stay_on_the_loop() -> None:
    """The first block of a session reads SOUL.md, MEMORY.md and the logfiles; the loop never waits on the disk."""
    frozen: set[tuple[str, str | None]] = set()
    asked: list[tuple[str, str | None]] = []

    def has_snapshot(session: str, project: str | None) -> bool:
        asked.append((session, project))
        return (session, project) in frozen

    params = {"session": "s", "project": "/p"}
    assert answers_inline("inject", params, has_snapshot) is False
    frozen.add(("s", "/p"))
    assert answers_inline("inject", params, has_snapshot) is True
    assert answers_inline("inject", {"session": "s"}, has_snapshot) is False  # another project: another snapshot
    assert asked == [("s", "/p"), ("s", "/p"), ("s", None)]
    for malformed in ({"session": 3}, {"session": "s", "project": 3}, {}, None):  # the worker answers the error
        assert answers_inline("inject", malformed, has_snapshot) is False
    assert answers_inline("brain_recall", {"query": "tea"}, has_snapshot) is True
