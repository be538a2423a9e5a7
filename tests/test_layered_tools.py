"""The five memory_* tools through the real daemon's socket and the CLI, with the exact file text."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from braind.errors import BraindError
from tests.conftest import Daemon, days_ago, run_cli, today, wait_until

CREATED = "---\nname: 网络历史\ntype: reference\ndescription: 网络故障 与处理\n---\n\n# 网络历史\n"


def refused(d: Daemon, method: str, **params: Any) -> BraindError:
    """The error a call is refused with (fails the test when it succeeds)."""
    with pytest.raises(BraindError) as err:
        d.call(method, **params)
    return err.value


def stamp_of(heading: str) -> str:
    """The 'YYYY-MM-DD HH:MM' at the end of an entry heading, checked to be about now."""
    stamp = heading[-16:]
    written = dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M")
    assert abs(dt.datetime.now() - written) < dt.timedelta(minutes=2)
    return stamp


def project_dir(d: Daemon) -> Path:
    """A project directory next to the daemon's root."""
    path = d.base / "proj"
    path.mkdir(exist_ok=True)
    return path


def test_create_append_correct_logfile_exact_text(daemon: Daemon) -> None:
    made = daemon.call(
        "memory_creator",
        scope="home",
        name="网络历史.md",
        type="reference",
        description="网络故障\n与处理",
        heading="# 网络历史",
    )
    path = daemon.root / "logs" / "网络历史.md"
    assert made == {"path": str(path), "name": "网络历史", "type": "reference", "description": "网络故障 与处理",
                    "heading": "网络历史"}  # fmt: skip
    assert path.read_text() == CREATED
    first = daemon.call("memory_write_logfile", scope="home", name="网络历史", title="断网",
                        content="路由器重启后恢复\n### 细节\n换了网线\n")  # fmt: skip
    one = stamp_of(first["heading"])
    assert first["heading"] == f"## [断网] {one}" and first["line"] == 9
    after_first = CREATED + f"\n## [断网] {one}\n路由器重启后恢复\n### 细节\n换了网线\n"
    assert path.read_text() == after_first
    second = daemon.call("memory_write_logfile", scope="home", name="网络历史", content="untitled entry")
    two = stamp_of(second["heading"])
    assert path.read_text() == after_first + f"\n## {two}\nuntitled entry\n"
    before = path.read_text()
    fixed = daemon.call("memory_correct", scope="home", name="网络历史", title="断网", content="换了路由器",
                        approved=True)  # fmt: skip
    assert fixed["action"] == "rewritten" and (fixed["title"], fixed["at"]) == ("断网", one)
    assert path.read_text() == CREATED + f"\n## [断网] {one}\n换了路由器\n\n## {two}\nuntitled entry\n"
    backup = daemon.root / ".braind" / "bak" / "logs" / "网络历史.md.bak"
    assert fixed["backup"] == str(backup) and backup.read_text() == before
    gone = daemon.call("memory_correct", scope="home", name="网络历史", title="", at=two, approved=True)
    assert gone["action"] == "deleted"
    assert path.read_text() == CREATED + f"\n## [断网] {one}\n换了路由器\n"
    assert [h["text"] for h in daemon.call("brain_recall", query="路由器")["hits"]] == ["断网\n换了路由器"]
    err = refused(daemon, "memory_creator", scope="home", name="网络历史", type="user", description="d", heading="h")
    assert err.reason == "exists" and path.read_text().startswith(CREATED)


