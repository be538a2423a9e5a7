"""The systemd side: sd_notify and socket activation, the unit files, and the sandbox they ask for."""

from __future__ import annotations

import ctypes.util
import errno
import functools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from braind.config import build_config
from braind.runtime import sdnotify
from tests.conftest import today, wait_until

UNITS = Path(__file__).resolve().parent.parent / "systemd"
USER_UNITS = ("braind.service", "braind.socket")
SYSTEM_UNITS = ("braind@.service", "braind@.socket")
SERVICES = ("braind.service", "braind@.service")
SOCKETS = ("braind.socket", "braind@.socket")
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")
SD_VARS = ("NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID")
INVOCATION = "0123456789abcdef0123456789abcdef"
INSTANCE = "alice"  # not "root": the security score of User=root is worse by design

# Starts a program the way systemd starts a service: the passed sockets moved to fds 3,
# 4, ... with LISTEN_PID/LISTEN_FDS, then optionally no_new_privs, MemoryDenyWriteExecute
# (the kernel's PR_SET_MDWE) and a seccomp allow-list built from the unit's
# SystemCallFilter= and RestrictAddressFamilies=, then exec. Exit 77: no PR_SET_MDWE.
LAUNCHER = r"""
import ctypes, errno, fcntl, json, os, sys

spec = json.loads(sys.argv[1])


def place(fds):
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in fds]
    for fd in fds:
        os.close(fd)
    for target, fd in enumerate(high, 3):
        os.dup2(fd, target)
        os.close(fd)
    os.environ["LISTEN_PID"] = str(os.getpid())
    os.environ["LISTEN_FDS"] = str(len(fds))


class Cmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]


def sandbox(sb):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0):  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.prctl(65, 1, 0, 0, 0):  # PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN
        sys.exit(77)
    lib = ctypes.CDLL(sb["libseccomp"])
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(Cmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    allow = 0x7FFF0000
    ctx = lib.seccomp_init(0x00050000 | sb["errno"])
    for name in sb["syscalls"]:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr >= 0 and name != "socket" and lib.seccomp_rule_add_array(ctx, allow, nr, 0, None):
            raise OSError(errno.EINVAL, "seccomp_rule_add " + name)
    nr = lib.seccomp_syscall_resolve_name(b"socket")
    for family in sb["families"]:  # SCMP_CMP_EQ on the first argument
        lib.seccomp_rule_add_array(ctx, allow, nr, 1, ctypes.byref(Cmp(0, 4, family, 0)))
    if lib.seccomp_load(ctx):
        raise OSError(errno.EINVAL, "seccomp_load")


if spec["fds"]:
    place(spec["fds"])
os.environ.update(spec["env"])
if spec["sandbox"]:
    sandbox(spec["sandbox"])
os.execv(spec["argv"][0], spec["argv"])
"""

# Run under LAUNCHER: adopt the passed sockets, answer one queued client on each, report.
ADOPTER = r"""
import json, os
from braind.runtime.sdnotify import listen_sockets

report = {"sockets": []}
for sock in listen_sockets():
    conn, _ = sock.accept()
    with conn:
        conn.sendall(conn.recv(16).upper())
    report["sockets"].append({"fd": sock.fileno(), "family": int(sock.family), "type": int(sock.type),
                              "name": sock.getsockname(), "inheritable": sock.get_inheritable()})
report["env"] = sorted(k for k in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES") if k in os.environ)
print(json.dumps(report))
"""


# -- helpers ----------------------------------------------------------------------------------------


@pytest.fixture
def sd_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The test process as if systemd had not started it."""
    for name in (*SD_VARS, "INVOCATION_ID", "SYSTEMD_EXEC_PID"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def datagram_listener(address: str) -> socket.socket:
    """A bound AF_UNIX datagram socket standing in for systemd's notify socket."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.settimeout(10)
    return sock


