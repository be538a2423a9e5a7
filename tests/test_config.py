"""The configuration: lookup order, validation that names key and range, and the shipped file."""

from __future__ import annotations

import dataclasses
import os
import pwd
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from braind.config import RANGES, Config, build_config, load_config
from braind.errors import ConfigError

SHIPPED = Path(__file__).resolve().parent.parent / "config" / "braind.yaml"
HOME = "/home/ada"
ENV = {"HOME": HOME}
SECTIONS: dict[str, Any] = {
    f.name: type(f.default) for f in dataclasses.fields(Config) if dataclasses.is_dataclass(f.default)
}
INT_RANGES: dict[str, tuple[int, int]] = {k: v for k, v in RANGES.items() if isinstance(v[0], int)}
CHOICES: dict[str, tuple[str, ...]] = {k: v for k, v in RANGES.items() if isinstance(v[0], str)}


def write(directory: Path, text: str, name: str = "braind.yaml") -> Path:
    """Write a config file and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def defaults(env: dict[str, str] = ENV) -> Config:
    """The built-in defaults for an environment."""
    return build_config({}, env, "built-in defaults")


def build(raw: dict[str, Any], env: dict[str, str] = ENV) -> Config:
    """Validate a parsed mapping in the fixed test environment."""
    return build_config(raw, env, "test")


def refused(raw: dict[str, Any], env: dict[str, str] = ENV) -> str:
    """The message of the ConfigError a mapping raises."""
    with pytest.raises(ConfigError) as info:
        build(raw, env)
    assert info.value.reason == "invalid_config"
    return info.value.message


def states_range(message: str, low: int, high: int) -> bool:
    """The message ends by giving the allowed range, low end first."""
    tail = message.rpartition("; allowed: ")[2]
    return re.fullmatch(rf"{low}\D+{high}", tail) is not None


def nested(key: str, value: Any) -> dict[str, Any]:
    """{"recall": {"max_results": value}} from "recall.max_results"."""
    section, name = key.split(".")
    return {section: {name: value}}


def uncommented(text: str) -> str:
    """The shipped file with its commented-out top-level keys switched on."""
    keys = "|".join(f.name for f in dataclasses.fields(Config))
    return re.sub(rf"^# ({keys}): ", r"\1: ", text, flags=re.MULTILINE)


def same(config: Config, expected: Config) -> bool:
    """Equal apart from where the values came from (a named socket is the only place clients look)."""
    return dataclasses.replace(config, source=expected.source, socket_search=expected.socket_search) == expected


# -- the shipped file -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env",
    [
        ENV,
        {"HOME": HOME, "XDG_RUNTIME_DIR": "/run/user/1000"},
        {"HOME": HOME, "XDG_DATA_HOME": "/data", "XDG_STATE_HOME": "/state", "XDG_RUNTIME_DIR": "/rt"},
    ],
)
def test_shipped_file_loads_as_the_builtin_defaults(env: dict[str, str]) -> None:
    """Copying the shipped file changes nothing, whatever the XDG variables say."""
    config = load_config(str(SHIPPED), env)
    assert config.source == str(SHIPPED)
    assert same(config, defaults(env))


def test_shipped_file_names_every_field_of_every_section() -> None:
    """A field added to a Config dataclass must be documented in the shipped file."""
    raw = yaml.safe_load(uncommented(SHIPPED.read_text(encoding="utf-8")))
    assert set(raw) == {f.name for f in dataclasses.fields(Config)} - {"source", "socket_search"}
    for name, cls in SECTIONS.items():
        assert set(raw[name]) == {f.name for f in dataclasses.fields(cls)}, name


def test_shipped_commented_paths_are_the_xdg_defaults(tmp_path: Path) -> None:
    """The example paths shown in comments are the defaults when no XDG variable is set."""
    env = {"HOME": HOME, "XDG_RUNTIME_DIR": "/run/user/1000"}
    path = write(tmp_path, uncommented(SHIPPED.read_text(encoding="utf-8")))
    assert same(load_config(str(path), env), defaults(env))


def shipped_comment(key: str) -> str:
    """The comment on a nested key's line in the shipped file."""
    section, name = key.split(".")
    current = None
    for line in SHIPPED.read_text(encoding="utf-8").splitlines():
        if re.match(r"^\w+:", line):
            current = line.split(":")[0]
        elif current == section and line.strip().startswith(f"{name}:"):
            return line.partition("#")[2]
    raise AssertionError(f"{key} is not in {SHIPPED}")


