"""The syncer's append path: a note to a day indexed from its own bytes, not from a read of the whole day."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from braind.config import FilesConfig
from braind.files.durable import append_line
from braind.files.problems import Problems
from braind.files.validate import open_dir
from braind.index.whoosh.index import Index
from braind.ingest import sync
from braind.ingest.sync import Syncer
from braind.model.roots import Root

DAY = Path("diary", "2026-01-10.md")
LINES = 300


@pytest.fixture
def root(tmp_path: Path) -> Root:
    """A root whose day already holds a few hundred entries."""
    (tmp_path / "root" / "diary").mkdir(parents=True)
    text = "".join(f"[10:{n % 60:02d}] busy entry {n}\n" for n in range(LINES))
    (tmp_path / "root" / DAY).write_text(text, encoding="utf-8")
    return Root(tmp_path / "root", "user")


@pytest.fixture
def restarted(root: Root, tmp_path: Path) -> Iterator[Syncer]:
    """A syncer over an index that holds the day from an earlier run: nothing of the day is in memory yet."""
    first = Index(tmp_path / "state", "identity-1")
    first.open()
    Syncer(first, FilesConfig(), Problems()).sync_file(root, DAY)
    first.close()
    index = Index(tmp_path / "state", "identity-1")
    assert index.open() is False
    yield Syncer(index, FilesConfig(), Problems())
    index.close()


@pytest.mark.parametrize("prepared", [True, False])
def test_a_prepared_day_takes_its_first_note_without_reading_the_day(
    root: Root, restarted: Syncer, monkeypatch: pytest.MonkeyPatch, prepared: bool
) -> None:
    """prepare_append (run at start) does the day's reading ahead; the first note then reads only its own line."""
    if prepared:
        restarted.prepare_append(root, DAY)
    reads: list[str] = []
    hash_of, counted = Syncer._hash_of, sync.occurrences
    monkeypatch.setattr(Syncer, "_hash_of", lambda s, path, before: reads.append("hash") or hash_of(s, path, before))
    monkeypatch.setattr(sync, "occurrences", lambda entries: reads.append("count") or counted(entries))
    dir_fd = open_dir(root.path, ("diary",))
    try:
        appended = append_line(dir_fd, DAY.name, "[11:00] the first note after a start")
    finally:
        os.close(dir_fd)
    loaded = restarted.sync_append(root, DAY, appended)
    assert reads == ([] if prepared else ["hash", "count"])
    assert len(loaded.entries) == LINES + 1
    assert loaded.entries[-1].text == "the first note after a start"
    assert loaded.record is not None and loaded.record.size == (root.path / DAY).stat().st_size


def test_preparing_a_day_that_is_not_indexed_or_changed_on_disk_does_nothing(root: Root, restarted: Syncer) -> None:
    """A day missing from the index, or edited since it was indexed, is left for the first note to read whole."""
    restarted.prepare_append(root, Path("diary", "2026-01-11.md"))
    text = (root.path / DAY).read_text(encoding="utf-8")
    (root.path / DAY).write_text(text.replace("busy entry 0\n", "edited while braind was stopped\n"), encoding="utf-8")
    restarted.prepare_append(root, DAY)
    assert not restarted._hashes and not restarted._seen
