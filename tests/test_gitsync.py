"""A memory root kept in git on two machines: real git, a bare remote, two clones, a daemon on each."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Daemon, days_ago, run_cli, today, wait_until

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

# Each "machine" is its own git identity; no global or system git config is read.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "braind test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "braind test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}
REAL_WATCHER = {"watcher": {"quiet_ms": 150, "max_wait_ms": 1000}}  # braind's defaults, as a person runs it


def git(root: Path, *args: str) -> str:
    """Run git in a root; fail the test with git's own words when it fails."""
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, env={**os.environ, **GIT_ENV}, check=False
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


def commit(root: Path, message: str) -> None:
    """Commit everything git should carry."""
    git(root, "add", "-A")
    git(root, "commit", "--quiet", "-m", message)


def machines(make_daemon: Callable[..., Daemon], short_tmp: Path) -> tuple[Daemon, Daemon, Path]:
    """Machine A with a git-initialised root pushed to a bare remote, and machine B running on a clone of it."""
    remote = short_tmp / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True, env={**os.environ, **GIT_ENV})
    a = make_daemon(REAL_WATCHER, name="a")
    a.call("brain_note", text="machine a was set up first")
    done = run_cli("git-init", str(a.root), config=a.config_path)
    assert done.returncode == 0, done.stderr
    commit(a.root, "memory of machine a")
    git(a.root, "remote", "add", "origin", str(remote))
    git(a.root, "push", "--quiet", "origin", "HEAD:main")
    b = make_daemon(REAL_WATCHER, start=False, name="b")
    subprocess.run(
        ["git", "clone", "--quiet", "--branch", "main", str(remote), str(b.root)],
        check=True,
        env={**os.environ, **GIT_ENV},
    )
    git(a.root, "branch", "--set-upstream-to=origin/main")
    b.start()
    return a, b, remote


def test_git_init_is_opt_in_idempotent_and_keeps_local_files_out(make_daemon: Callable[..., Daemon]) -> None:
    d = make_daemon()
    d.call("brain_note", text="a note before git")
    assert not (d.root / ".gitattributes").exists() and not (d.root / ".git").exists()  # never unasked
    (d.root / ".gitignore").write_text("my-own-pattern\n")
    first = run_cli("git-init", str(d.root), "--json", config=d.config_path)
    assert first.returncode == 0, first.stderr
    again = run_cli("git-init", config=d.config_path)  # the configured root by default
    assert again.returncode == 0 and "already a git repository" in again.stdout
    assert "nothing to add" in again.stdout and "added" not in again.stdout
    attributes = (d.root / ".gitattributes").read_text()
    assert "diary/*.md merge=union" in attributes and ".braind/state.log merge=union" in attributes
    ignores = (d.root / ".gitignore").read_text().splitlines()
    assert ignores[0] == "my-own-pattern" and ".braind/bak/" in ignores
    assert git(d.root, "check-attr", "merge", "diary/2026-01-01.md").strip().endswith("merge: union")
    d.call("memory_write_root", section="core", content="first")
    d.call("memory_correct", scope="root", section="core", content="second", approved=True)  # leaves a .bak
    assert any((d.root / ".braind" / "bak").rglob("*.bak"))
    commit(d.root, "memory")
    tracked = git(d.root, "ls-files").split()
    assert "MEMORY.md" in tracked and f"diary/{today()}.md" in tracked
    assert not [path for path in tracked if path.startswith(".braind/bak/")]
    assert d.recall("before git") == ["a note before git"]  # git's files are not memory


def test_notes_on_two_machines_merge_without_conflict_and_both_recall_both(
    make_daemon: Callable[..., Daemon], short_tmp: Path
) -> None:
    a, b, _ = machines(make_daemon, short_tmp)
    b.wait_recall("machine set", "machine a was set up first")
    a.call("brain_note", text="written on machine a while apart")
    b.call("brain_note", text="written on machine b while apart")  # the same diary day on both sides
    for d in (a, b):
        assert d.recall("apart")  # a use each side: uses.log changes on both
    wait_until(lambda: (a.root / ".braind" / "uses.log").exists() and (b.root / ".braind" / "uses.log").exists())
    commit(a.root, "machine a")
    git(a.root, "push", "--quiet", "origin", "HEAD:main")
    commit(b.root, "machine b")
    git(b.root, "pull", "--quiet", "--no-rebase", "--no-edit", "origin", "main")  # a merge, union on the diary
    assert "<<<<<<<" not in (b.root / "diary" / f"{today()}.md").read_text()
    git(b.root, "push", "--quiet", "origin", "HEAD:main")
    git(a.root, "pull", "--quiet", "--no-rebase", "--no-edit", "origin", "main")
    both = ["written on machine a while apart", "written on machine b while apart"]
    for d in (a, b):
        wait_until(lambda d=d: sorted(d.recall("written while apart")) == both, 20, f"both notes on {d.base.name}")
        assert d.call("status")["rejected"] == [] and d.call("status")["skipped_lines"] == []
    assert (a.root / "diary" / f"{today()}.md").read_text() == (b.root / "diary" / f"{today()}.md").read_text()


def test_a_pull_of_hundreds_of_files_is_one_rescan(make_daemon: Callable[..., Daemon], short_tmp: Path) -> None:
    a, b, _ = machines(make_daemon, short_tmp)
    b.wait_recall("machine set", "machine a was set up first")
    days = [days_ago(n) for n in range(1, 301)]
    for n, day in enumerate(days):
        (a.root / "diary" / f"{day}.md").write_text(f"[08:00] imported day {n} wigeon\n")
    commit(a.root, "three hundred days")
    git(a.root, "push", "--quiet", "origin", "HEAD:main")
    before = b.call("status")["watcher"]["rescans"]
    git(b.root, "pull", "--quiet", "--no-rebase", "--no-edit", "origin", "main")
    wait_until(lambda: len(b.recall("imported wigeon", limit=500, days=365)) == 300, 60, "every pulled day recalled")
    rescans = b.call("status")["watcher"]["rescans"] - before
    bursts = b.log_text().count("rescan (burst)")
    assert bursts == rescans == 1, (bursts, rescans)
