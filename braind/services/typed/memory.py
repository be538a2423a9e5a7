"""Typed memory: the `memory.*` commands, same-key supersession, tombstones, pins and undo.

Entries stay lines in the diary; what happens to them is appended to the
root's state (`braind.files.state`) and then folded into the index by re-reading
the entry's file, so every read (recall, inject, list) sees the new status at
once and a rebuilt index recovers it. Nothing is ever deleted: removal,
edits and evictions are tombstones that `undo` reverses.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from braind.errors import Ambiguous, BraindError, InvalidParams, NotFound
from braind.files.state import RootState, compact_line
from braind.files.validate import clean_note
from braind.index.analysis import Term
from braind.index.api import parse_query
from braind.index.ranking import held_words
from braind.model.entries import TYPES, Entry, GrammarError, Line, Meta, make_meta
from braind.model.redact import redact
from braind.model.roots import Root
from braind.services.context import Context
from braind.services.diary import NEW, Diary
from braind.services.typed import chains
from braind.services.typed.compact import Decision, plan
from braind.services.typed.triggers import Chosen, choose, rank

TYPED = ("fact", "decision", "error", "workflow")
_FP = re.compile(r"^[0-9a-f]{1,12}$")
_LIST_LIMIT = 200


class TypedMemory:
    """The typed system's operations, on top of the diary store and the index."""

    def __init__(self, context: Context, diary: Diary) -> None:
        self.context = context
        self.diary = diary
        self.states = context.syncer.states
        self._chain_texts: dict[str, str] = {}

    # -- helpers -------------------------------------------------------------------

    def state(self, root: Root) -> RootState:
        """The state of a root."""
        return self.states.of(root)

    def _roots(self, project: str | None) -> dict[str, Root]:
        """The visible roots by path: the user root plus at most the named project."""
        return {str(root.path): root for root in self.context.roots.visible(project)}

    def _root_of(self, entry: Entry) -> Root:
        """The root an entry lives in."""
        return root_of(entry)

    def _visible(self, entries: Iterable[Entry], project: str | None) -> list[Entry]:
        """Entries of the visible roots, each fp once."""
        roots = self._roots(project)
        seen: dict[str, Entry] = {}
        for entry in entries:
            if entry.root in roots:
                seen.setdefault(entry.fp, entry)
        return list(seen.values())

    def typed_entries(self, project: str | None, type: str | None = None) -> list[Entry]:
        """Typed memories of the visible roots, tombstoned ones included: a type, a key, triggers or a pin."""
        index = self.context.index
        if type is not None and type != "note":
            found = index.select("type", [type])
        else:
            found = [
                *index.select("type", list(TYPED)),
                *index.select("key", [""], prefix=True),
                *index.select("triggers", [""], prefix=True),
                *index.select("status", ["pinned"]),
            ]
            if type == "note":
                found = [e for e in found if e.type == "note"]
        return self._visible(found, project)

    def resolve(self, fp: str, project: str | None) -> Entry:
        """The one visible entry whose fingerprint starts with fp; ambiguity lists the candidates."""
        prefix = fp.strip().lower()
        if not _FP.match(prefix):
            raise InvalidParams("invalid_params", f"{fp!r} is not a fingerprint: 1 to 12 hex digits")
        found = self._visible(self.context.index.select("fp", [prefix], prefix=True), project)
        if not found:
            where = " or the project" if project else ""
            raise NotFound(f"no entry with fingerprint {prefix} in the user root{where}")
        if len(found) > 1:
            matches = [{"fp": e.fp, "type": e.type, "text": e.text[:80], "path": e.path} for e in found[:20]]
            listing = "; ".join(f"{m['fp']} {m['text'][:40]!r}" for m in matches)
            raise Ambiguous(f"fingerprint prefix {prefix} matches {len(found)} entries: {listing}", matches=matches)
        return found[0]

    def _resync(self, entries: Iterable[Entry]) -> None:
        """Re-read the files of entries whose status changed, so the index carries it."""
        done: set[str] = set()
        for entry in entries:
            if entry.path in done:
                continue
            done.add(entry.path)
            root = self._root_of(entry)
            self.context.syncer.sync_file(root, Path(entry.path).relative_to(root.path))

    def _change(self, entry: Entry, changes: Sequence[dict[str, Any]], also: Sequence[Entry] = ()) -> None:
        """Record state changes of one root durably, then fold them into the index."""
        self.state(self._root_of(entry)).record(changes)
        self._resync([entry, *also])

    def reconcile_status(self, root: Root) -> int:
        """Re-read files whose indexed status disagrees with the root's state (changed while stopped)."""
        state = self.state(root)
        index = self.context.index
        found = [*index.select("fp", list(state.marked())), *index.select("status", ["tombstoned", "pinned"])]
        stale = [e for e in found if e.root == str(root.path) and e.status != state.status(e.fp)]
        self._resync(stale)
        return len(stale)

    # -- writes --------------------------------------------------------------------

    def write(
        self,
        text: str,
        type: str = "note",
        key: str | None = None,
        triggers: Sequence[str] = (),
        project: str | None = None,
        approved: bool = False,
        internal: bool = False,
    ) -> dict[str, Any]:
        """Append a typed entry to today's diary; an older live entry with the same key is tombstoned."""
        meta = _meta(type, key, tuple(triggers))
        body, kinds = redact(clean_note(text, self.context.config.note.max_bytes))
        root = self.context.roots.for_write(project)
        older = self._same_key(root, meta.key) if meta.key else []
        if not internal:
            self._approve_write(meta, older, approved, text)
        job = ("key", str(root.path), meta.key or "", meta.type, body)
        detail = f"superseded by {NEW} (key {meta.key})"
        changes = [{"op": "tombstone", "fp": e.fp, "why": "key", "by": NEW, "detail": detail} for e in older]
        result = self.diary.append_with(root, Line("", body, meta), changes, job)
        self._resync(older)
        return {**result, "redacted": kinds, "superseded": [e.fp for e in older]}

    def _approve_write(self, meta: Meta, older: Sequence[Entry], approved: bool, text: str) -> None:
        """Decisions and same-key overwrites are important writes."""
        if older:
            what = f"overwriting key {meta.key} (entry {', '.join(e.fp for e in older)})"
        else:
            what = f"a {meta.type} entry"
        request = {"text": text, "type": meta.type, "key": meta.key, "triggers": list(meta.triggers)}
        self.context.approver.require(meta.type == "decision" or bool(older), approved, what, request)

    def _same_key(self, root: Root, key: str) -> list[Entry]:
        """Live (or pinned) entries of a root holding a key."""
        found = self.context.index.select("key", [key])
        return [e for e in found if e.root == str(root.path) and e.status != "tombstoned"]

    def edit(self, fp: str, text: str, project: str | None = None, approved: bool = False) -> dict[str, Any]:
        """Supersede a diary entry: the new text is appended today and the old entry is tombstoned, linked."""
        old = self.resolve(fp, project)
        body, kinds = redact(clean_note(text, self.context.config.note.max_bytes))
        if old.status == "tombstoned":
            done = self._edited(old, body)
            if done is not None:  # the same edit again (a retry after a lost reply): it is done, nothing new
                return {**done, "replaces": old.fp, "redacted": kinds}
            raise BraindError("tombstoned", f"entry {old.fp} is removed; `undo {old.fp}` brings it back first")
        if old.kind != "diary":
            raise BraindError(
                "not_editable",
                f"entry {old.fp} is a {'MEMORY.md section' if old.kind == 'section' else 'logfile entry'}; "
                "rewrite it with memory_correct",
            )
        self.context.approver.require(True, approved, f"editing entry {old.fp}", {"fp": old.fp, "text": text})
        root = self._root_of(old)
        meta = Meta(old.type, old.key, old.triggers)
        changes = [{"op": "tombstone", "fp": old.fp, "why": "edit", "by": NEW}]
        result = self.diary.append_with(root, Line("", body, meta), changes, ("edit", old.fp, body))
        self._resync([old])
        return {**result, "replaces": old.fp, "redacted": kinds}

    def _edited(self, old: Entry, body: str) -> dict[str, Any] | None:
        """The live entry that already superseded `old` with exactly this text, as edit answers it; else None."""
        tombstone = self.state(self._root_of(old)).mark(old.fp).tombstone
        if not tombstone or tombstone.get("why") != "edit" or not isinstance(tombstone.get("by"), str):
            return None
        found = [e for e in self.context.index.select("fp", [tombstone["by"]]) if e.root == old.root]
        new = next((e for e in found if e.text == body and e.status != "tombstoned"), None)
        return None if new is None else {"fp": new.fp, "path": new.path, "date": new.date, "time": new.time}

    def remove(self, fp: str, project: str | None = None, approved: bool = False) -> dict[str, Any]:
        """Tombstone an entry (never a physical delete); `undo` brings it back."""
        entry = self.resolve(fp, project)
        if entry.status == "tombstoned":
            return {"fp": entry.fp, "status": "tombstoned", "changed": False}
        self.context.approver.require(True, approved, f"removing entry {entry.fp}", {"fp": entry.fp})
        self._change(entry, [{"op": "tombstone", "fp": entry.fp, "why": "remove"}])
        return {"fp": entry.fp, "status": "tombstoned", "changed": True}

    def pin(self, fp: str, project: str | None = None, pinned: bool = True) -> dict[str, Any]:
        """Pin an entry (injected first when its triggers fire, never compacted), or unpin it."""
        entry = self.resolve(fp, project)
        changed = self.state(self._root_of(entry)).mark(entry.fp).pinned != pinned
        if changed:
            self._change(entry, [{"op": "pin" if pinned else "unpin", "fp": entry.fp}])
        status = self.state(self._root_of(entry)).status(entry.fp)
        return {"fp": entry.fp, "status": status, "changed": changed}

    def unpin(self, fp: str, project: str | None = None) -> dict[str, Any]:
        """Unpin an entry."""
        return self.pin(fp, project, pinned=False)

    def undo(self, fp: str, project: str | None = None) -> dict[str, Any]:
        """Reverse the newest change to an entry: a removal, an edit, an eviction, a pin or a weight."""
        entry = self.resolve(fp, project)
        state = self.state(self._root_of(entry))
        if not state.mark(entry.fp).changes and entry.fp in state.superseded:
            entry = self.resolve(state.superseded[entry.fp], project)  # the new side of an edit: undo the edit
        changes = state.mark(entry.fp).changes
        if not changes:
            raise NotFound(f"entry {entry.fp} has no change to undo")
        last = changes[-1]
        records: list[dict[str, Any]] = [{"op": "undo", "fp": entry.fp, "undoes": last["op"]}]
        also: list[Entry] = []
        if last["op"] == "tombstone" and last.get("why") == "edit" and last.get("by"):
            records.append({"op": "tombstone", "fp": last["by"], "why": "undo", "by": entry.fp})
            also = self._visible(self.context.index.select("fp", [last["by"]]), project)
        self._change(entry, records, also)
        return {
            "fp": entry.fp,
            "undone": _describe(last),
            "status": state.status(entry.fp),
            "tombstoned": [e.fp for e in also],
        }

    # -- reads ---------------------------------------------------------------------

    def describe(self, entry: Entry) -> dict[str, Any]:
        """An entry as the memory.* commands show it, with its state."""
        mark = self.state(self._root_of(entry)).mark(entry.fp)
        tombstone = mark.tombstone
        return {
            "fp": entry.fp,
            "type": entry.type,
            "key": entry.key,
            "triggers": list(entry.triggers),
            "status": entry.status,
            "realm": entry.realm,
            "kind": entry.kind,
            "path": entry.path,
            "line": entry.line,
            "date": entry.date,
            "time": entry.time,
            "text": entry.text,
            "weight": mark.weight,
            "uses": mark.uses,
            "last_used": mark.last_used,
            "why": tombstone.get("why") if tombstone else None,
            "by": tombstone.get("by") if tombstone else None,
        }

    def listing(self, type: str | None = None, project: str | None = None, limit: int = _LIST_LIMIT) -> dict[str, Any]:
        """Live typed memories, in injection order: pinned, then workflow > error > decision > fact."""
        live = [e for e in self.typed_entries(project, type) if e.status != "tombstoned"]
        ranked = [c.entry for c in rank([Chosen(e, (), self._weight(e)) for e in live])]
        return {"entries": [self.describe(e) for e in ranked[:limit]], "total": len(ranked)}

    def query(
        self, term: str, project: str | None = None, limit: int = 20, type: str | None = None, strict: bool = False
    ) -> dict[str, Any]:
        """Typed memories holding every word of term (text, key, triggers), in injection order; then some."""
        language = self.context.index.language
        terms = parse_query(term, language).required
        live = [e for e in self.typed_entries(project, type) if e.status != "tombstoned"]
        held = {e: held_words(language, searchable(e), terms) for e in live}
        full = self._in_order([e for e in live if len(held[e]) == len(terms)])
        partial = [] if strict else self._in_order([e for e in live if 0 < len(held[e]) < len(terms)])
        partial.sort(key=lambda e: len(held[e]), reverse=True)  # stable: injection order among equals
        ranked = (full + partial)[:limit]
        self.used(ranked)
        described = [{**self.describe(e), **_match(held[e], terms)} for e in ranked]
        return {"entries": described, "total": len(full), "partial_total": len(partial)}

    def _in_order(self, entries: list[Entry]) -> list[Entry]:
        """Entries in injection order: pinned, then workflow > error > decision > fact, then weight."""
        return [c.entry for c in rank([Chosen(e, (), self._weight(e)) for e in entries])]

    def recall_triggers(
        self, triggers: Sequence[str], project: str | None = None, limit: int = 20, type: str | None = None
    ) -> list[Entry]:
        """Live entries carrying any of the triggers, in injection order."""
        found = self._visible(self.context.index.select("triggers", list(triggers)), project)
        live = [e for e in found if e.status != "tombstoned" and (type is None or e.type == type)]
        weights = {e.fp: self._weight(e) for e in live}
        chosen = choose(live, triggers, weights, limit, 1 << 30)
        return [c.entry for c in chosen]

    def entries(
        self, term: str | None = None, project: str | None = None, limit: int = 50, strict: bool = False
    ) -> dict[str, Any]:
        """Raw entries of any type and status, newest first: those holding every word of term, then those holding some.

        Without a term, the newest entries.
        """
        if not term:
            found = sorted(self._newest(project, limit), key=_newest_first, reverse=True)
            return {"entries": [self.describe(e) for e in found[:limit]], "total": len(found)}
        language = self.context.index.language
        terms = parse_query(term, language).required
        hits = self.context.index.search(term, roots=list(self._roots(project)), limit=limit, strict=strict).hits
        removed = self._visible(self.context.index.select("status", ["tombstoned"]), project)
        held = {h.entry: list(h.matched) for h in hits}
        for entry in removed:
            words = held_words(language, entry.text, terms)
            if len(words) == len(terms) or (words and not strict):
                held[entry] = words
        full = sorted((e for e, w in held.items() if len(w) == len(terms)), key=_newest_first, reverse=True)
        partial = sorted((e for e, w in held.items() if len(w) < len(terms)), key=_newest_first, reverse=True)
        described = [{**self.describe(e), **_match(held[e], terms)} for e in (full + partial)[:limit]]
        return {"entries": described, "total": len(full), "partial_total": len(partial)}

    def _newest(self, project: str | None, limit: int) -> list[Entry]:
        """The newest entries of the visible roots, diary days newest first."""
        roots = self._roots(project)
        paths = sorted((p for p, r in self.context.index.file_records().items() if r.root in roots), reverse=True)
        found: list[Entry] = []
        for path in paths:
            found += self.context.index.entries_for(path)
            if len(found) >= limit and "/diary/" in path:
                break
        return found

    def dump(self, type: str | None = None, project: str | None = None) -> dict[str, Any]:
        """Everything typed memory holds: typed entries, tombstones and pins, and state with no entry left."""
        index = self.context.index
        found = self._visible(
            [*self.typed_entries(project), *index.select("status", ["tombstoned", "pinned"])], project
        )
        found = [e for e in found if type is None or e.type == type]
        found.sort(key=lambda e: (e.date, e.time, e.path, e.line))
        known = {e.fp for e in found}
        orphans = []
        for root in self._roots(project).values():
            for fp, mark in sorted(self.state(root).marks.items()):
                if fp not in known and mark.changes:
                    orphans.append({"fp": fp, "root": str(root.path), "status": mark.status, "changes": mark.changes})
        return {"entries": [self.describe(e) for e in found], "orphans": orphans}

    # -- compaction ------------------------------------------------------------------

    def compact(self, dry_run: bool = False, project: str | None = None, approved: bool = False) -> dict[str, Any]:
        """Apply the five rules (or only say what they would do); every eviction goes to compact.log."""
        entries = [e for e in self.typed_entries(project) if e.status == "live"]
        decisions = plan(entries, lambda e: self.state(root_of(e)).mark(e.fp), self.context.clock(), self.config)
        evictions = [d for d in decisions if d.action == "tombstone"]
        if not dry_run and evictions:
            listing = ", ".join(d.entry.fp for d in evictions[:10])
            count = f"{len(evictions)} {'entry' if len(evictions) == 1 else 'entries'}"
            self.context.approver.require(True, approved, f"compaction evicting {count} ({listing})")
        if not dry_run:
            self._apply(decisions)
        by_rule: dict[str, int] = {}
        for decision in decisions:
            name = f"rule{decision.rule}"
            by_rule[name] = by_rule.get(name, 0) + 1
        return {"dry_run": dry_run, "decisions": [d.as_dict() for d in decisions], "by_rule": by_rule}

    @property
    def config(self) -> Any:
        """The compaction thresholds."""
        return self.context.config.compact

    def _apply(self, decisions: Sequence[Decision]) -> None:
        """Write each root's changes and compact.log lines, then fold them into the index."""
        by_root: dict[Root, list[Decision]] = {}
        for decision in decisions:
            if decision.action != "keep":
                by_root.setdefault(root_of(decision.entry), []).append(decision)
        for root, chosen in by_root.items():
            state = self.state(root)
            written = state.record([_change_of(d) for d in chosen])
            state.compact_log([compact_line(d.entry.fp, d.rule, d.action, d.detail) for d in chosen], after=written)
            self._resync([d.entry for d in chosen if d.action == "tombstone"])

    # -- triggers and chains ---------------------------------------------------------

    def triggered(self, triggers: Sequence[str], project: str | None) -> list[Chosen]:
        """The memories this turn's triggers inject, within inject.trigger_max_entries / _chars."""
        if not triggers:
            return []
        budget = self.context.config.inject
        found = self._visible(self.context.index.select("triggers", list(triggers)), project)
        live = [e for e in found if e.status != "tombstoned"]
        return choose(live, triggers, self.weights(live), budget.trigger_max_entries, budget.trigger_max_chars)

    def turn(self, session: str, turn: str | int | None, project: str | None, calls: Sequence[str]) -> None:
        """Remember a turn's tool-call triggers, then refresh the workflow chains they complete."""
        if not calls:
            return
        root = self.context.roots.for_write(project)
        state = self.state(root)
        self.states.turn(root, session, turn, calls)
        written: set[str] = set()
        for trigger in dict.fromkeys(calls):
            chain = chains.steps(state.turns, trigger)
            if chain is None or chain[0] != trigger or chains.key_of(chain) in written:
                continue
            written.add(chains.key_of(chain))
            self._refresh_chain(root, chain, project)

    def _refresh_chain(self, root: Root, chain: Sequence[str], project: str | None) -> None:
        """Write the chain's workflow entry when it is new or its pattern changed."""
        key = chains.key_of(chain)
        found = self._visible(self.context.index.select("triggers", list(chain)), project)
        text = chains.text_of(chain, chains.related(found, chain))
        last = self._chain_texts.get(key)
        if last == text:
            return
        current = [e for e in self._same_key(root, key) if e.type == "workflow"]
        self._chain_texts[key] = text
        if last is None and current and current[-1].triggers == tuple(chain):
            return  # same steps as the entry on disk, which a person may have edited: left alone
        self.write(text, "workflow", key, chain, project, internal=True)

    # -- uses ------------------------------------------------------------------------

    def _weight(self, entry: Entry) -> float:
        """An entry's weight (halved by compaction when long unused)."""
        return self.state(self._root_of(entry)).mark(entry.fp).weight

    def weights(self, entries: Iterable[Entry]) -> dict[str, float]:
        """fp -> weight of entries."""
        return {e.fp: self._weight(e) for e in entries}

    def used(self, entries: Iterable[Entry]) -> None:
        """Count one use of each entry (returned by recall or injected); written in batches."""
        by_root: dict[Root, list[str]] = {}
        for entry in entries:
            by_root.setdefault(root_of(entry), []).append(entry.fp)
        for root, fps in by_root.items():
            self.states.use(root, fps)


