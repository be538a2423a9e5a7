"""The Unix socket face of the daemon: framing, peer checks, limits and a per-request error boundary.

One thread accepts; each connection gets its own thread that answers its lines
in order, so a client may pipeline. `dispatch` is called from several threads
at once and must do its own locking.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from braind.errors import BraindError, InternalError, InvalidRequest, Unavailable
from braind.protocol import MAX_LINE, Request, decode, encode_batch, encode_error, encode_result

log = logging.getLogger("braind.server")

Dispatch = Callable[[str, dict[str, Any]], Any]

_CHUNK = 64 * 1024
_BACKLOG = 128
_PROBE_TIMEOUT = 1.0
_REFUSAL_TIMEOUT = 1.0
_STRAGGLER_TIMEOUT = 1.0
_MIN_BACKOFF = 0.05
_MAX_BACKOFF = 1.0
_UCRED = struct.Struct("=iII")  # struct ucred: pid_t pid; uid_t uid; gid_t gid


class SocketServer:
    """Serves JSON-RPC lines to connections of the same uid on one Unix stream socket."""

    def __init__(
        self,
        path: Path,
        dispatch: Dispatch,
        *,
        max_connections: int = 64,
        read_timeout: float = 30.0,
        grace: float = 5.0,
        listen_socket: socket.socket | None = None,
    ) -> None:
        self.path = path
        self._dispatch = dispatch
        self._max_connections = max_connections
        self._read_timeout = read_timeout
        self._grace = grace
        self._listener = listen_socket
        self._owned: tuple[int, int] | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._connections: dict[threading.Thread, socket.socket] = {}
        self._accept_thread: threading.Thread | None = None
        self._waker: socket.socket | None = None
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
        with self._lock:
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
        """Accept connections in a background thread until close()."""
        if self._listener is None:
            raise RuntimeError("bind() must be called before start()")
        wake_reader, self._waker = socket.socketpair()
        self._accept_thread = threading.Thread(
            target=self._accept_loop, args=(self._listener, wake_reader), name="braind-accept", daemon=True
        )
        self._accept_thread.start()

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
        _prepare_directory(self.path.parent)
        _clear_stale(self.path)
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
        """Wake and join the accept thread, then close the listening socket."""
        self._stopping.set()
        if self._waker is not None and self._accept_thread is not None:
            with self._waker:
                self._waker.send(b"\0")
            self._accept_thread.join()
        if self._listener is not None:
            self._listener.close()

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
        """Wake idle connections, give busy ones the grace period, then cut what is left."""
        self._shutdown_connections(socket.SHUT_RD)
        self._join_connections(time.monotonic() + self._grace)
        self._shutdown_connections(socket.SHUT_RDWR)
        self._join_connections(time.monotonic() + _STRAGGLER_TIMEOUT)
        if stragglers := self.connection_count:
            log.warning("%d requests still running after close; abandoning them", stragglers)

    def _shutdown_connections(self, how: int) -> None:
        """Shut down every live connection; under the lock, so none is closed underneath us."""
        with self._lock:
            for conn in self._connections.values():
                _shutdown(conn, how)

    def _join_connections(self, deadline: float) -> None:
        """Wait for connection threads to end, until the deadline."""
        with self._lock:
            threads = [thread for thread in self._connections if thread is not threading.current_thread()]
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _accept_loop(self, listener: socket.socket, wake_reader: socket.socket) -> None:
        """Admit connections until close(); no error stops the loop, resource errors back off."""
        backoff = _MIN_BACKOFF
        with selectors.DefaultSelector() as selector, wake_reader:
            selector.register(listener, selectors.EVENT_READ)
            selector.register(wake_reader, selectors.EVENT_READ)
            while not self._stopping.is_set():
                try:
                    self._accept_once(selector, listener)
                    backoff = _MIN_BACKOFF
                except OSError as exc:
                    log.warning("accept failed (%s); retrying in %.2fs", exc, backoff)
                    self._stopping.wait(backoff)
                    backoff = min(2 * backoff, _MAX_BACKOFF)
                except Exception:
                    log.exception("unexpected error while accepting; continuing")
                    self._stopping.wait(backoff)

    def _accept_once(self, selector: selectors.BaseSelector, listener: socket.socket) -> None:
        """Wait for a connection (or close()) and admit it."""
        selector.select()
        if self._stopping.is_set():
            return
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return
        try:
            self._admit(conn)
        except Exception:
            log.exception("could not admit a connection")
            conn.close()

    def _admit(self, conn: socket.socket) -> None:
        """Refuse another uid or one connection too many; otherwise serve it in its own thread."""
        uid = _peer_uid(conn)
        if uid != os.getuid():
            log.warning("refused a connection from uid %d", uid)
            _refuse(conn, Unavailable("unauthorized", "braind only serves the user it runs as"))
        elif not self._spawn(conn):
            log.warning("refused a connection: %d already open", self._max_connections)
            _refuse(conn, Unavailable("busy", "braind has too many open connections; retry shortly"))

    def _spawn(self, conn: socket.socket) -> bool:
        """Serve `conn` in a tracked thread, unless the connection cap is reached."""
        with self._lock:
            if len(self._connections) >= self._max_connections:
                return False
            thread = threading.Thread(target=self._serve, args=(conn,), name="braind-conn", daemon=True)
            self._connections[thread] = conn
            try:
                thread.start()
            except RuntimeError:
                del self._connections[thread]
                return False
        return True

    def _serve(self, conn: socket.socket) -> None:
        """Run one connection to its end, whatever happens, and forget it."""
        try:
            self._converse(conn)
        except Exception:
            log.exception("connection handler failed")
        finally:
            with self._lock:
                del self._connections[threading.current_thread()]
            conn.close()

    def _converse(self, conn: socket.socket) -> None:
        """Answer lines in order until EOF, a stalled or oversized line, a dead peer, or close()."""
        reader = _LineReader(conn, self._read_timeout)
        while not self._stopping.is_set():
            try:
                line = reader.readline()
            except BraindError as err:
                log.warning("closing a connection: %s", err)
                self._send(conn, encode_error(None, err))
                return
            if line is None:
                return
            reply = self._answer_line(line)
            if reply is not None and not self._send(conn, reply):
                return

    def _answer_line(self, line: bytes) -> bytes | None:
        """The reply to one line: one answer, a batch answer, or nothing for notifications."""
        if not line.strip():
            return None
        try:
            decoded = decode(line)
        except BraindError as err:
            return encode_error(None, err)
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
            return encode_error(request.id, InternalError("internal", "internal error; see the braind log"))

    def _send(self, conn: socket.socket, data: bytes) -> bool:
        """Write a reply; a peer that stopped reading for read_timeout is given up on."""
        try:
            conn.settimeout(self._read_timeout)
            conn.sendall(data)
        except OSError as exc:
            log.debug("dropping a connection: %s", exc)
            return False
        return True


class _LineReader:
    """Splits a connection's bytes into lines, bounded in size and in the time to complete one."""

    def __init__(self, conn: socket.socket, timeout: float) -> None:
        self._conn = conn
        self._timeout = timeout
        self._buffer = bytearray()
        self._scanned = 0
        self._deadline: float | None = None

    def readline(self) -> bytes | None:
        """The next line without its newline; None at EOF or once a started line has stalled."""
        while (end := self._buffer.find(b"\n", self._scanned)) < 0:
            self._scanned = len(self._buffer)
            if self._scanned >= MAX_LINE:
                raise InvalidRequest("too_large", f"a message is limited to {MAX_LINE} bytes")
            if not self._fill():
                return None
        if end + 1 > MAX_LINE:
            raise InvalidRequest("too_large", f"a message is limited to {MAX_LINE} bytes")
        return self._pop(end)

    def _fill(self) -> bool:
        """Receive more bytes; False at EOF, on a socket error, or past the line's deadline."""
        timeout = None if self._deadline is None else self._deadline - time.monotonic()
        if timeout is not None and timeout <= 0:
            return False
        try:
            self._conn.settimeout(timeout)
            chunk = self._conn.recv(_CHUNK)
        except OSError:
            return False
        if chunk and not self._buffer:
            self._deadline = time.monotonic() + self._timeout
        self._buffer += chunk
        return bool(chunk)

    def _pop(self, end: int) -> bytes:
        """Take one line off the buffer; what is left starts the next line's deadline."""
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        self._scanned = 0
        self._deadline = time.monotonic() + self._timeout if self._buffer else None
        return line


