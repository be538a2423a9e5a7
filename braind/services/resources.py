"""Memory files as addressable resources: `memory://` URIs, a read-only listing and reads.

The MCP bridge offers these to clients as MCP resources; over the socket they
are the `memory.files` and `memory.read` methods. A URI names a realm, then a
file the way a person thinks of it:

    memory://user/SOUL.md
    memory://user/MEMORY.md
    memory://user/MEMORY.md#<section>      one `## section`, by its exact name
    memory://<realm>/logs/<name>           a logfile (realm user or project)
    memory://<realm>/diary/<YYYY-MM-DD>    one diary day

Names are percent-encoded (UTF-8). `project` resources need the request's
`project`. Reads go through the same validation as indexing, so a symlink or a
file that is not UTF-8 is refused with its reason, never followed or guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from braind.errors import InvalidParams, NotFound
from braind.files import layered as store
from braind.files.validate import classify, diary_date
from braind.ingest.sync import root_available, walk
from braind.model.layered import parse_memory, section_names
from braind.model.names import logfile_name
from braind.model.roots import Root
from braind.services.context import Context
from braind.services.layered.tools import LayeredMemory

SCHEME = "memory://"
MIME = "text/markdown"


@dataclass(frozen=True)
class Address:
    """What a URI names: a root, a file below it, and optionally one MEMORY.md section."""

    root: Root
    rel: Path
    section: str | None = None


def uri_of(realm: str, rel: Path, section: str | None = None) -> str:
    """The URI of a memory file (and section)."""
    kind = classify(rel)
    if kind == "diary":
        path = f"diary/{rel.name.removesuffix('.md')}"
    elif kind == "logfile":
        path = f"logs/{quote(rel.name.removesuffix('.md'), safe='')}"
    else:
        path = rel.name
    return f"{SCHEME}{realm}/{path}" + (f"#{quote(section, safe='')}" if section is not None else "")


def listing(context: Context, project: str | None = None) -> dict[str, Any]:
    """Every memory file of the visible roots, and each MEMORY.md section, as resources."""
    rejected = {p.path for p in context.problems.files()}
    resources: list[dict[str, Any]] = []
    for root in context.roots.visible(project):
        if root_available(root):
            resources += _root_resources(context, root, rejected)
    return {"resources": resources}


def _root_resources(context: Context, root: Root, rejected: set[str]) -> list[dict[str, Any]]:
    """One root's files: SOUL.md, MEMORY.md and its sections, logfiles by name, diary days newest first."""
    order = {"soul": 0, "memory": 1, "logfile": 2, "diary": 3}
    files = [rel for rel in walk(root) if classify(rel) in order and str(root.path / rel) not in rejected]
    files.sort(key=lambda rel: (order[classify(rel)], _newest_first(rel)))
    found: list[dict[str, Any]] = []
    for rel in files:
        found.append(_resource(root, rel))
        if classify(rel) == "memory":
            found += [_section_resource(root, rel, name) for name in _sections(context, root)]
    return found


def _newest_first(rel: Path) -> tuple[int, str]:
    """Diary days newest first; other files by name."""
    day = diary_date(rel.name)
    return (-int(day.replace("-", "")), "") if day else (0, rel.name)


def _resource(root: Root, rel: Path) -> dict[str, Any]:
    """One file as a resource description."""
    kind = classify(rel)
    title = {
        "soul": "SOUL.md: the persona",
        "memory": "MEMORY.md: the core memory",
        "logfile": f"logfile {rel.name.removesuffix('.md')}",
        "diary": f"diary {rel.name.removesuffix('.md')}",
    }[kind]
    where = f" ({root.realm} memory)" if root.realm == "project" else ""
    try:
        size: int | None = (root.path / rel).lstat().st_size
    except OSError:
        size = None
    return {
        "uri": uri_of(root.realm, rel),
        "name": f"{root.realm}/{rel.as_posix()}",
        "title": title + where,
        "description": f"{root.path / rel}",
        "mimeType": MIME,
        "size": size,
    }


def _section_resource(root: Root, rel: Path, name: str) -> dict[str, Any]:
    """One MEMORY.md section as a resource description."""
    return {
        "uri": uri_of(root.realm, rel, name),
        "name": f"{root.realm}/{rel.as_posix()}#{name}",
        "title": f"MEMORY.md section {name}",
        "description": f"the '## {name}' section of {root.path / rel}",
        "mimeType": MIME,
    }


def _sections(context: Context, root: Root) -> list[str]:
    """The section names of a root's MEMORY.md (none when it cannot be read)."""
    data = store.read_quietly(root, store.MEMORY, context.config.files)
    return section_names(parse_memory(data.text, context.config.files.max_line_bytes)) if data else []


def read(context: Context, layered: LayeredMemory, uri: str, project: str | None = None) -> dict[str, Any]:
    """The text of the file (or section) a URI names."""
    address = resolve(context, uri, project)
    if address.section is not None:
        found = layered.memory_recall(scope="root", section=address.section)
        if found.get("section") != address.section:
            raise NotFound(f"MEMORY.md has no section named exactly {address.section!r}")
        return {"uri": uri, "mimeType": MIME, "path": found["path"], "text": found["text"]}
    data = store.read(address.root, address.rel, context.config.files)
    if data is None:
        raise NotFound(f"{uri} names no file: {address.root.path / address.rel} does not exist")
    return {"uri": uri, "mimeType": MIME, "path": str(address.root.path / address.rel), "text": data.text}


def resolve(context: Context, uri: str, project: str | None) -> Address:
    """The root, file and section a memory:// URI names; refused when it names nothing that can exist."""
    parts = urlsplit(uri)
    if parts.scheme != "memory" or parts.query:
        raise InvalidParams("invalid_params", f"not a memory:// URI: {uri!r}")
    root = _realm_root(context, parts.netloc, project)
    rel = _relative(parts.path, root, uri)
    section = unquote(parts.fragment) if parts.fragment else None
    if section is not None and classify(rel) != "memory":
        raise InvalidParams("invalid_params", f"only MEMORY.md has sections: {uri!r}")
    return Address(root, rel, section)


def _realm_root(context: Context, realm: str, project: str | None) -> Root:
    """The root of a URI's realm: user, or the request's project."""
    if realm == "user":
        return context.roots.user
    if realm == "project":
        if not project:
            raise InvalidParams("invalid_params", "memory://project/... needs project: the project directory")
        return context.roots.project(project)
    raise InvalidParams("invalid_params", f"unknown realm {realm!r} in a memory:// URI; known: user, project")


def _relative(path: str, root: Root, uri: str) -> Path:
    """The file a URI path names below its root (each segment decoded on its own, so %2F stays in a name)."""
    segments = [unquote(segment) for segment in path.strip("/").split("/")]
    if segments == ["SOUL.md"] or segments == ["MEMORY.md"]:
        rel = Path(segments[0])
    elif len(segments) == 2 and segments[0] == "logs":
        rel = store.logfile_rel(logfile_name(segments[1]))
    elif len(segments) == 2 and segments[0] == "diary" and diary_date(f"{segments[1]}.md"):
        rel = Path("diary", f"{segments[1]}.md")
    else:
        raise InvalidParams("invalid_params", f"{uri!r} names no memory file (see memory.files)")
    if root.realm == "project" and rel in (store.SOUL, store.MEMORY):
        raise InvalidParams("invalid_params", f"{rel} belongs to the user root only: {uri!r}")
    return rel
