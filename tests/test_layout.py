"""The package's shape stays what docs/architecture.md says: packages by concern, no cycles, small modules.

These read the source with `ast`; nothing is imported, so a cycle that Python would
tolerate at run time (a function-level or TYPE_CHECKING import) is still found.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "braind"
MAX_LINES = 600
SUBPACKAGES = {"model", "files", "index", "ingest", "services", "rpc", "runtime", "faces"}
TOP_MODULES = {"__init__", "__main__", "config", "errors"}
# What each layer may import from braind (besides itself, config and errors): the data flow, top to bottom.
ALLOWED = {
    "model": set(),
    "files": {"model"},
    "index": {"model"},
    "ingest": {"model", "files", "index"},
    "services": {"model", "files", "index", "ingest"},
    "rpc": {"model", "services"},
    "runtime": {"model", "files", "index", "ingest", "services", "rpc"},
    "faces": {"model", "files", "ingest", "rpc", "runtime"},  # offline commands load files as the daemon does
}


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imported(path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The braind modules a module imports anywhere in it (function level and TYPE_CHECKING included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: braind imports absolutely"
            base = node.module or ""
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        yield from (name for name in names if name in known)


def graph() -> dict[str, set[str]]:
    """Module name to the braind modules it imports."""
    known = modules()
    return {name: set(imported(path, known)) - {name} for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in edges.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def layer(module: str) -> str:
    """The subpackage a module belongs to, or its own name for a top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in SUBPACKAGES else "braind"


def test_the_package_is_its_subpackages_and_a_few_top_level_modules() -> None:
    top = {p.stem for p in PACKAGE.glob("*.py")}
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert top == TOP_MODULES
    assert packages == SUBPACKAGES


def test_no_module_name_stands_in_for_a_package() -> None:
    """`layered_tools.py` beside `layered.py` is a package in disguise."""
    stems = [p.stem for p in PACKAGE.rglob("*.py") if not p.stem.startswith("__")]
    assert [s for s in stems if "_" in s] == []


def test_there_are_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(modules()))
def test_no_module_is_over_the_size_limit(name: str) -> None:
    lines = modules()[name].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{name} has {lines} lines"


def test_each_layer_imports_only_the_layers_below_it() -> None:
    wrong = []
    for module, targets in graph().items():
        mine = layer(module)
        for target in targets:
            theirs = layer(target)
            if theirs in (mine, "braind") or mine == "braind" or theirs in ALLOWED.get(mine, set()):
                continue
            wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_loggers_are_named_for_their_module() -> None:
    named = []
    for path in PACKAGE.rglob("*.py"):
        for call in re.findall(r"getLogger\(([^)]*)\)", path.read_text(encoding="utf-8")):
            if call != "__name__":
                named.append(f"{path.relative_to(REPO)}: getLogger({call})")
    assert named == []


def test_no_module_reaches_into_another_objects_private_fields() -> None:
    """`x._name` on anything but self or cls belongs in the one module that reaches into Whoosh."""
    compat = PACKAGE / "index" / "whoosh" / "compat.py"
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == compat:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute) or not re.match(r"_[^_]", node.attr):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                continue
            if isinstance(owner, ast.Name) and owner.id == "os" and node.attr == "_exit":
                continue  # the documented way to end a forked child
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def whoosh_importers() -> list[str]:
    """The modules that import Whoosh itself."""
    found = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            if "whoosh" in roots:
                found.append(name)
                break
    return sorted(found)


def test_only_the_engine_package_imports_whoosh() -> None:
    outside = [name for name in whoosh_importers() if not name.startswith("braind.index.whoosh.")]
    assert outside == []
    assert "braind.index.whoosh.compat" in whoosh_importers()


def test_services_reach_the_index_only_through_its_interface() -> None:
    """Services, the syncer and the faces see `index.api` (and the engine-free helpers), never the engine."""
    engine = ("braind.index.whoosh", "braind.index.partitioned", "braind.index.rebuilding")
    wrong = [
        f"{module} -> {target}"
        for module, targets in graph().items()
        if layer(module) not in ("index", "runtime")
        for target in targets
        if target.startswith(engine)
    ]
    assert wrong == []


def test_an_untested_whoosh_is_refused_with_what_to_do() -> None:
    from braind.errors import Unavailable
    from braind.index.whoosh import compat

    compat.check_version(compat.WHOOSH_VERSION)
    with pytest.raises(Unavailable) as refused:
        compat.check_version("2.7.4")
    assert refused.value.reason == "whoosh_version"
    assert "2.7.4" in refused.value.message and compat.WHOOSH_VERSION in refused.value.message
    assert "reinstall" in refused.value.message


def test_the_whoosh_pin_is_the_version_compat_was_written_for() -> None:
    import tomllib

    from braind.index.whoosh import compat

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert f"{compat.DISTRIBUTION}=={compat.WHOOSH_VERSION}" in project["dependencies"]
    assert compat.installed_version() == compat.WHOOSH_VERSION
