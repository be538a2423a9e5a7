"""A segment's postings in memory until its commit: gathered in arrays as documents arrive, grouped by term once.

Whoosh's own writer makes a tuple per posting and sorts them all at commit.
Here a document's terms are appended to a field's three arrays (term number,
document, weight) and grouped by term with one stable sort at the commit;
the postings of merged segments arrive a block at a time. The writer
(`writer.py`) takes each term's list whole.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

RUNS_BATCH = 65536  # postings made Python numbers at a time when a field's lists are written
SMALL_RUNS = 4096  # postings up to which a field's arrivals are grouped in Python: NumPy pays off past some 30,000

# (field, term bytes, document, weight, value): a posting as Whoosh's merges hand it over.
Posting = tuple[str, bytes, int, float, "bytes | None"]
# A block of a posting list: document numbers, weights, and values (None for a format without them).
Block = tuple[Sequence[int], Sequence[float], "Sequence[bytes | None] | None"]


class Postings:
    """One term's postings in document order: numbers, weights, and values when the format has them.

    Lists that may still grow (a merge's) are arrays; a list written as it is may be slices of Python lists.
    """

    __slots__ = ("docs", "values", "weights")

    def __init__(
        self, docs: array[int] | list[int] | None = None, weights: array[float] | list[float] | None = None
    ) -> None:
        self.docs: array[int] | list[int] = array("I") if docs is None else docs
        self.weights: array[float] | list[float] = array("f") if weights is None else weights
        self.values: list[bytes] = []


class Numbers(dict[str, int]):
    """Each term's number, in order of arrival: a new term is numbered when first looked up."""

    def __missing__(self, word: str) -> int:
        """Number a term not seen before (the only lookup that runs Python code)."""
        number = self[word] = len(self)
        return number


class Arrivals:
    """A field's postings as documents arrive, before they are grouped by term: three arrays, a posting a row.

    Appending a document's terms to these is a few calls in C; grouping them by term once, at the commit,
    is a sort. Keeping a list per term instead cost a dictionary lookup and two appends per posting.
    """

    __slots__ = ("docs", "numbers", "terms", "weights")

    def __init__(self) -> None:
        self.numbers = Numbers()
        self.terms = array("I")
        self.docs = array("I")
        self.weights = array("f")

    def add(self, docnum: int, weights: dict[str, float] | dict[str, int]) -> None:
        """One document's terms with their weights."""
        self.terms.fromlist(list(map(self.numbers.__getitem__, weights)))  # fromlist() sizes the array once
        self.docs.fromlist([docnum] * len(weights))
        self.weights.fromlist(list(weights.values()))

    def add_one(self, docnum: int, word: str, weight: float) -> None:
        """One document's only term of the field (an ID field's value)."""
        self.terms.append(self.numbers[word])
        self.docs.append(docnum)
        self.weights.append(weight)

    def runs(self) -> Iterator[tuple[bytes, Postings]]:
        """Each term in order with its postings in document order (the order they arrived in).

        A term's list is a slice of Python lists, cheaper to make than an array each; the numbers become
        lists RUNS_BATCH postings at a time, not all at once: a year's postings as Python numbers would take
        several times their arrays' memory.
        """
        if len(self.docs) <= SMALL_RUNS:
            yield from self._small_runs()
            return
        names, bounds, docs, weights = self._sorted()
        edges, first = np.asarray(bounds), 0
        while first < len(names):  # the terms from first to last, about RUNS_BATCH postings (or one longer list)
            last = max(first + 1, int(np.searchsorted(edges, bounds[first] + RUNS_BATCH, side="right")) - 1)
            base, top = bounds[first], bounds[last]
            batch_docs, batch_weights = docs[base:top].tolist(), weights[base:top].tolist()
            for number in range(first, last):
                start, end = bounds[number] - base, bounds[number + 1] - base
                yield names[number].encode("utf-8"), Postings(batch_docs[start:end], batch_weights[start:end])
            first = last

    def _sorted(self) -> tuple[list[str], list[int], np.ndarray, np.ndarray]:
        """The terms in order, where each one's run starts (and the last ends), and the postings in that order."""
        names = sorted(self.numbers)  # code point order, which is the order of their UTF-8 bytes
        ranks = np.empty(len(names), dtype=np.uint32)
        ranks[[self.numbers[name] for name in names]] = np.arange(len(names), dtype=np.uint32)
        keys = ranks[np.frombuffer(self.terms, dtype=np.uint32)]
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        bounds = [0, *(np.flatnonzero(keys[1:] != keys[:-1]) + 1).tolist(), len(keys)]
        docs = np.frombuffer(self.docs, dtype=np.uint32)[order]
        return names, bounds, docs, np.frombuffer(self.weights, dtype=np.float32)[order]

    def _small_runs(self) -> Iterator[tuple[bytes, Postings]]:
        """runs() for a few postings (a note's commit), where NumPy's fixed costs would outweigh the sort."""
        lists = [Postings() for _ in self.numbers]
        for number, doc, weight in zip(self.terms, self.docs, self.weights, strict=True):
            lists[number].docs.append(doc)
            lists[number].weights.append(weight)
        for name, number in sorted(self.numbers.items()):
            yield name.encode("utf-8"), lists[number]


class TermPool:
    """A segment's postings by field and term, in memory: compact arrays instead of a tuple per posting."""

    def __init__(self) -> None:
        self._fields: dict[str, dict[bytes, Postings]] = {}
        self._arrivals: dict[str, Arrivals] = {}  # postings without values, not yet grouped by term
        self.unsorted: set[tuple[str, bytes]] = set()  # terms that got a posting out of document order

    @property
    def fields(self) -> list[str]:
        """The names of the fields that have postings."""
        return sorted(self._fields.keys() | self._arrivals.keys())

    def terms(self, fieldname: str) -> dict[bytes, Postings]:
        """The postings of one field by term."""
        if fieldname in self._arrivals:
            self._group(fieldname)
        found = self._fields.get(fieldname)
        return found if found is not None else self._fields.setdefault(fieldname, {})

    def _group(self, fieldname: str) -> None:
        """Move a field's arrived postings into its lists by term, as arrays: a merge's blocks join them."""
        terms = self._fields.setdefault(fieldname, {})
        for text, arrived in self._arrivals.pop(fieldname).runs():
            postings = terms.get(text)
            if postings is None:
                terms[text] = Postings(array("I", arrived.docs), array("f", arrived.weights))
                continue
            if postings.docs[-1] >= arrived.docs[0]:
                self.unsorted.add((fieldname, text))
            postings.docs.extend(arrived.docs)
            postings.weights.extend(arrived.weights)

    def arrivals(self, fieldname: str) -> Arrivals:
        """Where a document's terms of a field whose format has no values go, each with its weight."""
        arrivals = self._arrivals.get(fieldname)
        if arrivals is None:
            arrivals = self._arrivals[fieldname] = Arrivals()
        return arrivals

    def add_term(self, terms: dict[bytes, Postings], text: bytes, docnum: int, weight: float) -> Postings:
        """Add a posting without a value."""
        postings = terms.get(text)
        if postings is None:
            postings = terms[text] = Postings()
        postings.docs.append(docnum)
        postings.weights.append(weight)
        return postings

    def add_terms(self, fieldname: str, docnum: int, items: Iterable[tuple[str, int, float, bytes]]) -> int:
        """Add a document's (term, frequency, weight, value) items for a field; the sum of frequencies."""
        terms, length = self.terms(fieldname), 0
        for word, frequency, weight, value in items:  # add_term() inlined: this runs for every posting
            text = word.encode("utf-8")
            postings = terms.get(text)
            if postings is None:
                postings = terms[text] = Postings()
            postings.docs.append(docnum)
            postings.weights.append(weight)
            if value:
                postings.values.append(value)
            length += frequency
        return length

    def add(self, item: Posting) -> None:
        """One posting of a merged segment (Whoosh's pool interface)."""
        fieldname, text, docnum, weight, value = item
        terms = self.terms(fieldname)
        known = terms.get(text)
        if known is not None and known.docs[-1] >= docnum:
            self.unsorted.add((fieldname, text))
        postings = self.add_term(terms, text, docnum, weight)
        if value:
            postings.values.append(value)

    def add_block(self, fieldname: str, text: bytes, block: Block, docmap: Any) -> None:
        """A block of a merged segment's postings: renumbered by `docmap`, deleted documents left out."""
        docs, weights, values = block
        kept: Sequence[int]
        if isinstance(docmap, int):  # no deletions: numbers shift by the segment's first document
            kept = range(len(docs))
            renumbered = [docmap + doc for doc in docs]
        else:
            kept = [i for i, doc in enumerate(docs) if doc in docmap]
            renumbered = [docmap[docs[i]] for i in kept]
        if not renumbered:
            return
        terms = self.terms(fieldname)
        postings = terms.get(text)
        if postings is None:
            postings = terms[text] = Postings()
        elif postings.docs[-1] >= renumbered[0]:
            self.unsorted.add((fieldname, text))
        postings.docs.extend(renumbered)
        postings.weights.extend([weights[i] for i in kept])
        if values is not None:
            postings.values.extend(value for i in kept if (value := values[i]))

    def sorted_terms(self, fieldname: str) -> Iterator[tuple[bytes, Postings]]:
        """A field's terms in order, each with its postings in document order."""
        if fieldname not in self._fields and fieldname in self._arrivals:
            return self._arrivals.pop(fieldname).runs()
        terms = self.terms(fieldname)
        if not self.unsorted:
            return iter(sorted(terms.items()))
        return ((text, self._in_order(fieldname, text, terms[text])) for text in sorted(terms))

    def _in_order(self, fieldname: str, text: bytes, postings: Postings) -> Postings:
        """The postings sorted by document, for a term whose postings arrived out of order."""
        if (fieldname, text) not in self.unsorted:
            return postings
        order = sorted(range(len(postings.docs)), key=postings.docs.__getitem__)
        ordered = Postings()
        ordered.docs.extend(postings.docs[i] for i in order)
        ordered.weights.extend(postings.weights[i] for i in order)
        if postings.values:  # a format with values gives every posting one
            ordered.values.extend(postings.values[i] for i in order)
        return ordered

    def cleanup(self) -> None:
        """Forget everything (Whoosh's pool interface)."""
        self._fields, self._arrivals, self.unsorted = {}, {}, set()