def installed_braind() -> Path:
    """The `braind` console script next to this interpreter, as pip installed it."""
    candidates = [Path(sys.executable).with_name("braind"), Path(shutil.which("braind") or "/nonexistent")]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    pytest.skip("the braind console script is not installed (pip install -e .)")


def unit(name: str) -> dict[str, dict[str, list[str]]]:
    """A unit file as {section: {key: [values in order]}}; keys may repeat in systemd units."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for line in (UNITS / name).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
        else:
            key, _, value = line.partition("=")
            current.setdefault(key, []).append(value)
    return sections


def setting(name: str, section: str, key: str) -> str:
    """The one value of a key that must appear exactly once."""
    values = unit(name)[section].get(key, [])
    assert len(values) == 1, f"{name}: [{section}] {key}= should be set once, found {values}"
    return values[0]


def run_analyze(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run systemd-analyze; return stdout and stderr together, failing on a non-zero exit."""
    assert SYSTEMD_ANALYZE is not None
    result = subprocess.run(
        [SYSTEMD_ANALYZE, *args], capture_output=True, text=True, timeout=60, env=env, cwd=cwd, check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"systemd-analyze {' '.join(args)} failed:\n{output}"
    return output


def system_units_for(directory: Path, braind: Path) -> list[Path]:
    """The template units as instance files, ExecStart pointed at the installed braind."""
    paths = []
    for name in SYSTEM_UNITS:
        text = (UNITS / name).read_text(encoding="utf-8").replace("/usr/local/bin/braind", str(braind))
        path = directory / name.replace("@", f"@{INSTANCE}")
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


@functools.cache
def syscall_groups() -> dict[str, tuple[str, ...]]:
    """systemd's syscall groups (@default, @system-service, ...) with their direct members."""
    groups: dict[str, list[str]] = {}
    members: list[str] = []
    for line in run_analyze("syscall-filter").splitlines():
        if line.startswith("@"):
            members = groups.setdefault(line.strip(), [])
        elif line.startswith("    ") and not line.strip().startswith("#"):
            members.append(line.strip())
    return {name: tuple(entries) for name, entries in groups.items()}


def expand(entry: str) -> set[str]:
    """The system calls of a name or a group, nested groups expanded."""
    if not entry.startswith("@"):
        return {entry}
    return set().union(*(expand(member) for member in syscall_groups()[entry]))


def allowed_syscalls(name: str) -> set[str]:
    """What the unit's SystemCallFilter= lines let through: @default, the allow-list, minus the ~ lines."""
    allowed = expand("@default")
    for value in unit(name)["Service"]["SystemCallFilter"]:
        names = set().union(*(expand(item) for item in value.lstrip("~").split()))
        allowed = allowed - names if value.startswith("~") else allowed | names
    return allowed


# -- sd_notify --------------------------------------------------------------------------------------


def test_notify_without_notify_socket_does_nothing(sd_env: pytest.MonkeyPatch) -> None:
    """Outside systemd, notify() is a cheap no-op so the daemon can call it unconditionally."""
    assert sdnotify.notify("READY=1") is False


@pytest.mark.parametrize("form", ["path", "abstract"])
@pytest.mark.parametrize(
    "lines", [("READY=1", "STATUS=ready: 3 entries"), ("STATUS=reconciling",), ("WATCHDOG=1",), ("STOPPING=1",)]
)
def test_notify_reaches_the_notify_socket(
    sd_env: pytest.MonkeyPatch, short_tmp: Path, form: str, lines: tuple[str, ...]
) -> None:
    """One datagram with the lines joined by newlines, to a path or an abstract '@name' socket."""
    if form == "path":
        address = env_value = str(short_tmp / "notify")
    else:
        name = f"braind-test-{uuid.uuid4().hex}"
        address, env_value = "\0" + name, "@" + name
    with datagram_listener(address) as listener:
        sd_env.setenv("NOTIFY_SOCKET", env_value)
        assert sdnotify.notify(*lines) is True
        assert listener.recv(4096).decode() == "\n".join(lines)


def test_notify_to_a_vanished_socket_reports_false(sd_env: pytest.MonkeyPatch, short_tmp: Path) -> None:
    """A notify socket that is gone must not take the daemon down."""
    sd_env.setenv("NOTIFY_SOCKET", str(short_tmp / "gone"))
    assert sdnotify.notify("WATCHDOG=1") is False


@pytest.mark.parametrize("value", ["", "@", "relative/notify", "vsock:2:1234"])
def test_notify_ignores_addresses_it_cannot_use(sd_env: pytest.MonkeyPatch, value: str) -> None:
    """Empty, relative or non-Unix addresses are treated as "not supervised"."""
    sd_env.setenv("NOTIFY_SOCKET", value)
    assert sdnotify.notify("READY=1") is False


def test_notify_refuses_a_line_with_a_newline(sd_env: pytest.MonkeyPatch, short_tmp: Path) -> None:
    """A newline would smuggle a second assignment (say, a STATUS carrying MAINPID=) into the message."""
    with datagram_listener(str(short_tmp / "notify")):
        sd_env.setenv("NOTIFY_SOCKET", str(short_tmp / "notify"))
        with pytest.raises(ValueError, match="newline"):
            sdnotify.notify("STATUS=one\nMAINPID=1")


# -- socket activation ------------------------------------------------------------------------------


def launch(spec: dict[str, Any], pass_fds: tuple[int, ...], **popen: Any) -> subprocess.Popen[bytes]:
    """Start LAUNCHER with a spec; the fds in spec["fds"] must be in pass_fds."""
    return subprocess.Popen([sys.executable, "-c", LAUNCHER, json.dumps(spec)], pass_fds=pass_fds, **popen)


def test_listen_sockets_adopts_the_passed_sockets_in_order(short_tmp: Path) -> None:
    """fds 3 and 4 come back as listening sockets, close-on-exec, with LISTEN_* removed."""
    paths = [str(short_tmp / "a.sock"), str(short_tmp / "b.sock")]
    listeners = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in paths]
    clients = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in paths]
    try:
        for listener, client, path, word in zip(listeners, clients, paths, (b"a", b"b"), strict=True):
            listener.bind(path)
            listener.listen()
            client.settimeout(30)
            client.connect(path)  # queued in the backlog until the child accepts
            client.sendall(word)
        fds = tuple(s.fileno() for s in listeners)
        spec = {"fds": fds, "env": {"LISTEN_FDNAMES": "a:b"}, "sandbox": None, "argv": [sys.executable, "-c", ADOPTER]}
        with launch(spec, fds, stdout=subprocess.PIPE) as proc:
            out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        assert [c.recv(16) for c in clients] == [b"A", b"B"]
    finally:
        for s in (*listeners, *clients):
            s.close()
    report = json.loads(out)
    assert report["env"] == []
    assert [s["fd"] for s in report["sockets"]] == [3, 4]
    assert [s["name"] for s in report["sockets"]] == paths
    for adopted in report["sockets"]:
        assert (adopted["family"], adopted["type"]) == (socket.AF_UNIX, socket.SOCK_STREAM)
        assert adopted["inheritable"] is False


