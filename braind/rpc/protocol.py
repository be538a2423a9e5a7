"""JSON-RPC 2.0 over newline-delimited UTF-8: strict decoding, compact encoding, no I/O.

Decoding is strict so that every peer reads a message the same way: invalid
UTF-8, NaN and Infinity, duplicate keys, lone surrogates, deep nesting and
oversized numbers are refused with a stable reason instead of being guessed at.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from braind.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    BraindError,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    NotFound,
    ParseError,
    Unavailable,
)

MAX_LINE = 1 << 20
MAX_DEPTH = 64
MAX_INT_DIGITS = 20
MAX_FLOAT_CHARS = 64
MAX_BATCH = 256

RequestId = str | int | None

_MEMBERS = frozenset({"jsonrpc", "method", "params", "id"})
_ESCAPE = re.compile(r"\\.", re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_SURROGATE = re.compile("[\ud800-\udfff]")
_UNDECODABLE = re.compile("[\udc80-\udcff]")  # os.fsdecode's stand-ins for bytes that are not UTF-8
_APPLICATION_CODES = range(-32099, -32000 + 1)
_BY_CODE: dict[int, type[BraindError]] = {
    PARSE_ERROR: ParseError,
    INVALID_REQUEST: InvalidRequest,
    METHOD_NOT_FOUND: MethodNotFound,
    INVALID_PARAMS: InvalidParams,
    INTERNAL_ERROR: InternalError,
}
_BY_REASON: dict[str, type[BraindError]] = {
    "not_found": NotFound,
    "busy": Unavailable,
    "unauthorized": Unavailable,
    "already_running": Unavailable,
    "daemon_unavailable": Unavailable,
}


@dataclass(frozen=True)
class Request:
    """One decoded message: a call, a notification, or an invalid message answered with `error`."""

    id: RequestId
    method: str
    params: dict[str, Any] = field(default_factory=dict)
    notification: bool = False
    error: BraindError | None = None


@dataclass(frozen=True)
class Response:
    """One decoded reply: the result of a call, or the typed error it was refused with."""

    id: RequestId
    result: Any = None
    error: BraindError | None = None


def decode(line: bytes) -> Request | list[Request]:
    """Read one wire line as a request or a batch; raise for a line that is not strict JSON."""
    if len(line) > MAX_LINE:
        raise InvalidRequest("too_large", f"a message is limited to {MAX_LINE} bytes")
    message = _loads(line)
    if not isinstance(message, list):
        return _request(message)
    if not message:
        raise InvalidRequest("invalid_request", "an empty batch is not a request")
    if len(message) > MAX_BATCH:
        raise InvalidRequest("too_large", f"a batch is limited to {MAX_BATCH} requests")
    return [_request(item) for item in message]


def decode_response(line: bytes) -> Response:
    """Read one reply line from the daemon into a result or a typed error.

    Replies come from the daemon the user runs, which never sends what the request
    checks refuse, so plain JSON parsing is enough; the checks cost more than the parse.
    """
    message = _loads_reply(line)
    if not _is_response(message):
        raise ParseError("invalid_response", "the reply is not a JSON-RPC 2.0 response")
    if "error" in message:
        return Response(message["id"], error=error_from_wire(message["error"]))
    return Response(message["id"], result=message["result"])


def encode_request(request_id: RequestId, method: str, params: dict[str, Any]) -> bytes:
    """One request line; raises TypeError or ValueError when params are not JSON."""
    return _line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def encode_result(request_id: RequestId, result: Any) -> bytes:
    """One reply line, file names' undecodable bytes shown as \\xNN; raises TypeError or ValueError when not JSON."""
    message = {"jsonrpc": "2.0", "id": request_id, "result": result}
    text = json.dumps(message, allow_nan=False, separators=(",", ":"))  # escaped to ASCII: the encoder's fast path
    if "\\ud" not in text:  # no surrogate (an undecodable file name, or a pair for a character beyond the BMP)
        return text.encode("ascii") + b"\n"
    return _line(message, shown=True)


def encode_error(request_id: RequestId, err: BraindError) -> bytes:
    """One error reply line; never fails, falling back to the bare reason and message."""
    try:
        return _line({"jsonrpc": "2.0", "id": request_id, "error": err.to_wire()}, shown=True, default=str)
    except (TypeError, ValueError, RecursionError):
        bare = {"code": err.code, "message": _printable(err.message), "data": {"reason": err.reason}}
        return _line({"jsonrpc": "2.0", "id": request_id, "error": bare}, ensure_ascii=True)


def encode_batch(replies: list[bytes]) -> bytes:
    """Join encoded reply lines into the one array line that answers a batch."""
    return b"[" + b",".join(reply.rstrip(b"\n") for reply in replies) + b"]\n"


def error_from_wire(error: Any) -> BraindError:
    """Rebuild the typed error a JSON-RPC error object stands for; the inverse of to_wire()."""
    if not isinstance(error, dict) or not isinstance(error.get("code"), int):
        raise ParseError("invalid_response", "the reply carries a malformed error object")
    data = dict(error["data"]) if isinstance(error.get("data"), dict) else {}
    reason = str(data.pop("reason", "unknown"))
    cls = _error_class(error["code"], reason)
    err = cls.__new__(cls)
    BraindError.__init__(err, reason, str(error.get("message", "")))
    err.data = data
    err.code = error["code"]
    return err


