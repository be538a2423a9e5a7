"""Each document's neighbours in its file (the context of ranking), made whole or carried over a commit.

Arrays are in a searcher's top-level document numbering, one per step (-1 the entry just before,
1 the one just after); `size` (one past the last document) stands for "none". A commit that only
adds segments and deletes documents changes the neighbours of the files it touched and of no
other, so those alone are worked out again.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.ma  # np.unique imports it on first use: here at start, not inside the first recall

NUMBERS = np.int32  # a neighbour's document number: half the bytes of NumPy's default, for a partition's few millions


def whole(keys: np.ndarray, lines: np.ndarray, live: np.ndarray, steps: Sequence[int]) -> list[np.ndarray]:
    """For each document and step, the live entry that many entries from it in its file (one array a step).

    `keys` name each document's file (0 for file records), `lines` its line: sorted by file then
    line, each entry's neighbours are the live entries of the same file around it.
    """
    size = len(keys)
    found = [np.full(size, size, dtype=NUMBERS) for _ in steps]
    _link(found, steps, keys, lines, np.flatnonzero(live & (keys != 0)))
    return found


def carried(
    before: list[np.ndarray],
    was_live: np.ndarray,
    steps: Sequence[int],
    keys: np.ndarray,
    lines: np.ndarray,
    live: np.ndarray,
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
        grown = np.full(size, size, dtype=NUMBERS)
        grown[:old_size] = np.where(previous == old_size, size, previous)
        grown[docs] = size
        found.append(grown)
    _link(found, steps, keys, lines, docs[live[docs]])
    return found


def _link(found: list[np.ndarray], steps: Sequence[int], keys: np.ndarray, lines: np.ndarray, docs: np.ndarray) -> None:
    """Set the neighbours of `docs` (live entries of whole files) among themselves."""
    order = docs[np.lexsort((lines[docs], keys[docs]))]
    for step, around in zip(steps, found, strict=True):
        far = abs(step)
        same = keys[order[far:]] == keys[order[:-far]]
        earlier, later = order[:-far][same], order[far:][same]
        if step < 0:
            around[later] = earlier
        else:
            around[earlier] = later
