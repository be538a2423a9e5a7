"""One partition's directory on disk: its Whoosh index, the manifest it was built with, what is moved aside."""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from whoosh import index as whoosh_index
from whoosh.fields import Schema
from whoosh.filedb.filestore import FileStorage

from braind.index import analysis, manifest
from braind.index.whoosh import compat
from braind.index.whoosh.documents import SCHEMA_VERSION, read_records

log = logging.getLogger(__name__)

_INDEX = "index"
_MANIFEST = "manifest.json"
_OLD = "index.old-"
_NEW = "index.new-"
_TRASH = "index.trash-"
_KEEP_OLD = 2


class Store:
    """The state directory of one partition: the index in `index/`, `manifest.json` beside it."""

    def __init__(self, state_dir: Path, identity: str, languages: tuple[str, ...], schema: Schema) -> None:
        self.state_dir = Path(state_dir)
        self.dir = self.state_dir / _INDEX
        self._identity = identity
        self._languages = languages
        self._schema = schema

    def prepare(self) -> None:
        """Create the state directory private to the user, and sweep leftovers of a crash."""
        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.state_dir.stat().st_mode & 0o077:
            os.chmod(self.state_dir, 0o700)
        for path in self.state_dir.iterdir():
            if path.name.startswith((_NEW, _TRASH)):
                shutil.rmtree(path, ignore_errors=True)

    def manifest(self) -> dict[str, Any]:
        """What the manifest of a compatible index says."""
        return {
            "schema_version": SCHEMA_VERSION,
            "analyzer_version": analysis.ANALYZER_VERSION,
            "whoosh_version": compat.WHOOSH_VERSION,
            "languages": list(self._languages),
            "identity": self._identity,
        }

    def problem(self) -> str | None:
        """Why the existing index cannot be used, or None when it looks compatible."""
        if not self.dir.is_dir():
            return "missing"
        return manifest.problem(self.state_dir / _MANIFEST, self.manifest())

    def write_manifest(self) -> None:
        """Write the manifest atomically next to the index directory."""
        manifest.write(self.state_dir / _MANIFEST, self.manifest())

    def discard(self) -> None:
        """Move an unusable index aside for inspection, keeping only the newest few."""
        if self.dir.exists():
            aside = self.state_dir / (_OLD + utc_stamp())
            os.replace(self.dir, aside)
            log.warning("moved the old index to %s", aside)
        old = sorted(p for p in self.state_dir.iterdir() if p.name.startswith(_OLD))
        for path in old[:-_KEEP_OLD]:
            shutil.rmtree(path, ignore_errors=True)

    def create(self) -> None:
        """Create an empty index and its manifest."""
        self.dir.mkdir(mode=0o700)
        whoosh_index.create_in(str(self.dir), self._schema)
        self.write_manifest()

    def open(self) -> Any:
        """The Whoosh index in the directory."""
        return open_whoosh(self.dir)

    def damage(self) -> str | None:
        """Why the index on disk can no longer be used (checked while running), or None when it reads."""
        problem = self.problem()
        if problem is not None:
            return problem
        try:
            searcher = self.open().searcher()
            try:
                read_records(searcher)
            finally:
                searcher.close()
        except Exception as exc:  # whatever Whoosh raises on a damaged file
            return f"unreadable ({type(exc).__name__}: {exc})"
        return None

    def new_directory(self) -> Path:
        """A fresh name beside the index for a rebuild (swept at the next start if it is left behind)."""
        return self.state_dir / (_NEW + utc_stamp())

    def swap_in(self, directory: Path) -> Path:
        """Put a rebuilt index in place of the live one; where the old one went, to remove once closed."""
        trash = self.state_dir / (_TRASH + utc_stamp())
        if self.dir.exists():  # gone when it was deleted under the running daemon
            os.replace(self.dir, trash)
        os.replace(directory, self.dir)
        self.write_manifest()
        return trash


def open_whoosh(directory: Path) -> Any:
    """Open an index without mmap: a segment truncated under a mapping would kill the daemon with SIGBUS."""
    return FileStorage(str(directory), supports_mmap=False).open_index()


def utc_stamp() -> str:
    """A sortable UTC timestamp for directory names."""
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