def test_listen_sockets_without_activation_is_empty(sd_env: pytest.MonkeyPatch) -> None:
    """Started by hand, there is nothing to adopt and the daemon binds the socket itself."""
    assert sdnotify.listen_sockets() == []


@pytest.mark.parametrize(
    ("pid", "fds"), [("1", "1"), ("ours", "not-a-number"), ("ours", "0"), ("ours", "-2"), ("garbage", "1")]
)
def test_listen_sockets_ignores_variables_not_meant_for_us(sd_env: pytest.MonkeyPatch, pid: str, fds: str) -> None:
    """Another process's LISTEN_PID or a bad LISTEN_FDS adopts nothing, and the variables are dropped."""
    sd_env.setenv("LISTEN_PID", str(os.getpid()) if pid == "ours" else pid)
    sd_env.setenv("LISTEN_FDS", fds)
    sd_env.setenv("LISTEN_FDNAMES", "braind")
    assert sdnotify.listen_sockets() == []
    assert not any(name in os.environ for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"))


# -- watchdog and detection -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usec", "pid", "expected"),
    [
        (None, None, None),
        ("30000000", None, 15.0),
        ("30000000", "ours", 15.0),
        ("30000000", "1", None),
        ("0", None, None),
        ("-5", None, None),
        ("soon", None, None),
        ("500000", "not-a-pid", None),
    ],
)
def test_watchdog_interval_is_half_of_watchdogsec(
    sd_env: pytest.MonkeyPatch, usec: str | None, pid: str | None, expected: float | None
) -> None:
    """Ping at half the timeout, as sd_watchdog_enabled(3) recommends; only when it is ours."""
    if usec is not None:
        sd_env.setenv("WATCHDOG_USEC", usec)
    if pid is not None:
        sd_env.setenv("WATCHDOG_PID", str(os.getpid()) if pid == "ours" else pid)
    assert sdnotify.watchdog_interval() == expected


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({}, False),
        ({"INVOCATION_ID": INVOCATION}, True),  # systemd before 248 sets no SYSTEMD_EXEC_PID
        ({"INVOCATION_ID": INVOCATION, "SYSTEMD_EXEC_PID": "ours"}, True),
        ({"INVOCATION_ID": INVOCATION, "SYSTEMD_EXEC_PID": "1"}, False),  # a shell in a terminal service
        ({"NOTIFY_SOCKET": "/run/systemd/notify"}, True),
        ({"LISTEN_PID": "ours"}, True),
        ({"LISTEN_PID": "1"}, False),
    ],
)
def test_under_systemd(sd_env: pytest.MonkeyPatch, variables: dict[str, str], expected: bool) -> None:
    """`braind start` uses this to refuse detaching from systemd's supervision, and only then."""
    for name, value in variables.items():
        sd_env.setenv(name, str(os.getpid()) if value == "ours" else value)
    assert sdnotify.under_systemd() is expected


