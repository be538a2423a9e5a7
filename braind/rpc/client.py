"""The client side of the socket: one kept connection, typed errors, one reconnect.

This is the only place outside the daemon that knows the wire format; the CLI
and the MCP bridge call methods and catch BraindError.
"""

from __future__ import annotations

import itertools
import socket
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from braind.errors import InvalidParams, InvalidRequest, ParseError, Unavailable
from braind.rpc.protocol import MAX_LINE, Response, decode_response, encode_request


class Client:
    """Calls braind methods over its Unix socket; not for use by several threads at once.

    Given several paths (the places a default socket may be, see Config.client_sockets),
    it connects to the first that answers.
    """

    def __init__(self, path: Path | Sequence[Path], timeout: float = 30.0) -> None:
        self.paths = (path,) if isinstance(path, Path) else tuple(path)
        self.path = self.paths[0]
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._reader: BinaryIO | None = None
        self._ids = itertools.count(1)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def call(self, method: str, /, **params: Any) -> Any:
        """Run one method and return its result, or raise the BraindError it was refused with."""
        request_id = next(self._ids)
        response = self._exchange(_request_line(request_id, method, params))
        if response.id != request_id and not (response.id is None and response.error is not None):
            self.close()
            raise ParseError("invalid_response", f"reply for request {response.id!r}, expected {request_id}")
        if response.error is not None:
            raise response.error
        return response.result

    def close(self) -> None:
        """Hang up; the next call connects again."""
        if self._reader is not None:
            self._reader.close()
        if self._sock is not None:
            self._sock.close()
        self._sock = self._reader = None

    def _exchange(self, line: bytes) -> Response:
        """Send on the kept connection, reconnecting once if the daemon had closed it."""
        if not self._send(line):
            pending = self._pending_refusal()
            if pending is not None:
                return pending
            self.close()
            if not self._send(line):
                self.close()
                raise Unavailable("connection_closed", "braind closed the connection")
        return self._receive()

    def _send(self, line: bytes) -> bool:
        """Write one request; False when the peer had already hung up, so nothing was delivered."""
        try:
            self._connection().sendall(line)
        except (BrokenPipeError, ConnectionResetError):
            return False
        except TimeoutError:
            self.close()
            raise Unavailable("timeout", f"braind did not read the request within {self.timeout:g}s") from None
        return True

    def _pending_refusal(self) -> Response | None:
        """The error line a daemon sent before hanging up on us (busy, unauthorized), if any."""
        try:
            return self._receive()
        except Unavailable:
            return None

    def _receive(self) -> Response:
        """Read and decode one reply line; any failure leaves no half-read connection behind."""
        try:
            line = self._reader.readline() if self._reader is not None else b""
        except TimeoutError:
            self.close()
            raise Unavailable("timeout", f"braind did not answer within {self.timeout:g}s") from None
        except OSError:
            line = b""
        if not line.endswith(b"\n"):
            self.close()
            raise Unavailable("connection_closed", "braind closed the connection before answering")
        try:
            return decode_response(line)
        except ParseError:
            self.close()
            raise

    def _connection(self) -> socket.socket:
        """The kept connection, replaced when the daemon has hung up on it since the last call."""
        if self._sock is not None and _hung_up(self._sock, self.timeout):
            self.close()
        if self._sock is None:
            self.path, self._sock = _connect_first(self.paths, self.timeout)
            self._reader = self._sock.makefile("rb")
        return self._sock


def _request_line(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    """The encoded request, refused here when the daemon would refuse it anyway."""
    try:
        line = encode_request(request_id, method, params)
    except (TypeError, ValueError) as exc:
        raise InvalidParams("invalid_params", f"params are not JSON: {exc}") from None
    if len(line) > MAX_LINE:
        raise InvalidRequest("too_large", f"a request is limited to {MAX_LINE} bytes")
    return line


def _connect_first(paths: Sequence[Path], timeout: float) -> tuple[Path, socket.socket]:
    """A connection to the first path that answers, or daemon_unavailable listing every place tried."""
    failures: list[str] = []
    for path in paths:
        try:
            return path, _connect(path, timeout)
        except FileNotFoundError:
            failures.append(f"no socket at {path}")
        except ConnectionRefusedError:
            failures.append(f"nothing listens on {path}")
        except OSError as exc:
            failures.append(f"cannot reach {path}: {exc.strerror or exc}")
    looked = "; ".join(failures)
    raise Unavailable(
        "daemon_unavailable",
        f"braind is not running ({looked}); start it with `braind start` or systemctl --user start braind",
        tried=[str(p) for p in paths],
    )


def _connect(path: Path, timeout: float) -> socket.socket:
    """A new connection to one socket path; OSError when there is nothing to connect to."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        raise
    return sock


def _hung_up(sock: socket.socket, timeout: float) -> bool:
    """Whether the daemon closed (or wrote unasked to) an idle connection, checked without blocking."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.settimeout(timeout)
    return True
