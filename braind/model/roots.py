"""Memory roots: the user root and project roots (`<project>/.agents/.memory`), as values."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROJECT_SUBDIR = (".agents", ".memory")


@dataclass(frozen=True)
class Root:
    """One memory root and the realm its entries belong to."""

    path: Path
    realm: str
    project: Path | None = None

    def contains(self, path: Path) -> bool:
        """True when path lies inside this root."""
        return path == self.path or self.path in path.parents


def user_root(path: Path) -> Root:
    """The cross-project root of the configured memory_root."""
    return Root(path, "user")