# -- the unit files ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SERVICES)
def test_services_are_notify_services_with_a_watchdog(name: str) -> None:
    """READY=1 from the main process ends start-up; a hang or a crash restarts the daemon."""
    assert setting(name, "Service", "Type") == "notify"
    assert setting(name, "Service", "NotifyAccess") == "main"
    assert setting(name, "Service", "Restart") == "on-failure"
    assert re.fullmatch(r"[1-9]\d*s", setting(name, "Service", "WatchdogSec"))


@pytest.mark.parametrize(
    ("service", "socket_unit"), [("braind.service", "braind.socket"), ("braind@.service", "braind@%i.socket")]
)
def test_services_require_their_socket(service: str, socket_unit: str) -> None:
    """The socket unit owns the path, so only one thing ever binds it."""
    assert setting(service, "Unit", "Requires") == socket_unit
    assert setting(service, "Unit", "After") == socket_unit
    assert setting(service, "Install", "Also") == socket_unit


@pytest.mark.parametrize("name", SOCKETS)
def test_sockets_are_private(name: str) -> None:
    """The socket is 0600; the user's own directory is 0700 (the system one is root's, see below)."""
    assert setting(name, "Socket", "SocketMode") == "0600"
    expected = "0700" if name == "braind.socket" else "0711"
    assert setting(name, "Socket", "DirectoryMode") == expected


def test_system_socket_belongs_to_the_instance_user() -> None:
    """systemd creates /run/braind as root, so the node itself must be the user's to connect to it."""
    assert setting("braind@.socket", "Socket", "SocketUser") == "%i"


