"""Migration of a legacy `<project>/.memory` into `<project>/.agents/.memory`: once, idempotent, undone on failure."""

from __future__ import annotations

import json
import resource
from collections.abc import Callable
from pathlib import Path

from braind.files.migrate import as_logfile
from tests.conftest import Daemon, run_cli, wait_until

LEGACY_TEXT = "# Situation of the repo\n\nThe build uses make; the kiwi service listens on 8080.\n"


def tree(path: Path) -> dict[str, str | None]:
    """Every path below a directory with its text (None for directories), to compare before and after."""
    return {str(p.relative_to(path)): None if p.is_dir() else p.read_text() for p in sorted(path.rglob("*"))}


def project_with(base: Path, legacy: str | dict[str, str]) -> Path:
    """A project directory holding a legacy .memory file (a string) or directory (name -> text)."""
    project = base / "proj"
    project.mkdir()
    if isinstance(legacy, str):
        (project / ".memory").write_text(legacy)
    else:
        (project / ".memory").mkdir()
        for name, text in legacy.items():
            (project / ".memory" / name).write_text(text)
    return project


def test_single_file_is_migrated_on_first_use(daemon: Daemon) -> None:
    project = project_with(daemon.base, LEGACY_TEXT)
    listing = daemon.call("memory_recall", scope="project", project=str(project))
    assert listing["text"] == "- project [project] Situation of the repo"
    target = project / ".agents" / ".memory" / "logs" / "project.md"
    assert not (project / ".memory").exists()
    assert target.read_text() == (
        "---\nname: project\ntype: project\ndescription: Situation of the repo\n---\n\n# Situation of the repo\n"
        "\nThe build uses make; the kiwi service listens on 8080.\n"
    )
    hits = daemon.call("brain_recall", query="kiwi", project=str(project))["hits"]
    assert [h["realm"] for h in hits] == ["project"]
    before = target.read_text()
    added = daemon.call("memory_write_logfile", scope="project", name="project", content="added", project=str(project))
    assert target.read_text() == before + f"\n{added['heading']}\nadded\n"


def test_legacy_text_without_a_heading_gets_one() -> None:
    assert as_logfile("just notes\n") == (
        "---\nname: project\ntype: project\ndescription: Project memory migrated from .memory\n---\n\n"
        "# project\n\njust notes\n"
    )
    framed = "---\nname: x\ntype: user\ndescription: d\n---\n\n# x\n"
    assert as_logfile(framed) == framed


def test_directory_is_moved_whole(daemon: Daemon) -> None:
    files = {"a.md": "---\nname: a\ntype: user\ndescription: first\n---\n\n# a\n", "b.md": "# b only\n"}
    project = project_with(daemon.base, files)
    block = daemon.call("inject", session="migrate", project=str(project))
    assert "- a [user] first" in block["text"] and "- b [project] b only" in block["text"]
    logs = project / ".agents" / ".memory" / "logs"
    assert tree(logs) == files and not (project / ".memory").exists()


def test_already_migrated_is_a_no_op(make_daemon: Callable[..., Daemon]) -> None:
    d = make_daemon()
    project = project_with(d.base, LEGACY_TEXT)
    first = run_cli("migrate", str(project), "--json", config=d.config_path, check=True)
    assert json.loads(first.stdout)["moved"] is True
    before = tree(project)
    again = run_cli("migrate", str(project), config=d.config_path, check=True)
    assert again.stdout.startswith("nothing to migrate") and tree(project) == before
    d.call("memory_recall", scope="project", project=str(project))
    assert tree(project) == before


def test_both_present_moves_nothing_and_reports(daemon: Daemon) -> None:
    project = project_with(daemon.base, {"old.md": "# old\n"})
    logs = project / ".agents" / ".memory" / "logs"
    logs.mkdir(parents=True)
    (logs / "new.md").write_text("# new\n")
    before = tree(project)
    listing = daemon.call("memory_recall", scope="project", project=str(project))
    assert listing["text"] == "- new [project] new" and tree(project) == before
    rejected = {p["path"]: p["reason"] for p in daemon.call("status")["rejected"]}
    assert rejected == {str(project / ".memory"): "migration_conflict"}
    cli = run_cli("migrate", str(project), config=daemon.config_path)
    assert cli.returncode == 1 and cli.stderr.startswith("braind: error: migration_conflict: both ")
    (project / ".memory" / "old.md").rename(logs / "old.md")
    (project / ".memory").rmdir()
    daemon.call("memory_recall", scope="project", project=str(project))
    wait_until(lambda: daemon.call("status")["rejected"] == [], what="the conflict to clear once merged by hand")


def test_single_file_conflicts_with_an_existing_project_logfile(tmp_path: Path) -> None:
    project = project_with(tmp_path, LEGACY_TEXT)
    logs = project / ".agents" / ".memory" / "logs"
    logs.mkdir(parents=True)
    (logs / "project.md").write_text("# mine\n")
    before = tree(project)
    cli = run_cli("migrate", str(project))
    assert cli.returncode == 1 and "migration_conflict" in cli.stderr and tree(project) == before


def test_a_failed_migration_is_rolled_back(tmp_path: Path) -> None:
    project = project_with(tmp_path, "# Big legacy memory\n" + "x" * 5000 + "\n")
    before = tree(tmp_path)

    def small_files() -> None:  # a real write failure (EFBIG) after the directories are made
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    failed = run_cli("migrate", str(project), preexec_fn=small_files)
    assert failed.returncode == 1 and failed.stderr.startswith("braind: error: migration_failed: ")
    assert "left as it was" in failed.stderr and tree(tmp_path) == before
    assert run_cli("migrate", str(project), check=True).stdout.startswith("moved ")


def test_a_configured_project_is_migrated_at_start(make_daemon: Callable[..., Daemon]) -> None:
    d = make_daemon(start=False)
    project = project_with(d.base, "# Legacy\nthe walrus protocol\n")
    d.settings["projects"] = [str(project)]
    d.start()
    assert (project / ".agents" / ".memory" / "logs" / "project.md").is_file()
    hits = d.call("brain_recall", query="walrus", project=str(project))["hits"]
    assert [h["text"] for h in hits] == ["the walrus protocol"]
