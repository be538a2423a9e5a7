"""The end check of every fault test: the index holds exactly what a clean rebuild from the files gives."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from braind.config import load_config
from braind.files.roots import project_root
from braind.files.state import RootState
from braind.index.partitioned import PartitionedIndex
from braind.ingest.sync import load_file, root_available, walk, with_status
from braind.model.entries import Entry
from braind.model.roots import Root, user_root
from braind.runtime.daemon import _identity
from tests.conftest import Daemon, wait_until

EntryKey = tuple[Any, ...]


def entry_key(entry: Entry) -> EntryKey:
    """What must agree between the index and the files: identity, place, content and status."""
    return (
        entry.fp,
        entry.path,
        entry.line,
        entry.date,
        entry.time,
        entry.text,
        entry.type,
        entry.key,
        entry.triggers,
        entry.status,
    )


def indexed_entries(state_dir: Path, identity: str) -> set[EntryKey]:
    """Every entry in a (stopped daemon's) index; an index that had to start afresh counts as empty."""
    index = PartitionedIndex(state_dir, identity)
    fresh = index.open()
    try:
        if fresh:
            return set()
        return {entry_key(e) for path in index.file_records() for e in index.entries_for(path)}
    finally:
        index.close()


def disk_entries(roots: Iterable[Root], files: Any) -> set[EntryKey]:
    """Every entry a clean rebuild would index from the roots as they are on disk now."""
    found: set[EntryKey] = set()
    for root in roots:
        if not root_available(root):
            continue
        state = RootState(root)
        for rel in walk(root):
            found |= {entry_key(e) for e in with_status(load_file(root, rel, files), state).entries}
    return found


def assert_index_matches_files(daemon: Daemon, projects: Iterable[str | Path] = ()) -> None:
    """Stop the daemon (SIGTERM commits the index), then compare its index with a clean rebuild."""
    assert daemon.stop() == 0, daemon.log_text()[-3000:]
    config = load_config(str(daemon.config_path), env={"HOME": str(daemon.base)})
    roots = [user_root(config.memory_root), *(project_root(p) for p in (*config.projects, *projects))]
    indexed = indexed_entries(config.state_dir, _identity(config))
    on_disk = disk_entries(roots, config.files)
    missing, extra = on_disk - indexed, indexed - on_disk
    assert not missing and not extra, (
        f"index differs from a clean rebuild: {len(missing)} missing, e.g. {sorted(missing)[:3]}; "
        f"{len(extra)} extra, e.g. {sorted(extra)[:3]}"
    )


class WrappedDaemon(Daemon):
    """A daemon run through a wrapper command (unshare, setpriv) and with extra environment (NOTIFY_SOCKET)."""

    def __init__(
        self,
        base: Path,
        overrides: dict[str, Any] | None = None,
        wrapper: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(base, overrides)
        self.wrapper = list(wrapper)
        self.env = dict(env or {})

    def start(self, wait: bool = True) -> None:
        """Run `wrapper... python -m braind serve` and wait until status says ready."""
        self.write_config()
        env = {**os.environ, "BRAIND_LOG_LEVEL": "DEBUG"}
        env.pop("NOTIFY_SOCKET", None)
        argv = [*self.wrapper, sys.executable, "-m", "braind", "serve", "--config", str(self.config_path)]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log, env={**env, **self.env})
        if wait:
            wait_until(self.ready, 60, f"daemon ready (log: {self.log_text()[-2000:]})")


@contextlib.contextmanager
def tiny_tmpfs(path: Path, size: str) -> Iterator[None]:
    """Mount a small tmpfs (a real full disk); skip when this machine does not let us mount."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path) -> None:
    """Write to path until the filesystem is full."""
    with path.open("wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"x" * 1024)


def refused_start(daemon: Daemon) -> str:
    """Start a daemon that must refuse; return what it logged on the way out."""
    logged = len(daemon.log_text())
    daemon.start(wait=False)
    assert daemon.proc is not None
    code = daemon.proc.wait(60)
    daemon.proc = None
    assert code != 0, "the daemon started"
    return daemon.log_text()[logged:]