def test_user_socket_is_the_configured_default() -> None:
    """%t is $XDG_RUNTIME_DIR in the user manager: the unit listens where clients look by default."""
    listen = setting("braind.socket", "Socket", "ListenStream")
    runtime = "/run/user/1000"
    assert listen.replace("%t", runtime) == str(build_config({}, {"HOME": "/h", "XDG_RUNTIME_DIR": runtime}, "").socket)


def test_system_service_is_told_the_socket_units_path() -> None:
    """Without XDG_RUNTIME_DIR in a system service, the daemon learns the path from --socket."""
    listen = setting("braind@.socket", "Socket", "ListenStream")
    assert setting("braind@.service", "Service", "ExecStart").split() == [
        "/usr/local/bin/braind",
        "serve",
        "--socket",
        listen,
    ]


def test_user_service_runs_the_user_installed_braind() -> None:
    """pip install --user and pipx put the script in ~/.local/bin."""
    assert setting("braind.service", "Service", "ExecStart") == "%h/.local/bin/braind serve"


def test_system_service_runs_as_the_instance_user_on_their_home() -> None:
    """braind@alice runs as alice and can write only alice's home."""
    assert setting("braind@.service", "Service", "User") == "%i"
    assert setting("braind@.service", "Service", "ProtectSystem") == "strict"
    assert setting("braind@.service", "Service", "ProtectHome") == "tmpfs"
    assert setting("braind@.service", "Service", "BindPaths") == "/home/%i"
    assert setting("braind@.service", "Unit", "RequiresMountsFor") == "/home/%i"


@needs_analyze
@pytest.mark.parametrize("name", SERVICES)
def test_syscall_filter_keeps_what_the_daemon_needs(name: str) -> None:
    """inotify, durable writes, the socket server and Python's threads all pass the filter."""
    needed = {
        "inotify_init1",
        "inotify_add_watch",
        "inotify_rm_watch",  # the watcher
        "openat",
        "write",
        "fsync",
        "fdatasync",
        "rename",
        "renameat2",
        "unlink",
        "mkdir",
        "flock",  # files
        "accept4",
        "getsockopt",
        "sendto",
        "recvfrom",
        "poll",
        "epoll_wait",
        "socketpair",  # the server
        "clone3",
        "futex",
        "mmap",
        "mprotect",
        "getrandom",
        "execve",  # CPython
    }
    assert needed - allowed_syscalls(name) == set()


@needs_analyze
def test_user_units_verify(tmp_path: Path) -> None:
    """`systemd-analyze verify --user` is clean, with ~/.local/bin/braind the installed script."""
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "braind").symlink_to(installed_braind())
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)  # the user manager refuses to start without $XDG_RUNTIME_DIR
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)}
    output = run_analyze("verify", "--user", *(str(UNITS / n) for n in USER_UNITS), env=env, cwd=tmp_path)
    assert output == ""


@needs_analyze
def test_system_units_verify(tmp_path: Path) -> None:
    """`systemd-analyze verify` is clean for an instance, ExecStart pointed at the installed script."""
    paths = system_units_for(tmp_path, installed_braind())
    assert run_analyze("verify", *map(str, paths), cwd=tmp_path) == ""


@needs_analyze
def test_system_service_exposure_is_at_most_1_5(tmp_path: Path) -> None:
    """The sandbox keeps `systemd-analyze security` in the SAFE band, with margin."""
    service = system_units_for(tmp_path, installed_braind())[0]
    output = run_analyze("security", "--offline=true", str(service), cwd=tmp_path)
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", output)
    assert match, output
    assert float(match.group(1)) <= 1.5, output


# -- the daemon under the unit's conditions ---------------------------------------------------------


def sandbox_spec(name: str) -> dict[str, Any]:
    """The launcher's sandbox settings, read from the unit so the test follows the unit."""
    library = ctypes.util.find_library("seccomp")
    if library is None:
        pytest.skip("libseccomp is not installed, so SystemCallFilter= cannot be emulated")
    service = unit(name)["Service"]
    assert service["MemoryDenyWriteExecute"] == ["yes"] and service["NoNewPrivileges"] == ["yes"]
    families = [int(getattr(socket, family)) for family in service["RestrictAddressFamilies"][0].split()]
    return {
        "libseccomp": library,
        "syscalls": sorted(allowed_syscalls(name)),
        "families": families,
        "errno": getattr(errno, service["SystemCallErrorNumber"][0]),
    }


