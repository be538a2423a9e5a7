"""Workflow chains: a trigger seen in more than 3 turns becomes one `workflow` entry listing the steps.

Each injected turn's tool-call triggers are kept in order (`turns.log`). When
a trigger has occurred in more than ``THRESHOLD`` turns, the steps of its
chain are the triggers that occur in more than half of those turns (the
newest ``WINDOW`` of them), in the order they usually come in, e.g.
``file:app.py → tool:pytest → tool:edit``. A chain is written once per
pattern, by its first step, as a diary line a person can read and edit::

    [10:02] [workflow key=chain:file:app.py file:app.py tool:pytest tool:edit] Workflow: file:app.py → ...

It lists the memories related to its steps (their type and fingerprint).
When the pattern or its related memories change, a new line with the same
key supersedes the old one (rule 1); a line a person edited is left alone
until the pattern changes again.
"""

from __future__ import annotations

from collections.abc import Sequence

from braind.files.state import Turn
from braind.model.entries import Entry

THRESHOLD = 3
WINDOW = 20
MIN_STEPS = 2
MAX_RELATED = 6
KEY_PREFIX = "chain:"


def steps(turns: Sequence[Turn], trigger: str) -> list[str] | None:
    """The chain of a trigger, or None while it has occurred in THRESHOLD turns or fewer."""
    seen = [t.triggers for t in turns if trigger in t.triggers][-WINDOW:]
    if len(seen) <= THRESHOLD:
        return None
    positions: dict[str, list[int]] = {}
    for sequence in seen:
        for place, step in enumerate(dict.fromkeys(sequence)):
            positions.setdefault(step, []).append(place)
    common = [step for step, places in positions.items() if len(places) * 2 > len(seen)]
    common.sort(key=lambda step: (sum(positions[step]) / len(positions[step]), step))
    return common if len(common) >= MIN_STEPS else None


def key_of(chain: Sequence[str]) -> str:
    """A chain's key: named by its first step, so one pattern gives one entry."""
    return KEY_PREFIX + chain[0]


def text_of(chain: Sequence[str], related: Sequence[Entry]) -> str:
    """The readable workflow text: the steps in order, then the related memories."""
    text = "Workflow: " + " → ".join(chain)
    if related:
        text += " (related: " + ", ".join(f"{e.type} {e.fp}" for e in related[:MAX_RELATED]) + ")"
    return text


def related(entries: Sequence[Entry], chain: Sequence[str]) -> list[Entry]:
    """Live non-workflow memories whose triggers touch the chain, newest first."""
    wanted = set(chain)
    found = [
        e for e in entries if e.type != "workflow" and e.status != "tombstoned" and wanted.intersection(e.triggers)
    ]
    found.sort(key=lambda e: (e.date, e.time, e.fp), reverse=True)
    return found
