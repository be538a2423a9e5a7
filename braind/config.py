"""Configuration: loaded and validated once at start, then passed down frozen."""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from braind.errors import ConfigError

# sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
_MAX_SOCKET_PATH = 107


def _home(env: Mapping[str, str]) -> str:
    """$HOME, or the password database's home when it is unset, so paths stay absolute."""
    return env.get("HOME") or os.path.expanduser("~")


def _xdg(env: Mapping[str, str], var: str, fallback: str) -> Path:
    """An XDG base directory; relative values are ignored, as the XDG spec requires."""
    value = env.get(var)
    return Path(value) if value and os.path.isabs(value) else Path(_home(env)) / fallback


def _default_socket(env: Mapping[str, str]) -> Path:
    """$XDG_RUNTIME_DIR/braind/braind.sock, or a per-uid directory under /tmp."""
    runtime = env.get("XDG_RUNTIME_DIR")
    if not runtime or not os.path.isabs(runtime):
        runtime = f"/tmp/braind-{os.getuid()}"
    return Path(runtime) / "braind" / "braind.sock"


def _socket_search(env: Mapping[str, str]) -> tuple[Path, ...]:
    """Where a client looks for a daemon on the default socket: the runtime dir, /run/user/UID, /tmp."""
    runtime = env.get("XDG_RUNTIME_DIR")
    found = [Path(runtime) / "braind" / "braind.sock"] if runtime and os.path.isabs(runtime) else []
    found += [Path(f"/run/user/{os.getuid()}/braind/braind.sock"), _default_socket({})]
    return tuple(dict.fromkeys(found))


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate keys instead of keeping the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """Build a mapping, failing on the second occurrence of a key."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` may be overridden by explicit keys
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"duplicate key {key!r}", key_node.start_mark
                )
            if isinstance(key, Hashable):
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


@dataclass(frozen=True)
class InjectConfig:
    """Budgets of the per-turn injection block."""

    diary_days: int = 2
    max_bytes: int = 8192
    max_chars: int = 16384
    max_lines: int = 200
    trigger_max_entries: int = 8
    trigger_max_chars: int = 1200


@dataclass(frozen=True)
class NoteConfig:
    """Limits on one write."""

    max_bytes: int = 8192


@dataclass(frozen=True)
class RecallConfig:
    """Defaults and limits of brain_recall."""

    max_results: int = 20
    snippet_chars: int = 240
    scan_days: int = 0  # 0: all of memory
    languages: tuple[str, ...] = ("en",)  # whose stemmers and stopwords apply to words


@dataclass(frozen=True)
class FilesConfig:
    """Caps on files read from the memory roots."""

    max_file_bytes: int = 67108864
    max_line_bytes: int = 16384


@dataclass(frozen=True)
class CompactConfig:
    """Thresholds of the compaction rules."""

    fact_ttl_days: int = 30
    deweight_days: int = 90


@dataclass(frozen=True)
class ApprovalConfig:
    """What happens to important writes that carry no approval."""

    mode: str = "fail-closed"
    command: str = ""
    timeout_seconds: int = 120


@dataclass(frozen=True)
class WatcherConfig:
    """Debounce windows and the periodic rescan of the roots."""

    quiet_ms: int = 150
    max_wait_ms: int = 1000
    rescan_seconds: int = 600


@dataclass(frozen=True)
class IndexConfig:
    """How often queued index changes are committed."""

    commit_ms: int = 500


@dataclass(frozen=True)
class ServerConfig:
    """Limits of the socket server."""

    max_connections: int = 1024
    read_timeout_seconds: int = 30
    idle_timeout_seconds: int = 600
    workers: int = 8


@dataclass(frozen=True)
class Config:
    """The whole validated configuration."""

    memory_root: Path
    state_dir: Path
    socket: Path
    projects: tuple[Path, ...] = ()
    inject: InjectConfig = InjectConfig()
    note: NoteConfig = NoteConfig()
    recall: RecallConfig = RecallConfig()
    files: FilesConfig = FilesConfig()
    compact: CompactConfig = CompactConfig()
    approval: ApprovalConfig = ApprovalConfig()
    watcher: WatcherConfig = WatcherConfig()
    index: IndexConfig = IndexConfig()
    server: ServerConfig = ServerConfig()
    source: str = "built-in defaults"
    # Where clients look for the daemon, in order; empty when the socket was named (config, $BRAIND_SOCKET).
    socket_search: tuple[Path, ...] = ()

    def client_sockets(self) -> tuple[Path, ...]:
        """The socket paths a client tries, in order."""
        return self.socket_search or (self.socket,)

    def with_socket(self, path: str) -> Config:
        """This config with the socket given on the command line (--socket), which alone is tried."""
        return replace(self, socket=Path(path).absolute(), socket_search=())


# Allowed ranges: (low, high) for integers, a tuple of strings for choices.
RANGES: dict[str, tuple[int, int] | tuple[str, ...]] = {
    "inject.diary_days": (1, 7),
    "inject.max_bytes": (256, 1048576),
    "inject.max_chars": (256, 1048576),
    "inject.max_lines": (10, 100000),
    "inject.trigger_max_entries": (0, 100),
    "inject.trigger_max_chars": (0, 65536),
    "note.max_bytes": (16, 1048576),
    "recall.max_results": (1, 500),
    "recall.snippet_chars": (1, 4000),
    "recall.scan_days": (0, 36500),
    "files.max_file_bytes": (1024, 1073741824),
    "files.max_line_bytes": (64, 1048576),
    "compact.fact_ttl_days": (1, 3650),
    "compact.deweight_days": (1, 3650),
    "approval.mode": ("fail-closed", "open"),
    "approval.timeout_seconds": (1, 3600),
    "watcher.quiet_ms": (10, 10000),
    "watcher.max_wait_ms": (50, 60000),
    "watcher.rescan_seconds": (10, 86400),
    "index.commit_ms": (10, 60000),
    "server.max_connections": (1, 65536),
    "server.read_timeout_seconds": (1, 3600),
    "server.idle_timeout_seconds": (1, 86400),
    "server.workers": (1, 256),
}

_PATH_KEYS = ("memory_root", "state_dir", "socket")


def find_config(explicit: str | None, env: Mapping[str, str]) -> Path | None:
    """The config file to use: --config, $BRAIND_CONFIG, then the XDG location."""
    if explicit:
        return Path(explicit)
    if env.get("BRAIND_CONFIG"):
        return Path(env["BRAIND_CONFIG"])
    candidate = _xdg(env, "XDG_CONFIG_HOME", ".config") / "braind" / "braind.yaml"
    return candidate if candidate.is_file() else None


def load_config(explicit: str | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Find, read and validate the configuration; raise ConfigError naming the key."""
    env = os.environ if env is None else env
    path = find_config(explicit, env)
    raw: Any = {}
    if path is not None:
        try:
            with path.open(encoding="utf-8") as stream:
                raw = yaml.load(stream, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
        except yaml.MarkedYAMLError as exc:
            raise ConfigError("invalid_config", _yaml_problem(path, exc)) from None
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError("invalid_config", f"cannot read {path}: {exc}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("invalid_config", f"{path}: top level must be a mapping")
    if path is None:
        return build_config(raw, env, "built-in defaults")
    try:
        return build_config(raw, env, str(path))
    except ConfigError as exc:
        raise ConfigError(exc.reason, f"{path}: {exc.message}") from None


def _yaml_problem(path: Path, exc: yaml.MarkedYAMLError) -> str:
    """One line, path:line:column: problem, as editors and the CLI's error line expect."""
    mark = exc.problem_mark or exc.context_mark
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
    context = f" ({exc.context})" if exc.context else ""
    return f"{where}: invalid YAML: {exc.problem or 'syntax error'}{context}"


def build_config(raw: Mapping[str, Any], env: Mapping[str, str], source: str) -> Config:
    """Validate a parsed mapping against the schema and defaults."""
    defaults = {
        "memory_root": _xdg(env, "XDG_DATA_HOME", ".local/share") / "braind",
        "state_dir": _xdg(env, "XDG_STATE_HOME", ".local/state") / "braind",
        "socket": _default_socket(env),
    }
    values: dict[str, Any] = {"source": source}
    known = {f.name for f in fields(Config)} - {"source", "socket_search"}
    for key in raw:
        if key not in known:
            raise ConfigError("invalid_config", f"unknown key {key!r}; known keys: {', '.join(sorted(known))}")
    for key in _PATH_KEYS:
        values[key] = _path(key, raw[key], env) if key in raw else defaults[key]
    if env.get("BRAIND_SOCKET"):
        values["socket"] = _path("$BRAIND_SOCKET", env["BRAIND_SOCKET"], env)
    elif "socket" not in raw:
        values["socket_search"] = _socket_search(env)
    values["socket"] = _socket_length(values["socket"])
    values["projects"] = _projects(raw.get("projects", []), env)
    for f in fields(Config):
        if f.name in raw and is_dataclass(f.default):
            values[f.name] = _section(f.name, type(f.default), raw[f.name])
    return Config(**values)


def _socket_length(path: Path) -> Path:
    """Refuse a socket path too long for AF_UNIX now rather than at bind time."""
    size = len(os.fsencode(path))
    if size > _MAX_SOCKET_PATH:
        raise ConfigError(
            "invalid_config", f"socket: {str(path)!r} is {size} bytes; allowed: at most {_MAX_SOCKET_PATH} bytes"
        )
    return path


def _path(key: str, value: Any, env: Mapping[str, str]) -> Path:
    """An absolute or ~ path; environment variables are not expanded."""
    if not isinstance(value, str) or not value:
        raise ConfigError("invalid_config", f"{key}: expected a path string, got {value!r}")
    if value == "~" or value.startswith("~/"):
        value = _home(env) + value[1:]
    elif value.startswith("~"):
        value = os.path.expanduser(value)  # ~user; left as is (and refused) when unknown
    if not os.path.isabs(value):
        raise ConfigError("invalid_config", f"{key}: {value!r} is not absolute; allowed: an absolute or ~ path")
    return Path(os.path.normpath(value))


def _projects(value: Any, env: Mapping[str, str]) -> tuple[Path, ...]:
    """The list of configured project directories; an empty `projects:` means none."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError("invalid_config", f"projects: expected a list of absolute paths, got {value!r}")
    return tuple(_path(f"projects[{i}]", item, env) for i, item in enumerate(value))


def _section(name: str, cls: type, value: Any) -> Any:
    """Validate one nested section (inject, recall, ...); an empty section keeps the defaults."""
    if value is None:
        return cls()
    if not isinstance(value, dict):
        raise ConfigError("invalid_config", f"{name}: expected a mapping, got {value!r}")
    known = {f.name: f for f in fields(cls)}
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key not in known:
            raise ConfigError("invalid_config", f"unknown key {name}.{key}; known keys: {', '.join(sorted(known))}")
        out[key] = _check(f"{name}.{key}", item, getattr(cls(), key))
    return cls(**out)


def _check(key: str, value: Any, default: Any) -> Any:
    """Check one scalar's type and range; the error names key, value and range."""
    allowed = RANGES.get(key)
    if isinstance(default, tuple):
        return _languages(key, value)
    if isinstance(default, int):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError("invalid_config", f"{key}: expected an integer, got {value!r}{_describe(allowed)}")
        if allowed and not allowed[0] <= value <= allowed[1]:  # type: ignore[operator]
            raise ConfigError("invalid_config", f"{key}: {value!r} is out of range{_describe(allowed)}")
        return value
    if not isinstance(value, str) or (allowed and value not in allowed):
        raise ConfigError("invalid_config", f"{key}: {value!r} is not allowed{_describe(allowed)}")
    return value


def _languages(key: str, value: Any) -> tuple[str, ...]:
    """A non-empty list of language codes that have a stemmer."""
    from braind.index.analysis import supported_languages

    known = supported_languages()
    if not isinstance(value, list) or not value or not all(isinstance(code, str) for code in value):
        raise ConfigError("invalid_config", f"{key}: expected a list of language codes, got {value!r}")
    unknown = [code for code in value if code not in known]
    if unknown:
        raise ConfigError("invalid_config", f"{key}: {unknown[0]!r} is not allowed; allowed: {', '.join(known)}")
    return tuple(dict.fromkeys(value))


def _describe(allowed: Any) -> str:
    """Say the allowed range or choices of a key."""
    if not allowed:
        return ""
    if isinstance(allowed[0], int):
        return f"; allowed: {allowed[0]} to {allowed[1]}"
    return "; allowed: " + ", ".join(allowed)