@pytest.mark.parametrize("key", sorted(RANGES))
def test_shipped_comments_state_the_allowed_range(key: str) -> None:
    """The range written next to each key is the one the validator enforces."""
    comment = shipped_comment(key)
    if key in INT_RANGES:
        low, high = INT_RANGES[key]
        assert comment.rstrip().endswith(f"; {low}-{high}"), comment
    else:
        assert all(choice in comment for choice in CHOICES[key]), comment


# -- lookup order -----------------------------------------------------------------------------------


def lookup_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment whose home and XDG config directory live under tmp_path."""
    return {"HOME": str(tmp_path / "home"), **extra}


def test_explicit_path_wins_over_env_and_xdg(tmp_path: Path) -> None:
    """--config beats $BRAIND_CONFIG and the XDG file."""
    explicit = write(tmp_path / "a", "recall: {max_results: 1}")
    from_env = write(tmp_path / "b", "recall: {max_results: 2}")
    write(tmp_path / "xdg" / "braind", "recall: {max_results: 3}")
    env = lookup_env(tmp_path, BRAIND_CONFIG=str(from_env), XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    config = load_config(str(explicit), env)
    assert (config.recall.max_results, config.source) == (1, str(explicit))


def test_braind_config_wins_over_xdg(tmp_path: Path) -> None:
    """$BRAIND_CONFIG beats the XDG file."""
    from_env = write(tmp_path / "b", "recall: {max_results: 2}")
    write(tmp_path / "xdg" / "braind", "recall: {max_results: 3}")
    env = lookup_env(tmp_path, BRAIND_CONFIG=str(from_env), XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    assert load_config(None, env).recall.max_results == 2


def test_xdg_config_home_is_used(tmp_path: Path) -> None:
    """$XDG_CONFIG_HOME/braind/braind.yaml is read when nothing more specific is given."""
    path = write(tmp_path / "xdg" / "braind", "recall: {max_results: 3}")
    config = load_config(None, lookup_env(tmp_path, XDG_CONFIG_HOME=str(tmp_path / "xdg")))
    assert (config.recall.max_results, config.source) == (3, str(path))


def test_xdg_config_home_defaults_to_dot_config(tmp_path: Path) -> None:
    """Without $XDG_CONFIG_HOME the file is ~/.config/braind/braind.yaml."""
    write(tmp_path / "home" / ".config" / "braind", "recall: {max_results: 4}")
    assert load_config(None, lookup_env(tmp_path)).recall.max_results == 4


def test_relative_xdg_config_home_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative $XDG_CONFIG_HOME is invalid per the XDG spec, so ~/.config is used."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "rel" / "braind", "recall: {max_results: 5}")
    write(tmp_path / "home" / ".config" / "braind", "recall: {max_results: 4}")
    assert load_config(None, lookup_env(tmp_path, XDG_CONFIG_HOME="rel")).recall.max_results == 4


def test_no_file_anywhere_gives_builtin_defaults(tmp_path: Path) -> None:
    """With no file to read, the built-in defaults apply and say so."""
    env = lookup_env(tmp_path)
    config = load_config(None, env)
    assert config == defaults(env)
    assert config.source == "built-in defaults"


def test_process_environment_is_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_config() without env reads os.environ."""
    monkeypatch.setenv("BRAIND_CONFIG", str(write(tmp_path, "recall: {max_results: 6}")))
    assert load_config().recall.max_results == 6


@pytest.mark.parametrize("via", ["explicit", "env"])
def test_named_file_that_is_missing_is_an_error(tmp_path: Path, via: str) -> None:
    """A file asked for by name must exist; falling back to defaults would hide a typo."""
    missing = str(tmp_path / "nope.yaml")
    env = lookup_env(tmp_path, BRAIND_CONFIG=missing) if via == "env" else lookup_env(tmp_path)
    with pytest.raises(ConfigError, match=re.escape(missing)):
        load_config(missing if via == "explicit" else None, env)


