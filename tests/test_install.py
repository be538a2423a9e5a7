"""install.sh as a newcomer runs it: a fresh HOME, no systemd user session, run twice, then --uninstall."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

from tests.conftest import REPO, wait_until

INSTALL_SECONDS = 600  # pip installs braind and the MCP SDK into a new virtualenv


def test_install_twice_then_uninstall_on_a_fresh_home(short_tmp: Path) -> None:
    home, runtime = short_tmp / "home", short_tmp / "run"
    home.mkdir()
    runtime.mkdir(mode=0o700)
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "PIP_CACHE_DIR", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))  # a fresh HOME need not fetch again
    env |= {"HOME": str(home), "SHELL": "/bin/bash", "XDG_RUNTIME_DIR": str(runtime)}
    env["DBUS_SESSION_BUS_ADDRESS"] = f"unix:path={runtime}/no-bus"  # no systemd user session: the detached path
    link = home / ".local" / "bin" / "braind"
    root = home / ".local" / "share" / "braind"

    def install(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["bash", str(REPO / "install.sh"), *args], env=env, capture_output=True, text=True, timeout=INSTALL_SECONDS
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    def braind(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(link), *args], env=env, capture_output=True, text=True, timeout=120)

    try:
        first = install().stdout
        assert f"{home}/.local/bin is not on your PATH" in first and f"Add this line to {home}/.bashrc" in first
        assert '\n    export PATH="$HOME/.local/bin:$PATH"\n' in first
        assert f"the command for agent configs (MCP servers, hooks): {link}\n" in first
        assert f"root [user] {root}: ok\n" in first  # created empty on the first start, 0700
        assert root.is_dir() and root.stat().st_mode & 0o777 == 0o700
        assert link.resolve() == (home / ".local" / "lib" / "braind" / "bin" / "braind").resolve()
        mcp = subprocess.run([str(link.resolve().parent / "python"), "-c", "import mcp"], env=env, check=False)
        assert mcp.returncode == 0, "install.sh installs the MCP extra"
        assert braind("note", "installed on a fresh home").returncode == 0
        before = json.loads(braind("status", "--json").stdout)["pid"]

        second = install().stdout
        assert "upgraded and restarted" in second and f"root [user] {root}: ok\n" in second
        after = json.loads(braind("status", "--json").stdout)["pid"]
        assert after != before
        assert "installed on a fresh home" in braind("recall", "fresh", "home").stdout

        gone = install("--uninstall").stdout
        assert "kept your memory" in gone
        assert not link.exists() and not (home / ".local" / "lib" / "braind").exists()
        wait_until(lambda: not (runtime / "braind" / "braind.sock").exists(), 30, "the daemon stopped")
        assert "installed on a fresh home" in "".join(p.read_text() for p in (root / "diary").iterdir())
        assert (home / ".local" / "state" / "braind").is_dir()
    finally:
        pidfile = runtime / "braind" / "braind.pid"
        if link.exists():
            braind("stop")
        elif pidfile.exists() and pidfile.read_text().strip().isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pidfile.read_text()), 15)
