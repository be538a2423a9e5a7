"""What a request does: note, recall, inject, typed memory and layered memory, over one shared context."""
