"""What /proc says about a process and the machine: memory, CPU time, hardware."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import sqlite3
import subprocess
import threading
from importlib import metadata
from pathlib import Path
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")
_QUIET: dict[str, Any] = {"capture_output": True, "text": True, "timeout": 10, "check": False}


def _status_kb(pid: int, field: str) -> int:
    """One `field:  N kB` line of /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(f"{field} not in /proc/{pid}/status")


def rss_mb(pid: int) -> float:
    """Resident set size now (VmRSS), in MiB."""
    return _status_kb(pid, "VmRSS") / 1024


def rss_split_mb(pid: int) -> dict[str, float]:
    """Resident memory now: anonymous (heap) and file-backed (mapped index files), in MiB."""
    return {"anon_mb": _status_kb(pid, "RssAnon") / 1024, "file_mb": _status_kb(pid, "RssFile") / 1024}


def peak_rss_mb(pid: int) -> float:
    """Peak resident set size since the process started (VmHWM), in MiB."""
    return _status_kb(pid, "VmHWM") / 1024


def threads(pid: int) -> int:
    """How many threads a process runs now."""
    return int(Path(f"/proc/{pid}/status").read_text().split("Threads:", 1)[1].split()[0])


def open_fds(pid: int) -> int:
    """How many file descriptors a process holds open now."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_limit(pid: int) -> int:
    """The soft limit on a process's open files (RLIMIT_NOFILE), as /proc/<pid>/limits says; -1 when unlimited."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft = line.split()[3]
            return -1 if soft == "unlimited" else int(soft)
    return -1


def cpu_seconds(pid: int, children: bool = False) -> float:
    """User plus system CPU time of every thread of a process so far (and of its exited children)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    ticks = int(fields[11]) + int(fields[12])  # utime and stime, fields 14 and 15
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime and cstime of waited-for children
    return ticks / CLK_TCK


def children(pid: int) -> list[int]:
    """The child processes of every thread of a process."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(child) for child in (task / "children").read_text().split()]
    return found


def tree(pid: int) -> list[int]:
    """A process and all its descendants (worker processes of a parallel build)."""
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        todo += children(current)
    return pids


def tree_rss_mb(pid: int) -> float:
    """VmRSS of a process and its descendants, in MiB; processes that exit meanwhile count 0."""
    total = 0.0
    for member in tree(pid):
        with contextlib.suppress(OSError, KeyError):
            total += rss_mb(member)
    return total


class TreeSampler:
    """Samples a process tree's RSS in a thread while a block runs; keeps the peak and the most processes."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_mb = 0.0
        self.processes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-rss-sampler", daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        """Sample until stopped."""
        while not self._stop.wait(self.interval):
            self.processes = max(self.processes, len(tree(self.pid)))
            self.peak_mb = max(self.peak_mb, tree_rss_mb(self.pid))


def _cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _ram_gb() -> float:
    """Total RAM in GiB from /proc/meminfo."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024 / 1024, 1)
    return 0.0


def _version(package: str) -> str:
    """An installed distribution's version, or '?'."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def loadavg() -> float:
    """The 1-minute load average: other work on the machine skews every figure."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def _commit() -> str:
    """The braind commit measured, marked dirty when the work tree has changes."""
    repo = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], **_QUIET).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--", "braind"], **_QUIET).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    return head + ("-dirty" if dirty.strip() else "") if head else "?"


def hardware() -> dict[str, object]:
    """The machine and software a run was measured on."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count() or 0,
        "ram_gb": _ram_gb(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "sqlite": sqlite3.sqlite_version,
        "whoosh": _version("whoosh-reloaded"),
        "braind": _version("braind"),
        "commit": _commit(),
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "load_start": loadavg(),
    }


def hardware_line(hw: dict[str, object]) -> str:
    """The hardware as one line for the Markdown report."""
    return (
        f"{hw['date']} · {hw['cpu']}, {hw['cores']} cores, {hw['ram_gb']} GiB RAM · "
        f"Python {hw['python']} · Linux {hw['kernel']} · braind {hw['braind']} ({hw.get('commit', '?')}), "
        f"whoosh-reloaded {hw['whoosh']}, SQLite {hw['sqlite']} · "
        f"load average {hw['load_start']} at the start, {hw.get('load_end', '?')} at the end"
    )
