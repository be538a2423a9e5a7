"""The `braind` command as a person uses it: help, output, errors, start/stop."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from braind.faces.cli import build_parser
from tests.conftest import Daemon, run_cli, today, wait_until

COMMANDS = sorted(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_and_common_options(command: str) -> None:
    out = run_cli(command, "--help", check=True).stdout
    for option in ("--config", "--socket", "--json"):
        assert option in out


def test_console_script_is_installed() -> None:
    local = Path(sys.executable).parent / "braind"
    script = str(local) if local.exists() else shutil.which("braind")
    assert script, "the braind console script is not installed"
    out = subprocess.run([script, "--version"], capture_output=True, text=True, check=True).stdout
    assert re.match(r"braind \d+\.\d+\.\d+", out)


def test_note_recall_status_through_the_cli(daemon: Daemon) -> None:
    noted = run_cli("note", "the", "cli", "remembers", "persimmons", config=daemon.config_path, check=True)
    assert noted.stdout.startswith("noted ")
    human = run_cli("recall", "persimmons", "cli", config=daemon.config_path, check=True).stdout
    assert "the cli remembers persimmons" in human and "1 entry holds every word" in human
    as_json = json.loads(run_cli("recall", "persimmons", "--json", config=daemon.config_path, check=True).stdout)
    assert as_json["total"] == 1 and as_json["hits"][0]["date"] == today()
    status = run_cli("status", config=daemon.config_path, check=True).stdout
    assert "ready" in status and "1 entry in 1 file\n" in status
    assert json.loads(run_cli("tools", "--json", config=daemon.config_path, check=True).stdout)[0]["name"]


def test_inject_and_reindex_through_the_cli(daemon: Daemon) -> None:
    run_cli("note", "inject", "me", config=daemon.config_path, check=True)
    block = run_cli("inject", "--session", "cli", "--turn", "1", config=daemon.config_path, check=True).stdout
    assert "inject me" in block and block.startswith("<memory")
    again = run_cli("inject", "--session", "cli", "--turn", "1", config=daemon.config_path, check=True).stdout
    assert "already_injected" in again
    named = run_cli("inject", "--session", "cli", "--turn", "msg_01 A", config=daemon.config_path, check=True).stdout
    assert "inject me" in named  # any string names a turn
    out = run_cli("reindex", config=daemon.config_path, check=True).stdout
    assert out.startswith("reindexed 1 entry from 1 file in ")


def test_errors_are_one_line_with_reason_and_nonzero_exit(daemon: Daemon) -> None:
    result = run_cli("note", "bad\x1bescape", config=daemon.config_path)
    assert result.returncode == 1
    assert result.stderr == "braind: error: control_char: text contains a control character\n"


def test_no_daemon_is_a_clear_error(short_tmp: Path) -> None:
    result = run_cli("status", "--socket", str(short_tmp / "none.sock"))
    assert result.returncode == 1
    assert result.stderr.startswith("braind: error: daemon_unavailable: ")


def test_bad_config_is_a_clear_error(short_tmp: Path) -> None:
    config = short_tmp / "bad.yaml"
    config.write_text("recall:\n  snippet_chars: 5000\n")
    result = run_cli("status", config=config)
    assert result.returncode == 1
    assert "recall.snippet_chars: 5000 is out of range; allowed: 1 to 4000" in result.stderr


def test_check_reports_every_problem_once_and_exits_by_the_worst(short_tmp: Path) -> None:
    """Exit 1 for a rejected file, 3 for skipped lines alone, 0 when clean; each path is named once per line."""
    root = short_tmp / "root"
    (root / "diary").mkdir(parents=True)
    (root / "diary" / "2026-02-30.md").write_text("[10:00] x\n")
    (root / "diary" / "2026-01-02.md").write_bytes(b"[10:00] a\0b\n")
    (root / "diary" / "2026-01-01.md").write_text("[10:00] fine\nnot a line\n")
    result = run_cli("check", str(root))
    assert result.returncode == 1
    problems = result.stdout.splitlines()[:-1]
    assert sorted(problems) == sorted(
        [
            f"{root}/diary/2026-02-30.md: invalid_date: diary files must be named YYYY-MM-DD.md with a real date",
            f"{root}/diary/2026-01-02.md: nul_byte: NUL byte at line 1",
            f"{root}/diary/2026-01-01.md:2: bad_line: expected '[HH:MM] text'",
        ]
    )
    assert result.stdout.endswith("1 file, 1 entry, 2 rejected files, 1 skipped line\n")
    (root / "diary" / "2026-02-30.md").unlink()
    (root / "diary" / "2026-01-02.md").unlink()
    skipped = run_cli("check", str(root))
    assert skipped.returncode == 3 and skipped.stdout.endswith("0 rejected files, 1 skipped line\n")
    assert json.loads(run_cli("check", str(root), "--json").stdout)["skipped_lines"][0]["line"] == 2
    (root / "diary" / "2026-01-01.md").write_text("[10:00] fine\n")
    clean = run_cli("check", str(root))
    assert clean.returncode == 0 and clean.stdout == "1 file, 1 entry, 0 rejected files, 0 skipped lines\n"


@pytest.mark.parametrize("how", [("start",), ("serve", "--detach")])
def test_start_detaches_and_stop_stops(make_daemon, how: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    d = make_daemon(start=False)
    d.write_config()
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "INVOCATION_ID")}
    started = run_cli(*how, "--json", config=d.config_path, env=env)
    assert started.returncode == 0, started.stderr
    pid = json.loads(started.stdout)["pid"]
    try:
        assert d.call("status")["pid"] == pid
        assert os.getsid(pid) != os.getsid(0) and os.getppid() != pid
        assert "Umask:\t0077" in Path(f"/proc/{pid}/status").read_text()
        assert (d.state / "braind.log").stat().st_mode & 0o777 == 0o600  # private like everything braind makes
        again = run_cli("start", config=d.config_path, env=env)
        assert again.returncode == 1 and "already_running" in again.stderr
        assert run_cli("note", "detached", "note", config=d.config_path, env=env).returncode == 0
        assert (d.socket.parent / "braind.pid").read_text().strip() == str(pid)
    finally:
        stopped = run_cli("stop", config=d.config_path, env=env)
    assert stopped.returncode == 0, stopped.stderr
    wait_until(lambda: not _alive(pid), 10, "daemon gone")
    assert not d.socket.exists()


def test_start_refused_under_systemd(make_daemon) -> None:  # type: ignore[no-untyped-def]
    d = make_daemon(start=False)
    d.write_config()
    result = run_cli("start", config=d.config_path, env={**os.environ, "INVOCATION_ID": "0123abcd"})
    assert result.returncode == 1 and "under_systemd" in result.stderr


def _alive(pid: int) -> bool:
    """True while the process exists."""
    try:
        os.kill(pid, signal.SIG_DFL)
    except ProcessLookupError:
        return False
    return True


def test_common_options_work_before_the_command(daemon: Daemon) -> None:
    out = run_cli("--json", "--config", str(daemon.config_path), "status", check=True).stdout
    assert json.loads(out)["state"] == "ready"


def test_reindex_draws_a_progress_bar_on_a_terminal(daemon: Daemon) -> None:
    import pty

    diary = daemon.root / "diary"
    diary.mkdir(parents=True)
    for day in range(1, 29):
        (diary / f"2026-02-{day:02d}.md").write_text(f"[10:00] day {day} " + "words " * 50 + "\n")
    daemon.call("reindex")
    leader, follower = pty.openpty()
    try:
        result = run_cli("reindex", config=daemon.config_path, stderr=follower)
        os.close(follower)
        drawn = _drain(leader)
    finally:
        os.close(leader)
    assert result.returncode == 0 and "reindexed 28 entries from 28 files" in result.stdout
    assert "\r[" in drawn and "] " in drawn and "files" in drawn


def _drain(fd: int) -> str:
    """Everything written to a pty whose writer has closed."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["notee", "x"], "'note'"),
        (["memory", "lst"], "'list'"),
        (["inject", "--session", "s", "--trun", "1"], "'--turn'"),
        (["status", "--jsn"], "'--json'"),
        (["memory", "list", "--tpye", "fact"], "'--type'"),
    ],
)
def test_a_mistyped_command_or_option_suggests_the_nearest(argv: list[str], meant: str) -> None:
    result = run_cli(*argv)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.rstrip("\n").endswith(f"; did you mean {meant}?"), result.stderr


def test_nothing_close_suggests_nothing() -> None:
    result = run_cli("xyzzyplugh")
    assert result.returncode == 2 and "did you mean" not in result.stderr


def test_a_bad_value_in_the_implicit_config_names_its_file(short_tmp: Path) -> None:
    """~/.config/braind/braind.yaml is found without --config; its errors still say which file."""
    home = short_tmp / "home"
    found = home / ".config" / "braind" / "braind.yaml"
    found.parent.mkdir(parents=True)
    found.write_text("recall:\n  max_results: 0\n")
    env = {k: v for k, v in os.environ.items() if k not in ("BRAIND_CONFIG", "XDG_CONFIG_HOME")}
    result = run_cli("status", env={**env, "HOME": str(home)})
    assert result.returncode == 1
    assert result.stderr == (
        f"braind: error: invalid_config: {found}: recall.max_results: 0 is out of range; allowed: 1 to 500\n"
    )
