"""What the daemon remembers about entries, kept as plain text under `<root>/.braind/`.

The Markdown files hold the entries; this holds what happened to them, so a
copied root carries it and a rebuilt index recovers it. Every file is
append-only, one JSON object per line, and read back in full at start:

- ``state.log``: one change to one entry per line, ``{"at", "op", "fp", ...}``
  with ``op`` one of ``tombstone`` (``why``: remove, edit, key, compact,
  undo; ``by``: the entry that superseded it), ``revive``, ``pin``, ``unpin``,
  ``weight`` (``value``), or ``undo`` (reverses the newest change of ``fp``
  not yet undone). Written and fsynced before the request is answered.
- ``uses.log``: ``{"at", "uses": {fp: n}}``, use counts (an entry returned
  by recall or injected by a trigger is used once), and
- ``turns.log``: ``{"at", "session", "turn", "triggers"}``, the trigger
  strings of each injected turn, which workflow chains are built from; both
  are written in batches within ``FLUSH_SECONDS`` and at shutdown (a crash
  loses at most those seconds of counts, never an entry or a tombstone).
- an ``intent`` line in ``state.log`` (``{"op": "intent", "id", "path",
  "line", "size", "then"}``) comes before a diary line whose state change must follow
  it (an edit, a same-key note): the changes carry ``"intent": id``. An
  intent with no such change was cut short (a crash, a full disk): when the
  root is next used its line is looked for, and the changes are written if
  it is there, or the intent is closed (``"op": "void"``) if it is not.
- ``compact.log``: one line per compaction decision for people to read:
  ``TIMESTAMP FP RULE ACTION DETAIL``. It is written after the state change
  it reports; the state lines of evictions and de-weightings carry the rule
  and the detail, so a compact.log that missed some (a crash between the two
  appends, a full disk) is completed from state.log when the root is first
  used and after the next successful append.

A line that cannot be read (a torn last line after a crash, a bad hand edit)
is skipped with a warning; the rest still counts.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import stat
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from braind.errors import BraindError, Rejected
from braind.files.durable import Appended, append_line, retract
from braind.files.validate import open_dir
from braind.model.roots import Root

log = logging.getLogger(__name__)

STATE_DIR = ".braind"
STATE_LOG = "state.log"
USES_LOG = "uses.log"
TURNS_LOG = "turns.log"
COMPACT_LOG = "compact.log"
TURNS_KEPT = 1000
FLUSH_SECONDS = 2.0
OPS = ("tombstone", "revive", "pin", "unpin", "weight", "undo")
_MAX_LINE = 1 << 20


def utc_now() -> str:
    """A UTC timestamp to the second, as every state line carries."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def compact_line(fp: str, rule: int, action: str, detail: str) -> str:
    """One compact.log line: timestamp, fingerprint, rule, action and why."""
    return f"{utc_now()} {fp} rule{rule} {action} {detail}"


@dataclass
class Mark:
    """Everything known about one entry beyond its text: the fold of its changes, and its uses."""

    changes: list[dict[str, Any]] = field(default_factory=list)
    uses: int = 0
    last_used: str | None = None

    @property
    def tombstone(self) -> dict[str, Any] | None:
        """The change that tombstoned the entry, or None while it is live."""
        found = None
        for change in self.changes:
            if change["op"] == "tombstone":
                found = change
            elif change["op"] == "revive":
                found = None
        return found

    @property
    def pinned(self) -> bool:
        """Pinned by the newest pin or unpin."""
        flags = [c["op"] == "pin" for c in self.changes if c["op"] in ("pin", "unpin")]
        return bool(flags and flags[-1])

    @property
    def weight(self) -> float:
        """The newest weight set (by compaction), 1.0 otherwise."""
        values = [float(c["value"]) for c in self.changes if c["op"] == "weight"]
        return values[-1] if values else 1.0

    @property
    def status(self) -> str:
        """live, pinned or tombstoned: a tombstone wins over a pin (undo brings the pin back)."""
        return "tombstoned" if self.tombstone else "pinned" if self.pinned else "live"


@dataclass(frozen=True)
class Turn:
    """The trigger strings of one injected turn."""

    at: str
    session: str
    turn: str | int | None
    triggers: tuple[str, ...]


