"""Memory formats as values, with no I/O: diary entries, MEMORY.md and logfile units, names, roots, redaction."""