def test_write_root_and_correct_sections_exact_text(daemon: Daemon) -> None:
    memory = daemon.root / "MEMORY.md"
    assert daemon.call("memory_write_root", section="网络历史", content="line1")["created"] is True
    assert memory.read_text() == "## 网络历史\nline1\n"
    appended = daemon.call("memory_write_root", section="网络历史", content="line2")
    assert (appended["created"], appended["text"]) == (False, "## 网络历史\nline1\nline2")
    daemon.call("memory_write_root", section="网络配置", content="gateway 10.0.0.1\n### 备注\n无")
    before = "## 网络历史\nline1\nline2\n\n## 网络配置\ngateway 10.0.0.1\n### 备注\n无\n"
    assert memory.read_text() == before
    err = refused(daemon, "memory_correct", scope="root", section="网络", content="x", approved=True)
    assert err.reason == "ambiguous"
    assert err.data["matches"] == [{"section": "网络历史", "line": 1}, {"section": "网络配置", "line": 5}]
    assert "full section name" in err.message and memory.read_text() == before
    denied = refused(daemon, "memory_correct", scope="root", section="网络历", content="")
    assert denied.reason == "approval_required" and memory.read_text() == before
    deleted = daemon.call("memory_correct", scope="root", section="网络历", content="", approved=True)
    assert (deleted["action"], deleted["section"]) == ("deleted", "网络历史")
    assert memory.read_text() == "## 网络配置\ngateway 10.0.0.1\n### 备注\n无\n"
    assert (daemon.root / ".braind" / "bak" / "MEMORY.md.bak").read_text() == before
    daemon.call("memory_correct", scope="root", section="网络配置", content="gateway 10.0.0.254", approved=True)
    assert memory.read_text() == "## 网络配置\ngateway 10.0.0.254\n"
    section = daemon.call("memory_recall", scope="root", section="网络")
    assert (section["section"], section["text"]) == ("网络配置", "## 网络配置\ngateway 10.0.0.254")
    assert (
        refused(daemon, "memory_correct", scope="root", section="DNS", content="x", approved=True).reason == "not_found"
    )


def test_open_approval_mode_needs_no_approval(make_daemon: Callable[..., Daemon]) -> None:
    d = make_daemon({"approval": {"mode": "open"}})
    d.call("memory_write_root", section="a", content="one")
    assert d.call("memory_correct", scope="root", section="a", content="two")["action"] == "rewritten"


def test_hand_written_memory_is_kept_byte_for_byte(daemon: Daemon) -> None:
    daemon.root.mkdir(parents=True, exist_ok=True)
    memory = daemon.root / "MEMORY.md"
    original = "# My memory\n\nwritten by hand  \n\n\n## 偏好\n喜欢乌龙茶\n\n\n## 工作\n早上开会"
    memory.write_text(original)
    daemon.call("memory_write_root", section="偏好", content="也喜欢普洱")
    assert memory.read_text() == original.replace("喜欢乌龙茶\n", "喜欢乌龙茶\n也喜欢普洱\n")
    daemon.call("memory_write_root", section="新", content="x")
    assert memory.read_text() == original.replace("喜欢乌龙茶\n", "喜欢乌龙茶\n也喜欢普洱\n") + "\n\n## 新\nx\n"
    daemon.call("memory_write_root", section="工作", content="下午写代码")
    assert memory.read_text().endswith("\n\n## 工作\n早上开会\n下午写代码\n\n## 新\nx\n")


def test_budget_exceeded_refuses_with_advice(make_daemon: Callable[..., Daemon]) -> None:
    d = make_daemon({"inject": {"max_chars": 256}})
    d.call("memory_write_root", section="big", content="x" * 200)
    before = (d.root / "MEMORY.md").read_text()
    err = refused(d, "memory_write_root", section="big", content="y" * 60)
    assert err.reason == "budget_exceeded" and err.data == {"chars": len(before) + 61, "max_chars": 256}
    assert "memory_correct" in err.message and (d.root / "MEMORY.md").read_text() == before
    assert d.call("memory_correct", scope="root", section="big", content="short", approved=True)["chars"] == len(
        "## big\nshort\n"
    )


def test_forbidden_headings_and_invalid_names(daemon: Daemon) -> None:
    for content in ("# title", "ok\n## split", "  ## indented"):
        err = refused(daemon, "memory_write_root", section="s", content=content)
        assert err.reason == "forbidden_heading" and "###" in err.message
    daemon.call("memory_write_root", section="s", content="### part\n#tag")
    assert (daemon.root / "MEMORY.md").read_text() == "## s\n### part\n#tag\n"
    for name in ("a/b", "../x", ".hidden", "x" * 65, "a:b", "bad\tname"):
        err = refused(daemon, "memory_creator", scope="home", name=name, type="user", description="d", heading="h")
        assert err.reason == "invalid_name"
    assert refused(daemon, "memory_write_root", section="#x", content="y").reason == "invalid_name"
    assert not (daemon.root / "logs").exists()