class RootState:
    """The state files of one root, loaded into memory and appended to under a lock."""

    def __init__(self, root: Root, claim: Callable[[Root], None] | None = None) -> None:
        self.root = root
        self.claim = claim or (lambda root: None)  # the daemon holds a root's lock before writing into it
        self._compact_behind = False
        self.marks: dict[str, Mark] = {}
        self.superseded: dict[str, str] = {}  # new fp -> the fp it superseded
        self.turns: list[Turn] = []
        self.version = 0
        self._pending_uses: dict[str, int] = {}
        self._pending_turns: list[dict[str, Any]] = []
        self.intents: dict[str, dict[str, Any]] = {}  # intents whose changes are not written yet
        self._lock = threading.RLock()
        self._uses_lock = threading.Lock()  # the pending uses only: a recall counting them never waits on a flush
        self._load()

    # -- reading -------------------------------------------------------------------

    def _load(self) -> None:
        """Replay every state file of the root; a missing file is an empty history."""
        for record in self._records(STATE_LOG):
            self._intent(record)
            self._apply(record)
        for record in self._records(USES_LOG):
            self._count(record.get("uses", {}), str(record.get("at", "")))
        for record in self._records(TURNS_LOG):
            self._remember(record)

    def _records(self, name: str) -> Iterator[dict[str, Any]]:
        """The JSON objects of one state file; unreadable lines are logged and skipped."""
        path = self.root.path / STATE_DIR / name
        try:
            text = _read(self.root.path, name)
        except FileNotFoundError:
            return
        except Rejected as exc:
            if exc.reason != "not_found":
                log.warning("cannot read %s: %s; its history is ignored until it can be read", path, exc.message)
            return
        except OSError as exc:
            log.warning("cannot read %s: %s; its history is ignored until it can be read", path, exc)
            return
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                log.warning("%s:%d: not a JSON object; line skipped", path, number)
                continue
            if isinstance(record, dict):
                yield record
            else:
                log.warning("%s:%d: not a JSON object; line skipped", path, number)

    def _apply(self, record: Mapping[str, Any]) -> None:
        """Fold one state change into the entry's mark."""
        op, fp = record.get("op"), record.get("fp")
        if op not in OPS or not isinstance(fp, str) or not fp:
            return
        mark = self.marks.setdefault(fp, Mark())
        if op == "undo":
            if mark.changes:
                mark.changes.pop()
        else:
            mark.changes.append(dict(record))
        by = record.get("by")
        if op == "tombstone" and isinstance(by, str) and record.get("why") == "edit":
            self.superseded[by] = fp
        self.version += 1

    def _intent(self, record: Mapping[str, Any]) -> None:
        """Keep an intent until a record that carries its id closes it."""
        if record.get("op") == "intent" and isinstance(record.get("id"), str):
            self.intents[record["id"]] = dict(record)
        elif isinstance(record.get("intent"), str):
            self.intents.pop(record["intent"], None)

    def _count(self, uses: Any, at: str) -> None:
        """Add use counts to the marks."""
        if not isinstance(uses, dict):
            return
        for fp, n in uses.items():
            if isinstance(fp, str) and isinstance(n, int) and n > 0:
                mark = self.marks.setdefault(fp, Mark())
                mark.uses += n
                mark.last_used = max(mark.last_used or "", at) or None

    def _remember(self, record: Mapping[str, Any]) -> None:
        """Keep one turn's triggers, the newest TURNS_KEPT only."""
        triggers = record.get("triggers")
        if not isinstance(triggers, list) or not all(isinstance(t, str) for t in triggers):
            return
        turn = record.get("turn")
        self.turns.append(
            Turn(
                str(record.get("at", "")),
                str(record.get("session", "")),
                turn if isinstance(turn, str | int) and not isinstance(turn, bool) else None,
                tuple(triggers),
            )
        )
        del self.turns[:-TURNS_KEPT]

    # -- queries -------------------------------------------------------------------

    def mark(self, fp: str) -> Mark:
        """The mark of an entry (an empty one when nothing happened to it)."""
        with self._lock:
            mark = self.marks.get(fp)
            return Mark([dict(c) for c in mark.changes], mark.uses, mark.last_used) if mark else Mark()

    def status(self, fp: str) -> str:
        """live, pinned or tombstoned."""
        with self._lock:
            mark = self.marks.get(fp)
            return mark.status if mark else "live"

    def statuses(self, fps: Iterable[str]) -> list[str]:
        """The status of each entry, under one lock: a day of a few hundred entries asks at every note."""
        with self._lock:
            marks = self.marks
            return [mark.status if (mark := marks.get(fp)) and mark.changes else "live" for fp in fps]

    def marked(self) -> dict[str, str]:
        """fp -> status of every entry whose status is not live."""
        with self._lock:
            return {fp: m.status for fp, m in self.marks.items() if m.status != "live"}

    # -- writing -------------------------------------------------------------------

    def record(self, changes: Sequence[Mapping[str, Any]]) -> Appended | None:
        """Append changes to state.log in one durable write, then fold them in; where they landed."""
        if not changes:
            return None
        at = utc_now()
        lines = [{"at": at, **change} for change in changes]
        with self._lock:
            done = self._append(STATE_LOG, "\n".join(_dumps(line) for line in lines))
            for line in lines:
                self._intent(line)
                self._apply(line)
        return done

    def intend(self, path: str, line: str, size: int, then: Sequence[Mapping[str, Any]]) -> str:
        """Write (durably) that a line is about to be appended to a file of `size` bytes, and what must follow it."""
        intent = {
            "op": "intent",
            "id": os.urandom(6).hex(),
            "path": path,
            "line": line,
            "size": size,
            "then": list(then),
        }
        self.record([intent])
        return str(intent["id"])

    def use(self, fps: Sequence[str]) -> None:
        """Count uses in memory; flush() writes them out."""
        with self._uses_lock:
            for fp in fps:
                self._pending_uses[fp] = self._pending_uses.get(fp, 0) + 1

    def flush(self) -> None:
        """Write the counted uses and the remembered turns (one append each), folding the uses in."""
        if not _is_directory(self.root.path):  # a root moved away or unmounted must not be recreated for counts
            return
        with self._lock:
            turns, self._pending_turns = self._pending_turns, []
            with self._uses_lock:
                uses, self._pending_uses = self._pending_uses, {}
            try:
                if turns:
                    self._append(TURNS_LOG, "\n".join(_dumps(t) for t in turns))
                    turns = []
                if uses:
                    at = utc_now()
                    self._append(USES_LOG, _dumps({"at": at, "uses": uses}))
                    self._count(uses, at)
                    uses = {}
            except (OSError, BraindError) as exc:
                log.warning("cannot write use counts and turns to %s: %s; will retry", self.root.path, exc)
            finally:
                self._pending_turns = turns + self._pending_turns
                with self._uses_lock:
                    for fp, n in uses.items():
                        self._pending_uses[fp] = self._pending_uses.get(fp, 0) + n

    @property
    def pending(self) -> bool:
        """True while uses or turns wait to be written."""
        return bool(self._pending_uses or self._pending_turns)

    def turn(self, session: str, turn: str | int | None, triggers: Sequence[str]) -> None:
        """Remember one injected turn's triggers now; flush() writes them out with the use counts."""
        record = {"at": utc_now(), "session": session, "turn": turn, "triggers": list(triggers)}
        with self._lock:
            self._remember(record)
            self._pending_turns.append(record)
            self.version += 1

    def compact_log(self, lines: Sequence[str], after: Appended | None = None) -> None:
        """Append decisions to compact.log, after the state.log lines (`after`) they report.

        When it fails, those state lines are taken back and the error raised, so the write they
        belong to fails whole; if they cannot be taken back (more came after them), the write
        stands and compact.log is completed from state.log later.
        """
        if not lines:
            return
        with self._lock:
            if self._compact_behind:
                self.repair_compact_log()
                return
            try:
                self._append(COMPACT_LOG, "\n".join(lines))
            except (OSError, BraindError) as exc:
                if after is not None and self.take_back(after):
                    raise BraindError("io_error", f"cannot write compact.log of {self.root.path}: {exc}") from None
                self._compact_behind = True
                log.warning(
                    "cannot write compact.log of %s (%s); it is completed from state.log later", self.root.path, exc
                )

    def repair_compact_log(self) -> int:
        """Append to compact.log the evictions and de-weightings state.log holds and it lacks; how many."""
        with self._lock:
            missing = missing_compact_lines(list(self._records(STATE_LOG)), self._text(COMPACT_LOG))
            if missing:
                try:
                    self._append(COMPACT_LOG, "\n".join(missing))
                except (OSError, BraindError) as exc:
                    self._compact_behind = True
                    log.warning("cannot complete compact.log of %s: %s", self.root.path, exc)
                    return 0
                log.info("compact.log of %s: %d line(s) restored from state.log", self.root.path, len(missing))
            self._compact_behind = False
            return len(missing)

    def _text(self, name: str) -> str:
        """A state file's text; empty when it is missing or unreadable."""
        try:
            return _read(self.root.path, name)
        except (OSError, BraindError):
            return ""

    def _append(self, name: str, text: str) -> Appended:
        """One durable append under <root>/.braind/ (created on first use); a missing root is never recreated."""
        if not _is_directory(self.root.path):
            raise BraindError("root_unavailable", f"memory root {self.root.path} is missing or not a directory")
        self.claim(self.root)
        dir_fd = open_dir(self.root.path, (STATE_DIR,), create=True)
        try:
            return append_line(dir_fd, name, text)
        finally:
            os.close(dir_fd)

    def take_back(self, done: Appended) -> bool:
        """Remove what record() appended, while it is still the end of state.log; False when it cannot be."""
        with self._lock:
            dir_fd = open_dir(self.root.path, (STATE_DIR,))
            try:
                taken = retract(dir_fd, STATE_LOG, done)
            finally:
                os.close(dir_fd)
            if taken:
                self.marks, self.superseded, self.turns, self.intents = {}, {}, [], {}
                self._load()  # the fold of state.log without the lines taken back
                self.version += 1
            return taken