# Run under LAUNCHER's sandbox: what the unit forbids must fail, what braind needs must work.
PROBE = r"""
import json, mmap, os, socket, tempfile

def attempt(action):
    try:
        action()
    except OSError as exc:
        return exc.errno
    return 0

directory = tempfile.mkdtemp()
path = os.path.join(directory, "f")
open(path, "w").close()
print(json.dumps({
    "inet": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()),
    "unix": attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()),
    "wx": attempt(lambda: mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)),
    "setpriority": attempt(lambda: os.setpriority(os.PRIO_PROCESS, 0, 1)),
    "chown": attempt(lambda: os.chown(path, os.getuid(), os.getgid())),
    "fsync": attempt(lambda: os.fsync(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW))),
}))
"""


@needs_analyze
def test_emulated_sandbox_is_not_a_no_op() -> None:
    """The launcher really applies the unit's filter, so the daemon test below proves something."""
    spec = {"fds": [], "env": {}, "sandbox": sandbox_spec("braind@.service"), "argv": [sys.executable, "-c", PROBE]}
    with launch(spec, (), stdout=subprocess.PIPE) as proc:
        out, _ = proc.communicate(timeout=60)
    if proc.returncode == 77:
        pytest.skip("this kernel has no PR_SET_MDWE (Linux 6.3+) to emulate MemoryDenyWriteExecute=")
    assert json.loads(out) == {
        "inet": errno.EPERM,  # RestrictAddressFamilies=AF_UNIX (systemd answers EAFNOSUPPORT)
        "unix": 0,
        "wx": errno.EACCES,  # MemoryDenyWriteExecute=
        "setpriority": errno.EPERM,  # ~@resources
        "chown": errno.EPERM,  # ~@privileged, even for root
        "fsync": 0,
    }


def rpc(path: Path, method: str, **params: Any) -> Any:
    """One JSON-RPC call over the daemon's socket; the result, or an AssertionError with the error."""
    request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        sock.sendall(json.dumps(request).encode() + b"\n")
        reply = sock.makefile("rb").readline()
    message = json.loads(reply)
    assert "result" in message, message
    return message["result"]


class Supervisor:
    """Plays systemd for one `braind serve`: the notify socket, the listening socket, the signals."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.socket_path = base / "braind.sock"
        self.root = base / "root"
        self.notify = datagram_listener(str(base / "notify"))
        self.seen: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = base / "daemon.log"

    def start(self, braind: Path, sandbox: dict[str, Any] | None) -> None:
        """Bind the socket as braind.socket would, and start the service with it."""
        config = self.base / "braind.yaml"
        settings = {
            "memory_root": str(self.root),
            "state_dir": str(self.base / "state"),
            "socket": str(self.socket_path),
            "watcher": {"quiet_ms": 50, "max_wait_ms": 300},
            "index": {"commit_ms": 100},
        }
        config.write_text(yaml.safe_dump(settings), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k not in SD_VARS}
        env.update({"HOME": str(self.base), "INVOCATION_ID": uuid.uuid4().hex, "PYTHONFAULTHANDLER": "1"})
        spec_env = {"NOTIFY_SOCKET": str(self.base / "notify"), "WATCHDOG_USEC": "400000"}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener, self.log.open("wb") as log:
            listener.bind(str(self.socket_path))
            listener.listen()
            spec = {
                "fds": [listener.fileno()],
                "env": spec_env,
                "sandbox": sandbox,
                "argv": [str(braind), "serve", "--config", str(config)],
            }
            self.proc = launch(spec, (listener.fileno(),), env=env, stdout=log, stderr=subprocess.STDOUT)

    def wait_for(self, line: str, timeout: float = 60) -> None:
        """Receive notifications until one carries `line`; fail early if the daemon has exited without it."""

        def seen() -> bool:
            self._drain()
            if line in self.seen:
                return True
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"braind exited with {self.proc.returncode}:\n{self.log_text()}")
            return False

        wait_until(seen, timeout, f"{line} on the notify socket")

    def _drain(self) -> None:
        """Read every notification waiting on the socket."""
        self.notify.settimeout(0.1)
        while True:
            try:
                self.seen.extend(self.notify.recv(4096).decode().split("\n"))
            except TimeoutError:
                return

    def log_text(self) -> str:
        """What the daemon wrote to stdout and stderr."""
        return self.log.read_text(encoding="utf-8", errors="replace")

    def close(self) -> None:
        """Kill the daemon if a test left it running, and close the notify socket."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(timeout=30)
        self.notify.close()