def test_duplicate_titles_need_at(daemon: Daemon) -> None:
    daemon.call("memory_creator", scope="home", name="部署", type="project", description="部署记录", heading="部署")
    path = daemon.root / "logs" / "部署.md"
    head = path.read_text()
    first, second, third = days_ago(3), days_ago(2), days_ago(1)  # recent days: in every recall window
    body = (
        f"\n## [上线] {first} 10:00\n第一次\n\n## [上线] {second} 11:00\n第二次\n\n## [上线检查] {third} 09:00\n检查\n"
    )
    path.write_text(head + body)
    wait_until(lambda: "上线\n第二次" in daemon.recall("第二次", days=365), what="the hand-written entries")
    err = refused(daemon, "memory_correct", scope="home", name="部署", title="上线", content="x", approved=True)
    assert err.reason == "ambiguous" and "at=" in err.message
    assert err.data["matches"] == [
        {"title": "上线", "at": f"{first} 10:00", "line": 9},
        {"title": "上线", "at": f"{second} 11:00", "line": 12},
    ]
    daemon.call(
        "memory_correct", scope="home", name="部署", title="上线", at=f"{second} 11:00", content="改", approved=True
    )
    assert path.read_text() == head + body.replace("第二次", "改")
    daemon.call("memory_correct", scope="home", name="部署", title="上线检", at=third, approved=True)
    assert path.read_text() == head + body.replace("第二次", "改").split("\n\n## [上线检查]")[0] + "\n"
    missing = refused(daemon, "memory_correct", scope="home", name="部署", title="回滚", content="x", approved=True)
    assert missing.reason == "not_found" and len(missing.data["entries"]) == 2


def test_project_scope_is_never_guessed(daemon: Daemon) -> None:
    params = {"scope": "project", "name": "ci", "type": "project", "description": "CI", "heading": "CI"}
    assert refused(daemon, "memory_creator", **params).reason == "invalid_params"
    assert refused(daemon, "memory_creator", **params, project="relative/dir").reason == "path_escape"
    project = project_dir(daemon)
    made = daemon.call("memory_creator", **params, project=str(project))
    assert made["path"] == str(project / ".agents" / ".memory" / "logs" / "ci.md")
    daemon.call("memory_write_logfile", scope="project", name="ci", content="pipeline is green", project=str(project))
    listing = daemon.call("memory_recall", scope="project", project=str(project))
    assert listing["text"] == "- ci [project] CI"
    assert daemon.call("memory_recall", scope="home")["logfiles"] == []
    hits = daemon.call("brain_recall", query="pipeline", project=str(project))["hits"]
    assert [(h["realm"], h["text"]) for h in hits] == [("project", "pipeline is green")]
    assert daemon.call("brain_recall", query="pipeline")["hits"] == []


def test_write_logfile_needs_an_existing_file(daemon: Daemon) -> None:
    daemon.call("memory_creator", scope="home", name="one", type="user", description="d", heading="h")
    err = refused(daemon, "memory_write_logfile", scope="home", name="two", content="x")
    assert err.reason == "not_found" and err.data["logfiles"] == ["one"] and "memory_creator" in err.message
    assert not (daemon.root / "logs" / "two.md").exists()