def _is_directory(path: Path) -> bool:
    """A real directory, not a symlink to one: only then may bookkeeping be written into a root."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def missing_compact_lines(records: Sequence[Mapping[str, Any]], text: str) -> list[str]:
    """compact.log lines for the state changes by compaction that compact.log does not list yet (newest kept)."""
    logged = Counter(key for line in text.split("\n") if (key := _logged(line)) is not None)
    events: dict[tuple[str, int, str], list[Mapping[str, Any]]] = {}
    for record in records:
        key = _compaction(record)
        if key is not None:
            events.setdefault(key, []).append(record)
    missing = []
    for key, found in events.items():
        for record in found[logged[key] :]:
            detail = record.get("detail") or f"(restored from state.log: {record.get('why', 'compact')})"
            missing.append(
                (str(record.get("at", "")), f"{record.get('at', '')} {key[0]} rule{key[1]} {key[2]} {detail}")
            )
    return [line for _, line in sorted(missing)]


def _compaction(record: Mapping[str, Any]) -> tuple[str, int, str] | None:
    """(fp, rule, action) of a state change that compact.log reports: rule 1 at write time, or a compaction."""
    fp, op, why = record.get("fp"), record.get("op"), str(record.get("why", ""))
    if not isinstance(fp, str):
        return None
    if op == "tombstone" and why == "key":
        return (fp, 1, "tombstone")
    if op == "tombstone" and why == "compact" and isinstance(record.get("rule"), int):
        return (fp, record["rule"], "tombstone")
    if op == "weight" and why.startswith("compact rule") and why[12:].isdigit():
        return (fp, int(why[12:]), "deweight")
    return None


def _logged(line: str) -> tuple[str, int, str] | None:
    """(fp, rule, action) of one compact.log line, or None for a line that is not one."""
    parts = line.split(" ", 4)
    if len(parts) < 4 or not parts[2].startswith("rule") or not parts[2][4:].isdigit():
        return None
    return (parts[1], int(parts[2][4:]), parts[3])


class States:
    """The state of every root the daemon has seen, loaded on first use."""

    def __init__(self, flush_seconds: float = FLUSH_SECONDS) -> None:
        self.claim: Callable[[Root], None] = lambda root: None  # set by the daemon: one daemon per root
        self._roots: dict[Path, RootState] = {}
        self._lock = threading.Lock()
        self._flush_seconds = flush_seconds
        self._timer: threading.Timer | None = None

    def of(self, root: Root) -> RootState:
        """The state of one root."""
        with self._lock:
            state = self._roots.get(root.path)
            if state is None:
                state = self._roots[root.path] = RootState(root, lambda r: self.claim(r))
            return state

    def status_of(self, root_path: str, fp: str) -> str:
        """An entry's status by its root's path (live when the root's state is not loaded)."""
        with self._lock:
            state = self._roots.get(Path(root_path))
        return state.status(fp) if state else "live"

    def all(self) -> list[RootState]:
        """Every loaded root state."""
        with self._lock:
            return list(self._roots.values())

    @property
    def version(self) -> int:
        """A counter that changes with any root's state, to invalidate cached blocks."""
        return sum(state.version for state in self.all())

    def use(self, root: Root, fps: Sequence[str]) -> None:
        """Count uses; a flush follows within flush_seconds."""
        if fps:
            self.of(root).use(fps)
            self._schedule()

    def turn(self, root: Root, session: str, turn: str | int | None, triggers: Sequence[str]) -> None:
        """Remember a turn's triggers; a flush follows within flush_seconds."""
        self.of(root).turn(session, turn, triggers)
        self._schedule()

    def _schedule(self) -> None:
        """Start the flush timer unless one is waiting (no timer runs while idle)."""
        with self._lock:
            if self._timer is None:
                self._timer = threading.Timer(self._flush_seconds, self._timed_flush)
                self._timer.name = "braind-state-flush"
                self._timer.daemon = True
                self._timer.start()

    def _timed_flush(self) -> None:
        """The timer's work: flush, then let the next use start a new timer."""
        with self._lock:
            self._timer = None
        self.flush()

    def flush(self) -> None:
        """Write every root's pending use counts."""
        for state in self.all():
            state.flush()

    def close(self) -> None:
        """Stop the timer and write what is pending."""
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self.flush()


def _dumps(record: Mapping[str, Any]) -> str:
    """One compact JSON line, non-ASCII kept readable."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def _read(root: Path, name: str) -> str:
    """Read one state file without following links; oversized lines are cut by the JSON check."""
    dir_fd = open_dir(root, (STATE_DIR,))
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read()
    return "\n".join(line for line in data.decode("utf-8", errors="replace").split("\n") if len(line) <= _MAX_LINE)
