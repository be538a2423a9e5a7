"""The caches of the index's read side: per segment, by recent use within a budget of bytes, and of loaded entries.

Segments never change but by deletions, so what is read of one is kept as long
as it lives; arrays decoded from them are kept by least recent use within a
budget that counts every item's overhead too.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar, cast

import numpy as np

from braind.index.whoosh import compat

Arrays = TypeVar("Arrays", bound=tuple[np.ndarray, ...])
ITEM_BYTES = 512  # what one cached item costs besides its arrays: its key, tuple and array headers


class SegmentCache:
    """What is read once per segment and kept while it lives: segments never change but by deletions."""

    def __init__(self) -> None:
        self._items: dict[tuple[Any, str, str], Any] = {}

    def get(self, reader: Any, name: str, field: str, read: Callable[[Any, str], Any]) -> Any:
        """The item `name` of a segment's field, read on first use."""
        key = (segment_id(reader), name, field)
        found = self._items.get(key)
        if found is None:
            found = self._items[key] = read(reader, field)
        return found

    def find(self, reader: Any, name: str, field: str) -> Any:
        """The item `name` of a segment's field if it was made, else None."""
        return self._items.get((segment_id(reader), name, field))

    def put(self, reader: Any, name: str, field: str, item: Any) -> None:
        """Keep an item made elsewhere (None forgets it)."""
        key = (segment_id(reader), name, field)
        if item is None:
            self._items.pop(key, None)
        else:
            self._items[key] = item

    def keep(self, live: set[Any]) -> None:
        """Forget the items of segments that were merged away or deleted."""
        for key in [key for key in self._items if key[0] not in live]:
            del self._items[key]


class StoredDocuments:
    """Recently loaded documents (as entries), shared by every index: hits repeat across queries."""

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._docs: OrderedDict[tuple[Any, int], Any] = OrderedDict()
        self._lock = threading.Lock()  # partitions are searched from several threads

    def get(self, key: tuple[Any, int], read: Callable[[], Any]) -> Any:
        """A loaded document, read on a miss."""
        with self._lock:
            found = self._docs.get(key)
            if found is not None:
                self._docs.move_to_end(key)
                return found
        found = read()
        with self._lock:
            self._docs[key] = found
            while len(self._docs) > self._budget:
                self._docs.popitem(last=False)
        return found


class ArrayCache:
    """Tuples of arrays by key, the least recently used dropped beyond a budget of bytes."""

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._lists: OrderedDict[Hashable, tuple[np.ndarray, ...]] = OrderedDict()
        self._by_segment: dict[Hashable, set[Hashable]] = {}  # keys by first item (a segment, in shared caches)
        self._held = 0
        self._lock = threading.Lock()  # partitions are searched from several threads

    @property
    def held(self) -> int:
        """The bytes held now."""
        return self._held

    def get(self, key: Hashable, read: Callable[[], Arrays]) -> Arrays:
        """The arrays of a key, made by `read` on a miss."""
        with self._lock:
            found = self._lists.get(key)
            if found is not None:
                self._lists.move_to_end(key)
                return cast(Arrays, found)
        made = read()
        size = nbytes(made)
        if size > self._budget:
            return made
        with self._lock:
            self._drop(key)
            self._held += size
            self._lists[key] = made
            self._by_segment.setdefault(segment_of(key), set()).add(key)
            while self._held > self._budget:
                self._drop(next(iter(self._lists)))
        return made

    def forget(self, segments: Iterable[Hashable]) -> None:
        """Drop the arrays of segments that are gone (merged away): they would only wait to be pushed out."""
        with self._lock:
            for segment in segments:
                for key in self._by_segment.get(segment, set()).copy():
                    self._drop(key)

    def _drop(self, key: Hashable) -> None:
        """Forget one key, if held (caller holds the lock)."""
        dropped = self._lists.pop(key, None)
        if dropped is None:
            return
        self._held -= nbytes(dropped)
        keys = self._by_segment[segment_of(key)]
        keys.discard(key)
        if not keys:
            del self._by_segment[segment_of(key)]


def segment_of(key: Hashable) -> Hashable:
    """The segment a key's arrays come from: its first item (a key of another shape stands for itself)."""
    return key[0] if isinstance(key, tuple) and key else key


def nbytes(arrays: tuple[np.ndarray, ...]) -> int:
    """The bytes a tuple of arrays holds, with what an entry costs besides (so empty lists count too)."""
    return ITEM_BYTES + sum(array.nbytes for array in arrays)


def segment_id(reader: Any) -> Any:
    """What names a segment for as long as it exists."""
    return compat.segment_id(reader) or id(reader)