def test_listing_type_filter_and_read_cap(daemon: Daemon) -> None:
    for i, (name, kind) in enumerate([("a", "user"), ("b", "feedback"), ("c", "user")]):
        daemon.call("memory_creator", scope="home", name=name, type=kind, description=f"about {name}", heading=name)
        os.utime(daemon.root / "logs" / f"{name}.md", (1_700_000_000 + i, 1_700_000_000 + i))
    assert daemon.call("memory_recall", scope="home")["text"] == (
        "- c [user] about c\n- b [feedback] about b\n- a [user] about a"
    )
    users = daemon.call("memory_recall", scope="home", type="user")
    assert [lf["name"] for lf in users["logfiles"]] == ["c", "a"]
    big = daemon.root / "logs" / "big.md"
    big.write_text("---\nname: big\ntype: reference\ndescription: big\n---\n\n# big\n" + ("汉字" * 100 + "\n") * 300)
    read = daemon.call("memory_recall", scope="home", name="big.md")
    assert read["truncated"] is True and read["bytes"] == big.stat().st_size
    assert len(read["text"].encode()) <= 128 * 1024 and big.read_text().startswith(read["text"])
    assert daemon.call("memory_recall", scope="home", name="a")["text"] == (daemon.root / "logs" / "a.md").read_text()
    assert refused(daemon, "memory_recall", scope="home", name="zzz").reason == "not_found"
    assert refused(daemon, "memory_recall", scope="root", name="a").reason == "invalid_params"


def test_sections_and_entries_are_recallable_with_their_dates(daemon: Daemon) -> None:
    daemon.call("memory_write_root", section="饮料", content="我最喜欢的饮料是乌龙茶")
    daemon.call("memory_creator", scope="home", name="old", type="reference", description="old", heading="old")
    path = daemon.root / "logs" / "old.md"
    recent = (dt.date.today() - dt.timedelta(days=1)).isoformat()
    path.write_text(
        path.read_text() + f"\n## [ancient] 2020-01-02 03:04\nzebra 2020\n\n## [recent] {recent} 08:00\nzebra now\n"
    )
    wait_until(lambda: daemon.call("status")["index"]["entries"] == 3, what="the hand-written entries indexed")
    assert daemon.recall("zebra") == ["recent\nzebra now", "ancient\nzebra 2020"]  # all of memory, newer first
    assert daemon.recall("zebra", days=30) == ["recent\nzebra now"]  # a dated entry keeps to a window
    assert daemon.recall("zebra", days=1) == []
    hit = daemon.call("brain_recall", query="乌龙茶", days=1)["hits"][0]  # a section has no date: always searched
    assert (hit["date"], hit["key"], hit["line"], hit["realm"]) == ("", "饮料", 1, "user")
    assert hit["path"] == str(daemon.root / "MEMORY.md") and len(hit["fp"]) == 12


def test_editor_edits_to_memory_and_logfiles_are_picked_up(daemon: Daemon) -> None:
    daemon.call("memory_write_root", section="偏好", content="喜欢乌龙茶")
    daemon.call("memory_creator", scope="home", name="notes", type="user", description="n", heading="n")
    memory = daemon.root / "MEMORY.md"
    tmp = daemon.root / ".MEMORY.md.swp"
    tmp.write_text(memory.read_text().replace("乌龙茶", "普洱茶"))
    os.replace(tmp, memory)
    daemon.wait_recall("普洱茶", "偏好\n喜欢普洱茶")
    daemon.wait_gone("乌龙茶", "偏好\n喜欢乌龙茶")
    logfile = daemon.root / "logs" / "notes.md"
    with logfile.open("a") as f:
        f.write(f"\n## [typed by hand] {today()} 08:00\nflamingo sighting\n")
    daemon.wait_recall("flamingo", "typed by hand\nflamingo sighting")
    assert daemon.call("memory_write_logfile", scope="home", name="notes", content="after the editor")["line"] == 12


def test_malformed_frontmatter_is_reported_not_fatal(daemon: Daemon) -> None:
    (daemon.root / "logs").mkdir(parents=True)
    bad = daemon.root / "logs" / "bad.md"
    bad.write_text(f"---\nname: [bad\n---\n\n# Bad\n\n## [kept] {today()} 09:00\npelican notes\n")
    daemon.wait_recall("pelican", "kept\npelican notes")
    skipped = [(p["path"], p["line"], p["reason"]) for p in daemon.call("status")["skipped_lines"]]
    assert skipped == [(str(bad), 2, "bad_frontmatter")]
    assert daemon.call("memory_recall", scope="home")["text"] == "- bad [project] Bad"
    daemon.call("memory_write_logfile", scope="home", name="bad", content="appended anyway")
    assert bad.read_text().startswith("---\nname: [bad\n---\n") and bad.read_text().endswith("\nappended anyway\n")
    bad.write_text("---\nname: bad\ntype: user\ndescription: fixed\n---\n\n# Bad\n")
    wait_until(lambda: daemon.call("status")["skipped_lines"] == [], what="the problem to clear")


