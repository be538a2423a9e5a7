"""One client connection of the event-loop server: its buffers, its line framing and where its conversation stands."""

from __future__ import annotations

import functools
import math
import socket
from collections.abc import Callable

from braind.errors import InvalidRequest
from braind.rpc.protocol import MAX_LINE

CHUNK = 64 * 1024
HIGH_WATER = 256 * 1024  # reply bytes a peer has not read yet before its next line waits


class Connection:
    """One client's socket, the bytes on their way in and out, and where its conversation stands."""

    def __init__(self, sock: socket.socket, on_ready: Callable[[Connection, int], None]) -> None:
        self.sock = sock
        self.ready: Callable[[int], None] = functools.partial(on_ready, self)  # the selector's callback
        self.inbuf = bytearray()
        self.scanned = 0  # bytes of inbuf already known to hold no newline
        self.outbuf = bytearray()
        self.events = 0  # what the selector watches for on this socket
        self.busy = False  # a request of this connection is with a worker
        self.closing = False  # answer what is in flight, take no new line, then hang up
        self.eof = False  # the peer has sent all it will
        self.closed = False
        self.line_deadline: float | None = None
        self.write_deadline: float | None = None

    def next_line(self) -> bytes | None:
        """The next complete line without its newline, or None; raises for a line over the limit."""
        end = self.inbuf.find(b"\n", self.scanned)
        if end < 0:
            self.scanned = len(self.inbuf)
            if self.scanned >= MAX_LINE:
                raise InvalidRequest("too_large", f"a message is limited to {MAX_LINE} bytes")
            return None
        if end + 1 > MAX_LINE:
            raise InvalidRequest("too_large", f"a message is limited to {MAX_LINE} bytes")
        line = bytes(self.inbuf[:end])
        del self.inbuf[: end + 1]
        self.scanned = 0
        return line

    def reading(self) -> bool:
        """Whether to read more: the peer keeps up with its replies, and while busy, one chunk ahead at most."""
        if self.closing or self.eof or len(self.outbuf) >= HIGH_WATER:
            return False
        return not self.busy or len(self.inbuf) < CHUNK

    def awaiting_line(self) -> bool:
        """Whether a line has begun and we wait for its end; it must come within read_timeout."""
        return bool(self.inbuf) and not self.busy and self.reading()

    def idle(self) -> bool:
        """No request in flight, no line begun, no reply unsent: the connection only costs a descriptor."""
        return not (self.busy or self.closing or self.inbuf or self.outbuf)

    def finished(self) -> bool:
        """Nothing left to answer or send, and the peer is done or we are hanging up."""
        return not (self.busy or self.outbuf) and (self.closing or self.eof)

    def deadline(self) -> float:
        """The soonest of this connection's deadlines."""
        return min(self.line_deadline or math.inf, self.write_deadline or math.inf)

    def why_late(self, now: float) -> str:
        """What the deadline that passed was for, for the log."""
        if self.write_deadline is not None and self.write_deadline <= now:
            return "the peer stopped reading its replies"
        return "a line was not completed in time"