# -- file contents ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n"])
def test_empty_file_gives_defaults(tmp_path: Path, text: str) -> None:
    """An empty or comment-only file means "all defaults"."""
    assert same(load_config(str(write(tmp_path, text)), ENV), defaults())


def test_empty_section_and_empty_projects_keep_defaults(tmp_path: Path) -> None:
    """A section whose keys are all commented out is empty, not an error."""
    path = write(tmp_path, "projects:\ninject:\n  # diary_days: 3\nrecall:\n")
    assert same(load_config(str(path), ENV), defaults())


def test_yaml_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    """A syntax error points at path:line:column on one line."""
    path = write(tmp_path, "recall:\n  max_results: [1, 2\n")
    with pytest.raises(ConfigError) as info:
        load_config(str(path), ENV)
    assert info.value.message.startswith(f"{path}:3:1: invalid YAML: ")
    assert "\n" not in info.value.message


def test_duplicate_key_is_refused(tmp_path: Path) -> None:
    """A key given twice is an error, not a silent last-one-wins."""
    path = write(tmp_path, "recall:\n  max_results: 5\n  max_results: 6\n")
    with pytest.raises(ConfigError, match=rf"{re.escape(str(path))}:3:3: .*duplicate key 'max_results'"):
        load_config(str(path), ENV)


def test_not_utf8_names_the_file(tmp_path: Path) -> None:
    """Undecodable bytes are reported with the file's name."""
    path = tmp_path / "braind.yaml"
    path.write_bytes(b"recall: {max_results: \xff}\n")
    with pytest.raises(ConfigError, match=re.escape(str(path))):
        load_config(str(path), ENV)


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    """A list or scalar document is refused with the file's name."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=rf"{re.escape(str(path))}: top level must be a mapping"):
        load_config(str(path), ENV)


# -- unknown keys and wrong types -------------------------------------------------------------------


@pytest.mark.parametrize("key", ["colour", "source", "memory-root", "Recall"])
def test_unknown_top_level_key(key: str) -> None:
    """Typos and internal fields are refused, listing the keys that exist."""
    message = refused({key: 1})
    assert repr(key) in message
    assert "known keys: approval, compact" in message


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_unknown_nested_key(section: str) -> None:
    """An unknown key inside a section is named with its section."""
    message = refused({section: {"limit": 1}})
    assert f"unknown key {section}.limit" in message
    assert all(f.name in message for f in dataclasses.fields(SECTIONS[section]))


@pytest.mark.parametrize(
    ("value", "shown"),
    [(True, "True"), (False, "False"), ("20", "'20'"), (20.0, "20.0"), (None, "None"), ([20], "[20]")],
)
def test_integer_keys_refuse_other_types(value: Any, shown: str) -> None:
    """Booleans, strings, floats, null and lists are not integers; the range is still shown."""
    message = refused(nested("recall.max_results", value))
    assert message.startswith(f"recall.max_results: expected an integer, got {shown}; allowed: ")
    assert states_range(message, 1, 500), message


@pytest.mark.parametrize("value", [1, True, None, "closed", "Open", ["open"]])
def test_choice_key_refuses_other_values(value: Any) -> None:
    """approval.mode takes one of its two words; YAML's `off` (False) is not one of them."""
    message = refused(nested("approval.mode", value))
    assert message == f"approval.mode: {value!r} is not allowed; allowed: fail-closed, open"


@pytest.mark.parametrize("section", sorted(SECTIONS))
@pytest.mark.parametrize("value", [[1, 2], "fast", 3])
def test_section_must_be_a_mapping(section: str, value: Any) -> None:
    """A list or scalar where a section belongs is refused, naming the section."""
    assert refused({section: value}) == f"{section}: expected a mapping, got {value!r}"


@pytest.mark.parametrize("value", ["/srv/project", {"a": "/srv"}, 3])
def test_projects_must_be_a_list(value: Any) -> None:
    """projects is a list, even for one project."""
    assert refused({"projects": value}).startswith("projects: expected a list of absolute paths")