def test_sloppy_hand_written_logfile_is_appended_to(daemon: Daemon) -> None:
    (daemon.root / "logs").mkdir(parents=True)
    path = daemon.root / "logs" / "old.md"
    original = "# Old notes\nno frontmatter, no final newline\n## deploy 2026-01-02 10:00\nold-style entry"
    path.write_text(original)
    result = daemon.call("memory_write_logfile", scope="home", name="old", title="new", content="appended")
    assert path.read_text() == original + f"\n\n## [new] {stamp_of(result['heading'])}\nappended\n"
    fixed = daemon.call("memory_correct", scope="home", name="old", title="deploy", content="rewritten", approved=True)
    assert fixed["at"] == "2026-01-02 10:00"
    assert path.read_text().startswith(
        "# Old notes\nno frontmatter, no final newline\n## deploy 2026-01-02 10:00\nrewritten\n\n## [new]"
    )


def test_symlinked_logs_directory_is_refused(daemon: Daemon) -> None:
    outside = daemon.base / "outside"
    outside.mkdir()
    daemon.root.mkdir(parents=True, exist_ok=True)
    (daemon.root / "logs").symlink_to(outside)
    err = refused(daemon, "memory_creator", scope="home", name="x", type="user", description="d", heading="h")
    assert err.reason == "symlink" and list(outside.iterdir()) == []


def test_tools_list_the_five_layered_tools(daemon: Daemon) -> None:
    tools = {t["name"]: t for t in daemon.call("tools")}
    names = ["memory_recall", "memory_write_root", "memory_write_logfile", "memory_correct", "memory_creator"]
    assert all(name in tools for name in names)
    assert tools["memory_creator"]["inputSchema"]["required"] == ["scope", "name", "type", "description", "heading"]
    assert tools["memory_correct"]["inputSchema"]["properties"]["approved"]["type"] == "boolean"
    assert refused(daemon, "memory_recall", scope="root", bogus=1).reason == "invalid_params"


def test_the_cli_commands(daemon: Daemon) -> None:
    def cli(*args: str, **kw: Any) -> Any:
        return run_cli(*args, config=daemon.config_path, **kw)

    made = cli("memory-creator", "home", "网络历史", "--type", "reference", "--description", "网络故障", check=True)
    assert made.stdout.strip() == f"created {daemon.root / 'logs' / '网络历史.md'}"
    cli("memory-write-logfile", "home", "网络历史", "--title", "断网", input="从标准输入\n第二行\n", check=True)
    listing = cli("memory-recall", "home", check=True).stdout
    assert listing == "- 网络历史 [reference] 网络故障\n"
    read = cli("memory-recall", "home", "--name", "网络历史", check=True).stdout
    assert read.endswith("从标准输入\n第二行\n") and read.startswith("---\nname: 网络历史\n")
    assert "created section '## 偏好'" in cli("memory-write-root", "偏好", "喜欢乌龙茶", check=True).stdout
    assert cli("memory-recall", check=True).stdout == "## 偏好\n喜欢乌龙茶\n"
    assert cli("recall", "乌龙茶", check=True).stdout.startswith("(undated) 偏好 喜欢乌龙茶  (")
    denied = cli("memory-correct", "root", "--section", "偏", "--delete")
    assert denied.returncode == 1 and denied.stderr.startswith("braind: error: approval_required: ")
    done = cli("memory-correct", "root", "--section", "偏", "--delete", "--approved", check=True).stdout
    assert done.startswith("deleted section '## 偏好'") and (daemon.root / "MEMORY.md").read_text() == ""
    bad = cli("memory-creator", "home", "a/b", "--type", "user", "--description", "d")
    assert bad.returncode == 1 and bad.stderr.startswith("braind: error: invalid_name: ")
    as_json = json.loads(cli("memory-recall", "home", "--json", check=True).stdout)
    assert as_json["logfiles"][0]["name"] == "网络历史"
