"""Busy days: a fresh daemon on the root when today's diary already holds many entries, then what agents call.

Agents that note a lot fill one day file. The daemon is stopped, today's file
is replaced by one of N generated entries timed up to now, the daemon started
again on its index (it reconciles the day), and then, CALLS times: a note, an
`inject` of a steady session right after it, and a recall of all of memory.
"""

from __future__ import annotations

import datetime as dt
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import measure
from bench.corpus import Generator
from bench.stats import summarize
from braind.rpc.client import Client

CALLS = 60
Query = tuple[str, ...]


def write_day(root: Path, entries: int, seed: int) -> None:
    """Replace today's diary file with `entries` generated entries up to now; a MEMORY.md left by the soak goes."""
    now = dt.datetime.now().astimezone()
    path = root / "diary" / f"{now.date().isoformat()}.md"
    partial = path.with_name(path.name + ".bench")
    with open(partial, "w", encoding="utf-8") as out:
        out.write(Generator(seed).day_until(entries, now.time()))
        out.flush()
        os.fsync(out.fileno())  # as the notes that fill a day are: else the first note's fsync writes the whole day
    os.replace(partial, path)
    (root / "MEMORY.md").unlink(missing_ok=True)


def calls(client: Client, queries: Sequence[Query], rng: random.Random) -> dict[str, Any]:
    """CALLS rounds of note, inject right after it (timed alone) and recall; queries repeat only when too few."""
    session = f"busy-{measure.token(rng)}"
    note, inject, recall = [], [], []
    totals, partials = [], []
    for turn in range(1, CALLS + 1):
        note.append(measure.call_ms(client, "brain_note", text=f"Busy day note {turn}: {measure.token(rng)}")[0])
        inject.append(measure.call_ms(client, "inject", session=session, turn=turn)[0])
        ms, found = measure.call_ms(client, "brain_recall", query=" ".join(queries[turn % len(queries)]))
        recall.append(ms)
        totals.append(found["total"])
        partials.append(found.get("partial_total", 0))
    return {
        "note": summarize(note).as_dict(),
        "inject": summarize(inject).as_dict(),
        "recall": {**summarize(recall).as_dict(), "totals": totals, "partial_totals": partials},
    }
