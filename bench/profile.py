"""Optional profiles of the daemon: py-spy attached for one phase at a time, with a text summary.

Worker processes the daemon starts (a parallel rebuild) are sampled too.
Each phase writes profile-<entries>-<phase>.txt (collapsed stacks, the input
of flamegraph tools and speedscope) and profile-<entries>-<phase>-top.txt
(the functions with the most samples, by self and by total time). Sampling
slows the daemon down: a profiled run shows where the time goes, not how
much there is.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.daemon import BenchDaemon

RATE_HZ = 200
ATTACH_S = 0.5
SOCKET_WAIT_S = 60.0
TOP = 40


def py_spy() -> str | None:
    """The py-spy executable, next to this Python or on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Profiler:
    """Attaches py-spy to the daemon around phases; does nothing when out is None."""

    def __init__(self, out: Path | None, prefix: str) -> None:
        self.out = out
        self.prefix = prefix

    @contextmanager
    def phase(self, daemon: BenchDaemon, name: str, gil: bool = True) -> Iterator[None]:
        """Record the daemon while the body runs, then summarise the samples.

        With `gil`, only the thread holding the GIL is sampled: where the CPU
        goes. Without it every busy thread is, waits on I/O (fsync) included.
        """
        exe = py_spy()
        if self.out is None or exe is None:
            yield
            return
        _wait_for(daemon.socket)
        raw = self.out / f"profile-{self.prefix}-{name}.txt"
        command = [exe, "record", "--pid", str(daemon.pid), "--rate", str(RATE_HZ), "--function", "--format", "raw"]
        command += ["--subprocesses", "-o", str(raw), *(["--gil"] if gil else [])]
        recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(ATTACH_S)
        try:
            yield
        finally:
            recorder.send_signal(signal.SIGINT)
            recorder.wait(60)
        if raw.exists():
            (self.out / f"profile-{self.prefix}-{name}-top.txt").write_text(summary(raw), encoding="utf-8")


def _wait_for(path: Path) -> None:
    """Wait until the daemon has bound its socket (its interpreter is up, py-spy can attach)."""
    deadline = time.monotonic() + SOCKET_WAIT_S
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def _frames(line: str) -> tuple[list[str], int]:
    """The frames (outermost first) and sample count of one collapsed-stack line."""
    stack, _, count = line.rpartition(" ")
    return stack.split(";"), int(count)


def summary(raw: Path) -> str:
    """The functions with the most samples: by self time (top of stack) and by total time."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        frames, count = _frames(line)
        samples += count
        own[frames[-1]] += count
        for frame in set(frames):
            total[frame] += count
    return _table("self", own, samples) + "\n" + _table("total (inclusive)", total, samples)


def _table(title: str, counts: Counter[str], samples: int) -> str:
    """The top functions of one counter as percentages of all samples."""
    lines = [f"{title}: {samples} samples"]
    lines += [f"{100 * n / max(samples, 1):5.1f} %  {frame}" for frame, n in counts.most_common(TOP)]
    return "\n".join(lines) + "\n"
