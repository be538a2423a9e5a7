"""Each document's predecessors in its file (the context of ranking), made whole or carried over a commit.

Arrays are in a searcher's top-level document numbering; `size` (one past the last document)
stands for "none". A commit that only adds segments and deletes documents changes the
predecessors of the files it touched and of no other, so those alone are worked out again.
"""

from __future__ import annotations

import numpy as np


def whole(keys: np.ndarray, lines: np.ndarray, live: np.ndarray, count: int) -> list[np.ndarray]:
    """For each document, the live entry just before it in its file, the one before that, ... (`count` arrays).

    `keys` name each document's file (0 for file records), `lines` its line: sorted by file then
    line, each entry's predecessors are the live entries of the same file just before it.
    """
    size = len(keys)
    found = [np.full(size, size, dtype=np.int64) for _ in range(count)]
    _link(found, keys, lines, np.flatnonzero(live & (keys != 0)))
    return found


def carried(
    before: list[np.ndarray], was_live: np.ndarray, keys: np.ndarray, lines: np.ndarray, live: np.ndarray
) -> list[np.ndarray]:
    """`whole()` of a searcher whose first documents are the previous searcher's (`before`, `was_live`), unmerged.

    The files touched are those of the documents added after the old ones and of the old ones
    deleted since; only their entries are linked again.
    """
    old_size, size = len(was_live), len(keys)
    gone = was_live & ~live[:old_size]
    touched = np.unique(np.concatenate([keys[old_size:], keys[:old_size][gone]]))
    docs = np.flatnonzero(np.isin(keys, touched[touched != 0]))
    found = []
    for previous in before:
        grown = np.full(size, size, dtype=np.int64)
        grown[:old_size] = np.where(previous == old_size, size, previous)
        grown[docs] = size
        found.append(grown)
    _link(found, keys, lines, docs[live[docs]])
    return found


def _link(found: list[np.ndarray], keys: np.ndarray, lines: np.ndarray, docs: np.ndarray) -> None:
    """Set the predecessors of `docs` (live entries of whole files) among themselves."""
    order = docs[np.lexsort((lines[docs], keys[docs]))]
    for step, before in enumerate(found, start=1):
        same = keys[order[step:]] == keys[order[:-step]]
        before[order[step:][same]] = order[:-step][same]
