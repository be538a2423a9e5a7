"""Every declared dependency range holds at its floor: braind runs on the oldest version each one allows.

The floors are installed from the package index into a directory of their own, put first
on the daemon's PYTHONPATH, and a real daemon is run on them: a note, a recall, and an
editor's file seen by the inotify watcher.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO, Daemon, today, wait_until

BINARY = ("--only-binary", ":all:")  # wheels only: a floor that needs a compiler is not one a user gets
SHOW_VERSIONS = "import importlib.metadata as m, numpy; print(m.version('watchdog'), numpy.__version__)"


def declared() -> list[str]:
    """The dependencies pyproject.toml declares."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return list(project["dependencies"])


def floor(requirement: str) -> str:
    """A requirement pinned to the oldest version it allows (`watchdog>=7.1,<8` -> `watchdog==7.1`)."""
    found = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(?:>=|==)\s*([0-9][0-9A-Za-z.]*)(?:\s*,.*)?", requirement)
    assert found, f"{requirement!r} declares no floor"
    return f"{found[1]}=={found[2]}"


def release(version: str) -> tuple[int, ...]:
    """A release number without its trailing zeros, to compare `7.1` with `7.1.0`."""
    numbers = [int(part) for part in version.split(".")]
    while numbers and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def test_every_dependency_has_a_floor_and_a_ceiling() -> None:
    for requirement in declared():
        floor(requirement)
        assert "<" in requirement or "==" in requirement, f"{requirement!r} has no ceiling"


def test_the_floor_of_a_range_is_its_lower_bound() -> None:
    assert floor("watchdog>=7.1,<8") == "watchdog==7.1"
    assert floor("whoosh-reloaded==2.7.5") == "whoosh-reloaded==2.7.5"
    assert release("7.1") == release("7.1.0") != release("7.10")


@pytest.fixture(scope="module")
def floors(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The floor of every dependency, installed (with what they need) into a directory of their own."""
    target = tmp_path_factory.mktemp("floors")
    pins = [floor(requirement) for requirement in declared()]
    pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", *BINARY]
    done = subprocess.run(
        [*pip, "--target", str(target), *pins],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"the floors {pins} do not install: {done.stderr[-2000:]}"
    return target


def test_the_daemon_runs_on_the_floor_of_every_dependency(floors: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": f"{floors}:{REPO}", "PYTHONNOUSERSITE": "1"}
    versions = subprocess.run(
        [sys.executable, "-c", SHOW_VERSIONS],
        capture_output=True,
        text=True,
        env={**env, "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=True,
    ).stdout.split()
    wanted = dict(floor(requirement).split("==") for requirement in declared())
    assert [release(v) for v in versions] == [release(wanted["watchdog"]), release(wanted["numpy"])]
    daemon = Daemon(tmp_path)
    daemon.env = env
    daemon.start()
    try:
        daemon.call("brain_note", text="the floor of watchdog is seven point one")
        assert daemon.recall("floor watchdog") == ["the floor of watchdog is seven point one"]
        with (daemon.root / "diary" / f"{today()}.md").open("a", encoding="utf-8") as diary:
            diary.write("[09:00] an editor wrote this\n")
        daemon.wait_recall("editor wrote", "an editor wrote this")
        assert wait_until(lambda: daemon.call("status")["state"] == "ready", what="ready")
    finally:
        assert daemon.stop() == 0
