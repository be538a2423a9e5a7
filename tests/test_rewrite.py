"""The compare-and-exchange rewrite, branch by branch: another program's write placed at an exact moment.

The racing tests (`test_faults_races.py`) drive these branches with a real second process, at
random moments. Here each branch is reached on purpose: `exchange` is wrapped so that another
writer acts right before or right after the swap. That is the one thing mocked, because no real
process can be made to write between two given syscalls of the daemon; the files, inodes and
renames are real. Filesystems without RENAME_EXCHANGE are simulated the same way (every local
Linux filesystem here supports it).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pytest

from braind.files.durable import leftover, temp_name
from braind.files.rewrite import rewriter as rewriting
from braind.files.rewrite.backups import clean_leftovers
from braind.files.rewrite.inodes import Target, grown, in_flux
from braind.files.rewrite.rewriter import Rewriter

MEMORY = "## alpha\nfirst body\n\n## omega\nomega body\n"


def correct_alpha(body: str) -> Callable[[str | None], tuple[str, None]]:
    """A change that rewrites section alpha's body (as memory_correct does)."""

    def change(text: str | None) -> tuple[str, None]:
        assert text is not None
        head, _, rest = text.partition("## alpha\n")
        return head + "## alpha\n" + body + "\n" + rest[rest.index("\n\n") + 1 :], None

    return change


@pytest.fixture
def memory(tmp_path: Path) -> Target:
    """A root holding a MEMORY.md."""
    (tmp_path / "MEMORY.md").write_text(MEMORY)
    return Target(tmp_path, Path("MEMORY.md"))


def rewriter() -> Rewriter:
    """A rewriter with a short quiet window."""
    return Rewriter(0.01, 0.2, 1 << 20)