@pytest.fixture
def supervisor(short_tmp: Path) -> Iterator[Supervisor]:
    """A Supervisor in a short directory, cleaned up after the test."""
    sup = Supervisor(short_tmp)
    yield sup
    sup.close()


def proc_status(pid: int) -> dict[str, str]:
    """/proc/<pid>/status as a mapping."""
    text = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def hits(sock: Path, query: str) -> list[str]:
    """The texts brain_recall returns for a query."""
    return [hit["text"] for hit in rpc(sock, "brain_recall", query=query)["hits"]]


@needs_analyze
@pytest.mark.parametrize("sandboxed", [False, True], ids=["plain", "sandboxed"])
def test_daemon_runs_as_the_unit_starts_it(supervisor: Supervisor, sandboxed: bool) -> None:
    """Socket activation, READY=1, watchdog pings, inotify, durable writes and STOPPING=1 on SIGTERM.

    Sandboxed, the daemon also runs under no_new_privs, the kernel's MemoryDenyWriteExecute
    and a seccomp filter built from braind@.service. A test cannot have systemd run the
    unit, so this is the part of its sandbox that can be reproduced (the mount and user
    namespaces are not); the "plain" run tells a sandbox failure from a daemon failure.
    """
    sandbox = sandbox_spec("braind@.service") if sandboxed else None
    supervisor.start(installed_braind(), sandbox)
    assert supervisor.proc is not None
    try:
        supervisor.wait_for("READY=1")
    except AssertionError:
        if sandboxed and supervisor.proc.returncode == 77:
            pytest.skip("this kernel has no PR_SET_MDWE (Linux 6.3+) to emulate MemoryDenyWriteExecute=")
        raise
    if sandboxed:
        status = proc_status(supervisor.proc.pid)
        assert (status["NoNewPrivs"], status["Seccomp"]) == ("1", "2")
    assert rpc(supervisor.socket_path, "status")["version"]

    diary = supervisor.root / "diary" / f"{today()}.md"
    diary.parent.mkdir(parents=True, exist_ok=True)
    diary.write_text("[09:00] the sandbox keeps inotify working\n", encoding="utf-8")
    wait_until(lambda: hits(supervisor.socket_path, "sandbox inotify"), 30, "the edited line to be recallable")
    assert rpc(supervisor.socket_path, "brain_note", text="noted through the socket")["fp"]
    assert hits(supervisor.socket_path, "noted through")
    assert rpc(supervisor.socket_path, "reindex")

    supervisor.wait_for("WATCHDOG=1", timeout=10)  # WATCHDOG_USEC is 0.4 s: a ping every 0.2 s
    supervisor.proc.send_signal(signal.SIGTERM)
    assert supervisor.proc.wait(timeout=60) == 0, supervisor.log_text()
    supervisor.wait_for("STOPPING=1")
    for symptom in ("Operation not permitted", "PermissionError", "Bad system call"):
        assert symptom not in supervisor.log_text()
