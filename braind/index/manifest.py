"""The index manifest: what an index was built with, so an incompatible one is rebuilt."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def problem(path: Path, wanted: dict[str, Any]) -> str | None:
    """Why the manifest at path does not describe a compatible index, or None when it does."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"without a readable manifest ({exc})"
    if not isinstance(found, dict):
        return "without a valid manifest"
    for key, value in wanted.items():
        if found.get(key) != value:
            return f"of another {key} ({found.get(key)!r}, wanted {value!r})"
    return None


def write(path: Path, content: dict[str, Any]) -> None:
    """Write a manifest atomically (temp file, then rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
