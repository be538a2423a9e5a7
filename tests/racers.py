"""An editor in a process of its own, for the racing tests: it writes one file the way editors do.

    python -m tests.racers MODE PATH SECONDS TAG OUT

MODE is `append` (open with "a", one line, close: what `echo >>` and loggers do), `rename`
(read, write a temp file, rename it over the file: vim's default save), or `inplace` (read,
truncate, write: `backupcopy=yes`, nano, many scripts). Every save adds the line `TAG n` at the
end of the file. `rename` and `inplace` check, as vim does, that the file did not change since
they read it (the inode they read, its size and mtime), and read it again if it did;
`rename-naive` and `inplace-naive` save what they read without looking, as a script would. OUT
gets a JSON report: the lines written, and for every save the monotonic times it read the file
and finished writing it.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

Stamp = tuple[int, int, int]


def stamp(info: os.stat_result) -> Stamp:
    """What an editor compares to see whether a file changed since it read it."""
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def read(path: Path) -> tuple[bytes, Stamp]:
    """The file's bytes and the stamp of the very inode they were read from."""
    with open(path, "rb") as f:
        return f.read(), stamp(os.fstat(f.fileno()))


def with_line(data: bytes, line: str) -> bytes:
    """The file's bytes with one more line at the end."""
    return data + (b"" if not data or data.endswith(b"\n") else b"\n") + line.encode() + b"\n"


def append(path: Path, line: str) -> tuple[float, float]:
    """One O_APPEND write, as `echo line >> file` does."""
    began = time.monotonic()
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    return began, time.monotonic()


def rename_save(path: Path, line: str) -> tuple[float, float]:
    """vim's save: the whole text to a temp file, fsync, rename over the file (if unchanged since read)."""
    while True:
        began = time.monotonic()
        data, before = read(path)
        tmp = path.with_name(f".{path.name}.swx{os.getpid()}")
        with open(tmp, "wb") as f:
            f.write(with_line(data, line))
            f.flush()
            os.fsync(f.fileno())
        if stamp(os.stat(path)) == before:
            os.replace(tmp, path)
            return began, time.monotonic()
        tmp.unlink()


def inplace_save(path: Path, line: str) -> tuple[float, float]:
    """A save in place: truncate the file, then write the whole text (if unchanged since read)."""
    while True:
        began = time.monotonic()
        data, before = read(path)
        with open(path, "r+b") as f:
            if stamp(os.fstat(f.fileno())) != before:
                continue
            f.truncate(0)
            f.write(with_line(data, line))
        return began, time.monotonic()


def rename_naive(path: Path, line: str) -> tuple[float, float]:
    """A script's save by rename: read, temp file, rename over, no check."""
    began = time.monotonic()
    data = path.read_bytes()
    tmp = path.with_name(f".{path.name}.swx{os.getpid()}")
    tmp.write_bytes(with_line(data, line))
    os.replace(tmp, path)
    return began, time.monotonic()


def inplace_naive(path: Path, line: str) -> tuple[float, float]:
    """A script's save in place: read, open for writing (truncating), write, no check."""
    began = time.monotonic()
    data = path.read_bytes()
    with open(path, "wb") as f:
        f.write(with_line(data, line))
    return began, time.monotonic()


SAVES = {
    "append": append,
    "rename": rename_save,
    "inplace": inplace_save,
    "rename-naive": rename_naive,
    "inplace-naive": inplace_naive,
}


def run(mode: str, path: Path, seconds: float, tag: str) -> dict[str, Any]:
    """Save the file again and again for `seconds`, with small random pauses."""
    rng = random.Random(f"{mode}{tag}")
    save = SAVES[mode]
    lines: list[str] = []
    saves: list[tuple[float, float]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = f"{tag} {len(lines)}"
        saves.append(save(path, line))
        lines.append(line)
        time.sleep(rng.random() * 0.004)
    return {"lines": lines, "saves": saves}


def main(argv: list[str]) -> int:
    """Command line: MODE PATH SECONDS TAG OUT."""
    mode, path, seconds, tag, out = argv
    Path(out).write_text(json.dumps(run(mode, Path(path), float(seconds), tag)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
