"""`braind check`: validate a root offline, with the same loader the daemon uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from braind.config import FilesConfig
from braind.ingest.sync import load_file, root_available, walk
from braind.model.roots import user_root


def check_root(path: Path, files: FilesConfig) -> dict[str, Any]:
    """Load every memory file of a root and collect every rejection and skipped line."""
    root = user_root(path)
    report: dict[str, Any] = {"root": str(path), "files": 0, "entries": 0, "rejected": [], "skipped_lines": []}
    if not root_available(root):
        reason = "symlink" if path.is_symlink() else "missing"
        report["rejected"].append({"path": str(path), "line": None, "reason": reason, "message": "root unavailable"})
        return report
    for rel in walk(root):
        loaded = load_file(root, rel, files)
        report["files"] += loaded.record is not None
        report["entries"] += len(loaded.entries)
        for p in loaded.problems:
            key = "rejected" if p.line is None else "skipped_lines"
            report[key].append(p.to_wire())
    return report