@pytest.mark.parametrize("key", ["memory_root", "state_dir", "socket"])
@pytest.mark.parametrize("value", [5, "", None, ["/a"], True])
def test_paths_must_be_strings(key: str, value: Any) -> None:
    """A path key takes one non-empty string."""
    assert refused({key: value}) == f"{key}: expected a path string, got {value!r}"


# -- ranges -----------------------------------------------------------------------------------------


def range_cases() -> list[tuple[str, int]]:
    """(key, value) just outside each integer range."""
    return [(key, value) for key, (low, high) in INT_RANGES.items() for value in (low - 1, high + 1)]


@pytest.mark.parametrize(("key", "value"), range_cases())
def test_out_of_range_names_key_value_and_range(key: str, value: int) -> None:
    """One below the low end and one above the high end are both refused."""
    message = refused(nested(key, value))
    assert message.startswith(f"{key}: {value} is out of range; allowed: ")
    assert states_range(message, *INT_RANGES[key]), message


@pytest.mark.parametrize("key", sorted(INT_RANGES))
def test_range_ends_are_accepted(key: str) -> None:
    """Both ends of every range are valid values."""
    section, name = key.split(".")
    for value in INT_RANGES[key]:
        assert getattr(getattr(build(nested(key, value)), section), name) == value


@pytest.mark.parametrize("key", sorted(INT_RANGES))
def test_defaults_are_within_their_ranges(key: str) -> None:
    """No built-in default violates its own range."""
    section, name = key.split(".")
    low, high = INT_RANGES[key]
    assert low <= getattr(getattr(defaults(), section), name) <= high


@pytest.mark.parametrize("choice", CHOICES["approval.mode"])
def test_every_choice_is_accepted(choice: str) -> None:
    """Each listed approval mode loads."""
    assert build(nested("approval.mode", choice)).approval.mode == choice


def test_every_integer_field_has_a_range() -> None:
    """Each integer setting is bounded, so none can be negative or absurd."""
    for name, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            if isinstance(getattr(cls(), f.name), int):
                assert f"{name}.{f.name}" in RANGES


# -- paths ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["memory_root", "state_dir", "socket"])
@pytest.mark.parametrize("value", ["relative/dir", "./here", "$HOME/braind", "${XDG_DATA_HOME}/braind"])
def test_non_absolute_paths_are_refused(key: str, value: str) -> None:
    """Relative paths and unexpanded variables would depend on the working directory."""
    message = refused({key: value})
    assert message == f"{key}: {value!r} is not absolute; allowed: an absolute or ~ path"


def test_relative_project_is_refused_with_its_index() -> None:
    """The error points at the offending list item."""
    message = refused({"projects": ["/srv/ok", "src/app"]})
    assert message == "projects[1]: 'src/app' is not absolute; allowed: an absolute or ~ path"


def test_tilde_expands_to_home_from_the_environment() -> None:
    """~ and ~/x use $HOME of the environment given, not the test runner's."""
    config = build({"memory_root": "~", "state_dir": "~/state/", "projects": ["~/src/app"]})
    assert config.memory_root == Path(HOME)
    assert config.state_dir == Path(HOME, "state")
    assert config.projects == (Path(HOME, "src/app"),)


def test_tilde_user_expands_through_the_password_database() -> None:
    """~name/x is the named user's home."""
    try:
        user = pwd.getpwuid(os.getuid())
    except KeyError:
        pytest.skip("this uid has no password database entry to expand ~name from")
    assert build({"memory_root": f"~{user.pw_name}/mem"}).memory_root == Path(user.pw_dir, "mem")


def test_tilde_unknown_user_is_refused() -> None:
    """An unknown ~name cannot be expanded, so it is not an absolute path."""
    assert "is not absolute" in refused({"memory_root": "~no-such-user-braind/mem"})


def test_paths_are_normalised() -> None:
    """Dot segments and trailing slashes do not survive."""
    assert build({"memory_root": "/srv//mem/./a/../b/"}).memory_root == Path("/srv/mem/b")


