"""A term's posting list in one segment, decoded whole into two arrays: document numbers and frequencies."""

from __future__ import annotations

import io
import pickle
import struct
import zlib
from array import array
from typing import Any

import numpy as np

from braind.index.whoosh import compat

Ids = np.ndarray  # document numbers, sorted, distinct
Values = np.ndarray  # one float per document number

_BLOCK = struct.Struct("!i")  # a posting block starts with its length, negative for the last one
_MAGIC = b"W3Bl"  # a W3 posting list starts with it


def decode(reader: Any, field: str, term: bytes, info: Any) -> tuple[Ids, Values]:
    """A term's posting list in one segment: inlined in its term info, or blocks read in one go."""
    if info.is_inlined():
        ids, weights, _ = info.inlined_postings()
        return np.array(ids, dtype=np.uint32), np.array(weights, dtype=np.float32)
    terms = compat.segment_terms(reader)
    if terms is None or not compat.has_postings_file(terms):  # not a W3 segment
        return _matcher_postings(reader.postings(field, term))
    offset, length = info.extent()
    length = length[0] if isinstance(length, tuple) else length  # this Whoosh decodes it as a 1-tuple
    return _blocks(compat.posting_bytes(terms, offset, length))


def _blocks(data: bytes) -> tuple[Ids, Values]:
    """Decode a W3 posting list: blocks of (length, pickled info, pickled or zlib data of delta ids and weights)."""
    if not data.startswith(_MAGIC):
        raise ValueError("not a W3 posting list")
    stream = io.BytesIO(data)
    position, ids_parts, weight_parts = len(_MAGIC), [], []
    while True:
        (size,) = _BLOCK.unpack_from(data, position)
        stream.seek(position + _BLOCK.size)
        count, _, _, compression, _, _ = pickle.load(stream)
        end = position + _BLOCK.size + abs(size)
        body = data[stream.tell() : end]
        deltas, weights, _ = pickle.loads(zlib.decompress(body) if compression else body)
        ids_parts.append(np.cumsum(_uints(deltas), dtype=np.uint32))  # each block counts from 0
        weight_parts.append(_weights(weights, count))
        if size < 0:
            break
        position = end
    return np.concatenate(ids_parts), np.concatenate(weight_parts)


def _uints(deltas: Any) -> np.ndarray:
    """A block's delta-encoded numbers: an array's bytes as they are (braind's writer), or a tuple (Whoosh's)."""
    if isinstance(deltas, array) and deltas.typecode == "I":
        return np.frombuffer(deltas, dtype=np.uint32)
    return np.array(deltas, dtype=np.uint32)


def _weights(weights: Any, count: int) -> Values:
    """A block's weights: None for all ones, one float for all equal, else one each (an array or a tuple)."""
    if weights is None:
        return np.ones(count, dtype=np.float32)
    if isinstance(weights, float):
        return np.full(count, weights, dtype=np.float32)
    if isinstance(weights, array) and weights.typecode == "f":
        return np.frombuffer(weights, dtype=np.float32)
    return np.array(weights, dtype=np.float32)


def _matcher_postings(matcher: Any) -> tuple[Ids, Values]:
    """Any Whoosh matcher's postings, one at a time (segments of another codec)."""
    ids, weights = array("I"), array("f")
    while matcher.is_active():
        ids.append(matcher.id())
        weights.append(matcher.weight())
        matcher.next()
    return np.frombuffer(ids, dtype=np.uint32).copy(), np.frombuffer(weights, dtype=np.float32).copy()
