"""The wire format: strict decoding with stable reasons, compact one-line encoding."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braind.errors import (
    BraindError,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    NotFound,
    ParseError,
    Unavailable,
)
from braind.rpc.protocol import (
    MAX_BATCH,
    MAX_DEPTH,
    MAX_LINE,
    Request,
    decode,
    decode_response,
    encode_batch,
    encode_error,
    encode_request,
    encode_result,
    error_from_wire,
)


def call(params: str = "{}", **members: str) -> bytes:
    """A request line with `params` spliced in verbatim, so invalid JSON can be written."""
    fields = {"jsonrpc": '"2.0"', "method": '"echo"', "id": "1", "params": params, **members}
    return ("{" + ",".join(f'"{key}":{value}' for key, value in fields.items()) + "}").encode()


def nested(depth: int) -> str:
    """A JSON value nested `depth` levels deep, counting the request object itself."""
    return "[" * (depth - 2) + "]" * (depth - 2)


def refusal(line: bytes) -> BraindError:
    """The error a line is refused with, whether the whole line or the one request is at fault."""
    try:
        decoded = decode(line)
    except BraindError as err:
        return err
    assert isinstance(decoded, Request) and decoded.error is not None, decoded
    return decoded.error


def test_a_request_decodes_to_method_params_and_id() -> None:
    assert decode(call('{"a": [1, "é"]}')) == Request(1, "echo", {"a": [1, "é"]})


def test_a_request_without_id_is_a_notification() -> None:
    request = decode(b'{"jsonrpc":"2.0","method":"echo"}')
    assert request == Request(None, "echo", {}, notification=True)


def test_a_null_id_is_a_request_not_a_notification() -> None:
    assert decode(call(id="null")) == Request(None, "echo", {})


def test_a_string_id_and_a_trailing_newline_are_accepted() -> None:
    assert decode(call(id='"a-1"') + b"\r\n") == Request("a-1", "echo", {})


def test_nesting_up_to_the_limit_is_accepted() -> None:
    request = decode(call(f'{{"a":{nested(MAX_DEPTH)}}}'))
    assert isinstance(request, Request) and request.error is None


def test_escaped_quotes_and_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = json.dumps("[" * 100 + '\\"{' * 100)
    assert decode(call(f'{{"a":{text}}}')) == Request(1, "echo", {"a": json.loads(text)})


def test_surrogate_pairs_are_accepted() -> None:
    assert decode(call('{"a":"\\ud83d\\ude00"}')) == Request(1, "echo", {"a": "\U0001f600"})


@pytest.mark.parametrize(
    ("line", "cls", "reason"),
    [
        pytest.param(call('{"a":NaN}'), ParseError, "not_finite", id="nan"),
        pytest.param(call('{"a":Infinity}'), ParseError, "not_finite", id="infinity"),
        pytest.param(call('{"a":-Infinity}'), ParseError, "not_finite", id="minus-infinity"),
        pytest.param(call('{"a":1,"a":2}'), ParseError, "duplicate_key", id="duplicate-param"),
        pytest.param(call(id='1,"id":2'), ParseError, "duplicate_key", id="duplicate-member"),
        pytest.param(call('{"a":"\\ud800"}'), ParseError, "lone_surrogate", id="lone-high-surrogate"),
        pytest.param(call('{"a":["x\\udc00"]}'), ParseError, "lone_surrogate", id="lone-low-surrogate"),
        pytest.param(call('{"\\udfff":1}'), ParseError, "lone_surrogate", id="surrogate-key"),
        pytest.param(call(f'{{"a":{nested(MAX_DEPTH + 1)}}}'), ParseError, "too_deep", id="one-too-deep"),
        pytest.param(b"[" * 10_000 + b"]" * 10_000, ParseError, "too_deep", id="10k-deep"),
        pytest.param(b"{" * 10_000, ParseError, "too_deep", id="10k-unclosed"),
        pytest.param(call('{"a":' + "9" * 100_000 + "}"), ParseError, "number_too_large", id="100k-digits"),
        pytest.param(call('{"a":-' + "9" * 21 + "}"), ParseError, "number_too_large", id="21-digits"),
        pytest.param(call('{"a":1e999}'), ParseError, "number_too_large", id="float-overflow"),
        pytest.param(call('{"a":0.' + "1" * 100_000 + "}"), ParseError, "number_too_large", id="long-float"),
        pytest.param(b'{"jsonrpc":"2.0","method":"\xff"}', ParseError, "invalid_utf8", id="invalid-utf8"),
        pytest.param(b'{"a":"\xc0\xaf"}', ParseError, "invalid_utf8", id="overlong-utf8"),
        pytest.param(b'{"a":"\xed\xa0\x80"}', ParseError, "invalid_utf8", id="utf8-surrogate"),
        pytest.param(b"\xef\xbb\xbf{}", ParseError, "parse_error", id="bom"),
        pytest.param(b'{"jsonrpc":', ParseError, "parse_error", id="truncated"),
        pytest.param(b"garbage", ParseError, "parse_error", id="garbage"),
        pytest.param(b"", ParseError, "parse_error", id="empty"),
        pytest.param(b"x" * (MAX_LINE + 1), InvalidRequest, "too_large", id="too-large"),
        pytest.param(b"[]", InvalidRequest, "invalid_request", id="empty-batch"),
        pytest.param(b"[" + b"1," * MAX_BATCH + b"1]", InvalidRequest, "too_large", id="batch-too-large"),
        pytest.param(call("[1,2]"), InvalidParams, "invalid_params", id="array-params"),
        pytest.param(call('"x"'), InvalidParams, "invalid_params", id="string-params"),
        pytest.param(call("null"), InvalidParams, "invalid_params", id="null-params"),
        pytest.param(call(jsonrpc='"1.0"'), InvalidRequest, "invalid_request", id="jsonrpc-1.0"),
        pytest.param(call(jsonrpc="2.0"), InvalidRequest, "invalid_request", id="jsonrpc-number"),
        pytest.param(b'{"method":"echo","id":1}', InvalidRequest, "invalid_request", id="no-jsonrpc"),
        pytest.param(b'{"jsonrpc":"2.0","id":1}', InvalidRequest, "invalid_request", id="no-method"),
        pytest.param(call(method="7"), InvalidRequest, "invalid_request", id="method-number"),
        pytest.param(call(method='""'), InvalidRequest, "invalid_request", id="method-empty"),
        pytest.param(call(id="true"), InvalidRequest, "invalid_request", id="id-bool"),
        pytest.param(call(id="1.5"), InvalidRequest, "invalid_request", id="id-float"),
        pytest.param(call(id="[1]"), InvalidRequest, "invalid_request", id="id-array"),
        pytest.param(call(extra="1"), InvalidRequest, "invalid_request", id="unknown-member"),
        pytest.param(b'"echo"', InvalidRequest, "invalid_request", id="not-an-object"),
    ],
)
def test_rejections_carry_their_code_and_reason(line: bytes, cls: type[BraindError], reason: str) -> None:
    err = refusal(line)
    assert (type(err), err.code, err.reason) == (cls, cls.code, reason)


def test_an_invalid_request_keeps_its_id_when_it_has_a_valid_one() -> None:
    request = decode(call("[1]", id='"r7"'))
    assert isinstance(request, Request) and request.id == "r7" and not request.notification


def test_a_batch_decodes_each_member_on_its_own() -> None:
    batch = decode(b'[{"jsonrpc":"2.0","method":"a","id":1},{"jsonrpc":"2.0","method":"b"},7]')
    assert isinstance(batch, list)
    assert batch[:2] == [Request(1, "a", {}), Request(None, "b", {}, notification=True)]
    assert batch[2].error is not None and batch[2].error.reason == "invalid_request"


def test_a_batch_with_a_bad_member_json_is_refused_whole() -> None:
    assert refusal(b'[{"jsonrpc":"2.0","method":"a","id":1},{"a":1,"a":1}]').reason == "duplicate_key"


FUZZ = settings(deadline=None)  # about correctness, not speed: no timing assertions


@FUZZ
@given(st.binary(max_size=512))
def test_decode_of_arbitrary_bytes_raises_only_braind_errors(data: bytes) -> None:
    with contextlib.suppress(BraindError):
        decode(data)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@FUZZ
@given(JSON, st.integers(min_value=0), st.sampled_from(["", "[", "]", "{", '"', "\\", ",", ":", "\\ud800"]))
def test_decode_of_damaged_json_raises_only_braind_errors(value: Any, where: int, insert: str) -> None:
    text = json.dumps({"jsonrpc": "2.0", "method": "m", "params": {"v": value}, "id": 1})
    cut = where % (len(text) + 1)
    with contextlib.suppress(BraindError):
        decode((text[:cut] + insert + text[cut:]).encode())


FINITE_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**19), max_value=10**19)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@FUZZ
@given(st.dictionaries(st.text(), FINITE_JSON, max_size=5), st.integers(min_value=-(10**19), max_value=10**19))
def test_requests_round_trip(params: dict[str, Any], request_id: int) -> None:
    assert decode(encode_request(request_id, "m", params)) == Request(request_id, "m", params)


def test_encoded_replies_are_one_compact_line() -> None:
    line = encode_result(3, {"text": "a\nb", "ü": [1.5, None], "茶": "乌龙茶"})
    result = b'{"text":"a\\nb","\\u00fc":[1.5,null],"\\u8336":"\\u4e4c\\u9f99\\u8336"}'
    assert line == b'{"jsonrpc":"2.0","id":3,"result":' + result + b"}\n"
    assert json.loads(line) == {"jsonrpc": "2.0", "id": 3, "result": {"text": "a\nb", "ü": [1.5, None], "茶": "乌龙茶"}}


@pytest.mark.parametrize("result", [object(), {1, 2}, float("nan"), "\ud800", Path("/x")])
def test_a_result_that_is_not_json_raises_for_the_caller_to_handle(result: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        encode_result(1, {"value": result})


def test_an_error_reply_carries_code_message_reason_and_data() -> None:
    reply = json.loads(encode_error("x", InvalidParams("bad_limit", "limit must be 1-500", key="limit")))
    assert reply == {
        "jsonrpc": "2.0",
        "id": "x",
        "error": {"code": -32602, "message": "limit must be 1-500", "data": {"reason": "bad_limit", "key": "limit"}},
    }


def test_error_data_that_is_not_json_is_rendered_as_text() -> None:
    reply = json.loads(encode_error(1, NotFound("no such file", path=Path("/m/x.md"))))
    assert reply["error"]["data"] == {"reason": "not_found", "path": "/m/x.md"}


def test_an_error_that_cannot_be_encoded_falls_back_to_its_reason() -> None:
    reply = decode_response(encode_error(1, BraindError("odd", "bad \ud800 text", ratio=float("nan"))))
    assert reply.error is not None
    assert (reply.error.reason, reply.error.message, reply.error.data) == ("odd", "bad ? text", {})


def test_a_batch_reply_is_one_array_line() -> None:
    line = encode_batch([encode_result(1, "a"), encode_error(None, InvalidRequest("invalid_request", "no"))])
    assert line.count(b"\n") == 1 and [reply["id"] for reply in json.loads(line)] == [1, None]


@pytest.mark.parametrize(
    ("err", "cls"),
    [
        (ParseError("parse_error", "m"), ParseError),
        (InvalidRequest("too_large", "m"), InvalidRequest),
        (MethodNotFound("unknown_method", "m"), MethodNotFound),
        (InvalidParams("invalid_params", "m"), InvalidParams),
        (InternalError("internal", "m"), InternalError),
        (NotFound("m", fp="ab12"), NotFound),
        (Unavailable("busy", "m"), Unavailable),
        (Unavailable("unauthorized", "m"), Unavailable),
        (BraindError("path_escape", "m", path="../x"), BraindError),
    ],
)
def test_errors_survive_the_wire(err: BraindError, cls: type[BraindError]) -> None:
    back = decode_response(encode_error(5, err)).error
    assert back is not None and type(back) is cls
    assert (back.code, back.reason, back.message, back.data) == (err.code, err.reason, "m", err.data)


def test_an_unknown_error_code_keeps_its_code() -> None:
    err = error_from_wire({"code": -32050, "message": "m", "data": {"reason": "quota", "n": 1}})
    assert (type(err), err.code, err.reason, err.data) == (BraindError, -32050, "quota", {"n": 1})


@pytest.mark.parametrize(
    "line",
    [b"[]", b'{"jsonrpc":"2.0","id":1}', b'{"jsonrpc":"2.0","id":1,"result":1,"error":{}}', b"{", b"\xff"],
)
def test_a_malformed_reply_is_a_parse_error(line: bytes) -> None:
    with pytest.raises(ParseError):
        decode_response(line)
