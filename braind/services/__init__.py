"""What a request does: note, recall, inject, typed memory and layered memory, over one shared context.

`make_services` builds them in the order they depend on each other: the diary,
typed memory (on the diary), layered memory (reading typed memory), and the
diary services behind note, recall and inject (on both).
"""

from __future__ import annotations

from dataclasses import dataclass

from braind.services.context import Context
from braind.services.diary import Diary
from braind.services.layered.tools import LayeredMemory
from braind.services.memory import Memory
from braind.services.typed.memory import TypedMemory


@dataclass(frozen=True)
class Services:
    """Every service of one daemon, each built on the same context."""

    context: Context
    diary: Diary
    typed: TypedMemory
    layered: LayeredMemory
    memory: Memory


def make_services(context: Context) -> Services:
    """Build the services on a context, each given the siblings it calls."""
    diary = Diary(context)
    typed = TypedMemory(context, diary)
    layered = LayeredMemory(context, typed)
    return Services(context, diary, typed, layered, Memory(context, typed, layered))
