"""Idle connections: many clients connected and silent, and what one more client gets meanwhile.

Editors, shell hooks and MCP bridges each keep a connection to the daemon and
mostly say nothing. The daemon runs with its default connection cap; whatever it
refuses is counted, not hidden. This process raises its own open-file limit to
hold the sockets; the daemon keeps the limit it was started with.
"""

from __future__ import annotations

import contextlib
import json
import resource
import selectors
import socket
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import measure, proc
from bench.stats import summarize
from braind.errors import BraindError
from braind.rpc.client import Client
from braind.rpc.protocol import encode_request

CONNECT_TIMEOUT_S = 10.0
BACKLOG_WAIT_S = 0.001
SETTLE_S = 0.5  # no refusal for this long: the daemon has admitted or refused every connection
SETTLE_MAX_S = 30.0
ANSWER_TIMEOUT_S = 10.0
ANSWER_DEADLINE_S = 60.0
SPARE_FDS = 64
CLOSE_WAIT_S = 10.0
POLL_S = 0.01
Query = tuple[str, ...]


def raise_fd_limit(needed: int) -> None:
    """Let this process open `needed` more descriptors, up to its hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = _own_fds() + needed + SPARE_FDS
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))


def _own_fds() -> int:
    """How many descriptors this process holds now."""
    return len(list(Path("/proc/self/fd").iterdir()))


def open_idle(path: Path, count: int) -> tuple[list[socket.socket], Counter[str]]:
    """Connect `count` sockets that send nothing; the reasons of the connects that failed."""
    opened: list[socket.socket] = []
    failed: Counter[str] = Counter()
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            _connect(sock, path)
        except OSError as exc:
            sock.close()
            failed[type(exc).__name__] += 1
            continue
        opened.append(sock)
    return opened, failed


def _connect(sock: socket.socket, path: Path) -> None:
    """Connect, waiting while the daemon's listen backlog is full (a Unix socket says EAGAIN then)."""
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    sock.settimeout(CONNECT_TIMEOUT_S)
    while True:
        try:
            sock.connect(str(path))
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise
            time.sleep(BACKLOG_WAIT_S)


def settle(socks: Sequence[socket.socket]) -> tuple[list[socket.socket], Counter[str]]:
    """Wait until the daemon has refused what it will; the connections still silent, and why the others ended."""
    held = set(socks)
    ended: Counter[str] = Counter()
    deadline = time.monotonic() + SETTLE_MAX_S
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ, sock)
        while held and time.monotonic() < deadline:
            ready = selector.select(SETTLE_S)
            if not ready:
                break
            for key, _ in ready:
                sock = key.data
                selector.unregister(sock)
                held.discard(sock)
                ended[_why_ended(sock)] += 1
                sock.close()
    return [sock for sock in socks if sock in held], ended


def _why_ended(sock: socket.socket) -> str:
    """The reason of the error line the daemon sent before hanging up, or `closed` when it sent none."""
    try:
        data = sock.recv(65536)
        reply = json.loads(data.split(b"\n", 1)[0]) if data else {}
        return str(reply["error"]["data"]["reason"]) if reply else "closed"
    except (OSError, ValueError, KeyError, TypeError):
        return "closed"


def answered(socks: Sequence[socket.socket]) -> int:
    """How many held connections still answer a request (`tools`): held, not just queued."""
    line = encode_request(1, "tools", {})
    count = 0
    deadline = time.monotonic() + ANSWER_DEADLINE_S
    for sock in socks:
        if time.monotonic() > deadline:
            break
        with contextlib.suppress(OSError):
            sock.settimeout(ANSWER_TIMEOUT_S)
            sock.sendall(line)
            count += _reply_line(sock).endswith(b"\n")
    return count


def _reply_line(sock: socket.socket) -> bytes:
    """Bytes up to the first newline, or what came before the peer hung up."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def daemon_state(pid: int) -> dict[str, float]:
    """The daemon's resident memory, threads and open descriptors now."""
    return {"rss_mb": proc.tree_rss_mb(pid), "threads": float(proc.threads(pid)), "fds": float(proc.open_fds(pid))}


def one_client(path: Path, queries: Sequence[Query]) -> dict[str, Any]:
    """One more client's recalls of all of memory on a new connection: latency of those served, reasons of refusals."""
    served: list[float] = []
    refused: Counter[str] = Counter()
    with Client(path, timeout=60) as client, measure.without_collector_pauses():
        for words in queries:
            try:
                served.append(measure.call_ms(client, "brain_recall", query=" ".join(words))[0])
            except BraindError as err:
                refused[err.reason] += 1
    stats = summarize(served).as_dict() if served else {}
    return {**stats, "served": float(len(served)), "refused": float(sum(refused.values())), "reasons": dict(refused)}


def _wait_for_threads(pid: int, threads: float) -> None:
    """Wait (bounded) until the daemon is back to the threads it had, so the next phase starts as this one did."""
    deadline = time.monotonic() + CLOSE_WAIT_S
    while proc.threads(pid) > threads and time.monotonic() < deadline:
        time.sleep(POLL_S)


def measure_idle(path: Path, pid: int, count: int, queries: Sequence[Query]) -> dict[str, Any]:
    """One client's recalls without, then with `count` idle connections open; what the daemon held and cost."""
    half = len(queries) // 2
    without = one_client(path, queries[:half])
    before = daemon_state(pid)
    raise_fd_limit(count)
    opened, failed = open_idle(path, count)
    try:
        held, ended = settle(opened)
        during = daemon_state(pid)
        with_idle = one_client(path, queries[half:])
        still = answered(held)
    finally:
        for sock in opened:
            sock.close()
    _wait_for_threads(pid, before["threads"])
    return {
        "connections": float(count),
        "connected": float(len(opened)),
        "connect_errors": dict(failed),
        "held": float(len(held)),
        "refused": float(sum(ended.values())),
        "reasons": dict(ended),
        "answered": float(still),
        "daemon_fd_limit": float(proc.fd_limit(pid)),
        "without": before,
        "with": during,
        "recall_without": without,
        "recall_with": with_idle,
    }
