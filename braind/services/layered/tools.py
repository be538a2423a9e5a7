"""The five layered memory tools and the layered part of `inject`, over the context the services share.

Every write holds the syncer's lock, writes durably, then re-indexes the file,
so what a tool wrote is recallable the moment it answers. Addresses (section,
title, `at`) must hit exactly one unit; appends need none. A project scope
without `project` is refused, never guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from braind.errors import BudgetExceeded, InvalidParams, NotFound
from braind.files import layered as store
from braind.files.rewrite.inodes import Target
from braind.files.rewrite.rewriter import Rewriter
from braind.index.api import parse_query
from braind.model.entries import TYPES
from braind.model.layered import (
    STAMP_FORMAT,
    Parsed,
    Unit,
    append_section,
    bare,
    body_end,
    check_at,
    check_content,
    delete_unit,
    entry_chunk,
    entry_heading,
    find_entry,
    find_section,
    is_empty,
    parse_logfile,
    parse_memory,
    render_logfile,
    replace_unit,
    section_names,
)
from braind.model.names import MAX_DESCRIPTION, MAX_HEADING, folded, logfile_name, section_name
from braind.model.roots import Root
from braind.services.context import Context
from braind.services.layered.inject import Layer, Snapshot, Snapshots, freeze, text_lines
from braind.services.typed.memory import TypedMemory, searchable

READ_CAP = 128 * 1024
SCOPES = ("root", "home", "project")


class LayeredMemory:
    """SOUL.md, MEMORY.md and the home and project logfiles: the memory_* tools and injection snapshots."""

    def __init__(self, context: Context, typed: TypedMemory) -> None:
        self.context = context
        self.typed = typed
        self.files = context.config.files
        self.snapshots = Snapshots()
        watcher = context.config.watcher
        self.rewriter = Rewriter(watcher.quiet_ms / 1000, watcher.max_wait_ms / 1000, self.files.max_file_bytes)

    # -- roots -------------------------------------------------------------------

    def scope_root(self, scope: str, project: str | None) -> Root:
        """The root a scope names: the user root for root and home, the project's for project."""
        if scope != "project":
            return self.context.roots.user
        if not project:
            raise InvalidParams(
                "invalid_params", "scope=project needs project: the absolute path of the project directory"
            )
        return self.context.roots.project(project)

    # -- memory_recall -------------------------------------------------------------

    def memory_recall(
        self,
        scope: str = "root",
        section: str | None = None,
        name: str | None = None,
        type: str | None = None,
        project: str | None = None,
        query: str | None = None,
        triggers: list[str] | None = None,
        limit: int = 20,
    ) -> dict[str, Any]:
        """Read MEMORY.md (or one section), a listing of logfiles (optionally of one type), or one logfile."""
        if query is not None or triggers is not None:
            _refuse("query or triggers", section=section, name=name)
            return self._typed_recall(query, triggers or [], type, project, limit)
        if type in TYPES:
            raise InvalidParams("invalid_params", f"type={type} searches typed memories: give query or triggers")
        if scope == "root":
            _refuse("scope=root", name=name, type=type)
            return self._read_root(section)
        _refuse(f"scope={scope}", section=section)
        root = self.scope_root(scope, project)
        if name is not None:
            return self._read_logfile(scope, root, logfile_name(name))
        return self._listing(scope, root, type)

    def _typed_recall(
        self, query: str | None, triggers: list[str], type: str | None, project: str | None, limit: int
    ) -> dict[str, Any]:
        """The explicit form of trigger recall: typed memories matching a query and/or triggers."""
        if type is not None and type not in TYPES:
            raise InvalidParams("invalid_params", f"with query or triggers, type is one of {', '.join(TYPES)}")
        typed = self.typed
        if triggers:
            found = typed.recall_triggers(triggers, project, 10000, type)
            if query is not None:
                language = self.context.index.language
                terms = parse_query(query, language).required
                found = [e for e in found if language.matches(searchable(e), terms)]
            typed.used(found[:limit])
            return {"scope": "typed", "entries": [typed.describe(e) for e in found[:limit]], "total": len(found)}
        return {"scope": "typed", **typed.query(query or "", project, limit, type)}

    def _read_root(self, section: str | None) -> dict[str, Any]:
        """The whole of MEMORY.md, or one section found by exact name or unique prefix."""
        user = self.context.roots.user
        data = store.read(user, store.MEMORY, self.files)
        result: dict[str, Any] = {"scope": "root", "path": str(user.path / store.MEMORY), "exists": data is not None}
        parsed = parse_memory(data.text if data else "", self.files.max_line_bytes)
        if section is None:
            return {**result, "sections": section_names(parsed), "text": data.text if data else ""}
        unit = find_section(parsed, section_name(section))
        text = "\n".join(bare(line) for line in parsed.lines[unit.start : body_end(parsed.lines, unit)])
        return {**result, "section": unit.title, "line": unit.start + 1, "text": text}

    def _read_logfile(self, scope: str, root: Root, name: str) -> dict[str, Any]:
        """One logfile's text, at most 128 KiB, cut at a character boundary."""
        rel = store.logfile_rel(name)
        data = store.read(root, rel, self.files)
        if data is None:
            raise self._no_logfile(scope, root, name)
        raw = data.text.encode("utf-8")
        text = raw[:READ_CAP].decode("utf-8", "ignore") if len(raw) > READ_CAP else data.text
        path = str(root.path / rel)
        return {
            "scope": scope,
            "name": name,
            "path": path,
            "bytes": len(raw),
            "truncated": len(raw) > READ_CAP,
            "text": text,
        }

    def _listing(self, scope: str, root: Root, type: str | None) -> dict[str, Any]:
        """The logfiles of a scope as `- name [type] description` lines, newest first."""
        shown = [lf for lf in store.logfiles(root, self.files) if type is None or lf.type == type]
        path = str(root.path / store.LOGS)
        return {
            "scope": scope,
            "path": path,
            "logfiles": [lf.as_dict() for lf in shown],
            "text": "\n".join(lf.line() for lf in shown),
        }

    def _no_logfile(self, scope: str, root: Root, name: str) -> NotFound:
        """The error for a logfile that is not there, with the names that are."""
        names = [lf.name for lf in store.logfiles(root, self.files)]
        listing = ", ".join(names) or "none yet"
        return NotFound(
            f"no logfile {name!r} in {scope} ({root.path / store.logfile_rel(name)}); existing: {listing}. "
            "Create it first with memory_creator.",
            logfiles=names,
        )

    # -- memory_write_root ---------------------------------------------------------

    def memory_write_root(self, section: str, content: str, approved: bool = False) -> dict[str, Any]:
        """Append to a MEMORY.md section, creating the section (and the file) when missing."""
        name = section_name(section)
        lines = check_content(content, self.context.config.note.max_bytes)

        def change(text: str | None) -> tuple[str, bool]:
            new, created = append_section(text or "", name, lines)
            self._check_budget(text or "", new, grow_only=False)
            return new, created

        text, created = self._edit(self.context.roots.user, store.MEMORY, change, append=True)
        parsed = parse_memory(text, self.files.max_line_bytes)
        unit = find_section(parsed, name)
        body = "\n".join(bare(line) for line in parsed.lines[unit.start : body_end(parsed.lines, unit)])
        path = str(self.context.roots.user.path / store.MEMORY)
        return {"path": path, "section": name, "created": created, "chars": len(text), "text": body}

    def _check_budget(self, old: str, new: str, grow_only: bool) -> None:
        """MEMORY.md is injected whole into every session, so it may not outgrow inject.max_chars."""
        limit = self.context.config.inject.max_chars
        if len(new) <= limit or (grow_only and len(new) < len(old)):
            return
        raise BudgetExceeded(
            f"MEMORY.md would be {len(new)} characters, over inject.max_chars={limit} (it is injected whole into "
            "every session). Read it with memory_recall scope=root and shorten its longest sections with "
            "memory_correct, or keep the detail in a logfile (memory_creator, then memory_write_logfile).",
            chars=len(new),
            max_chars=limit,
        )

    def _edit(
        self, root: Root, rel: Path, change: Callable[[str | None], tuple[str, Any]], append: bool = False
    ) -> tuple[str, Any]:
        """Change one file under the write lock and re-index it before answering."""
        with self.context.syncer.lock:
            self.context.prepare_write(root)
            try:
                result = store.edit(self.rewriter, root, rel, change, self._indexed_size(root, rel), append)
                self.context.syncer.sync_file(root, rel)
            finally:  # what other programs still wrote to the file's earlier versions, even when this edit failed
                if self.rewriter.look_back(Target(root.path, rel)):
                    self.context.syncer.sync_file(root, rel)
        return result

    def _indexed_size(self, root: Root, rel: Path) -> int | None:
        """The file's size as last indexed, a hint of what it held before an editor emptied it (the index may fail)."""
        try:
            record = self.context.index.record(str(root.path / rel))
        except Exception:  # a damaged index is repaired in the background; the write does not need it
            return None
        return record.size if record else None

    def recover(self, root: Root) -> list[str]:
        """Put in what a crashed daemon was still carrying over into this root's files; what was done."""
        with self.context.syncer.lock:
            done = self.rewriter.recover(root.path)
            if done:
                self.context.syncer.reconcile(root)
        return done

    def close(self) -> None:
        """Carry over what still reached the previous versions of rewritten files (the daemon is stopping)."""
        with self.context.syncer.lock:
            for target in self.rewriter.close():
                self.context.syncer.sync_file(self.context.roots.at(target.root), target.rel)

    # -- memory_write_logfile ------------------------------------------------------

    def memory_write_logfile(
        self,
        scope: str,
        name: str,
        content: str,
        title: str | None = None,
        project: str | None = None,
        approved: bool = False,
    ) -> dict[str, Any]:
        """Append an entry (`## [title] YYYY-MM-DD HH:MM` and the content) to an existing logfile."""
        root = self.scope_root(scope, project)
        name = logfile_name(name)
        label = section_name(title, "title") if title else None
        lines = check_content(content, self.context.config.note.max_bytes)
        rel = store.logfile_rel(name)
        heading = entry_heading(label, self.context.clock().strftime(STAMP_FORMAT))

        def change(text: str | None) -> tuple[str, int]:
            if text is None:
                raise self._no_logfile(scope, root, name)
            before = text + ("\n" if text and not text.endswith("\n") else "")
            chunk = entry_chunk(text, heading, lines)
            at = before + chunk[: len(chunk) - len(chunk.lstrip("\r\n"))]
            return before + chunk + "\n", at.count("\n") + 1

        _, line = self._edit(root, rel, change, append=True)
        loaded = self.context.syncer.load(root, rel)
        ours = [e for e in loaded.entries if e.line == line] or loaded.entries[-1:]
        return {
            "path": loaded.path,
            "name": name,
            "heading": heading,
            "line": ours[0].line if ours else None,
            "fp": ours[0].fp if ours else None,
        }

    # -- memory_correct ------------------------------------------------------------

    def memory_correct(
        self,
        scope: str,
        section: str | None = None,
        name: str | None = None,
        title: str | None = None,
        at: str | None = None,
        content: str | None = None,
        project: str | None = None,
        approved: bool = False,
    ) -> dict[str, Any]:
        """Rewrite one unit's body, or delete the unit when content is empty; needs approval."""
        lines = None if is_empty(content) else check_content(content, self.context.config.note.max_bytes)
        if scope == "root":
            _refuse("scope=root", name=name, title=title, at=at)
            if section is None:
                raise InvalidParams("invalid_params", "scope=root needs section: the name of a MEMORY.md section")
            return self._correct_root(section_name(section), lines, approved)
        _refuse(f"scope={scope}", section=section)
        if name is None or (title is None and at is None):
            raise InvalidParams("invalid_params", f"scope={scope} needs name, and title or at (or both)")
        root = self.scope_root(scope, project)
        address = (
            section_name(title, "title") if title else title,
            check_at(at) if at is not None else None,
        )
        return self._correct_entry(scope, root, logfile_name(name), address, lines, approved)

    def _correct_root(self, name: str, lines: list[str] | None, approved: bool) -> dict[str, Any]:
        """Rewrite or delete one MEMORY.md section."""

        def change(text: str | None) -> tuple[str, Unit]:
            parsed = parse_memory(text or "", self.files.max_line_bytes)
            unit = find_section(parsed, name)
            self._approve(approved, lines, f"section '## {unit.title}' of MEMORY.md")
            new = _rewritten(parsed, unit, lines)
            self._check_budget(text or "", new, grow_only=True)
            return new, unit

        text, unit = self._edit(self.context.roots.user, store.MEMORY, change)
        return self._corrected(self.context.roots.user, store.MEMORY, lines, {"section": unit.title}, text)

    def _correct_entry(
        self,
        scope: str,
        root: Root,
        name: str,
        address: tuple[str | None, str | None],
        lines: list[str] | None,
        approved: bool,
    ) -> dict[str, Any]:
        """Rewrite or delete one logfile entry, found by title and/or `at`."""
        rel = store.logfile_rel(name)

        def change(text: str | None) -> tuple[str, Unit]:
            if text is None:
                raise self._no_logfile(scope, root, name)
            parsed = parse_logfile(text, self.files.max_line_bytes)
            unit = find_entry(parsed, *address, where=f"{scope} logfile {name!r}")
            self._approve(approved, lines, f"entry '{unit.title or '(untitled)'} @ {unit.stamp}' of logfile {name!r}")
            return _rewritten(parsed, unit, lines), unit

        text, unit = self._edit(root, rel, change)
        return self._corrected(root, rel, lines, {"name": name, "title": unit.title, "at": unit.stamp}, text)

    def _approve(self, approved: bool, lines: list[str] | None, what: str) -> None:
        """Corrections and deletions are important writes (docs/memory.md, Approval)."""
        self.context.approver.require(True, approved, ("deleting " if lines is None else "rewriting ") + what)

    def _corrected(
        self, root: Root, rel: Path, lines: list[str] | None, unit: dict[str, Any], text: str
    ) -> dict[str, Any]:
        """The answer of memory_correct."""
        action = "deleted" if lines is None else "rewritten"
        backup = str(store.backup_path(root, rel))
        return {"path": str(root.path / rel), "action": action, **unit, "backup": backup, "chars": len(text)}

    # -- memory_creator ------------------------------------------------------------

    def memory_creator(
        self,
        scope: str,
        name: str,
        type: str,
        description: str,
        heading: str,
        project: str | None = None,
        approved: bool = False,
    ) -> dict[str, Any]:
        """Create an empty logfile: frontmatter, one blank line, `# heading`; `exists` when it is there."""
        root = self.scope_root(scope, project)
        name = logfile_name(name)
        about = folded(description, "description", MAX_DESCRIPTION)
        title = folded(heading.lstrip("#").strip() if isinstance(heading, str) else heading, "heading", MAX_HEADING)
        rel = store.logfile_rel(name)
        with self.context.syncer.lock:
            self.context.prepare_write(root)
            store.create(root, rel, render_logfile(name, type, about, title))
            self.context.syncer.sync_file(root, rel)
        return {"path": str(root.path / rel), "name": name, "type": type, "description": about, "heading": title}

    # -- injection -----------------------------------------------------------------

    def has_snapshot(self, session: str, project: str | None) -> bool:
        """Whether a session's first block has frozen its snapshot (the next blocks read nothing from the disk)."""
        return (session, project or "") in self.snapshots

    def snapshot(self, session: str, project: str | None) -> Snapshot:
        """The frozen SOUL, MEMORY and catalogue of a session, made by its first block."""
        return self.snapshots.get((session, project or ""), lambda: self._freeze(project))

    def _freeze(self, project: str | None) -> Snapshot:
        """Read SOUL.md, MEMORY.md and the catalogues now, and fit them into the budget."""
        user = self.context.roots.user
        soul = store.read_quietly(user, store.SOUL, self.files)
        core = store.read_quietly(user, store.MEMORY, self.files)
        roots = [("home", user)] + ([("project", self.context.roots.project(project))] if project else [])
        layers = [self._layer(scope, root) for scope, root in roots]
        root_part = (str(user.path / store.MEMORY), text_lines(core.text)) if core else None
        return freeze(text_lines(soul.text if soul else None), root_part, layers, self.context.config.inject)

    def _layer(self, scope: str, root: Root) -> Layer:
        """One catalogue: the scope's logfiles, newest first."""
        lines = tuple(lf.line() for lf in store.logfiles(root, self.files))
        return Layer(scope, str(root.path / store.LOGS), lines)


def _refuse(where: str, **params: object) -> None:
    """Params that mean nothing for a scope are refused rather than silently ignored."""
    given = [key for key, value in params.items() if value is not None]
    if given:
        raise InvalidParams("invalid_params", f"{where} does not take {', '.join(given)}")


def _rewritten(parsed: Parsed, unit: Unit, lines: list[str] | None) -> str:
    """The file with the unit's body replaced, or without the unit when lines is None."""
    return delete_unit(parsed.lines, unit) if lines is None else replace_unit(parsed.lines, unit, lines)