def root_of(entry: Entry) -> Root:
    """The root an entry lives in, from the path and realm it carries."""
    return _root(entry.root, entry.realm)


@functools.lru_cache(maxsize=256)
def _root(root: str, realm: str) -> Root:
    """A root by its path and realm; recall asks for the same few roots on every hit."""
    path = Path(root)
    return Root(path, realm, path.parent.parent if realm == "project" else None)


def _change_of(decision: Decision) -> dict[str, Any]:
    """The state change a compaction decision writes, with the detail compact.log shows (it can be rebuilt)."""
    fp, detail = decision.entry.fp, decision.detail
    if decision.action == "deweight":
        why = f"compact rule{decision.rule}"
        return {"op": "weight", "fp": fp, "value": decision.weight, "why": why, "detail": detail}
    return {"op": "tombstone", "fp": fp, "why": "compact", "rule": decision.rule, "detail": detail}


def _meta(type: str, key: str | None, triggers: tuple[str, ...]) -> Meta:
    """Build entry metadata, turning grammar errors into invalid params."""
    if type not in TYPES:
        raise InvalidParams("invalid_params", f"invalid type {type!r}: one of {', '.join(TYPES)}")
    try:
        return make_meta(type, key, triggers)
    except GrammarError as exc:
        raise InvalidParams("invalid_params", str(exc)) from None


def _newest_first(entry: Entry) -> tuple[str, str, str, int]:
    """The order of raw entry listings: by date and time, then place."""
    return entry.date, entry.time, entry.path, entry.line


def _match(held: list[str], terms: Sequence[Term]) -> dict[str, Any]:
    """Whether an entry holds every query word, and which it holds."""
    return {"match": "all" if len(held) == len(terms) else "partial", "matched": held}


def searchable(entry: Entry) -> str:
    """What memory.query matches: text, key and triggers."""
    return " ".join([entry.text, entry.key or "", *entry.triggers])


def _describe(change: dict[str, Any]) -> str:
    """A change in words, for the undo reply."""
    op = change["op"]
    if op == "tombstone":
        return f"tombstone ({change.get('why', 'remove')})"
    if op == "weight":
        return f"weight set to {change.get('value')}"
    return str(op)
