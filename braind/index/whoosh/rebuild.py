"""A partition rebuilt beside the live one, from every file, while the live one keeps answering."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from whoosh import index as whoosh_index
from whoosh.fields import Schema

from braind.index import analysis
from braind.index.api import FileRecord
from braind.index.whoosh.changes import Change, add_file
from braind.index.whoosh.documents import make_schema
from braind.index.whoosh.store import open_whoosh
from braind.index.whoosh.writer import open_writer
from braind.model.entries import Entry


class Rebuild:
    """A fresh index being built from every file while the live one keeps answering.

    Files are either added here, or the whole directory is built by another
    process (see `directory` and `build_directory`) before finish() is called.
    The live index records in `changes` what is written to it meanwhile (under
    its lock, which this shares), and re-applies it when the rebuild is swapped in.
    """

    def __init__(
        self,
        directory: Path,
        schema: Schema,
        lock: threading.Lock,
        on_finish: Callable[[Rebuild], None],
        on_abort: Callable[[Rebuild], None],
    ) -> None:
        self._directory = directory
        self._schema = schema
        self._lock = lock  # the live index's overlay lock
        self._on_finish, self._on_abort = on_finish, on_abort
        self.changes: dict[str, Change] = {}  # changes to re-apply at the swap, by path
        self.files = self.entries = 0
        self._ix: Any = None
        self._writer: Any = None
        self._ended = False
        directory.mkdir(mode=0o700)

    @property
    def directory(self) -> Path:
        """Where the new index is being built."""
        return self._directory

    @property
    def ix(self) -> Any:
        """The new Whoosh index, once finished."""
        return self._ix

    def add(self, record: FileRecord, entries: Sequence[Entry]) -> None:
        """Add one file with its entries to the new index."""
        if self._writer is None:
            self._ix = whoosh_index.create_in(str(self._directory), self._schema)
            self._writer = open_writer(self._ix)
        add_file(self._writer, record, entries)
        self.files += 1
        self.entries += len(entries)

    def late(self, record: FileRecord, entries: Sequence[Entry]) -> None:
        """A file for a directory being built elsewhere: written in at the swap, unless changed meanwhile."""
        with self._lock:
            self.changes.setdefault(record.path, Change(record, tuple(entries)))

    def finish(self) -> None:
        """Swap the new index in; changes made to the live index meanwhile are kept."""
        if self._ended:
            raise RuntimeError("this rebuild has already ended")
        try:
            if self._writer is not None:
                self._writer.commit()
                self._writer = None
            elif not whoosh_index.exists_in(str(self._directory)):
                whoosh_index.create_in(str(self._directory), self._schema)
            self._ix = open_whoosh(self._directory)
            self._ended = True
            self._on_finish(self)
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Discard the new index; safe to call more than once."""
        self._ended = True
        if self._writer is not None:
            self._writer.cancel()
            self._writer = None
        self._on_abort(self)
        shutil.rmtree(self._directory, ignore_errors=True)


def build_directory(
    directory: Path,
    files: Sequence[tuple[FileRecord, Sequence[Entry]]],
    languages: tuple[str, ...] = analysis.DEFAULT_LANGUAGES,
) -> int:
    """Build a complete index in an empty directory in one commit (run in a worker process)."""
    ix = whoosh_index.create_in(str(directory), make_schema(languages))
    writer = open_writer(ix)
    try:
        for record, entries in files:
            add_file(writer, record, entries)
    except BaseException:
        writer.cancel()
        raise
    writer.commit()
    return sum(len(entries) for _, entries in files)