def _prepare_directory(directory: Path) -> None:
    """Create the socket's directory 0700, or check an existing one is ours and make it private."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = directory.stat()
    if info.st_uid != os.getuid():
        raise Unavailable(
            "unsafe_directory", f"{directory} belongs to uid {info.st_uid}; the socket needs a directory of its own"
        )
    if info.st_mode & stat.S_ISVTX:
        raise Unavailable("unsafe_directory", f"{directory} is a shared directory; put the socket in a private one")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(directory, 0o700)


def _clear_stale(path: Path) -> None:
    """Remove a socket left by a dead daemon; refuse a live one, and never touch a non-socket."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise Unavailable("not_a_socket", f"{path} exists and is not a socket; refusing to replace it")
    if _is_live(path):
        raise Unavailable("already_running", f"another braind is already listening on {path}")
    log.info("removing stale socket %s", path)
    path.unlink(missing_ok=True)


def _is_live(path: Path) -> bool:
    """Whether something accepts connections on the socket; a full backlog counts as alive."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(_PROBE_TIMEOUT)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except TimeoutError:
            return True
        return True


def _peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end, as the kernel saw it at connect time."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    _pid, uid, _gid = _UCRED.unpack(creds)
    return int(uid)


def _refuse(conn: socket.socket, err: BraindError) -> None:
    """Tell the peer why in one error line, then hang up."""
    try:
        conn.settimeout(_REFUSAL_TIMEOUT)
        conn.sendall(encode_error(None, err))
    except OSError:
        pass
    finally:
        conn.close()


def _shutdown(conn: socket.socket, how: int) -> None:
    """Shut a socket down, ignoring one the peer already closed."""
    with contextlib.suppress(OSError):
        conn.shutdown(how)