def test_socket_path_longer_than_af_unix_allows_is_refused() -> None:
    """sun_path holds 107 bytes plus NUL; a longer path would only fail at bind time."""
    fits = "/" + "s" * 106
    assert build({"socket": fits}).socket == Path(fits)
    message = refused({"socket": fits + "s"})
    assert message == f"socket: {fits + 's'!r} is 108 bytes; allowed: at most 107 bytes"


def test_xdg_variables_set_the_default_paths() -> None:
    """XDG_DATA_HOME, XDG_STATE_HOME and XDG_RUNTIME_DIR place the three paths."""
    env = {"HOME": HOME, "XDG_DATA_HOME": "/d", "XDG_STATE_HOME": "/s", "XDG_RUNTIME_DIR": "/run/user/7"}
    config = defaults(env)
    assert config.memory_root == Path("/d/braind")
    assert config.state_dir == Path("/s/braind")
    assert config.socket == Path("/run/user/7/braind/braind.sock")


def test_without_xdg_variables_paths_fall_back_under_home() -> None:
    """The XDG fallbacks, and a per-uid socket directory under /tmp without a runtime dir."""
    config = defaults()
    assert config.memory_root == Path(HOME, ".local/share/braind")
    assert config.state_dir == Path(HOME, ".local/state/braind")
    assert config.socket == Path(f"/tmp/braind-{os.getuid()}/braind/braind.sock")


def test_relative_xdg_variables_are_ignored() -> None:
    """The XDG spec says relative values are invalid; the fallbacks apply."""
    env = {"HOME": HOME, "XDG_DATA_HOME": "d", "XDG_STATE_HOME": "s", "XDG_RUNTIME_DIR": "r"}
    assert defaults(env) == defaults()


def test_missing_home_still_gives_absolute_paths() -> None:
    """Without $HOME the password database supplies the home directory."""
    config = defaults({})
    assert config.memory_root.is_absolute()
    assert config.state_dir.is_absolute()


def test_configured_paths_override_the_defaults() -> None:
    """Explicit paths are used as given, XDG variables notwithstanding."""
    env = {"HOME": HOME, "XDG_DATA_HOME": "/d"}
    config = build({"memory_root": "/m", "state_dir": "/s", "socket": "/r/b.sock", "projects": ["/p"]}, env)
    assert (config.memory_root, config.state_dir, config.socket) == (Path("/m"), Path("/s"), Path("/r/b.sock"))
    assert config.projects == (Path("/p"),)


# -- immutability -----------------------------------------------------------------------------------


def test_config_is_frozen() -> None:
    """Config and its sections cannot be changed after validation."""
    config = build({"projects": ["/p"]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.memory_root = Path("/elsewhere")  # type: ignore[misc]
    for name in SECTIONS:
        section = getattr(config, name)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(section, dataclasses.fields(section)[0].name, 1)
    assert isinstance(config.projects, tuple)
    assert hash(config) == hash(build({"projects": ["/p"]}))


def test_clients_look_in_the_runtime_dir_then_run_user_then_tmp() -> None:
    """The order clients search for a daemon on the default socket; the daemon binds the first of them."""
    uid = os.getuid()
    config = defaults({"HOME": HOME, "XDG_RUNTIME_DIR": "/rt"})
    assert config.client_sockets() == (
        Path("/rt/braind/braind.sock"),
        Path(f"/run/user/{uid}/braind/braind.sock"),
        Path(f"/tmp/braind-{uid}/braind/braind.sock"),
    )
    assert config.socket == config.client_sockets()[0]
    bare = defaults({})  # an MCP client that passes no environment at all
    assert bare.client_sockets() == config.client_sockets()[1:]


def test_a_named_socket_is_the_only_place_looked() -> None:
    """--socket, $BRAIND_SOCKET and the config's socket each name the one socket, in that order of precedence."""
    assert build({"socket": "/c/b.sock"}).client_sockets() == (Path("/c/b.sock"),)
    env = {**ENV, "BRAIND_SOCKET": "/e/b.sock"}
    assert build({"socket": "/c/b.sock"}, env).client_sockets() == (Path("/e/b.sock"),)
    assert build({}, env).with_socket("/o/b.sock").client_sockets() == (Path("/o/b.sock"),)
