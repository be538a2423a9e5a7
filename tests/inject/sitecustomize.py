"""ENOSPC on cue inside a real daemon: loaded through PYTHONPATH by `tests/test_faults_steps.py` only.

A full disk at one chosen step of a write cannot be had from a real filesystem (a tmpfs fills
up for every file at once), so the daemon under test is started with this module on its path.
It wraps the os calls braind writes with (open with O_CREAT, write, pwrite, fsync, link, rename,
replace, mkdir, and fsutil.exchange) for files below $BRAIND_TEST_ROOT and reads a plan from the
JSON file $BRAIND_TEST_INJECT whenever that file changes:

- {"record": PATH}: append "call name" to PATH for every such call (name: the file's base name,
  braind's per-write temp suffix `-<pid>-<n>` dropped);
- {"fail": [call, name, k]}: the k-th such call on that name, counted from when the plan was
  written, raises OSError(ENOSPC); every other call runs as it would.
"""

from __future__ import annotations

import errno
import importlib.abc
import json
import os
import re
import sys
import threading
from collections.abc import Callable
from typing import Any

_CONTROL = os.environ.get("BRAIND_TEST_INJECT")
_ROOT = os.environ.get("BRAIND_TEST_ROOT", "/nonexistent")
_REAL = {name: getattr(os, name) for name in ("open", "write", "pwrite", "fsync", "link", "rename", "replace", "mkdir")}
_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"stamp": None, "plan": {}, "counts": {}}


def _plan() -> dict[str, Any]:
    """The current plan, re-read when its file changed (counts start again then)."""
    try:
        info = os.stat(_CONTROL or "")
    except OSError:
        return {}
    stamp = (info.st_mtime_ns, info.st_size)
    if stamp != _STATE["stamp"]:
        with open(_CONTROL or "", encoding="utf-8") as f:
            text = f.read()
        _STATE.update(stamp=stamp, plan=json.loads(text) if text.strip() else {}, counts={})
    return dict(_STATE["plan"])


def _plain(name: str) -> str:
    """A base name, braind's per-write temp suffix dropped."""
    return re.sub(r"(\.braind-(?:tmp|old))-\d+-\d+$", r"\1", os.path.basename(name))


def _at(name: Any, dir_fd: Any) -> str | None:
    """The full path a name-based call touches, when it is below the root."""
    if not isinstance(name, str | bytes):
        return None
    name = os.fsdecode(name)
    if dir_fd is not None and not name.startswith("/"):
        try:
            name = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), name)
        except OSError:
            return None
    return name if name.startswith(_ROOT) else None


def _of_fd(fd: Any) -> str | None:
    """The full path an fd-based call touches, when it is below the root."""
    try:
        path = os.readlink(f"/proc/self/fd/{fd}").removesuffix(" (deleted)")
    except (OSError, TypeError):
        return None
    return path if path.startswith(_ROOT) else None


def _check(call: str, path: str | None) -> None:
    """Record the call, or fail it when the plan says this is the one."""
    if path is None:
        return
    name = _plain(path)
    with _LOCK:
        plan = _plan()
        if "record" in plan:
            with open(plan["record"], "a", encoding="utf-8") as f:
                f.write(f"{call} {name}\n")
        fail = plan.get("fail")
        if not fail or fail[0] != call or fail[1] != name:
            return
        counts = _STATE["counts"]
        counts[name] = counts.get(name, 0) + 1
        if counts[name] != fail[2]:
            return
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _wrap(call: str, where: Callable[..., str | None]) -> Callable[..., Any]:
    """A stand-in for one os function."""
    real = _REAL[call]

    def wrapped(*args: Any, **kw: Any) -> Any:
        _check(call, where(*args, **kw))
        return real(*args, **kw)

    return wrapped


def _open_at(path: Any, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> str | None:
    """os.open counts only when it creates the file (opening one that exists needs no room)."""
    where = _at(path, dir_fd) if flags & os.O_CREAT else None
    return where if where is not None and not os.path.lexists(where) else None


def _mkdir_at(path: Any, mode: int = 0o777, *, dir_fd: Any = None) -> str | None:
    """os.mkdir counts only when the directory is not there (else it fails with EEXIST first)."""
    where = _at(path, dir_fd)
    return where if where is not None and not os.path.lexists(where) else None


def _to(src: Any, dst: Any, *, src_dir_fd: Any = None, dst_dir_fd: Any = None, **_: Any) -> str | None:
    """link, rename, replace: the destination."""
    return _at(dst, dst_dir_fd)


class _Patcher(importlib.abc.MetaPathFinder):
    """Wraps braind.files.durable.exchange (a ctypes call) as soon as braind.files.durable is imported."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "braind.files.durable":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = spec.loader if spec else None
        if loader is None:
            return spec
        execute = loader.exec_module

        def exec_module(module: Any) -> None:
            execute(module)
            real = module.exchange

            def exchange(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> bool:
                try:
                    _check("exchange", _at(dst, dst_dir_fd))
                except OSError as exc:  # what fsutil.exchange makes of a failing renameat2
                    raise module.BraindError("io_error", f"cannot swap {src} and {dst}: {exc.strerror}") from None
                return bool(real(src_dir_fd, src, dst_dir_fd, dst))

            module.exchange = exchange

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if _CONTROL:
    import importlib.util

    os.open = _wrap("open", _open_at)  # type: ignore[assignment]
    os.write = _wrap("write", lambda fd, data: _of_fd(fd))  # type: ignore[assignment]
    os.pwrite = _wrap("pwrite", lambda fd, data, offset: _of_fd(fd))  # type: ignore[assignment]
    os.fsync = _wrap("fsync", _of_fd)  # type: ignore[assignment]
    os.link = _wrap("link", _to)  # type: ignore[assignment]
    os.rename = _wrap("rename", _to)  # type: ignore[assignment]
    os.replace = _wrap("replace", _to)  # type: ignore[assignment]
    os.mkdir = _wrap("mkdir", _mkdir_at)  # type: ignore[assignment]
    sys.meta_path.insert(0, _Patcher())
