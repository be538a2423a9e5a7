"""Typed errors with a stable machine reason, translated at one boundary each."""

from __future__ import annotations

from typing import Any

# JSON-RPC 2.0 codes (docs/protocol.md, Errors).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
APPLICATION_ERROR = -32000
INTERNAL_ERROR = -32603


class BraindError(Exception):
    """An expected failure: a stable `reason`, a human message, a JSON-RPC code."""

    code = APPLICATION_ERROR

    def __init__(self, reason: str, message: str, **data: Any) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.data = data

    def to_wire(self) -> dict[str, Any]:
        """Render as a JSON-RPC error object carrying `data.reason`."""
        return {
            "code": self.code,
            "message": self.message,
            "data": {"reason": self.reason, **self.data},
        }

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


class ParseError(BraindError):
    """The bytes on the wire were not one valid JSON document."""

    code = PARSE_ERROR


class InvalidRequest(BraindError):
    """The JSON was valid but not a JSON-RPC 2.0 request."""

    code = INVALID_REQUEST


class MethodNotFound(BraindError):
    """The request named a method the daemon does not have."""

    code = METHOD_NOT_FOUND


class InvalidParams(BraindError):
    """The params were missing, unknown, or of the wrong type or range."""

    code = INVALID_PARAMS


class ConfigError(BraindError):
    """The configuration file is invalid; the daemon must not start."""


class Rejected(BraindError):
    """A file or a write was refused by validation (docs/files.md, Validation)."""


class NotFound(BraindError):
    """The addressed file, section, entry or daemon does not exist."""

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__("not_found", message, **data)


class Unavailable(BraindError):
    """The daemon cannot be reached or is not in a state to answer."""


class InternalError(BraindError):
    """An unexpected failure inside the daemon; its log holds the traceback."""

    code = INTERNAL_ERROR


class InvalidName(InvalidParams):
    """A logfile name, section name or title that breaks the naming rules."""

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__("invalid_name", message, **data)


class ForbiddenHeading(InvalidParams):
    """Content with a line that would read as a `#` or `##` heading and split the file's units."""

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__("forbidden_heading", message, **data)


class BudgetExceeded(BraindError):
    """A write that would make MEMORY.md larger than the injection budget."""

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__("budget_exceeded", message, **data)


class Ambiguous(BraindError):
    """An address that matches more than one unit; data.matches lists them."""

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__("ambiguous", message, **data)


class Exists(BraindError):
    """A file that is to be created is already there."""

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__("exists", message, **data)