def _error_class(code: int, reason: str) -> type[BraindError]:
    """The class for a code; application errors are told apart by the few reasons clients handle."""
    if code in _APPLICATION_CODES:
        return _BY_REASON.get(reason, BraindError)
    return _BY_CODE.get(code, BraindError)


def _line(message: dict[str, Any], shown: bool = False, **options: Any) -> bytes:
    """Compact single-line JSON: newlines inside strings are escaped, so framing stays intact."""
    options.setdefault("ensure_ascii", False)
    text = json.dumps(message, allow_nan=False, separators=(",", ":"), **options)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # only surrogates fail: the rare file name that is not UTF-8
        if not shown:
            raise
        return _UNDECODABLE.sub(_shown_byte, text).encode("utf-8") + b"\n"


def _shown_byte(match: re.Match[str]) -> str:
    """A byte a file name could not decode (kept by surrogateescape) as the text \\xNN, escaped for JSON."""
    return f"\\\\x{ord(match[0]) - 0xDC00:02x}"


def _printable(text: str) -> str:
    """The text with anything UTF-8 cannot carry (lone surrogates) replaced."""
    return str(text).encode("utf-8", "replace").decode("utf-8")


def _loads(data: bytes) -> Any:
    """Strict JSON: the checks run before and around the parser so none of them can hang or recurse."""
    text = _text(data)
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:  # fewer brackets: in C
        raise ParseError("too_deep", f"nesting deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(
            text, object_pairs_hook=_object, parse_int=_int, parse_float=_float, parse_constant=_constant
        )
    except (ValueError, RecursionError) as exc:
        raise ParseError("parse_error", f"not valid JSON: {exc}") from None
    _check_strings(value)
    return value


def _loads_reply(data: bytes) -> Any:
    """A reply line as JSON; anything unparsable is a parse error."""
    try:
        return json.loads(_text(data), parse_constant=_constant)
    except (ValueError, RecursionError) as exc:
        raise ParseError("parse_error", f"not valid JSON: {exc}") from None


def _text(data: bytes) -> str:
    """Strict UTF-8: overlong forms and encoded surrogates are refused too."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError("invalid_utf8", f"not valid UTF-8 at byte {exc.start}") from None


def _depth(text: str) -> int:
    """The deepest bracket nesting outside strings, found without recursion in linear time."""
    unescaped = _ESCAPE.sub("", text)
    outside_strings = "".join(unescaped.split('"')[::2])
    brackets = _NOT_BRACKET.sub("", outside_strings)
    return max(accumulate(_STEP[char] for char in brackets), default=0)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are unique, so no peer silently keeps a different value."""
    obj = dict(pairs)
    if len(obj) < len(pairs):
        key = next(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
        raise ParseError("duplicate_key", f"duplicate key {key!r}")
    return obj


def _int(literal: str) -> int:
    """An integer of bounded size; huge literals would be slow to convert and useless."""
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise ParseError("number_too_large", f"integers are limited to {MAX_INT_DIGITS} digits")
    return int(literal)


def _float(literal: str) -> float:
    """A finite float of bounded length."""
    value = float(literal) if len(literal) <= MAX_FLOAT_CHARS else math.inf
    if not math.isfinite(value):
        raise ParseError("number_too_large", f"number {literal[:32]!r} is too long or overflows")
    return value


def _constant(literal: str) -> Any:
    """NaN and Infinity are not JSON, whatever Python's parser tolerates."""
    raise ParseError("not_finite", f"{literal} is not a JSON number")


def _check_strings(value: Any) -> None:
    """Refuse lone surrogates ("\\ud800" escapes) in any key or string, which UTF-8 cannot encode."""
    if isinstance(value, str):
        if _SURROGATE.search(value):
            raise ParseError("lone_surrogate", "a string holds a lone surrogate escape")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(key)
            _check_strings(item)
    elif isinstance(value, list):
        for item in value:
            _check_strings(item)


def _request(message: Any) -> Request:
    """Check one message's JSON-RPC 2.0 shape; an invalid one carries its error and is always answered."""
    if not isinstance(message, dict):
        return _invalid(None, "a request must be a JSON object")
    request_id = message.get("id")
    if not _valid_id(request_id):
        return _invalid(None, "id must be a string, an integer or null")
    problem = _shape_problem(message)
    if problem is not None:
        return _invalid(request_id, problem)
    params = message.get("params", {})
    if not isinstance(params, dict):
        error = InvalidParams("invalid_params", "params must be a JSON object")
        return Request(request_id, message["method"], error=error)
    return Request(request_id, message["method"], params, notification="id" not in message)


def _shape_problem(message: dict[str, Any]) -> str | None:
    """What makes a JSON object not a JSON-RPC 2.0 request, if anything."""
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if not isinstance(message.get("method"), str) or not message["method"]:
        return "method must be a non-empty string"
    unknown = sorted(message.keys() - _MEMBERS)
    if unknown:
        return f"unknown members: {', '.join(unknown)}"
    return None


def _invalid(request_id: RequestId, message: str) -> Request:
    """A message that is not a request, to be answered with invalid_request."""
    return Request(request_id, "", error=InvalidRequest("invalid_request", message))


def _valid_id(value: Any) -> bool:
    """JSON-RPC ids are strings, integers (not booleans) or null."""
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _is_response(message: Any) -> bool:
    """A JSON-RPC 2.0 response: a valid id and exactly one of result and error."""
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and _valid_id(message.get("id"))
        and ("result" in message) != ("error" in message)
    )
