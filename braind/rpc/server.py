"""The Unix socket face of the daemon: framing, peer checks, limits and a per-request error boundary.

One thread runs an event loop: the listener and every connection sit non-blocking
in one selector, so an idle connection costs a descriptor and a buffer, not a
thread. The loop answers the requests `inline` picks itself: they only compute
over what the daemon holds, and Python runs one thread at a time, so handing
them to another thread would only add two thread switches and a fight for the
interpreter (under eight clients, a third of a recall's cost). Every other
line goes to a small pool of worker threads, because its handler may wait on
the disk, a lock or an approval command. A connection has at most one request
in flight, so its lines are answered in order and a client may pipeline.
`dispatch` is called from several threads at once and must do its own locking.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import selectors
import socket
import stat
import struct
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from braind.errors import BraindError, InternalError, InvalidRequest, Unavailable
from braind.rpc.connection import CHUNK, HIGH_WATER, Connection
from braind.rpc.protocol import Request, decode, encode_batch, encode_error, encode_result
from braind.rpc.socketfile import clear_stale, prepare_directory
from braind.rpc.workers import Workers

log = logging.getLogger(__name__)

Dispatch = Callable[[str, dict[str, Any]], Any]

_BACKLOG = 128
_ACCEPT_BATCH = 64  # connections admitted per turn of the loop, so a flood cannot starve the others
_STRAGGLER_TIMEOUT = 1.0
_MIN_BACKOFF = 0.05
_MAX_BACKOFF = 1.0
_UCRED = struct.Struct("=iII")  # struct ucred: pid_t pid; uid_t uid; gid_t gid
_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
_INTERNAL = InternalError("internal", "internal error; see the braind log")
_INTERNAL_REPLY = encode_error(None, _INTERNAL)  # the answer of a handler that failed, made once


class SocketServer:
    """Serves JSON-RPC lines to connections of the same uid on one Unix stream socket."""

    def __init__(
        self,
        path: Path,
        dispatch: Dispatch,
        *,
        max_connections: int = 1024,
        read_timeout: float = 30.0,
        idle_timeout: float = 600.0,
        workers: int = 8,
        grace: float = 5.0,
        listen_socket: socket.socket | None = None,
        inline: Callable[[str, Any], bool] = lambda method, params: False,
    ) -> None:
        self.path = path
        self._dispatch = dispatch
        self._inline = inline
        self._max_connections = max_connections
        self._read_timeout = read_timeout
        self._idle_timeout = idle_timeout
        self._grace = grace
        self._listener = listen_socket
        self._owned: tuple[int, int] | None = None
        self._workers = Workers(workers)
        self._selector: selectors.BaseSelector | None = None
        self._connections: set[Connection] = set()
        self._idle: OrderedDict[Connection, float] = OrderedDict()  # idle since, the longest idle first
        self._timed: set[Connection] = set()  # connections with a line or a reply under a deadline
        self._done: deque[tuple[Connection, bytes | None]] = deque()  # answered by a worker, for the loop
        self._wake_pending = False
        self._listening = False
        self._backoff = _MIN_BACKOFF
        self._accept_again: float | None = None
        self._drain_until: float | None = None
        self._stopping = threading.Event()
        self._stopped_accepting = threading.Event()
        self._lock = threading.Lock()
        self._loop_thread: threading.Thread | None = None
        self._waker: socket.socket | None = None
        self._wake_reader: socket.socket | None = None
        self._closed = False

    def __enter__(self) -> SocketServer:
        self.bind()
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @property
    def connection_count(self) -> int:
        """How many connections are being served right now."""
        return len(self._connections)

    def bind(self) -> None:
        """Listen on the socket path, or adopt the socket passed in by systemd."""
        if self._listener is None:
            try:
                self._listener = self._bind_path()
            except OSError as exc:
                raise Unavailable("socket_error", f"cannot listen on {self.path}: {exc}") from exc
        self._listener.setblocking(False)

    def start(self) -> None:
        """Serve connections in a background event loop until close()."""
        if self._listener is None:
            raise RuntimeError("bind() must be called before start()")
        self._wake_reader, self._waker = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._waker.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_reader, _READ, self._on_wake)
        self._listen()
        self._workers.start()
        self._loop_thread = threading.Thread(target=self._loop, name="braind-server", daemon=True)
        self._loop_thread.start()

    def close(self) -> None:
        """Stop accepting, let in-flight requests finish within the grace period, remove our socket."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop_accepting()
        self._unlink_if_ours()
        self._drain()

    def _bind_path(self) -> socket.socket:
        """A listening socket at `path`, mode 0600, in a private directory, replacing only a stale one."""
        prepare_directory(self.path.parent)
        clear_stale(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(self.path))
            info = os.lstat(self.path)
            self._owned = (info.st_dev, info.st_ino)
            os.chmod(self.path, 0o600)
            sock.listen(_BACKLOG)
        except BaseException:
            sock.close()
            self._unlink_if_ours()
            raise
        return sock

    def _stop_accepting(self) -> None:
        """Have the loop close the listening socket and start draining; wait until it has."""
        self._stopping.set()
        if self._loop_thread is None:
            if self._listener is not None:
                self._listener.close()
            return
        self._wake()
        self._stopped_accepting.wait()

    def _unlink_if_ours(self) -> None:
        """Remove the socket file only if it is still the one we bound, never a successor's."""
        if self._owned is None:
            return
        try:
            info = self.path.lstat()
        except FileNotFoundError:
            return
        if (info.st_dev, info.st_ino) == self._owned and stat.S_ISSOCK(info.st_mode):
            self.path.unlink(missing_ok=True)

    def _drain(self) -> None:
        """Wait for the loop to finish its connections, then for the workers to end."""
        if self._loop_thread is None:
            return
        self._loop_thread.join()
        if stragglers := self._workers.stop(_STRAGGLER_TIMEOUT):
            log.warning("%d requests still running after close; abandoning them", stragglers)
        with self._lock:
            if self._waker is not None:
                self._waker.close()
                self._waker = None

    def _wake(self) -> None:
        """Interrupt the loop's wait (a worker has answered, or close() was called), once until it looks."""
        if self._wake_pending:
            return
        self._wake_pending = True
        with self._lock:
            if self._waker is not None:
                with contextlib.suppress(OSError):  # full: a wake-up is pending anyway; closed: no loop left
                    self._waker.send(b"\0")

    # -- the loop ---------------------------------------------------------------------------------

    def _loop(self) -> None:
        """Turn until close() has drained every connection; no error stops the loop."""
        assert self._selector is not None
        try:
            while not self._drained():
                try:
                    self._turn(self._selector)
                except Exception:
                    log.exception("unexpected error in the socket loop; continuing")
        finally:
            self._close_all()

    def _drained(self) -> bool:
        """Whether close() was called and no connection is left; begins the drain on the first look."""
        if self._stopping.is_set() and self._drain_until is None:
            self._begin_drain()
        return self._drain_until is not None and not self._connections

    def _turn(self, selector: selectors.BaseSelector) -> None:
        """Wait for the next event or deadline, handle what is ready, then what has come due."""
        due = min(self._deadlines(), default=math.inf)
        timeout = None if due == math.inf else max(0.0, due - time.monotonic())
        for key, events in selector.select(timeout):
            key.data(events)
        if (now := time.monotonic()) >= due:
            self._expire(now)

    def _deadlines(self) -> Iterator[float]:
        """Every moment the loop must wake up for, whatever happens on the sockets."""
        yield from (conn.deadline() for conn in self._timed)
        if self._idle:
            yield next(iter(self._idle.values())) + self._idle_timeout
        if self._accept_again is not None:
            yield self._accept_again
        if self._drain_until is not None:
            yield self._drain_until

    def _expire(self, now: float) -> None:
        """Close what has waited too long: stalled lines, unread replies, idle connections; resume accepting."""
        for conn in [conn for conn in self._timed if conn.deadline() <= now]:
            log.debug("closing a connection: %s", conn.why_late(now))
            self._drop(conn)
        self._expire_idle(now)
        if self._accept_again is not None and self._accept_again <= now:
            self._listen()
        if self._drain_until is not None and self._drain_until <= now:
            for conn in list(self._connections):
                self._drop(conn)

    def _expire_idle(self, now: float) -> None:
        """Close, quietly, the connections idle for longer than idle_timeout."""
        while self._idle:
            conn, since = next(iter(self._idle.items()))
            if since + self._idle_timeout > now:
                return
            log.debug("closing a connection idle for %.0f s", now - since)
            self._drop(conn)

    def _on_wake(self, events: int) -> None:
        """Take the answers the workers have posted and move their connections on."""
        assert self._wake_reader is not None
        with contextlib.suppress(BlockingIOError):
            while self._wake_reader.recv(4096):
                pass
        self._wake_pending = False  # after the bytes are gone, before the answers: a later one wakes us again
        while self._done:
            conn, reply = self._done.popleft()
            conn.busy = False
            if not conn.closed:
                if reply is not None:
                    conn.outbuf += reply
                self._guarded(conn, self._advance)

    def _begin_drain(self) -> None:
        """Accept no more, answer no new line, and hang up on each connection once it has nothing in flight."""
        self._close_listener()
        self._drain_until = time.monotonic() + self._grace
        for conn in list(self._connections):
            conn.closing = True
            self._guarded(conn, self._advance)

    def _close_all(self) -> None:
        """The loop's end: every connection, the selector and the wake-up socket closed."""
        for conn in list(self._connections):
            self._drop(conn)
        self._close_listener()
        if self._selector is not None:
            self._selector.close()
        if self._wake_reader is not None:
            self._wake_reader.close()

    # -- accepting --------------------------------------------------------------------------------

    def _listen(self) -> None:
        """Watch the listening socket for connections again."""
        assert self._selector is not None and self._listener is not None
        self._accept_again = None
        if not self._listening:
            self._selector.register(self._listener, _READ, self._on_listener)
            self._listening = True

    def _close_listener(self) -> None:
        """Close the listening socket for good and let close() go on."""
        self._stop_listening()
        self._accept_again = None
        if self._listener is not None:
            self._listener.close()
        self._stopped_accepting.set()

    def _stop_listening(self) -> None:
        """Stop watching the listening socket."""
        if self._listening and self._selector is not None and self._listener is not None:
            self._selector.unregister(self._listener)
        self._listening = False

    def _on_listener(self, events: int) -> None:
        """Admit waiting connections; a resource error (EMFILE) pauses accepting with a growing backoff."""
        assert self._listener is not None
        for _ in range(_ACCEPT_BATCH):
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                self._pause_accepting(exc)
                return
            self._backoff = _MIN_BACKOFF
            try:
                self._admit(sock)
            except Exception:
                log.exception("could not admit a connection")
                sock.close()

    def _pause_accepting(self, exc: OSError) -> None:
        """Stop watching the listener for a while, so the loop neither spins nor stops serving the others."""
        log.warning("accept failed (%s); retrying in %.2fs", exc, self._backoff)
        self._stop_listening()
        self._accept_again = time.monotonic() + self._backoff
        self._backoff = min(2 * self._backoff, _MAX_BACKOFF)

    def _admit(self, sock: socket.socket) -> None:
        """Refuse another uid; at the cap make room by closing the longest-idle connection, or refuse busy."""
        uid = _peer_uid(sock)
        if uid != os.getuid():
            log.warning("refused a connection from uid %d", uid)
            _refuse(sock, Unavailable("unauthorized", "braind only serves the user it runs as"))
        elif len(self._connections) >= self._max_connections and not self._evict_longest_idle():
            log.warning("refused a connection: %d already open, none of them idle", self._max_connections)
            _refuse(sock, Unavailable("busy", "braind has too many open connections; retry shortly"))
        else:
            self._open(sock)

    def _evict_longest_idle(self) -> bool:
        """Close the connection that has been idle longest, telling its peer why; False when none is idle."""
        if not self._idle:
            return False
        conn, since = next(iter(self._idle.items()))
        log.info("closing a connection idle for %.0f s to admit a new one", time.monotonic() - since)
        with contextlib.suppress(OSError):  # it is idle: nothing of ours is queued before this line
            conn.sock.send(encode_error(None, Unavailable("busy", "braind closed this idle connection; reconnect")))
        self._drop(conn)
        return True

    def _open(self, sock: socket.socket) -> None:
        """Start serving a new connection: non-blocking, watched for its first line."""
        sock.setblocking(False)
        conn = Connection(sock, self._on_connection)
        self._connections.add(conn)
        self._guarded(conn, self._settle)

    # -- one connection ---------------------------------------------------------------------------

    def _on_connection(self, conn: Connection, events: int) -> None:
        """The selector says the peer sent bytes or has room for ours."""
        if conn.closed:  # closed by an earlier event of the same turn
            return
        self._guarded(conn, self._receive if events & _READ else self._advance)

    def _guarded(self, conn: Connection, step: Callable[[Connection], None]) -> None:
        """Run one step of a connection; an unexpected failure closes that connection, nothing else."""
        try:
            step(conn)
        except Exception:
            log.exception("connection handler failed")
            self._drop(conn)

    def _receive(self, conn: Connection) -> None:
        """Read what the peer sent; nothing more at EOF; a socket error ends the connection."""
        try:
            chunk = conn.sock.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.debug("dropping a connection: %s", exc)
            self._drop(conn)
            return
        conn.inbuf += chunk
        conn.eof = not chunk
        self._advance(conn)

    def _advance(self, conn: Connection) -> None:
        """Send what is queued, hand on the next line, then hang up or wait, as the connection's state says."""
        if self._flush(conn):
            self._next_request(conn)
            if self._flush(conn):
                self._settle(conn)

    def _next_request(self, conn: Connection) -> None:
        """Answer or hand on the next complete lines, unless one is in flight or the peer is behind on replies."""
        while not (conn.busy or conn.closing) and len(conn.outbuf) < HIGH_WATER:
            try:
                line = conn.next_line()
            except InvalidRequest as err:
                log.warning("closing a connection: %s", err)
                conn.outbuf += encode_error(None, err)
                conn.closing = True
                return
            if line is None:
                return
            if line.strip():  # blank lines are not requests and get no answer
                self._hand_on(conn, line)

    def _hand_on(self, conn: Connection, line: bytes) -> None:
        """Answer a line here when it is malformed or calls an inline method; hand any other to a worker."""
        try:
            decoded = decode(line)
        except BraindError as err:
            conn.outbuf += encode_error(None, err)
            return
        if isinstance(decoded, Request) and (decoded.error is not None or self._inline(decoded.method, decoded.params)):
            if (reply := self._answer(decoded)) is not None:
                conn.outbuf += reply
            return
        conn.busy = True
        self._workers.submit(functools.partial(self._work, conn, decoded))

    def _flush(self, conn: Connection) -> bool:
        """Write queued reply bytes without blocking; False when the peer is gone and the connection dropped."""
        if not conn.outbuf:
            return True
        try:
            sent = conn.sock.send(conn.outbuf)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            log.debug("dropping a connection: %s", exc)
            self._drop(conn)
            return False
        del conn.outbuf[:sent]
        if sent or conn.write_deadline is None:  # a peer that reads at all gets read_timeout again
            conn.write_deadline = time.monotonic() + self._read_timeout
        return True

    def _settle(self, conn: Connection) -> None:
        """Hang up on a finished connection; otherwise set its deadlines, idleness and what to watch for."""
        if conn.finished():
            self._drop(conn)
            return
        now = time.monotonic()
        if not conn.outbuf:
            conn.write_deadline = None
        if not conn.awaiting_line():
            conn.line_deadline = None
        elif conn.line_deadline is None:
            conn.line_deadline = now + self._read_timeout
        self._mark(conn, now)
        self._watch(conn, (_READ if conn.reading() else 0) | (_WRITE if conn.outbuf else 0))

    def _mark(self, conn: Connection, now: float) -> None:
        """Keep the idle queue (longest idle first) and the set of connections under a deadline current."""
        if not conn.idle():
            self._idle.pop(conn, None)
        elif conn not in self._idle:
            self._idle[conn] = now
        if conn.line_deadline is None and conn.write_deadline is None:
            self._timed.discard(conn)
        else:
            self._timed.add(conn)

    def _watch(self, conn: Connection, events: int) -> None:
        """Tell the selector which events of this connection matter now."""
        assert self._selector is not None
        if events == conn.events:
            return
        if not events:
            self._selector.unregister(conn.sock)
        elif not conn.events:
            self._selector.register(conn.sock, events, conn.ready)
        else:
            self._selector.modify(conn.sock, events, conn.ready)
        conn.events = events

    def _drop(self, conn: Connection) -> None:
        """Close a connection and forget it; a reply still being worked out is thrown away when it comes."""
        if conn.closed:
            return
        conn.closed = True
        if conn.events and self._selector is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(conn.sock)
        self._connections.discard(conn)
        self._idle.pop(conn, None)
        self._timed.discard(conn)
        conn.sock.close()

    # -- the workers' side ------------------------------------------------------------------------

    def _work(self, conn: Connection, decoded: Request | list[Request]) -> None:
        """Answer one line on a worker thread and post the reply to the loop, whatever happens."""
        reply: bytes | None = _INTERNAL_REPLY
        try:
            reply = self._answer_decoded(decoded)
        except Exception:
            log.exception("connection handler failed")
        finally:
            self._done.append((conn, reply))
            self._wake()

    def _answer_decoded(self, decoded: Request | list[Request]) -> bytes | None:
        """The reply to one line: one answer, a batch answer, or nothing for notifications."""
        if isinstance(decoded, Request):
            return self._answer(decoded)
        replies = [reply for reply in map(self._answer, decoded) if reply is not None]
        return encode_batch(replies) if replies else None

    def _answer(self, request: Request) -> bytes | None:
        """Answer one request; notifications are run but never answered."""
        if request.error is not None:
            return encode_error(request.id, request.error)
        reply = self._call(request)
        return None if request.notification else reply

    def _call(self, request: Request) -> bytes:
        """The per-request error boundary: any failure becomes an error reply, never a dead daemon."""
        try:
            return encode_result(request.id, self._dispatch(request.method, request.params))
        except BraindError as err:
            return encode_error(request.id, err)
        except Exception:
            log.exception("request %r failed", request.method)
            return encode_error(request.id, _INTERNAL)


def _peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end, as the kernel saw it at connect time."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    _pid, uid, _gid = _UCRED.unpack(creds)
    return int(uid)


def _refuse(conn: socket.socket, err: BraindError) -> None:
    """Tell the peer why in one error line, then hang up; a new socket has room for the line."""
    try:
        conn.setblocking(False)
        conn.send(encode_error(None, err))
    except OSError:
        pass
    finally:
        conn.close()