def wrap_exchange(monkeypatch: pytest.MonkeyPatch, before: Callable[[], None], after: Callable[[], None]) -> None:
    """Make another program act right before and right after braind's first swap."""
    real = rewriting.exchange
    calls = []

    def exchange(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> bool:
        calls.append(dst)
        if len(calls) == 1:
            before()
        done = real(src_dir_fd, src, dst_dir_fd, dst)
        if len(calls) == 1:
            after()
        return done

    monkeypatch.setattr(rewriting, "exchange", exchange)


def test_temp_names_are_unique_and_recognised() -> None:
    first, second = temp_name("MEMORY.md"), temp_name("MEMORY.md")
    assert first != second and first.startswith(".MEMORY.md.braind-tmp-")
    assert leftover(first) == ("MEMORY.md", "braind-tmp")
    assert leftover(".MEMORY.md.braind-tmp") == ("MEMORY.md", "braind-tmp")  # older versions' fixed name
    assert leftover(".notes.md.bak-tmp") == ("notes.md", "bak-tmp")
    assert leftover(temp_name("notes.md", "braind-old")) == ("notes.md", "braind-old")
    for name in ("MEMORY.md", ".MEMORY.md.swp", "notes.md.bak", ".x.braind-tmpfoo", "MEMORY.md.carry"):
        assert leftover(name) is None, name


def test_a_rewrite_swaps_in_a_new_inode_and_keeps_the_old_one_as_the_backup(memory: Target) -> None:
    before = os.stat(memory.path).st_ino
    text, _ = rewriter().edit(memory, correct_alpha("second body"), None, False)
    assert memory.path.read_text() == text == "## alpha\nsecond body\n\n## omega\nomega body\n"
    bak = memory.root / ".braind" / "bak" / "MEMORY.md.bak"
    assert os.stat(bak).st_ino == before and bak.read_text() == MEMORY
    assert not [p for p in memory.root.rglob("*") if leftover(p.name)]


def test_an_append_is_one_write_to_the_same_inode(memory: Target) -> None:
    before = os.stat(memory.path).st_ino
    rewriter().edit(memory, lambda text: ((text or "") + "more\n", None), None, True)
    assert os.stat(memory.path).st_ino == before and memory.path.read_text() == MEMORY + "more\n"
    assert not (memory.root / ".braind" / "bak").exists()


def test_an_append_reaching_the_old_inode_after_the_swap_is_swapped_back_and_kept(
    memory: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program holding the file open appends just after the swap: its inode comes back, the rewrite is redone."""
    holder = open(memory.path, "a")  # noqa: SIM115 - held open across the rewrite, as a logger would
    try:
        wrap_exchange(monkeypatch, lambda: None, lambda: (holder.write("late line\n"), holder.flush()))
        text, _ = rewriter().edit(memory, correct_alpha("second body"), None, False)
    finally:
        holder.close()
    assert memory.path.read_text() == text == "## alpha\nsecond body\n\n## omega\nomega body\nlate line\n"


def add_to_alpha(line: str) -> Callable[[str | None], tuple[str, None]]:
    """A change that adds a line to section alpha's body (as memory_write_root to a middle section does)."""

    def change(text: str | None) -> tuple[str, None]:
        assert text is not None
        return text.replace("first body\n", f"first body\n{line}\n", 1), None

    return change


def drop_omega_body(text: str | None) -> tuple[str, None]:
    """A change that only removes a line."""
    assert text is not None
    return text.replace("omega body\n", ""), None


SAVED_IN_PLACE_AS_SHOWN = {
    # change, does the script save braind's version (True) or the one read before it (False) -> the file afterwards
    "an addition saved with braind's version is made once": (
        add_to_alpha("braind line"),
        True,
        "## alpha\nfirst body\nbraind line\n\n## omega\nomega body\nscript line\n",
    ),
    "an addition saved over with the older version is made again": (
        add_to_alpha("braind line"),
        False,
        "## alpha\nfirst body\nbraind line\n\n## omega\nomega body\nscript line\n",
    ),
    "a removal saved with braind's version stays made": (
        drop_omega_body,
        True,
        "## alpha\nfirst body\n\n## omega\nscript line\n",
    ),
    "a removal saved over with the older version is made again": (
        drop_omega_body,
        False,
        "## alpha\nfirst body\n\n## omega\nscript line\n",
    ),
}


@pytest.mark.parametrize("what", list(SAVED_IN_PLACE_AS_SHOWN))
def test_a_save_in_place_during_the_swap_gets_braind_s_change_exactly_once(
    memory: Target, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    """A script holding the old inode open saves into it just after the swap, from braind's version (read in the
    moment it was in place) or from the one before: that inode comes back, and braind's change is in it once."""
    change, as_shown, after = SAVED_IN_PLACE_AS_SHOWN[what]
    holder = open(memory.path, "r+b")  # noqa: SIM115 - held open across the rewrite, as an in-place save would
    before = memory.path.read_bytes()

    def script_saves() -> None:
        saved = memory.path.read_bytes() if as_shown else before
        holder.truncate(0)
        holder.seek(0)
        holder.write(saved + b"script line\n")
        holder.flush()

    try:
        wrap_exchange(monkeypatch, lambda: None, script_saves)
        text, _ = rewriter().edit(memory, change, None, False)
    finally:
        holder.close()
    assert memory.path.read_text() == text == after


@pytest.mark.parametrize("when", ["before the swap back", "right as it is back"])
def test_a_line_saved_into_the_old_inode_survives_a_save_made_from_braind_s_version(
    memory: Target, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """A script truncates the old inode just before the swap, so braind swaps it back; meanwhile the script writes
    its line to it and reads braind's version, and its next save, made from that read, lands on the inode put back
    and drops the line. Braind saw the line in the version it put back: its next look carries it again."""
    holder: list[BinaryIO] = []
    shown: list[bytes] = []
    real_exchange, real_grown = rewriting.exchange, rewriting.grown

    def script_writes_and_reads() -> None:  # its save into the old inode ends; its next one reads braind's version
        holder[0].write(MEMORY.encode() + b"script line 1\n")
        holder[0].close()
        shown.append(memory.path.read_bytes())

    def saves_from_braind_s_version() -> None:
        memory.path.write_bytes(shown[0] + b"script line 2\n")
        shown.append(b"")  # saved: the script is done

    def exchange(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> bool:
        if not holder:
            holder.append(open(memory.path, "wb"))  # noqa: SIM115 - a truncating open just before the swap
            return real_exchange(src_dir_fd, src, dst_dir_fd, dst)
        if when == "before the swap back" and not shown:
            script_writes_and_reads()
        done = real_exchange(src_dir_fd, src, dst_dir_fd, dst)
        if when == "right as it is back" and len(shown) == 1:
            saves_from_braind_s_version()
        return done

    def grown(fd: int, known: bytes) -> bytes | None:
        found = real_grown(fd, known)
        if when == "right as it is back" and holder and not shown:  # braind has judged the old inode: emptied
            script_writes_and_reads()
        return found

    monkeypatch.setattr(rewriting, "exchange", exchange)
    monkeypatch.setattr(rewriting, "grown", grown)
    writer = rewriter()
    writer.edit(memory, add_to_alpha("braind line"), None, False)
    if when == "before the swap back":
        saves_from_braind_s_version()  # after braind's redone rewrite: its line is dropped with the script's
    writer.look_back(memory)
    lines = memory.path.read_text().split("\n")
    assert lines.count("script line 1") == 1 and lines.count("script line 2") == 1, lines
    assert lines.count("braind line") == 1, lines


def test_braind_s_version_saved_over_in_its_moment_is_not_weighed_against_an_emptied_file(
    memory: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In braind's version's moment in place, one save reaches the old file (so it comes back) and another writes
    an older read over braind's version; then a third empties the file put back, to write it a moment later.
    What the second save added is weighed against the version put back only when that is a whole text: against
    the emptied file it would be the whole of braind's version, carried in, and so doubled."""
    holder = open(memory.path, "r+b")  # noqa: SIM115 - held open across the rewrite, as an in-place save would
    later: list[BinaryIO] = []
    real = rewriting.exchange

    def exchange(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> bool:
        done = real(src_dir_fd, src, dst_dir_fd, dst)
        if not later and holder.tell() == 0:  # braind's version is in place
            holder.truncate(0)
            holder.write(MEMORY.encode() + b"script line 1\n")  # the old file gains a line: it will come back
            holder.flush()
            memory.path.write_bytes(MEMORY.encode() + b"script line 2\n")  # over braind's version
        elif not later:  # the old file is back: a third save empties it
            later.append(open(memory.path, "wb"))  # noqa: SIM115 - written once braind has looked
        return done

    monkeypatch.setattr(rewriting, "exchange", exchange)
    writer = rewriter()
    try:
        writer.edit(memory, add_to_alpha("braind line"), None, False)
    finally:
        holder.close()
        if later:
            later[0].write(MEMORY.encode() + b"script line 1\nscript line 3\n")
            later[0].close()
    writer.look_back(memory)
    writer.close()
    lines = memory.path.read_text().split("\n")
    for line in ("## omega", "omega body", "script line 1", "script line 2", "script line 3"):
        assert lines.count(line) == 1, (line, lines)


SAVED_JUST_BEFORE = {
    # what vim saves by rename just before braind swaps -> the file afterwards
    "an addition is kept in braind's version": (
        MEMORY + "saved by vim\n",
        "## alpha\nsecond body\n\n## omega\nomega body\nsaved by vim\n",
    ),
    "a rewrite is put back and the change made on it": (
        MEMORY.replace("omega body", "omega rewritten by hand"),
        "## alpha\nsecond body\n\n## omega\nomega rewritten by hand\n",
    ),
}


@pytest.mark.parametrize("what", list(SAVED_JUST_BEFORE))
def test_a_rename_save_slipping_in_before_the_swap_is_never_lost(
    memory: Target, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    saved, after = SAVED_JUST_BEFORE[what]

    def vim_saves() -> None:
        tmp = memory.root / ".MEMORY.md.swp"
        tmp.write_text(saved)
        os.replace(tmp, memory.path)

    wrap_exchange(monkeypatch, vim_saves, lambda: None)
    rewriter().edit(memory, correct_alpha("second body"), None, False)
    assert memory.path.read_text() == after


def test_a_rename_save_before_the_swap_and_another_after_it_keep_the_first_save_once(
    memory: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vim saves by rename just before braind swaps, then again, from its own save, just after: braind carries the
    first save's line into its version, finds the second save in its place, and must not add that line to it again."""
    first = MEMORY + "saved by vim\n"

    def vim_saves(text: str) -> Callable[[], None]:
        def save() -> None:
            tmp = memory.root / ".MEMORY.md.swp"
            tmp.write_text(text)
            os.replace(tmp, memory.path)

        return save

    wrap_exchange(monkeypatch, vim_saves(first), vim_saves(first + "saved again\n"))
    rewriter().edit(memory, correct_alpha("second body"), None, False)
    assert memory.path.read_text() == first + "saved again\n"  # braind's change is lost to a save from before it


def test_without_rename_exchange_the_temp_file_is_renamed_over_and_late_appends_carried(
    memory: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem without RENAME_EXCHANGE (simulated): os.replace after the compare, then the last look."""
    holder = open(memory.path, "a")  # noqa: SIM115 - held open across the rewrite
    real_replace = os.replace

    def replace(src: str, dst: str, **kw: int) -> None:
        real_replace(src, dst, **kw)
        if dst == "MEMORY.md":
            holder.write("late line\n")
            holder.flush()

    monkeypatch.setattr(rewriting, "exchange", lambda *args: False)
    monkeypatch.setattr(os, "replace", replace)
    try:
        rewriter().edit(memory, correct_alpha("second body"), None, False)
    finally:
        holder.close()
    assert memory.path.read_text() == "## alpha\nsecond body\n\n## omega\nomega body\nlate line\n"


def test_an_append_made_long_after_reaches_the_file_at_the_next_look(memory: Target) -> None:
    """A program that keeps the old file open writes later: carried over at the next write, or at close."""
    holder = open(memory.path, "a")  # noqa: SIM115 - held open across the rewrite
    writer = rewriter()
    try:
        writer.edit(memory, correct_alpha("second body"), None, False)
        holder.write("written a while later\n")
        holder.flush()
        writer.close()
    finally:
        holder.close()
    assert memory.path.read_text().endswith("omega body\nwritten a while later\n")
    assert not (memory.root / ".braind" / "bak" / "MEMORY.md.carry").exists()


def test_an_old_file_saved_over_is_judged_against_the_file_once_it_is_saved(memory: Target) -> None:
    """A script saves over the old file after braind replaced it, and is saving the file in place when braind
    looks: the lines the old file ends with are weighed against the file once that save is done, not against the
    empty file caught half way (which would carry, and so double, every line back to the last blank one)."""
    holder = open(memory.path, "r+b")  # noqa: SIM115 - held open across the rewrite, as an in-place save would
    writer = rewriter()
    try:
        writer.edit(memory, correct_alpha("second body"), None, False)
        holder.truncate(0)
        holder.write(MEMORY.replace("first", "1st").encode() + b"script line\n")  # from the text before braind's
        holder.flush()
        time.sleep(0.05)  # that save is past the quiet window; the next one is under way when braind looks
        shown = memory.path.read_bytes()
        saving = open(memory.path, "wb")  # noqa: SIM115 - truncated now, written a moment later, while braind looks
        done = threading.Timer(0.03, lambda: (saving.write(shown + b"script line 2\n"), saving.close()))
        done.start()
        writer.look_back(memory)
        done.join()
        writer.look_back(memory)
        writer.close()
    finally:
        holder.close()
    lines = memory.path.read_text().split("\n")
    for line in ("## omega", "omega body", "second body", "script line", "script line 2"):
        assert lines.count(line) == 1, (line, lines)


def test_a_file_being_saved_in_place_is_waited_for(memory: Target) -> None:
    """An editor truncated the file and writes the rest a moment later: braind builds on the saved text."""
    info = os.stat(memory.path)
    assert not in_flux(info, info.st_size, info.st_size, 0.05, 0.2)
    os.truncate(memory.path, 0)
    emptied = os.stat(memory.path)
    assert in_flux(emptied, 0, info.st_size, 0.05, 0.2) and not in_flux(emptied, 0, info.st_size, 0.0, 0.0)
    saved = threading.Timer(0.05, lambda: memory.path.write_text(MEMORY + "saved in place\n"))
    saved.start()
    try:
        Rewriter(0.01, 1.0, 1 << 20).edit(memory, correct_alpha("second body"), info.st_size, False)
    finally:
        saved.join()
    assert memory.path.read_text() == "## alpha\nsecond body\n\n## omega\nomega body\nsaved in place\n"


def test_grown_tells_an_append_from_a_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert grown(fd, b"abc\n") == b""
        path.write_bytes(b"abc\ndef\n")
        assert grown(fd, b"abc\n") == b"def\n"
        path.write_bytes(b"xbc\ndef\n")
        assert grown(fd, b"abc\n") is None
    finally:
        os.close(fd)


def test_start_up_clean_up_removes_temps_and_keeps_an_orphaned_backup_link(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text(MEMORY)
    bak = tmp_path / ".braind" / "bak"
    bak.mkdir(parents=True)
    (tmp_path / temp_name("MEMORY.md")).write_text("unacknowledged")
    (bak / temp_name("MEMORY.md", "braind-old")).write_text("the version before the last swap")
    os.link(tmp_path / "MEMORY.md", bak / temp_name("MEMORY.md", "braind-old"))
    done = clean_leftovers(tmp_path)
    assert len(done) == 3 and sum("kept leftover" in d for d in done) == 1, done
    assert (bak / "MEMORY.md.bak").read_text() == "the version before the last swap"
    assert sorted(p.name for p in bak.iterdir()) == ["MEMORY.md.bak"] and (tmp_path / "MEMORY.md").read_text() == MEMORY
