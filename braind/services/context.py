"""What the services share: config, the index, the syncer, approval, the clock and the roots.

Each service is handed this context and the sibling services it calls, never
the object that owns them. The daemon plugs in its hooks (`Hooks`) once the
watcher and the per-root locks exist.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from braind.config import Config
from braind.files.migrate import Migrator
from braind.files.problems import Problems
from braind.files.roots import ensure_root, project_root
from braind.index.api import SearchIndex
from braind.ingest.sync import Syncer
from braind.model.roots import Root, user_root
from braind.services.typed.approval import Approver

Clock = Callable[[], dt.datetime]


def local_now() -> dt.datetime:
    """The local wall-clock time, which names diary days and stamps entries."""
    return dt.datetime.now().astimezone()


def _nothing() -> None:
    """A hook the daemon has not plugged in yet."""


def _no_claim(root: Root) -> None:
    """Before the daemon holds locks, a root needs none."""


@dataclass
class Hooks:
    """What the daemon plugs in once its watcher and locks exist."""

    root_created: Callable[[], None] = _nothing  # a root appeared: watch it
    claim: Callable[[Root], None] = _no_claim  # the daemon holds a root's lock before writing it


class Roots:
    """The roots a request can touch: the user root, the configured projects, a project it names."""

    def __init__(self, user: Root, projects: list[Root], migrator: Migrator) -> None:
        self.user = user
        self.projects = projects
        self._migrator = migrator

    def all(self) -> list[Root]:
        """Every root the daemon watches: the user root, then configured projects."""
        return [self.user, *self.projects]

    def project(self, project: str) -> Root:
        """A project's root, after moving its legacy `.memory` into it (once per daemon)."""
        root = project_root(project)
        self._migrator.ensure(root)
        return root

    def migrated(self, root: Root) -> None:
        """Move a project root's legacy `.memory` into it, unless done already."""
        self._migrator.ensure(root)

    def visible(self, project: str | None, realm: str | None = None) -> list[Root]:
        """What a request sees: the user root plus at most the one named project."""
        roots = [self.user] + ([self.project(project)] if project else [])
        return [r for r in roots if realm is None or r.realm == realm]

    def for_write(self, project: str | None) -> Root:
        """The root a write goes to: the project's when one is named."""
        return self.project(project) if project else self.user

    def at(self, path: Path) -> Root:
        """The root at a path: the user root, or a project's."""
        return self.user if path == self.user.path else project_root(path.parent.parent)


@dataclass(frozen=True)
class Context:
    """What every service may use; built once per daemon by `make_context`."""

    config: Config
    index: SearchIndex
    syncer: Syncer
    problems: Problems
    approver: Approver
    roots: Roots
    clock: Clock = local_now
    hooks: Hooks = field(default_factory=Hooks)

    def prepare_write(self, root: Root) -> None:
        """Before a write: the root exists (created on first write, then watched) and this daemon holds its lock."""
        if ensure_root(root):
            self.hooks.root_created()
        self.hooks.claim(root)


def make_context(
    config: Config, index: SearchIndex, syncer: Syncer, problems: Problems, clock: Clock = local_now
) -> Context:
    """The context of one daemon: its roots, with projects migrated on first use and indexed once migrated."""
    hooks = Hooks()

    def migrated(root: Root) -> None:
        """A migration created or filled a project root: watch it and index what arrived."""
        hooks.root_created()
        syncer.reconcile(root)

    migrator = Migrator(problems, config.files.max_file_bytes, syncer.lock, migrated, lambda root: hooks.claim(root))
    projects = [project_root(p) for p in config.projects if p.is_dir()]
    roots = Roots(user_root(config.memory_root), projects, migrator)
    return Context(config, index, syncer, problems, Approver(config.approval), roots, clock, hooks)
